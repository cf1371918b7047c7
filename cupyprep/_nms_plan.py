"""The NMS pipeline's launches as a plan: worked out once for a geometry, replayed on every
call of that geometry.

A :class:`Layout` places the pipeline's arrays in one or a few allocations; a
:class:`Plan` is the pipeline's steps (kernel launches with every by-value argument
packed, and the library sorts between them) with the arrays each step takes named by
slot. Running a plan makes the allocations (:class:`Carve`), resolves each slot once (a
pointer into an allocation: a number, not an array object, on the device; a NumPy view
under the kernel emulator) and launches; no kernel is looked up by name, no launch shape
or argument worked out again.
"""
from __future__ import annotations

import math

import numpy as np

from ._arrays import contiguous_strides
from ._launch import held, launch_filled, pointer
from ._torch import from_torch, torch_dtype

__all__ = ["INPUTS", "Carve", "Layout", "Plan", "Slot"]

_ALIGN = 256  # bytes between the arrays of one allocation
_BYTES = np.dtype(np.uint8)


class Layout:
    """Arrays placed in allocations: ``at[name] = (allocation, offset, shape, dtype,
    nbytes)``, each array at a 256-byte boundary; ``sizes`` the bytes of each
    allocation."""

    def __init__(self):
        self.at = {}
        self.sizes = []

    @classmethod
    def of(cls, specs):
        """One allocation holding ``specs`` (see :meth:`add`)."""
        layout = cls()
        layout.add(specs)
        return layout

    def add(self, specs):
        """One more allocation, holding ``specs``: names mapped to ``(shape, dtype)`` (None:
        no array)."""
        index, size = len(self.sizes), 0
        for name, spec in specs.items():
            if spec is None:
                continue
            shape, dtype = spec
            dtype = np.dtype(dtype)
            nbytes = dtype.itemsize * math.prod(shape)
            self.at[name] = (index, size, tuple(shape), dtype, nbytes)
            size += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
        self.sizes.append(max(size, _ALIGN))

    def region(self, name, start=0, dtype=None, shape=None):
        """Array ``name`` (or, from byte ``start`` of it, ``shape`` elements of ``dtype``) as
        ``(allocation, offset, nbytes, dtype, shape)``; None where there is no such array."""
        found = self.at.get(name)
        if found is None:
            return None
        index, offset, full_shape, full_dtype, nbytes = found
        if dtype is not None or shape is not None:
            dtype = full_dtype if dtype is None else np.dtype(dtype)
            shape = full_shape if shape is None else tuple(shape)
            nbytes = dtype.itemsize * math.prod(shape)
        else:
            dtype, shape = full_dtype, full_shape
        return index, offset + start, nbytes, dtype, shape


class Carve:
    """One run's allocations of a :class:`Layout`, on the caller's allocator (one
    ``torch.empty``, or cupy / numpy ``empty``, per allocation: under torch its caching
    allocator, so the pipeline stays capturable in a CUDA graph)."""

    __slots__ = ("bases", "bytes", "kind", "layout", "natives", "typed")

    def __init__(self, call, layout):
        self.kind = call.kind
        self.layout = layout
        self.natives, self.bytes, self.bases = [], [], []
        self.typed = {}  # torch: (allocation, dtype) -> the allocation viewed as that dtype
        for size in layout.sizes:
            if call.kind == "torch":
                # a pointer is all the kernels need: no CuPy view of the tensor
                native = call.tensor.new_empty((size,), dtype=torch_dtype(_BYTES))
                view, base = None, native.data_ptr()
            else:
                native, view = call.output(None, (size,), np.uint8)
                base = None if isinstance(view, np.ndarray) else view.data.ptr
            self.natives.append(native)
            self.bytes.append(view)
            self.bases.append(base)

    def argument(self, region):
        """A kernel argument for ``region``: its address on the device, the NumPy view
        under the emulator; None for no region."""
        if region is None:
            return None
        index, offset, nbytes, dtype, shape = region
        base = self.bases[index]
        if base is None:
            return self.bytes[index][offset:offset + nbytes].view(dtype).reshape(shape)
        return pointer(base + offset)

    def array(self, region):
        """``region`` as an array of the caller's library (what a library sort or the caller
        gets)."""
        index, offset, nbytes, dtype, shape = region
        if self.kind == "torch":
            itemsize = dtype.itemsize
            if offset % itemsize:
                return self.natives[index][offset:offset + nbytes].view(torch_dtype(dtype)).view(shape)
            # one strided view of the allocation, typed once per dtype (an allocation's size
            # is a multiple of 256 bytes): a third of a slice's and two views' host time
            typed = self.typed.get((index, dtype))
            if typed is None:
                typed = self.typed[index, dtype] = self.natives[index].view(torch_dtype(dtype))
            return typed.as_strided(shape, contiguous_strides(shape), offset // itemsize)
        if self.kind == "cupy":
            import cupy

            return cupy.ndarray(shape, dtype, self.natives[index].data + offset)
        return self.bytes[index][offset:offset + nbytes].view(dtype).reshape(shape)

    def view(self, name):
        """Array ``name`` as cupy (NumPy, emulated), or None: for tests."""
        region = self.layout.region(name)
        if region is None:
            return None
        if self.kind == "torch":
            import cupy

            index, offset, _, dtype, shape = region
            return cupy.ndarray(shape, dtype, from_torch(self.natives[index]).data + offset)
        return self.array(region)

    def native(self, name):
        """Array ``name`` as the caller's library has it: for tests."""
        return self.array(self.layout.region(name))


class Slot:
    """An argument of a planned launch resolved at every run: an input, an array of the
    layout, or what a sort step returned."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


INPUTS = (Slot(0), Slot(1), Slot(2))  # boxes, scores, the classes (or None)


class Plan:
    """The steps of one pipeline geometry. Built by calling :meth:`kernel`'s recorders (as
    a kernel function is called) and :meth:`sort` in launch order, with :class:`Slot`
    arguments from :meth:`slot`, then :meth:`seal`-ed; :meth:`run` replays them."""

    __slots__ = ("_slots", "_sorts", "layout", "regions", "results", "reusable", "steps")

    def __init__(self, layout):
        self.layout = layout
        self.reusable = True  # False: made for one call's values (see plan_pipeline)
        self.regions = []  # slot len(INPUTS) + i is regions[i]; the sorts' results follow
        self.steps = []
        self.results = {}  # what the caller gets: name -> region
        self._slots = {}
        self._sorts = []

    def slot(self, name, start=0, dtype=None, shape=None):
        """The :class:`Slot` of array ``name`` (a part of it, as :meth:`Layout.region`);
        None where the layout has no such array."""
        key = (name, start, dtype, shape)
        found = self._slots.get(key, False)
        if found is False:
            region = self.layout.region(name, start, dtype, shape)
            found = None
            if region is not None:
                found = Slot(len(INPUTS) + len(self.regions))
                self.regions.append(region)
            self._slots[key] = found
        return found

    def kernel(self, fn):
        """A stand-in for kernel ``fn``: calling it (``(grid, block, args)``, as a kernel is
        called) records the launch."""
        def record(grid, block, args):
            packed, fills = list(args), []
            for i, a in enumerate(args):
                if type(a) is Slot:
                    packed[i] = None
                    fills.append((i, a))
            self.steps.append((fn, grid, block, held(packed), fills))
        return record

    def sort(self, sort, name):
        """Record ``sort(call, array, view)`` of array ``name`` (``view``: the same array,
        None for torch); returns the :class:`Slot` of its result."""
        result = Slot(None)
        self._sorts.append(result)
        self.steps.append((sort, self.layout.region(name)))
        return result

    def seal(self):
        """Number the sorts' results after the regions, and every launch's slots by
        number: the plan is complete."""
        for k, result in enumerate(self._sorts):
            result.index = len(INPUTS) + len(self.regions) + k
        self.steps = [step if len(step) == 2 else (*step[:4], tuple((i, a.index) for i, a in step[4]))
                      for step in self.steps]
        return self

    def run(self, call, inputs):
        """Allocate, then launch every step (in the caller's launch context); ``inputs``:
        boxes, scores and classes as kernel arguments. Returns the :class:`Carve`."""
        carve = Carve(call, self.layout)
        values = [*inputs, *map(carve.argument, self.regions)]
        for step in self.steps:
            if len(step) == 2:
                sort, region = step
                array = carve.array(region)
                values.append(sort(call, array, None if call.kind == "torch" else array))
                continue
            launch_filled(*step, values)
        return carve
