"""Streams: which stream an op launches on, CuPy stream objects for raw handles, and
ordering between streams on the device.

:func:`cupyprep.stream` pushes a :class:`StreamChoice` on this thread's stack; an op's
launch context (``_arrays.Prepared.launch``) reads it.
"""
from __future__ import annotations

import contextlib
import threading
import weakref

__all__ = ["StreamChoice", "chosen_stream", "choose_stream", "cupy_stream", "order_after",
           "torch_current_stream", "capturing", "local", "LEGACY_STREAM", "PER_THREAD_STREAM"]

# the special stream handles: cudaStreamLegacy (the legacy default stream, from any thread)
# and cudaStreamPerThread (the calling thread's per-thread default stream: another stream
# in each thread)
LEGACY_STREAM, PER_THREAD_STREAM = 0x1, 0x2

# this thread's stream choices (``streams``) and its innermost launch context (``launch``)
local = threading.local()


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
    stack = getattr(local, "streams", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def choose_stream(choice):
    """Make ``choice`` (a :class:`StreamChoice` or None) this thread's launch stream."""
    stack = getattr(local, "streams", None)
    if stack is None:
        stack = local.streams = []
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
        if len(_stream_cache) >= _STREAM_CACHE_MAX:
            _evict_unreferenced()
        _stream_cache[key] = stream
    return stream


_STREAM_CACHE_MAX = 256  # stream objects kept, beyond those blocks still refer to


def _evict_unreferenced():
    """Drop the kept stream objects nothing refers to weakly. A block CuPy's
    ``MemoryAsyncPool`` allocated on a stream holds a weak reference to its stream object and
    is freed on that stream while the object lives (on whatever stream is current once it is
    gone, with no order after the work that used the block), so those stay."""
    for key, stream in list(_stream_cache.items()):
        if weakref.getweakrefcount(stream) == 0:
            _stream_cache.pop(key, None)


def order_after(producer_ptr, consumer_ptr):
    """Make stream ``consumer_ptr`` wait (on the device) for the work queued so far on
    ``producer_ptr``."""
    import cupy

    event = cupy.cuda.Event(block=False, disable_timing=True)
    event.record(cupy_stream(producer_ptr))
    cupy_stream(consumer_ptr).wait_event(event)


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


def capturing():
    """Whether the current stream (the launch context's) is being captured."""
    import cupy

    return cupy.cuda.get_current_stream().is_capturing()
