"""Data between host and device inside an op: uploads (also under CUDA graph capture),
tables kept on the device, and values read back."""
from __future__ import annotations

import sys
import threading

import numpy as np

from . import _kernels, _launch
from ._specs import upload as upload_spec
from ._specs._common import IMAGES_BY_VALUE
from ._streams import PER_THREAD_STREAM, capturing, local
from ._torch import is_torch

__all__ = ["to_host", "read_back", "refuse_under_capture", "upload", "upload_like", "device_constant",
           "ragged"]


def _is_cupy(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def to_host(x) -> np.ndarray:
    """An array of any supported kind as NumPy (a device-to-host copy for cupy and CUDA
    tensors; NumPy arrays as they are)."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        return x.detach().cpu().numpy()
    if _is_cupy(x):
        return x.get()
    return np.asarray(x)


def read_back(x, what, hint):
    """``to_host(x)`` of a device value an op needs on the host (a count, a flag). Under CUDA
    graph capture, where a read back would invalidate the capture (torch then reports that
    at its end without naming the cause), a ``ValueError`` instead: "``what`` is read back
    to the host by this call, ...; ``hint``"."""
    if _is_cupy(x) or (is_torch(x) and x.device.type != "cpu"):  # only device values need a read
        refuse_under_capture(what, hint)
    return to_host(x)


def refuse_under_capture(what, hint):
    """:func:`read_back`'s error, raised now if the current stream is capturing (for work
    before the read that cannot be captured either)."""
    if capturing():
        raise ValueError(f"{what} is read back to the host by this call, which a CUDA graph "
                         f"cannot capture; {hint}")


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
    of up to ``upload_spec.SPEC.max_bytes`` go into the graph as the parameters of kernel
    launches that write it (:func:`_put_in_graph`): each replay writes the capture's values again.
    Otherwise (larger data, ``in_graph=False``: a table that outlives the call) this
    raises a ``ValueError``, "``what`` is copied from host memory ...; ``hint``", ``what``
    naming the argument the data come from."""
    if xp is not np and not isinstance(a, xp.ndarray) and capturing():
        if in_graph and getattr(local, "launch", None) is not None:
            host = np.ascontiguousarray(np.asarray(a, dtype=dtype))
            if host.dtype.kind in "biufc" and host.nbytes <= upload_spec.SPEC.max_bytes:
                return _put_in_graph(xp, host)
            size = f" ({host.nbytes} bytes; a graph takes up to {upload_spec.SPEC.max_bytes})"
        else:
            size = ""
        raise ValueError(f"{what} is copied from host memory to the device by this call, which "
                         f"a CUDA graph cannot capture{size}; {hint}")
    return xp.asarray(a, dtype=dtype)


def _put_in_graph(xp, host):
    """The contiguous NumPy array ``host`` as a new ``xp`` array on the current device,
    written by launches of cupyprep_put_words on the current stream, each carrying up to
    ``upload_spec.SPEC.words`` words of it as a kernel parameter: a copy that a CUDA graph
    captures (as kernel nodes with the values in them) and needs no host memory to replay."""
    n = host.nbytes
    words = -(-n // 4)
    buf = xp.empty(words, np.uint32)  # whole words: the last one's padding stays inside
    if words:
        padded = np.zeros(words * 4, np.uint8)
        padded[:n] = host.reshape(-1).view(np.uint8)
        padded = padded.view(np.uint32)

        spec = upload_spec.SPEC
        fn = _kernels.get_function(upload_spec.FILE, spec.kernel)
        for start in range(0, words, spec.words):
            chunk = padded[start:start + spec.words]
            args = (buf[start:], _launch.by_value(chunk, np.uint32, spec.words), np.int32(chunk.size))
            _launch.launch_1d(fn, chunk.size, args)
    return buf.view(np.uint8)[:n].view(host.dtype).reshape(host.shape)


class _Constant:
    """A cached device table, the event recorded after its upload on ``stream_ptr``, the
    other streams already ordered after that event (``waited``), and whether a CUDA graph
    captured a call that reads the table (it then stays: a replay may read it at any later
    time)."""

    __slots__ = ("table", "event", "stream_ptr", "waited", "captured")

    def __init__(self, table, event, stream_ptr):
        self.table, self.event, self.stream_ptr = table, event, stream_ptr
        self.waited = set()
        self.captured = False


_WAITED_MAX = 64  # streams remembered per table as ordered after its upload (then forgotten: they wait again)


_constants: dict = {}
_retired: list = []  # the tables the last eviction dropped (see device_constant)
_constants_lock = threading.Lock()
_CONSTANTS_MAX = 256  # tables no graph has captured, kept at most
_constants_limit = _CONSTANTS_MAX  # the cache's size that triggers an eviction


def device_constant(xp, key, make, what, hint):
    """A table that depends only on ``key`` (``make()`` builds it on the host: an array or
    a tuple of them), uploaded once per device and kept: later calls with the same key copy
    nothing (so a CUDA graph can capture them). NumPy (the kernel emulator) gets ``make()``.

    Nothing waits for the GPU: the upload is queued on the current stream, and the first
    call on each other stream makes that stream wait for it on the device (under capture,
    through an external event wait, the form a capture allows, at every captured call).
    When :data:`_CONSTANTS_MAX` tables no graph has captured are kept, the devices are
    synchronized and those tables dropped, kept alive until the next such synchronize, so
    no queued kernel still reads a table whose memory is handed out again; a table read by
    a captured call is never dropped, since the graph's replays read it at any later time.
    (A first call under capture uploads, and :func:`upload` refuses it: the table would be
    allocated for the graph, which may be gone while the cache still holds it; nothing is
    dropped during a capture.)"""
    global _constants_limit
    if xp is np:
        return make()
    cupy = xp  # (the module: an import statement at every call cost as much as the rest)

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
                # the dropped tables stay until the next eviction's synchronize: a call may
                # have taken one just before this one and launch on it after the synchronize
                _retired[:] = [e.table for k, e in _constants.items() if k not in kept]
                _constants.clear()
                _constants.update(kept)
                _constants_limit = len(kept) + _CONSTANTS_MAX
            _constants[full_key] = _Constant(table, event, stream.ptr)
        return table
    capturing = stream.is_capturing()
    if capturing:
        entry.captured = True
    ptr = stream.ptr
    # (the per-thread default stream's handle names another stream in each thread: never
    # taken for the upload's stream or for one that waited)
    per_thread = ptr == PER_THREAD_STREAM
    if capturing:
        # at every captured call: the graph gets a node that waits for the event (long
        # passed at a replay, which may run on another stream)
        cupy.cuda.runtime.streamWaitEvent(ptr, entry.event.ptr, _EVENT_WAIT_EXTERNAL)
    elif per_thread or (ptr != entry.stream_ptr and ptr not in entry.waited):
        # once per stream, also after the host has seen the event pass (which CUDA counts
        # as an order too): memcheck's tracking of stream-ordered allocations sees only a
        # wait, and the wait orders everything the stream runs later. (A stream's handle
        # is reused only after its work, the wait included, has finished.)
        stream.wait_event(entry.event)
        if not per_thread:
            if len(entry.waited) >= _WAITED_MAX:
                entry.waited.clear()
            entry.waited.add(ptr)
    return entry.table


def drop_constants():
    """Forget every kept table (after the devices finished the work that reads them; a
    graph captured earlier must not be replayed afterwards): the next call uploads again."""
    with _constants_lock:
        _constants.clear()
        _retired.clear()


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
    if is_torch(ref):
        import torch

        if not ref.is_cuda:
            return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))
        import cupy

        return torch.from_dlpack(upload(cupy, a, what, hint, dtype))
    import cupy

    return upload(cupy, a, what, hint, dtype)


def ragged(arrays, name, sizes, strides, xp, plans=None):
    """Kernel arguments for the list of images ``name``: ``(table, records, plans_arg)``
    (:func:`_launch.ragged_records`), a longer list's table uploaded (:func:`upload`)."""
    table, records, plans_arg = _launch.ragged_records(arrays, sizes, strides, plans)
    if isinstance(table, bytes):
        table = upload_ragged(xp, np.frombuffer(table, np.uint8), name, IMAGES_BY_VALUE)
    return table, records, plans_arg
