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

import contextlib
import functools
import sys
import threading

import numpy as np

from . import _kernels

__all__ = ["prepare", "Prepared", "StreamChoice", "chosen_stream", "choose_stream", "cupy_stream"]

_local = threading.local()


class StreamChoice:
    """A stream named by :func:`cupyprep.stream`: its handle, device and the objects that
    represent it in CuPy and torch (made when first needed)."""

    def __init__(self, ptr, device_id, cupy_obj=None, torch_obj=None):
        self.ptr = int(ptr)
        self.device_id = int(device_id)
        self._cupy = cupy_obj
        self._torch = torch_obj

    def as_cupy(self):
        if self._cupy is None:
            self._cupy = cupy_stream(self.ptr)
        return self._cupy

    def as_torch(self):
        if self._torch is None:
            import torch

            device = torch.device("cuda", self.device_id)
            # handle 0 is the legacy default stream, torch's default stream
            self._torch = (torch.cuda.default_stream(device) if self.ptr == 0
                           else torch.cuda.ExternalStream(self.ptr, device=device))
        return self._torch


def chosen_stream():
    """The innermost :func:`cupyprep.stream` of this thread, or None."""
    stack = getattr(_local, "streams", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def choose_stream(choice):
    """Make ``choice`` (a :class:`StreamChoice` or None) this thread's launch stream."""
    stack = getattr(_local, "streams", None)
    if stack is None:
        stack = _local.streams = []
    stack.append(choice)
    try:
        yield choice
    finally:
        stack.pop()


class _StreamHandle:
    """A raw ``cudaStream_t`` seen through the CUDA stream protocol."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


_stream_cache: dict = {}


def cupy_stream(ptr, device_id=None):
    """A CuPy stream object for the raw handle ``ptr`` (not owned: never destroyed here) on
    device ``device_id`` (default: the current device).

    Kept per (device, handle): every op call asks for one, and making the object is a
    measurable part of a small call's host time.
    """
    import cupy

    if device_id is None:
        device_id = cupy.cuda.runtime.getDevice()
    key = (device_id, int(ptr))
    stream = _stream_cache.get(key)
    if stream is None:
        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is not None:
            stream = from_external(_StreamHandle(int(ptr)))
        else:
            stream = cupy.cuda.ExternalStream(int(ptr))
        if len(_stream_cache) > 256:
            _stream_cache.clear()
        _stream_cache[key] = stream
    return stream


def order_after(producer_ptr, consumer_ptr):
    """Make stream ``consumer_ptr`` wait (on the device) for the work queued so far on
    ``producer_ptr``."""
    import cupy

    event = cupy.cuda.Event(block=False, disable_timing=True)
    event.record(cupy_stream(producer_ptr))
    cupy_stream(consumer_ptr).wait_event(event)


def _is_cupy(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_tensor():
    """torch.Tensor, for a caller that holds a torch input (torch is imported)."""
    return sys.modules["torch"].Tensor


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


def to_host(x) -> np.ndarray:
    """An array of any supported kind as NumPy (a device-to-host copy for cupy and CUDA
    tensors; NumPy arrays as they are)."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        return x.detach().cpu().numpy()
    if _is_cupy(x):
        return x.get()
    return np.asarray(x)


def read_back(x, what, hint):
    """``to_host(x)`` of a device value an op needs on the host (a count, a flag). Under CUDA
    graph capture, where a read back would invalidate the capture (torch then reports that
    at its end without naming the cause), a ``ValueError`` instead: "``what`` is read back
    to the host by this call, ...; ``hint``"."""
    if not (isinstance(x, (np.ndarray, np.generic)) or (_is_torch(x) and x.device.type == "cpu")):
        refuse_under_capture(what, hint)
    return to_host(x)


def refuse_under_capture(what, hint):
    """:func:`read_back`'s error, raised now if the current stream is capturing (for work
    before the read that cannot be captured either)."""
    if _capturing():
        raise ValueError(f"{what} is read back to the host by this call, which a CUDA graph "
                         f"cannot capture; {hint}")


def _capturing():
    """Whether the current stream (the launch context's) is being captured."""
    import cupy

    return cupy.cuda.get_current_stream().is_capturing()


def upload(xp, a, what, hint, dtype=None, *, in_graph=True):
    """``a`` on the current device as a ``xp`` array of ``dtype``: host data copied there,
    an ``xp`` array (already on the device) as it is, or converted there; NumPy under the
    kernel emulator, as it is. The copy goes through CuPy, which stages it through
    page-locked memory and copies asynchronously on the current stream (the launch
    context's), where ``torch.as_tensor`` from NumPy onto the device would wait for that
    stream to drain.

    A CUDA graph cannot capture a copy from pageable host memory (the capture is
    invalidated, and torch reports that at its end without naming the cause). Under
    capture, inside an op's launch context (whose allocations the graph keeps), host data
    of up to :data:`_PUT_MAX_BYTES` go into the graph as the parameters of kernel launches
    that write it (:func:`_put_in_graph`): each replay writes the capture's values again.
    Otherwise (larger data, ``in_graph=False``: a table that outlives the call) this
    raises a ``ValueError``, "``what`` is copied from host memory ...; ``hint``", ``what``
    naming the argument the data come from."""
    if xp is not np and not isinstance(a, xp.ndarray) and _capturing():
        if in_graph and getattr(_local, "launch", None) is not None:
            host = np.ascontiguousarray(np.asarray(a, dtype=dtype))
            if host.dtype.kind in "biufc" and host.nbytes <= _PUT_MAX_BYTES:
                return _put_in_graph(xp, host)
            size = f" ({host.nbytes} bytes; a graph takes up to {_PUT_MAX_BYTES})"
        else:
            size = ""
        raise ValueError(f"{what} is copied from host memory to the device by this call, which "
                         f"a CUDA graph cannot capture{size}; {hint}")
    return xp.asarray(a, dtype=dtype)


# kernels/upload.cu: the 32-bit words one launch of cupyprep_put_words carries (kPutWords),
# and the most host data a call puts into a graph that way (64 launches)
_PUT_KERNEL = "cupyprep_put_words"
_PUT_WORDS = 1000
_PUT_MAX_BYTES = 64 * 4 * _PUT_WORDS
_kernels.register_variants("upload", "upload.cu", lambda: [_PUT_KERNEL])


def _put_in_graph(xp, host):
    """The contiguous NumPy array ``host`` as a new ``xp`` array on the current device,
    written by launches of cupyprep_put_words on the current stream, each carrying up to
    :data:`_PUT_WORDS` words of it as a kernel parameter: a copy that a CUDA graph captures
    (as kernel nodes with the values in them) and needs no host memory to replay."""
    n = host.nbytes
    words = -(-n // 4)
    buf = xp.empty(words, np.uint32)  # whole words: the last one's padding stays inside
    if words:
        padded = np.zeros(words * 4, np.uint8)
        padded[:n] = host.reshape(-1).view(np.uint8)
        padded = padded.view(np.uint32)

        fn = _kernels.get_function("upload.cu", _PUT_KERNEL)
        for start in range(0, words, _PUT_WORDS):
            chunk = padded[start:start + _PUT_WORDS]
            args = (buf[start:], _kernels.by_value(chunk, np.uint32, _PUT_WORDS), np.int32(chunk.size))
            _kernels.launch_1d(fn, chunk.size, args)
    return buf.view(np.uint8)[:n].view(host.dtype).reshape(host.shape)


class _Constant:
    """A cached device table, the event recorded after its upload on ``stream_ptr``,
    whether that event is known to have passed, and whether a CUDA graph captured a call
    that reads the table (it then stays: a replay may read it at any later time)."""

    __slots__ = ("table", "event", "stream_ptr", "ready", "captured")

    def __init__(self, table, event, stream_ptr):
        self.table, self.event, self.stream_ptr = table, event, stream_ptr
        self.ready = self.captured = False


_constants: dict = {}
_constants_lock = threading.Lock()
_CONSTANTS_MAX = 256  # tables no graph has captured, kept at most
_constants_limit = _CONSTANTS_MAX  # the cache's size that triggers an eviction


def device_constant(xp, key, make, what, hint):
    """A table that depends only on ``key`` (``make()`` builds it on the host: an array or
    a tuple of them), uploaded once per device and kept: later calls with the same key copy
    nothing (so a CUDA graph can capture them). NumPy (the kernel emulator) gets ``make()``.

    Nothing waits for the GPU: the upload is queued on the current stream, and a call on
    another stream before it is known to have finished makes that stream wait for it on
    the device (under capture, through an external event wait, the form a capture allows).
    When :data:`_CONSTANTS_MAX` tables no graph has captured are kept, the devices are
    synchronized and those tables dropped, so no queued kernel still reads a table whose
    memory is handed out again; a table read by a captured call is never dropped, since
    the graph's replays read it at any later time. (A first call under capture uploads,
    and :func:`upload` refuses it: the table would be allocated for the graph, which may
    be gone while the cache still holds it; nothing is dropped during a capture.)"""
    global _constants_limit
    if xp is np:
        return make()
    import cupy

    full_key = (cupy.cuda.runtime.getDevice(),) + key
    stream = cupy.cuda.get_current_stream()
    entry = _constants.get(full_key)
    if entry is None:
        host = make()
        table = (tuple(upload(xp, a, what, hint, in_graph=False) for a in host)
                 if isinstance(host, tuple) else upload(xp, host, what, hint, in_graph=False))
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(stream)
        with _constants_lock:
            if len(_constants) >= _constants_limit:
                for device_id in {k[0] for k, e in _constants.items() if not e.captured}:
                    with cupy.cuda.Device(device_id):
                        cupy.cuda.Device(device_id).synchronize()
                kept = {k: e for k, e in _constants.items() if e.captured}
                _constants.clear()
                _constants.update(kept)
                _constants_limit = len(kept) + _CONSTANTS_MAX
            _constants[full_key] = _Constant(table, event, stream.ptr)
        return table
    capturing = stream.is_capturing()
    if capturing:
        entry.captured = True
    if not entry.ready and stream.ptr != entry.stream_ptr:
        if capturing:
            # the event cannot be queried during a capture; the graph gets a node that
            # waits for it (long passed, at a replay)
            cupy.cuda.runtime.streamWaitEvent(stream.ptr, entry.event.ptr, _EVENT_WAIT_EXTERNAL)
        elif entry.event.done:
            entry.ready = True
        else:
            stream.wait_event(entry.event)
    return entry.table


_EVENT_WAIT_EXTERNAL = 0x1  # cudaEventWaitExternal


def upload_ragged(xp, a, name, by_value):
    """:func:`upload` of the per-image table of the list of images ``name`` (made on the
    host at every call), for a list longer than the ``by_value`` images a kernel takes by
    value."""
    return upload(xp, a, f"{name} (a list of more than {by_value} images): its table of "
                  "image records", f"pass at most {by_value} images, or one (N, H, W, C) "
                  "batch, or make this call outside the capture")


def upload_like(ref, a, dtype, what, hint):
    """NumPy ``a`` as ``dtype`` in the array kind, and on the device, of ``ref`` (numpy,
    cupy or torch); a device copy as :func:`upload` makes it."""
    if isinstance(ref, np.ndarray):
        return np.asarray(a, dtype=dtype)
    if _is_torch(ref):
        import torch

        if not ref.is_cuda:
            return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))
        import cupy

        return torch.from_dlpack(upload(cupy, a, what, hint, dtype))
    import cupy

    return upload(cupy, a, what, hint, dtype)


def describe(x) -> str:
    """A short description of an argument for error messages."""
    if isinstance(x, TensorView):
        x = x.tensor
    if isinstance(x, np.ndarray):
        return f"numpy.ndarray of shape {x.shape} and dtype {x.dtype}"
    if _is_cupy(x):
        return f"cupy.ndarray of shape {x.shape} and dtype {x.dtype} on device {x.device.id}"
    if _is_torch(x):
        return f"torch.Tensor of shape {tuple(x.shape)} and dtype {x.dtype} on {x.device}"
    return f"{type(x).__module__}.{type(x).__qualname__}"


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
        if self.kind == "torch" and self.device and isinstance(x, _torch_tensor()) and x.is_cuda:
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
        if self.kind == "torch":
            tensor = self.tensor.new_empty(shape, dtype=_torch_dtype(dtype))
            return tensor, _from_torch(tensor)
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
        if out is not None:  # a new output overlaps nothing
            lo, hi = _byte_span(view)
            for a in inputs:
                a_lo, a_hi = _byte_span(a)
                if lo < a_hi and a_lo < hi:
                    staged = self.xp.empty(view.shape, view.dtype)
                    break
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
        outer = getattr(_local, "launch", None)
        if outer is not None and outer[0] == device_id and call.kind in ("cupy", outer[1]):
            return None
        import cupy

        exits = self._exits
        self._outer = outer
        _local.launch = key
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
                scratch = _torch_allocations()
                scratch.__enter__()
                exits.append(scratch)
            elif ptr != 0 and stream.is_capturing():  # the legacy stream is never captured
                scratch = _captured_allocations()
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
            _local.launch = self._outer
            self._outer = _NOT_ENTERED
        return False


_NOT_ENTERED = object()


class _TorchBlock:
    """Owns memory taken from torch's caching allocator; gives it back when collected."""

    __slots__ = ("ptr", "_delete")

    def __init__(self, ptr, delete):
        self.ptr = ptr
        self._delete = delete

    def __del__(self):
        try:
            self._delete(self.ptr)
        except Exception:  # interpreter shutdown: torch may already be gone
            pass


def torch_malloc(size):
    """A CuPy allocator (``cupy.cuda.set_allocator``'s form) drawing on torch's caching
    allocator, for CuPy's current device and stream."""
    import cupy
    import torch

    device_id = cupy.cuda.Device().id
    if size == 0:
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(0, 0, None, device_id), 0)
    # the block belongs to the stream CuPy allocates for, as in CuPy's own pool; under a
    # torch CUDA graph capture of that stream it comes from the graph's private pool
    ptr = torch.cuda.caching_allocator_alloc(size, device_id, cupy.cuda.get_current_stream().ptr)
    owner = _TorchBlock(ptr, torch.cuda.caching_allocator_delete)
    return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, size, owner, device_id), 0)


class _UsingAllocator:
    """This thread's CuPy allocations come from ``malloc`` (``cupy.cuda.set_allocator``'s
    form) while entered; the allocator before is restored on exit."""

    __slots__ = ("_malloc", "_previous")

    def __init__(self, malloc):
        self._malloc = malloc

    def __enter__(self):
        access = _thread_allocator()
        if access is None:
            import cupy

            self._previous = cupy.cuda.using_allocator(self._malloc)
            self._previous.__enter__()
        else:
            self._previous = access[0]()
            access[1](self._malloc)

    def __exit__(self, *exc):
        access = _thread_allocator()
        if access is None:
            return self._previous.__exit__(*exc)
        access[1](self._previous)
        return False


def _torch_allocations():
    """Inside an op call on torch tensors, this thread's CuPy allocations come from torch's
    caching allocator: the op's tables and scratch arrays then live where its outputs do,
    and under ``torch.cuda.graph`` in the graph's private pool (memory from CuPy's pool
    would return to that pool when the call ends, and be handed to other arrays while the
    graph still reads and writes it at every replay)."""
    return _UsingAllocator(torch_malloc)


# Every block an op on CuPy arrays allocated while its stream was being captured: the
# graph's replays may use it at any later time, so it is held until the program says its
# graphs are done (cupyprep.release_graph_memory; see _captured_allocations).
_KEPT_FOR_GRAPHS: list = []


def release_kept_for_graphs():
    """Drop :data:`_KEPT_FOR_GRAPHS`'s blocks (:func:`cupyprep.release_graph_memory`);
    returns their bytes."""
    kept = _KEPT_FOR_GRAPHS[:]
    del _KEPT_FOR_GRAPHS[:len(kept)]  # blocks a capture in another thread added since stay
    return sum(int(getattr(getattr(b, "mem", None), "size", 0)) for b in kept)


def _captured_allocations():
    """Inside an op call on CuPy arrays while the launch stream is being captured into a
    CUDA graph (``cupy.cuda.Stream.begin_capture``): CuPy's pool would take back the
    tables, scratch arrays and temporaries the call lets go of, and hand them to other
    arrays while every replay of the graph still reads and writes them. Here every block
    the call allocates, through the allocator that was current, is also held in
    :data:`_KEPT_FOR_GRAPHS`, so it stays allocated for the life of the process, or until
    :func:`cupyprep.release_graph_memory` (outputs included: whether the graph still
    writes them cannot be told from here). torch tensors get the graph's private pool
    instead (:func:`_torch_allocations`)."""
    import cupy

    inner = cupy.cuda.get_allocator()

    def malloc(size):
        block = inner(size)
        _KEPT_FOR_GRAPHS.append(block)
        return block

    return _UsingAllocator(malloc)


@functools.lru_cache(maxsize=None)
def _thread_allocator():
    """(get, set) of CuPy's thread-local allocator, or None. They are what CuPy's public
    ``cupy.cuda.using_allocator`` context manager calls; called directly they skip its
    generator (a microsecond or two per op call). Where a CuPy version lacks them, the
    context manager is used."""
    from cupy.cuda import memory

    get = getattr(memory, "_get_thread_local_allocator", None)
    put = getattr(memory, "_set_thread_local_allocator", None)
    return (get, put) if get is not None and put is not None else None


def _device_id(array) -> int:
    return array.device.id


def _torch_dtype(dtype):
    table = _TORCH_DTYPES()
    found = table.get(dtype)  # a NumPy dtype object: no np.dtype() call
    return found if found is not None else table[np.dtype(dtype)]


@functools.lru_cache(maxsize=None)
def _NUMPY_DTYPES():
    """torch dtype -> NumPy dtype (the inverse of _TORCH_DTYPES)."""
    return {v: k for k, v in _TORCH_DTYPES().items()}


@functools.lru_cache(maxsize=None)
def _TORCH_DTYPES():
    import torch

    return {
        np.dtype(np.uint8): torch.uint8,
        np.dtype(np.uint16): torch.uint16,
        np.dtype(np.uint32): torch.uint32,
        np.dtype(np.uint64): torch.uint64,
        np.dtype(np.int16): torch.int16,
        np.dtype(np.int32): torch.int32,
        np.dtype(np.int64): torch.int64,
        np.dtype(np.float16): torch.float16,
        np.dtype(np.float32): torch.float32,
        np.dtype(np.float64): torch.float64,
        np.dtype(np.bool_): torch.bool,
    }


def _from_torch(tensor):
    """A zero-copy cupy view of a CUDA tensor.

    The tensor's memory is wrapped as cupy memory that keeps the tensor alive: no DLPack
    exchange, so no stream handshake and no synchronization (legal inside CUDA graph
    capture), at a few microseconds instead of DLPack's ~30 per array, which the ops pay
    for every torch input, output and scratch array. dtypes outside cupyprep's dtype table
    (int8, bfloat16, ...) and empty tensors go through DLPack on torch's current stream,
    where the handshake inserts no synchronization either.
    """
    import cupy

    dtype = _NUMPY_DTYPES().get(tensor.dtype)
    numel = tensor.numel()
    device = tensor.get_device()
    if dtype is None or numel == 0:
        t = tensor.detach()
        with cupy.cuda.Device(device):
            with cupy_stream(torch_current_stream(device)):
                return cupy_from_dlpack(t)
    itemsize = dtype.itemsize
    strides = tuple([s * itemsize for s in tensor.stride()])  # never negative in torch
    if tensor.is_contiguous():
        span = numel * itemsize
    else:
        span = itemsize
        for n, s in zip(tensor.shape, strides):
            span += (n - 1) * s
    memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), span, tensor, device_id=device)
    return cupy.ndarray(tuple(tensor.shape), dtype, cupy.cuda.MemoryPointer(memory, 0), strides)


def torch_current_stream(device_index):
    """The handle of torch's current stream on CUDA device ``device_index`` (an int)."""
    global _raw_stream
    if _raw_stream is None:
        import torch

        # torch's own generated code reads the handle this way; the public form builds a
        # Stream object per call (a few microseconds)
        _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream(device_index)


_raw_stream = None


def cupy_from_dlpack(t):
    """``cupy.from_dlpack`` of a CUDA tensor on its device, on cupy's current stream;
    uint16 / 32 / 64, on which DLPack consumers differ, go through their signed twin."""
    import cupy

    twin = _int_twin(t.dtype)
    with cupy.cuda.Device(t.device.index):
        if twin is None:
            return cupy.from_dlpack(t)
        return cupy.from_dlpack(t.view(twin)).view(_numpy_dtype(t.dtype))


class TensorView:
    """What a kernel needs of a torch CUDA tensor: pointer, shape, strides, dtype, device;
    the attributes mirror cupy.ndarray's (``data.ptr``, ``strides`` in bytes, ``device.id``),
    so shape checks and launch tables read it alike. ``elem_strides`` are torch's own, in
    elements."""

    __slots__ = ("tensor", "shape", "ndim", "dtype", "itemsize", "elem_strides", "ptr", "device")

    class _Device:
        __slots__ = ("id",)

        def __init__(self, index):
            self.id = index

    _devices: dict = {}

    def __init__(self, tensor, device=None):
        # a list of many images makes one of these per image: plain attribute reads only
        self.tensor = tensor
        self.shape = shape = tuple(tensor.shape)
        self.ndim = len(shape)
        dtype = _NUMPY_DTYPES().get(tensor.dtype)
        if dtype is None:
            raise TypeError(f"images: dtype {tensor.dtype} is not supported, got {describe(tensor)}")
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.elem_strides = tensor.stride()
        self.ptr = tensor.data_ptr()
        index = tensor.get_device() if device is None else device
        found = self._devices.get(index)
        if found is None:
            found = self._devices.setdefault(index, self._Device(index))
        self.device = found

    @property
    def data(self):
        """``data.ptr``, as a cupy array's."""
        return self

    @property
    def strides(self):
        k = self.itemsize
        return tuple([s * k for s in self.elem_strides])


def _int_twin(dtype):
    """The signed torch dtype of the same width for uint16 / 32 / 64 (None for others):
    DLPack consumers differ on those unsigned types."""
    import torch

    return {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}.get(dtype)


def _numpy_dtype(dtype):
    import torch

    return {torch.uint16: np.uint16, torch.uint32: np.uint32, torch.uint64: np.uint64}[dtype]


def prepare(x, name) -> Prepared:
    """Classify an array argument; a TypeError names ``name`` for anything else."""
    if isinstance(x, np.ndarray):
        return Prepared(x, "numpy", _kernels.emulating())
    if _is_cupy(x):
        return Prepared(x, "cupy", True)
    if _is_torch(x):
        if x.device.type == "cuda":
            return Prepared(_from_torch(x), "torch", True, x)
        if x.device.type == "cpu":
            if x.dtype in (_torch_bf16(),):
                raise TypeError(f"{name}: bfloat16 is not supported, got {describe(x)}")
            return Prepared(x.detach().numpy(), "torch", False, x)
        raise TypeError(f"{name}: expected a CPU or CUDA tensor, got {describe(x)}")
    raise TypeError(
        f"{name}: expected a numpy.ndarray, cupy.ndarray or torch.Tensor, got {describe(x)}"
    )


def _torch_bf16():
    import torch

    return torch.bfloat16


def on_input_device(fn):
    """Run ``fn`` as the ops run, in the launch context of its first device array argument:
    that array's device, and its natural stream (CuPy's current stream, torch's current
    stream on the tensor's device) or the one chosen by :func:`cupyprep.stream`, after the
    natural one. For the helpers that work with plain CuPy / torch expressions."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for a in (*args, *kwargs.values()):
            if _is_cupy(a) or (_is_torch(a) and a.is_cuda):
                with prepare(a, "argument").launch():
                    return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return run


def _byte_span(a):
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
