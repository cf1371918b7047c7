"""Input dispatch: NumPy, CuPy and PyTorch arrays in, the same kind out.

numpy in  -> computed by the CPU backend (``cupyprep.cpu``), numpy out
cupy in   -> kernels on the current CuPy stream and device, cupy out
torch CUDA tensor in -> kernels on ``torch.cuda.current_stream()``, torch out; inputs and
             outputs cross through DLPack without a copy (outputs are allocated by torch)
torch CPU tensor in  -> the CPU backend on a zero-copy NumPy view, torch CPU out

Inside :func:`cupyprep.stream` kernels run on the stream given there instead, ordered
after the work already queued on the stream they would otherwise have used.

Neither CuPy nor torch is imported unless an input needs it, so ``import cupyprep`` works
on a machine with neither. Under :func:`cupyprep.testing.emulate`, NumPy arrays take the
kernel path with NumPy standing in for device memory.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np

from . import _kernels
from ._allocators import DeviceMemoryError, captured_allocations, out_of_memory, torch_allocations
from ._streams import chosen_stream, cupy_stream, local, order_after, torch_current_stream
from ._torch import (TensorView, from_torch, is_torch, numpy_dtypes, tensor_type, torch_bf16,
                     torch_dtype)

__all__ = ["prepare", "prepare_list", "Prepared", "describe", "element_strides", "on_input_device",
           "is_cupy", "is_torch", "xp_of", "unwrap", "dense_pixels", "rows_view"]


def is_cupy(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def prepare_list(images, name):
    """A list of images: ``(prepared, arrays)``, ``prepared`` classifying ``images[0]`` and
    ``arrays`` its array followed by the others converted like it (torch CUDA images as
    :class:`TensorView`: a kernel over a ragged batch needs only their pointers and strides,
    not a DLPack exchange each)."""
    if len(images) == 0:
        raise ValueError(f"{name}: expected at least one image (pass an empty NHWC array "
                         "for an empty batch)")
    first = prepare(images[0], f"{name}[0]")
    convert = first.convert_image
    device = _device_id(first.array) if first.device and first.kind == "torch" else None
    return first, [first.array] + [convert(im, name, i, device)
                                   for i, im in enumerate(images[1:], 1)]


def describe(x) -> str:
    """A short description of an argument for error messages: the type the user passed,
    also for the NumPy / CuPy views of torch tensors the ops compute on (a torch tensor is
    described as one, with the view's shape)."""
    if isinstance(x, TensorView):
        x = x.tensor
    if isinstance(x, np.ndarray) or is_cupy(x):
        tensor = _torch_origin(x)
        if tensor is not None:
            return f"torch.Tensor of shape {tuple(x.shape)} and dtype {tensor.dtype} on {tensor.device}"
    if isinstance(x, np.ndarray):
        return f"numpy.ndarray of shape {x.shape} and dtype {x.dtype}"
    if is_cupy(x):
        return f"cupy.ndarray of shape {x.shape} and dtype {x.dtype} on device {x.device.id}"
    if is_torch(x):
        return f"torch.Tensor of shape {tuple(x.shape)} and dtype {x.dtype} on {x.device}"
    return f"{type(x).__module__}.{type(x).__qualname__}"


def _torch_origin(x):
    """The torch tensor whose memory a NumPy array (``Tensor.numpy()``, and views of it) or a
    CuPy array (:func:`cupyprep.from_torch`'s wrapping, and views of it) is, or None."""
    base = x
    while getattr(base, "base", None) is not None:
        base = base.base
        if is_torch(base):
            return base
    if is_cupy(base):
        owner = getattr(base.data.mem, "_owner", None)
        if is_torch(owner):
            return owner
    return None


class Prepared:
    """One op's main input: the array to compute on and how results go back.

    ``array`` is a numpy or cupy array (a zero-copy view for torch inputs); ``device`` says
    whether the kernel path runs; ``xp`` is the array module of that path.
    """

    def __init__(self, array, kind, device, tensor=None):
        self.array = array
        self.kind = kind  # "numpy", "cupy", "torch"
        self.device = device
        self.tensor = tensor
        if device and kind != "numpy":
            import cupy

            self.xp = cupy
        else:
            self.xp = np

    # -- inputs of the same call ---------------------------------------------------------
    def convert_image(self, x, name, index=None, device=None):
        """Like :meth:`convert` for one image of a list (``name[index]``, or ``name``): a
        torch CUDA tensor comes back as a :class:`TensorView` (pointer, shape, strides)
        without a DLPack exchange, which is what a kernel over a ragged batch needs of it.
        ``device``: the main input's device, where the caller has it already."""
        if self.kind == "torch" and self.device and isinstance(x, tensor_type()) and x.is_cuda:
            mine, theirs = (_device_id(self.array) if device is None else device), x.get_device()
            if theirs != mine:
                where = name if index is None else f"{name}[{index}]"
                raise ValueError(f"{where}: expected an array on device {mine} like the image, "
                                 f"got one on device {theirs}")
            return TensorView(x, theirs)
        return self.convert(x, name if index is None else f"{name}[{index}]")

    def convert(self, x, name):
        """Another array argument of the same call, on the same side as the main input."""
        other = prepare(x, name)
        if other.kind != self.kind or other.device != self.device:
            raise TypeError(
                f"{name}: expected the same kind of array as the image ({self.kind}), "
                f"got {describe(x)}"
            )
        if self.device and self.kind != "numpy":
            mine, theirs = _device_id(self.array), _device_id(other.array)
            if mine != theirs:
                raise ValueError(
                    f"{name}: expected an array on device {mine} like the image, "
                    f"got one on device {theirs}"
                )
        return other.array

    def sibling(self, x, name):
        """Another argument's array where the kernels can read it as it is (the same kind
        as the main input, on its device; under the emulator, NumPy), else None."""
        if not self.device:
            return None
        other = prepare(x, name)
        if other.kind != self.kind or not other.device:
            return None
        if self.kind != "numpy" and _device_id(other.array) != _device_id(self.array):
            return None
        return other.array

    # -- launching ----------------------------------------------------------------------
    def launch(self):
        """Device and stream for kernel launches (a context manager): the input's device;
        for torch tensors, torch's current stream on it (so work orders with the caller's
        torch work); inside :func:`cupyprep.stream`, that stream, after a device-side wait
        for the stream the launch would otherwise have used."""
        return _Launch(self)

    def output(self, out, shape, dtype, name="out"):
        """``(native, view)``: the array returned to the caller and the view kernels write.

        With ``out`` given it is checked (kind, shape, dtype) and written in place.
        """
        shape = tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        if out is not None:
            view = self.convert(out, name)
            if tuple(view.shape) != shape or view.dtype != dtype:
                raise ValueError(
                    f"{name}: expected shape {shape} and dtype {dtype}, got {describe(out)}"
                )
            return out, view
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes >= _NO_DEVICE_HOLDS and self.device:  # torch cannot even size some such tensors
            op = _op_name(None)
            raise DeviceMemoryError(f"{op}: an output of shape {shape} ({nbytes:,} bytes) is larger "
                                    f"than any device's memory", op=op, nbytes=nbytes)
        if self.kind == "torch":
            tensor = self.tensor.new_empty(shape, dtype=torch_dtype(dtype))
            return tensor, from_torch(tensor)
        arr = self.xp.empty(shape, dtype)
        return arr, arr

    def writing(self, out, shape, dtype, inputs):
        """The output of a kernel launch, as a context manager: ``with call.writing(out,
        shape, dtype, inputs) as (native, view)``, ``native`` the array returned to the
        caller and ``view`` the one the kernel writes (see :meth:`output`).

        Where a given ``out`` overlaps one of ``inputs`` in memory (``out=img``: in-place
        use), the kernel writes a fresh array, copied into ``out`` when the block ends
        without an error (on the same stream). OpenCV's warps and resizes accept ``dst``
        equal to ``src`` alike, by copying."""
        native, view = self.output(out, shape, dtype)
        staged = None
        if out is not None and any(overlaps(view, a) for a in inputs):  # (a new one overlaps nothing)
            staged = self.xp.empty(view.shape, view.dtype)
        return _Writing(native, view, staged)

    def back(self, array):
        """An array computed for this call (numpy, or cupy on the device) as the caller's
        kind: a torch tensor for torch input (zero-copy), else the array itself."""
        if self.kind != "torch":
            return array
        import torch

        if self.device:
            return torch.from_dlpack(array)
        return torch.from_numpy(np.require(array, requirements="C"))  # keeps 0-d results 0-d

    def result(self, array, out=None):
        """Hand a CPU-backend result back as the caller's kind (into ``out`` if given)."""
        if out is not None:
            _, view = self.output(out, array.shape, array.dtype)
            np.copyto(view, array)
            return out
        return self.back(array)


class _Writing:
    """:meth:`Prepared.writing`'s context."""

    __slots__ = ("_native", "_view", "_staged")

    def __init__(self, native, view, staged):
        self._native, self._view, self._staged = native, view, staged

    def __enter__(self):
        return self._native, (self._view if self._staged is None else self._staged)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self._staged is not None:
            self._view[...] = self._staged
        return False


class _Launch:
    """:meth:`Prepared.launch`'s context: entered on every op call, so kept to plain
    attribute work (a generator-based context manager cost a few microseconds more).

    Nested inside another launch context of this thread on the same device (an op's
    matrix work calling a helper, then its warp), it does nothing for CuPy arrays and for
    torch tensors under a torch one: the outer context has made that device and the stream
    this one would choose current already (CuPy's current stream is the outer's launch
    stream; so is torch's, for torch inputs)."""

    __slots__ = ("_call", "_exits", "_outer")

    def __init__(self, call):
        self._call = call
        self._exits = []
        self._outer = _NOT_ENTERED

    def __enter__(self):
        call = self._call
        if not call.device or call.kind == "numpy":
            return None
        device_id = _device_id(call.array)
        key = (device_id, call.kind)
        outer = getattr(local, "launch", None)
        if outer is not None and outer[0] == device_id and call.kind in ("cupy", outer[1]):
            return None
        import cupy

        exits = self._exits
        self._outer = outer
        local.launch = key
        device = cupy.cuda.Device(device_id)
        device.__enter__()
        exits.append(device)
        try:
            if call.kind == "torch":
                natural = torch_current_stream(device_id)
            else:
                natural = cupy.cuda.get_current_stream().ptr
            choice = chosen_stream()
            if choice is not None and choice.device_id != device_id:
                raise ValueError(
                    f"cupyprep.stream: the stream is on device {choice.device_id}, the input "
                    f"on device {device_id}"
                )
            ptr = natural if choice is None else choice.ptr
            if ptr != natural:
                # the input was written (and outputs last read) on the natural stream
                order_after(natural, ptr)
            stream = cupy_stream(ptr, device_id)
            stream.__enter__()
            exits.append(stream)
            if call.kind == "torch":
                if ptr != natural:
                    import torch

                    # torch allocates outputs for the stream that writes them
                    ctx = torch.cuda.stream(choice.as_torch())
                    ctx.__enter__()
                    exits.append(ctx)
                # and the op's own device memory (tables, scratch, CuPy's temporaries)
                scratch = torch_allocations()
                scratch.__enter__()
                exits.append(scratch)
            elif ptr != 0 and stream.is_capturing():  # the legacy stream is never captured
                scratch = captured_allocations()
                scratch.__enter__()
                exits.append(scratch)
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return None

    def __exit__(self, exc_type, exc, tb):
        exits = self._exits
        while exits:
            exits.pop().__exit__(exc_type, exc, tb)
        if self._outer is not _NOT_ENTERED:
            local.launch = self._outer
            self._outer = _NOT_ENTERED
        if exc_type is not None and issubclass(exc_type, (MemoryError, RuntimeError)):
            # every device allocation of an op happens in here: an allocator's
            # out-of-memory error becomes one that names the op and the size asked
            error = out_of_memory(exc, _op_name(tb), _launch_device(self._call))
            if error is not None:
                raise error from exc
        return False


_NOT_ENTERED = object()
_NO_DEVICE_HOLDS = 2**50  # bytes: an output this large fits no device


def _op_name(tb):
    """``cupyprep.<op>``: the outermost public cupyprep function on the stack above the
    launch (the call the user made), else the function that entered the launch."""
    frame = tb.tb_frame if tb is not None else sys._getframe(1)
    inner = frame.f_code.co_name
    public = _public_names()
    found = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_name
        if module.startswith("cupyprep.") and name in public.get(module, ()):
            found = f"{'cupyprep.cv2compat' if module.endswith('cv2compat') else 'cupyprep'}.{name}"
        frame = frame.f_back
    return found or f"cupyprep ({inner})"


def _public_names():
    """Public function names by defining module (``cupyprep.__all__``, cv2compat's)."""
    out = {}
    for package in ("cupyprep", "cupyprep.cv2compat"):
        mod = sys.modules.get(package)
        for name in getattr(mod, "__all__", ()):
            fn = getattr(mod, name, None)
            module = getattr(fn, "__module__", None)
            if callable(fn) and module:
                out.setdefault(module, set()).add(getattr(fn, "__name__", name))
    return out


def _launch_device(call):
    if call.device and call.kind != "numpy":
        return _device_id(call.array)
    return None


def _device_id(array) -> int:
    return array.device.id


@functools.cache
def _shared_torch_dtypes():
    """The torch dtypes NumPy / CuPy arrays can view (bfloat16: CuPy only, with ml_dtypes)."""
    import torch

    return frozenset(numpy_dtypes()) | {torch.int8, torch.complex64, torch.complex128, torch.bfloat16}


def check_tensor(t, name):
    """A torch tensor whose memory an array can view: dense (strided), of a dtype NumPy or
    CuPy has, without a lazy conjugate / negative bit (its memory holds the values before
    that view); a TypeError / ValueError naming ``name`` for anything else."""
    if t.is_nested:  # (a nested tensor has no shape for describe())
        raise TypeError(f"{name}: expected a dense (strided) tensor, got a nested tensor of {t.dtype}")
    if t.layout is not sys.modules["torch"].strided:
        raise TypeError(f"{name}: expected a dense (strided) tensor, got a {t.layout} one: {describe(t)}")
    if t.dtype not in _shared_torch_dtypes():
        raise TypeError(f"{name}: expected a dtype NumPy / CuPy have, got {describe(t)}")
    if t.is_conj() or t.is_neg():
        fix = "resolve_conj()" if t.is_conj() else "resolve_neg()"
        raise ValueError(f"{name}: a tensor with its {'conjugate' if t.is_conj() else 'negative'} bit "
                         f"set has no memory holding its values to share; pass t.{fix} (a copy), got "
                         f"{describe(t)}")


def prepare(x, name) -> Prepared:
    """Classify an array argument; a TypeError names ``name`` for anything else."""
    if isinstance(x, np.ndarray):
        return Prepared(x, "numpy", _kernels.emulating())
    if is_cupy(x):
        return Prepared(x, "cupy", True)
    if is_torch(x):
        check_tensor(x, name)
        if x.device.type == "cuda":
            return Prepared(from_torch(x), "torch", True, x)
        if x.device.type == "cpu":
            if x.dtype in (torch_bf16(),):
                raise TypeError(f"{name}: bfloat16 is not supported, got {describe(x)}")
            return Prepared(x.detach().numpy(), "torch", False, x)
        raise TypeError(f"{name}: expected a CPU or CUDA tensor, got {describe(x)}")
    raise TypeError(
        f"{name}: expected a numpy.ndarray, cupy.ndarray or torch.Tensor, got {describe(x)}"
    )


def on_input_device(fn):
    """Run ``fn`` as the ops run, in the launch context of its first device array argument:
    that array's device, and its natural stream (CuPy's current stream, torch's current
    stream on the tensor's device) or the one chosen by :func:`cupyprep.stream`, after the
    natural one. For the helpers that work with plain CuPy / torch expressions."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for a in (*args, *kwargs.values()):
            if is_cupy(a) or (is_torch(a) and a.is_cuda):
                with prepare(a, "argument").launch():
                    return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return run


def byte_span(a):
    """``[lo, hi)``: the addresses an array's elements lie in (empty for no elements);
    numpy, cupy or :class:`TensorView`."""
    shape = a.shape
    if 0 in shape:
        return 0, 0
    if type(a) is TensorView:  # torch strides: in elements, never negative
        k = a.itemsize
        span = 1
        for n, s in zip(shape, a.elem_strides):
            span += (n - 1) * s
        return a.ptr, a.ptr + span * k
    lo = a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr
    hi = lo + a.itemsize
    for n, s in zip(shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi


def overlaps(a, b):
    """Whether arrays ``a`` and ``b`` (numpy, cupy or :class:`TensorView`) share addresses."""
    lo, hi = byte_span(a)
    b_lo, b_hi = byte_span(b)
    return lo < b_hi and b_lo < hi


def element_strides(array, name="img"):
    """Strides in elements (negative and zero strides allowed)."""
    if type(array) is TensorView:
        return list(array.elem_strides)
    itemsize = array.itemsize
    strides = []
    for s in array.strides:
        if s % itemsize:
            raise ValueError(f"{name}: strides {array.strides} are not multiples of the item size")
        strides.append(s // itemsize)
    return strides


def contiguous_strides(shape):
    """C-contiguous strides of ``shape``, in elements (a zero-length axis counts as one)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def dense_pixels(strides, channels):
    """Pixels contiguous: channel stride 1 and pixel stride = channels (in elements)."""
    s_x, s_c = strides
    return (s_c == 1 or channels == 1) and s_x == channels


def xp_of(*arrays):
    """numpy or cupy, whichever the arrays are (cupy if any is)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and any(isinstance(a, cupy.ndarray) for a in arrays):
        return cupy
    return np


def inputs_of(**named):
    """The arrays of a helper's arguments as numpy / cupy (torch tensors through zero-copy
    views), the module they are computed with (cupy if any is on the device: host values
    are copied there) and ``back``, which hands a result back as the first argument's kind
    (torch for torch). A CPU tensor beside device arrays is a TypeError naming it: its
    result would have to come back to the host."""
    views, backs = {}, []
    for name, value in named.items():
        views[name], back = unwrap(value)
        backs.append(back)
    xp = xp_of(*views.values())
    if xp is not np:
        for name, value in named.items():
            if is_torch(value) and not value.is_cuda:
                raise TypeError(f"{name}: expected a CUDA tensor or a host array like the other "
                                f"arguments on the device, got {describe(value)}")
    return views, xp, backs[0]


def unwrap(x):
    """``(array, back)``: a numpy / cupy view of ``x`` and a function that returns results
    as the caller's kind (torch tensors through DLPack / from_numpy, zero-copy)."""
    if is_torch(x):
        call = prepare(x, "argument")
        return call.array, call.back
    return x, _same


def _same(a):
    return a


def rows_view(arr, name):
    """``(view, A, P, strides)``: ``arr`` (..., P, K) as the (A, P, K) array the boxes.cu
    kernels read (a view where the leading dimensions' strides merge, a contiguous copy
    where they do not), and its element strides as int64 kernel arguments."""
    P = arr.shape[-2] if arr.ndim >= 2 else 1
    A = math.prod(arr.shape[:-2])
    view = arr.reshape(A, P, arr.shape[-1])
    return view, A, P, tuple(np.int64(v) for v in element_strides(view, name))
