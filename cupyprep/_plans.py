"""Launch plans: what a repeated call with the same geometry reuses.

An op's first call with a given input geometry (kind, dtype, shape, strides, device) and
given options validates everything, works out its launch (kernel, grid, block and every
by-value argument) and stores it here as a :class:`LaunchPlan` under a key of exactly those
things. The next call with an equal key skips the validation and the planning it already
passed: it allocates the output, puts the two pointers into the stored arguments and
launches, in the same launch context (device, stream, allocator) as the first call. A
given ``out`` is part of the key too (its geometry), and is checked for overlap with the
input at every call.

A key holds every argument's type as well as its value (``True`` and ``1`` are different
keys), so a call that the first one's checks would refuse never finds a plan. Only device
arrays get plans; the CPU backend runs as before.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from . import _kernels, _transfers
from ._arrays import Prepared, byte_span, overlaps
from ._launch import held, held_bytes, pointer, ragged_records
from ._torch import TensorView, torch_dtype

__all__ = ["LaunchPlan", "PlanCache", "address", "argument", "array_key", "call_key", "clear_all", "list_key",
           "options_key", "overlap", "prepared", "run_chain"]


_KINDS: dict = {}  # type -> "torch" / "cupy" / "numpy" / None


def _kind_of(x):
    t = type(x)
    kind = _KINDS.get(t, False)
    if kind is False:
        module = t.__module__.split(".")[0]
        if module == "torch" and isinstance(x, sys.modules["torch"].Tensor):
            kind = "torch"
        elif module == "cupy" and isinstance(x, sys.modules["cupy"].ndarray):
            kind = "cupy"
        elif t is np.ndarray:
            kind = "numpy"
        else:
            kind = None
        _KINDS[t] = kind
    return kind


def array_key(x):
    """The geometry of a device array, as a plan's key sees it: ``(kind, dtype, shape,
    strides, device)``; None where a call on ``x`` gets no plan (host arrays, tensors that
    need the general path's checks)."""
    kind = _kind_of(x)
    if kind == "torch":
        if not x.is_cuda or x.is_nested or x.layout is not sys.modules["torch"].strided or x.is_neg() or x.is_conj():
            return None
        return "torch", x.dtype, x.shape, x.stride(), x.get_device()
    if kind == "cupy":
        return "cupy", x.dtype, x.shape, x.strides, x.data.device_id
    if kind == "numpy":
        emulator = _kernels.current_emulator()
        if emulator is None:  # the CPU backend
            return None
        return "numpy", x.dtype, x.shape, x.strides, emulator
    return None


def address(x):
    """The address of a device array's first element (``x`` one :func:`array_key` keys)."""
    kind = _kind_of(x)
    if kind == "torch":
        return x.data_ptr()
    if kind == "cupy":
        return x.data.ptr
    return x.__array_interface__["data"][0]


def argument(x, kind):
    """A device array ``x`` (one :func:`array_key` keys, of ``kind``) as a kernel argument
    at a plan's ``per_call`` position: a torch tensor's address, the array itself
    otherwise."""
    return pointer(x.data_ptr()) if kind == "torch" else x


def list_key(images, most):
    """``array_key`` of each image of a list (or tuple) of 1 to ``most`` device images, or
    None."""
    t = type(images)
    if (t is not list and t is not tuple) or not 0 < len(images) <= most:
        return None
    keys = []
    for a in images:
        k = array_key(a)
        if k is None:
            return None
        keys.append(k)
    return t, tuple(keys)


def call_key(images, out, options, most):
    """``(kind, key)`` of a call on ``images`` (a device array, or a list of 1 to ``most``
    device images; ``most`` 0: no list) with ``out`` (None or a device array) and ``options`` (the other
    arguments, see :func:`options_key`), or None where the call gets no plan."""
    if type(images) is list or type(images) is tuple:
        key = list_key(images, most)
        kind = None if key is None else key[1][0][0]
    else:
        key = array_key(images)
        kind = None if key is None else key[0]
    if key is None:
        return None
    out_key = None if out is None else array_key(out)
    if out is not None and out_key is None:
        return None
    options = options_key(options)
    if options is None:  # (an array among them: its values are no key)
        return None
    return kind, (key, out_key, options)


# option values a key may hold: immutable, so a value equal to a stored one means the same
# call (an array, or any object compared by identity, might change in place under its key)
_KEY_TYPES = frozenset((int, float, bool, str, type(None), type, np.dtype))


def _key_value(v):
    t = type(v)
    if t in _KEY_TYPES or isinstance(v, (np.generic, np.dtype)):
        return t, v
    return None


def options_key(values):
    """``values`` (an op's other arguments) as a key: their types, then the values (lists as
    tuples), or None where one cannot be a key: only numbers, strings, None, dtypes and
    types, alone or in tuples / lists (an array or any other object could change in place
    under its key). Two keys are equal where every value is equal and of the same type."""
    types, flat = [], []
    for v in values:
        t = type(v)
        if t in _KEY_TYPES:
            types.append(t)
            flat.append(v)
        elif t is tuple or t is list:
            inner = tuple(map(type, v))
            if not _KEY_TYPES.issuperset(inner) and any(_key_value(e) is None for e in v):
                return None
            types.append((t, inner))
            flat.append(v if t is tuple else tuple(v))
        elif _key_value(v) is not None:
            types.append(t)
            flat.append(v)
        else:
            return None
    return tuple(types), tuple(flat)


class LaunchPlan:
    """One kernel launch of a call, all but its input and output pointers fixed.

    ``args`` is the first call's argument tuple; ``slots`` the positions of the input (None
    for a list) and the output in it. For a list of images, ``ragged`` is ``(slot, sizes,
    strides)``: the position of the by-value records (:func:`cupyprep._launch.ragged_records`)
    whose pointers change, and the images' sizes and element strides. The fixed arguments
    are held in the form CuPy passes without converting them (:func:`_launch.held`). ``extra`` is whatever
    else the op hands back (copied per call by the op, so a caller changing it changes no
    later call's). ``per_call``: the positions of arguments the op works out at every call
    (a warp's matrix) and hands to :meth:`run`. ``constants``: ``(position, key, make,
    what, hint)`` of each kept table the launch reads (:func:`_transfers.device_constant`'s
    arguments; a tuple of positions for a table of several arrays): fetched again inside
    every run's launch context, as the general path does, so a stream that did not upload
    it waits for the upload and a capture marks it as read by a graph (and a table dropped
    since is uploaded again)."""

    __slots__ = ("args", "block", "constants", "extents", "extra", "fn", "grid", "out_dtype",
                 "out_shape", "out_torch_dtype", "per_call", "ragged", "slots")

    def __init__(self, fn, grid, block, args, slots, out_shape, out_dtype, extra=None, ragged=None,
                 per_call=(), constants=()):
        # the first call's input and output are not kept (a plan must not hold arrays alive):
        # their slots are filled at every run, and so are an emulator's records
        # (the list's records are kept apart: every run writes its pointers into a copy)
        args = list(args)
        for i in (*slots, *per_call, *(i for c in constants for i in _positions(c[0]))):
            if i is not None:
                args[i] = None
        if ragged is not None:
            slot, sizes, strides = ragged
            ragged = slot, (None if _kernels.current_emulator() is not None else args[slot]), sizes, strides
            args[slot] = None
        self.fn, self.grid, self.block, self.args, self.slots = fn, grid, block, held(args), slots
        self.out_shape, self.out_dtype, self.extra = tuple(out_shape), np.dtype(out_dtype), extra
        self.out_torch_dtype = None
        self.ragged = ragged
        self.per_call = per_call
        self.constants = constants
        self.extents = None  # the byte ranges around the pointers (see _overlaps)

    def run(self, x, kind, out=None, values=()):
        """Launch on input ``x`` (an array, or a list of images, of the kind the plan was
        made for) into a new output, or into ``out`` (of the geometry the plan was made
        for), in the launch context the general path uses, with ``values`` at the
        ``per_call`` positions; returns the output, or None where ``out`` overlaps an input
        (the general path then stages the output)."""
        torch = kind == "torch"
        if self.ragged is None:
            first = images = x
            view = TensorView(x) if torch else x
            pointers = None
        else:
            first, images = x[0], x
            view = TensorView(first) if torch else first
            pointers = ([t.data_ptr() for t in x] if torch else [a.data.ptr for a in x] if kind == "cupy"
                        else [address(a) for a in x])
        p_out = None
        if out is not None:
            p_out = address(out)
            if pointers is None:
                images, pointers = (x,), [view.ptr if torch else address(x)]
            if self._overlaps(images, pointers, out, p_out):
                return None
        call = prepared(first, kind, view)
        with call.launch():
            return self._launch(call, x, view.ptr if torch and self.ragged is None else None, pointers,
                                out, p_out, values)

    def _launch(self, call, x, x_ptr, pointers, out, p_out, values=()):
        """The launch of :meth:`run` inside ``call``'s launch context: on ``x`` (at
        ``x_ptr`` for a torch tensor) into ``out`` (at ``p_out``) or a new output."""
        i_in, i_out = self.slots
        args = list(self.args)
        for i, v in zip(self.per_call, values):
            args[i] = v
        for at, key, make, what, hint in self.constants:
            table = _transfers.device_constant(call.xp, key, make, what, hint)
            if type(at) is tuple:
                for i, a in zip(at, table):
                    if i is not None:
                        args[i] = a
            else:
                args[at] = table
        if self.ragged is not None:
            slot, stored, sizes, strides = self.ragged
            args[slot] = _records(stored, x, pointers, sizes, strides)
        if call.kind == "torch":
            if out is None:
                dtype = self.out_torch_dtype
                if dtype is None:
                    dtype = self.out_torch_dtype = torch_dtype(self.out_dtype)
                out = call.tensor.new_empty(self.out_shape, dtype=dtype)
                p_out = out.data_ptr()
            if i_in is not None:
                args[i_in] = pointer(x_ptr)
            args[i_out] = pointer(p_out)
        else:
            if out is None:
                out = call.xp.empty(self.out_shape, self.out_dtype)
            if i_in is not None:
                args[i_in] = x
            args[i_out] = out
        self.fn(self.grid, self.block, tuple(args))
        return out

    def _overlaps(self, images, pointers, out, p_out):
        """Whether ``out`` (at ``p_out``) shares memory with one of ``images`` (at
        ``pointers``). The key fixes the shapes and strides of every image and of ``out``,
        so the byte range each spans around its pointer is worked out once, at the first
        call with an ``out``; only the pointers change."""
        extents = self.extents
        if extents is None:
            def extent(a, p):
                lo, hi = byte_span(TensorView(a) if _kind_of(a) == "torch" else a)
                return (lo - p, hi - p) if hi > lo else (0, 0)

            extents = self.extents = (tuple(extent(a, p) for a, p in zip(images, pointers)),
                                      extent(out, p_out))
        inner, (c, d) = extents
        lo, hi = p_out + c, p_out + d
        for p, (a, b) in zip(pointers, inner):
            if p + a < hi and lo < p + b:
                return True
        return False


def run_chain(plans, x, kind, out=None):
    """Plans that each read the previous one's output (the first reads ``x``, a device
    array of ``kind``), the last writing a new output or ``out``, in one launch context:
    the intermediate arrays are new (none overlaps ``x`` or ``out``), and ``x`` is read
    whole before ``out`` is written (one stream), so ``out`` may be ``x``."""
    torch = kind == "torch"
    last = len(plans) - 1
    call = prepared(x, kind)
    with call.launch():
        for k, plan in enumerate(plans):
            target = out if k == last else None
            p_out = None if target is None else address(target)
            x = plan._launch(call, x, x.data_ptr() if torch else None, None, target, p_out)
    return x


def prepared(x, kind, view=None):
    """A repeated call on ``x`` (a device array of ``kind``; ``view`` its
    :class:`TensorView` where one is made already) as the general path prepares it: its
    ``launch()`` enters the same launch context."""
    if kind == "torch":
        return Prepared(TensorView(x) if view is None else view, kind, True, x)
    return Prepared(x, kind, True)


def _positions(at):
    """A constant's argument positions (one, or a tuple of them, None for a part the
    launch does not take)."""
    return at if type(at) is tuple else (at,)


def _records(stored, arrays, pointers, sizes, strides):
    """The by-value records of a list launch for ``arrays`` (at ``pointers``, of the stored
    sizes and strides): the stored ones with the pointers written in (under the emulator,
    records that carry the arrays)."""
    if _kernels.current_emulator() is not None:
        return ragged_records(arrays, sizes, strides)[1]
    records = np.empty((), stored.dtype)
    records[()] = stored  # a copy (the stored records stay as they were), then the pointers
    records["v"]["ptr"][:len(pointers)] = pointers
    return held_bytes(records)


def overlap(a, b):
    """Whether arrays ``a`` and ``b`` (NumPy, CuPy, torch or :class:`TensorView`) share
    memory."""
    if _kind_of(a) == "torch":
        a = TensorView(a)
    if _kind_of(b) == "torch":
        b = TensorView(b)
    return overlaps(a, b)


def unstaged(inputs, out):
    """Whether a launch into ``out`` (None: a new output) wrote it directly: an ``out`` that
    overlaps one of ``inputs`` was staged, and the launch's arguments hold the staging
    array's strides, so that call stores no plan."""
    return out is None or not any(overlap(a, out) for a in inputs)


_CACHES: list = []  # every PlanCache made, for clear_all()


def clear_all():
    """Drop every stored plan (the next call of each geometry plans again)."""
    for cache in _CACHES:
        cache.clear()


class PlanCache:
    """A bounded map from keys to plans (the oldest plan goes first when full; ``maxsize``
    0 keeps none: every call takes the general path)."""

    def __init__(self, maxsize=256):
        _CACHES.append(self)
        self._plans: dict = {}
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def get(self, key):
        return self._plans.get(key)

    def find(self, images, out, options, most=0):
        """``(kind, key, plan)`` of a call (see :func:`call_key`): the plan stored under its
        key, or None; kind and key are None too where the call gets no plan."""
        found = call_key(images, out, options, most)
        if found is None:
            return None, None, None
        kind, key = found
        return kind, key, self._plans.get(key)

    def replay(self, images, out, options, most=0):
        """``(key, result)`` of a call: its key (see :meth:`find`) and, where a plan is
        stored under it, the plan's launch on ``images`` into ``out`` (a new output for
        None); ``result`` None where no plan is stored, or where ``out`` overlaps an input
        (the general path then stages it)."""
        kind, key, found = self.find(images, out, options, most)
        return key, (None if found is None else found.run(images, kind, out))

    def put(self, key, plan):
        if self._maxsize <= 0:
            return
        with self._lock:
            if key not in self._plans and len(self._plans) >= self._maxsize:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan

    def clear(self):
        with self._lock:
            self._plans.clear()

    def __len__(self):
        return len(self._plans)
