"""Where an op's device memory comes from: torch's caching allocator for torch inputs (so
under ``torch.cuda.graph`` the graph's own pool), and blocks held for the life of CUDA
graphs captured from CuPy arrays."""
from __future__ import annotations

import functools
import re
import sys

__all__ = ["torch_malloc", "torch_allocations", "captured_allocations", "release_kept_for_graphs",
           "KEPT_FOR_GRAPHS", "DeviceMemoryError", "out_of_memory"]


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


def torch_allocations():
    """Inside an op call on torch tensors, this thread's CuPy allocations come from torch's
    caching allocator: the op's tables and scratch arrays then live where its outputs do,
    and under ``torch.cuda.graph`` in the graph's private pool (memory from CuPy's pool
    would return to that pool when the call ends, and be handed to other arrays while the
    graph still reads and writes it at every replay)."""
    return _UsingAllocator(torch_malloc)


# Every block an op on CuPy arrays allocated while its stream was being captured: the
# graph's replays may use it at any later time, so it is held until the program says its
# graphs are done (cupyprep.release_graph_memory; see _captured_allocations).
KEPT_FOR_GRAPHS: list = []


def release_kept_for_graphs():
    """Drop :data:`KEPT_FOR_GRAPHS`'s blocks (:func:`cupyprep.release_graph_memory`);
    returns their bytes."""
    kept = KEPT_FOR_GRAPHS[:]
    del KEPT_FOR_GRAPHS[:len(kept)]  # blocks a capture in another thread added since stay
    return sum(int(getattr(getattr(b, "mem", None), "size", 0)) for b in kept)


def captured_allocations():
    """Inside an op call on CuPy arrays while the launch stream is being captured into a
    CUDA graph (``cupy.cuda.Stream.begin_capture``): CuPy's pool would take back the
    tables, scratch arrays and temporaries the call lets go of, and hand them to other
    arrays while every replay of the graph still reads and writes them. Here every block
    the call allocates, through the allocator that was current, is also held in
    :data:`KEPT_FOR_GRAPHS`, so it stays allocated for the life of the process, or until
    :func:`cupyprep.release_graph_memory` (outputs included: whether the graph still
    writes them cannot be told from here). torch tensors get the graph's private pool
    instead (:func:`torch_allocations`)."""
    import cupy

    inner = cupy.cuda.get_allocator()

    def malloc(size):
        block = inner(size)
        KEPT_FOR_GRAPHS.append(block)
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

# --- running out of device memory ----------------------------------------------------------------
class DeviceMemoryError(MemoryError):
    """An op found too little free device memory. ``op`` names the op, ``nbytes`` the
    allocation that failed (None where the allocator did not say), ``device`` the device.

    Raised from the allocator's own error (its ``__cause__``); it is also an instance of
    that error's type (``cupy.cuda.memory.OutOfMemoryError`` or ``torch.OutOfMemoryError``;
    without the pools, the CUDA error of the failed ``cudaMalloc``: CuPy's
    ``CUDARuntimeError``, ``torch.AcceleratorError``), so handlers written for those still
    catch it. Nothing of the failed call stays allocated: the next call, with memory to
    spare, works."""

    def __init__(self, message, op=None, nbytes=None, device=None):
        MemoryError.__init__(self, message)
        self.op = op
        self.nbytes = nbytes
        self.device = device


_TORCH_ASKED = re.compile(r"Tried to allocate ([0-9.]+) ([KMGT]?i?B)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_error_types: dict = {}
_CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation (CuPy names no constant for it)


def _is_out_of_memory(exc):
    """Whether ``exc`` is an allocator's out-of-memory error: the pools' own types (CuPy's
    ``OutOfMemoryError``, ``torch.OutOfMemoryError``), or the CUDA error of a plain
    ``cudaMalloc`` (``cudaErrorMemoryAllocation``) that CuPy without its pool
    (``cupy.cuda.set_allocator(None)``) and torch without its caching allocator raise."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
            return True
        if isinstance(exc, cupy.cuda.runtime.CUDARuntimeError):
            return getattr(exc, "status", None) == _CUDA_ERROR_MEMORY_ALLOCATION
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
            return True
        if isinstance(exc, getattr(torch, "AcceleratorError", ())):
            # torch's own carry the CUDA status (error_code); the message, for those without
            code = getattr(exc, "error_code", None)
            if code is not None:
                return code == _CUDA_ERROR_MEMORY_ALLOCATION
            return "CUDA error: out of memory" in str(exc)
    return False



def _asked(exc):
    """The bytes the failed allocation asked for, or None."""
    size = getattr(exc, "_size", None)  # CuPy's OutOfMemoryError keeps it
    if isinstance(size, int):
        return size
    m = _TORCH_ASKED.search(str(exc))
    if m and m.group(2) in _UNITS:
        return int(float(m.group(1)) * _UNITS[m.group(2)])
    return None


def out_of_memory(exc, op, device=None):
    """A :class:`DeviceMemoryError` for the allocator error ``exc`` in ``op``, or None where
    ``exc`` is not an out-of-memory error (or is one of ours already)."""
    if isinstance(exc, DeviceMemoryError) or not _is_out_of_memory(exc):
        return None
    base = type(exc)
    cls = _error_types.get(base)
    if cls is None:
        cls = _error_types[base] = type(f"DeviceMemoryError[{base.__module__}.{base.__name__}]",
                                        (DeviceMemoryError, base), {"__module__": __name__})
    nbytes = _asked(exc)
    asked = (f"{nbytes:,} bytes ({nbytes / 2**20:.1f} MiB)" if nbytes is not None
             else "more than was free (the allocator did not say how much)")
    where = f" on device {device}" if device is not None else ""
    error = cls(f"{op}: out of device memory{where}: asked for {asked}; use smaller batches, free "
                f"memory held elsewhere (CuPy's pool: cupy.get_default_memory_pool().free_all_blocks(); "
                f"torch: torch.cuda.empty_cache()) or another device. The allocator said: {exc}",
                op=op, nbytes=nbytes, device=device)
    if hasattr(exc, "status"):  # CuPy's CUDARuntimeError: its CUDA status, as handlers read it
        error.status = exc.status
    return error
