"""A Loader's staging: page-locked host buffers a batch's frames are copied into (in
bands, by threads), and the batch's views on the device after the upload."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import _arrays, _torch

_ALIGN = 256  # byte alignment of each frame inside a ragged staging buffer


# --- device side ---------------------------------------------------------------------------------
class Slot:
    """A pinned host buffer and a device buffer of the same size, with their events."""

    def __init__(self, device, library, copy_stream):
        import cupy

        self.device = device
        self.library = library  # "cupy" or "torch": whose allocator the device buffer is from
        self.copy_stream = copy_stream
        self.capacity = 0
        self.host = None
        self.host_mem = None
        self.dev = None
        self.dev_ptr = 0
        self.held = None  # page-locked frames copied from directly, until `copied`
        self.copied = cupy.cuda.Event(block=False, disable_timing=True)
        self.consumed = cupy.cuda.Event(block=False, disable_timing=True)

    def ensure(self, nbytes, host=True):
        """Room for nbytes on the device, and in the pinned buffer when ``host`` (frames
        that are page-locked already need none). The device buffer is allocated on the
        slot's ``copy_stream`` (a CuPy stream; for torch, a torch stream), the stream that
        writes it first: with a stream-ordered allocator (``cudaMallocAsync``:
        CuPy's ``MemoryAsyncPool``, torch's ``backend:cudaMallocAsync``) a block is ready
        in the order of the stream it was allocated on, and the compute stream, which
        waits for the copy, comes after both."""
        import cupy

        if nbytes > self.capacity:
            self.copied.synchronize()
            self.consumed.synchronize()
            capacity = max(nbytes, int(self.capacity * 1.25))
            # the old blocks go before the new ones are asked for; until they are there the
            # slot has none (an allocation that fails leaves it empty, not pointing at them)
            self.dev, self.dev_ptr, self.capacity = None, 0, 0
            self.host = self.host_mem = None  # allocated again below at the new capacity
            if self.library == "torch":
                import torch

                with torch.cuda.stream(self.copy_stream):
                    dev = torch.empty(capacity, dtype=torch.uint8, device=f"cuda:{self.device}")
                self.dev, self.dev_ptr = dev, dev.data_ptr()
            else:
                with self.copy_stream:
                    dev = cupy.empty(capacity, np.uint8)
                self.dev, self.dev_ptr = dev, dev.data.ptr
            self.capacity = capacity
        if host and self.host is None:
            self.host_mem = cupy.cuda.alloc_pinned_memory(self.capacity)
            self.host = np.frombuffer(self.host_mem, np.uint8, self.capacity)

    def release(self):
        if self.capacity:
            self.copied.synchronize()
            self.consumed.synchronize()
        self.host = self.host_mem = self.dev = self.held = None
        self.capacity = 0


class Staged(NamedTuple):
    """One batch between its staging and its launch."""

    frames: list
    extra: dict
    shapes: list
    offsets: list
    nbytes: int
    uniform: bool
    slot: Slot
    direct: bool
    futures: list


def page_locked(frame):
    """True when a C-contiguous frame lies in page-locked (pinned) host memory, which the
    copy engine reads directly (for example a torch tensor from ``pin_memory()``)."""
    if not frame.flags.c_contiguous or frame.nbytes == 0:
        return False
    import cupy

    try:
        kind = cupy.cuda.runtime.pointerGetAttributes(frame.ctypes.data).type
    except cupy.cuda.runtime.CUDARuntimeError:
        return False
    return kind == cupy.cuda.runtime.memoryTypeHost


def layout(frames):
    """Byte offsets of each frame in a staging buffer: packed when all frames have one
    shape (one NHWC view), 256-byte aligned otherwise (one view per frame)."""
    shapes = [f.shape if f.ndim == 3 else f.shape + (1,) for f in frames]
    dtype = frames[0].dtype
    for i, f in enumerate(frames[1:], 1):
        if f.dtype != dtype or shapes[i][2] != shapes[0][2]:
            raise ValueError(f"frames of one batch differ: frame 0 is {_arrays.describe(frames[0])}, "
                             f"frame {i} is {_arrays.describe(f)} (same dtype and channel count "
                             f"expected)")
    uniform = all(s == shapes[0] for s in shapes)
    offsets, end = [], 0
    for s in shapes:
        offsets.append(end)
        end += math.prod(s) * dtype.itemsize
        if not uniform:
            end = -(-end // _ALIGN) * _ALIGN
    return shapes, offsets, end, uniform


def copy_jobs(frames, shapes, offsets, host, row_bytes_target=16 << 20):
    """Pieces of the staging copy: whole frames, or row bands of about 16 MB of larger ones
    (large copies run faster than many small ones: a 1080p frame is one job)."""
    jobs = []
    for f, s, off in zip(frames, shapes, offsets):
        dst = host[off:off + math.prod(s) * f.dtype.itemsize].view(f.dtype).reshape(s)
        src = f.reshape(s)
        row_bytes = max(1, s[1] * s[2] * f.dtype.itemsize)
        band = max(1, row_bytes_target // row_bytes)
        for y in range(0, s[0], band):
            jobs.append((dst[y:y + band], src[y:y + band]))
    return jobs


def copy_band(job):
    dst, src = job
    np.copyto(dst, src)  # NumPy releases the GIL for the copy


def device_views(buf, shapes, offsets, dtype, uniform, library):
    itemsize = dtype.itemsize
    if library == "torch":
        tdtype = _torch.torch_dtype(dtype)

        def view(start, nbytes, shape):
            return buf[start:start + nbytes].view(tdtype).view(shape)
    else:
        def view(start, nbytes, shape):
            return buf[start:start + nbytes].view(dtype).reshape(shape)
    if uniform:
        n, s = len(shapes), shapes[0]
        return view(0, n * math.prod(s) * itemsize, (n,) + tuple(s))
    return [view(off, math.prod(s) * itemsize, tuple(s)) for s, off in zip(shapes, offsets)]
