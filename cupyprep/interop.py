"""Handing arrays between CuPy, PyTorch and anything that speaks DLPack or the CUDA array
interface, choosing the stream kernels run on, and sharing one GPU memory pool.

Every conversion here is zero-copy: the result aliases the input's memory. Device arrays
cross through DLPack with its stream handshake (the consumer names the stream it will use;
the producer makes that stream wait for its pending work), so no host synchronization is
added and nothing is read before it is written.
"""
from __future__ import annotations

import contextlib
import sys

import numpy as np

from . import _allocators, _arrays, _streams
from . import _torch as _torch_views

__all__ = ["to_torch", "from_torch", "as_array", "stream", "use_torch_allocator",
           "release_graph_memory"]

# DLPack device types (dlpack.h)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def _torch():
    import torch

    return torch


def to_torch(x):
    """A torch tensor sharing ``x``'s memory.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, or any object with ``__dlpack__`` or
        ``__cuda_array_interface__``
        An array with a negative stride (``a[::-1]``) is refused with a ``ValueError``: a
        torch tensor cannot have one, and a copy would not share ``x``'s memory (pass
        ``numpy.ascontiguousarray(a)`` or ``cupy.ascontiguousarray(a)`` for a copy).

    Returns
    -------
    torch.Tensor on the device of ``x`` (a tensor comes back unchanged).

    Convention
    ----------
    Device arrays go through ``torch.from_dlpack``, which passes torch's current stream to
    the producer: work queued on the producer's stream (CuPy's current stream for a CuPy
    array) is ordered before anything torch later runs on its current stream, on the device,
    without a host synchronization. uint16/32/64 cross as their signed twins and are viewed
    back (DLPack consumers disagree on unsigned wide types).

    Example
    -------
    >>> t = cupyprep.to_torch(cupy.zeros((2, 3), cupy.float32))        # doctest: +SKIP
    >>> t.device                                                       # doctest: +SKIP
    device(type='cuda', index=0)
    """
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x
    arr = as_array(x, "x")
    # torch.from_numpy raises an error naming no argument here, and torch.from_dlpack of a
    # device array ends the process (its storage size computation overflows)
    if any(s < 0 for s in arr.strides):
        raise ValueError(f"x: expected non-negative strides (torch has no negative strides, and "
                         f"to_torch makes no copy: pass a contiguous copy), got strides "
                         f"{arr.strides} of {_arrays.describe(arr)}")
    if isinstance(arr, np.ndarray):
        return torch.from_numpy(arr)
    import cupy

    dtype = np.dtype(arr.dtype)
    if dtype in (np.uint16, np.uint32, np.uint64):
        signed = arr.view(np.dtype(f"i{dtype.itemsize}"))
        with cupy.cuda.Device(arr.device.id):
            t = torch.from_dlpack(signed)
        return t.view(_torch_views.torch_dtype(dtype))
    with cupy.cuda.Device(arr.device.id):
        return torch.from_dlpack(arr)


def from_torch(t):
    """A CuPy array (CUDA tensor) or NumPy array (CPU tensor) sharing ``t``'s memory.

    Parameters
    ----------
    t : torch.Tensor
        Any dtype DLPack carries (bool included; bfloat16 for CUDA tensors where CuPy has
        it: CuPy takes bfloat16 from the ml_dtypes package, and without it this raises a
        ``TypeError`` saying so); a tensor that requires grad is detached (the result is
        outside autograd). Dense (strided) tensors only; one with a lazy conjugate or
        negative bit (``t.conj()`` of a complex tensor) is refused: its memory does not hold
        its values (pass ``t.resolve_conj()``, a copy).

    Returns
    -------
    cupy.ndarray on the tensor's device, or numpy.ndarray for a CPU tensor.

    Convention
    ----------
    CuPy is the DLPack consumer and names its current stream: torch makes that stream wait
    (on the device) for the work queued on torch's current stream, so the array can be used
    right away on CuPy's current stream.

    Example
    -------
    >>> a = cupyprep.from_torch(torch.ones(4, device="cuda"))           # doctest: +SKIP
    >>> a.data.ptr == t.data_ptr()                                     # doctest: +SKIP
    True
    """
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"t: expected a torch.Tensor, got {_arrays.describe(t)}")
    return _tensor_as_array(t, "t")


def _tensor_as_array(t, name):
    """:func:`from_torch` of the tensor ``t``, its errors naming the argument ``name``."""
    torch = _torch()
    _arrays.check_tensor(t, name)
    t = t.detach()
    if t.device.type == "cpu":
        if t.dtype == torch.bfloat16:
            raise TypeError(f"{name}: NumPy has no bfloat16, got {_arrays.describe(t)}")
        return t.numpy()
    if t.device.type != "cuda":
        raise TypeError(f"{name}: expected a CPU or CUDA tensor, got {_arrays.describe(t)}")
    if t.dtype == torch.bfloat16:
        try:
            return _torch_views.cupy_from_dlpack(t)
        except NotImplementedError as exc:  # CuPy without ml_dtypes has no bfloat16
            raise TypeError(f"{name}: expected a dtype CuPy has (its bfloat16 needs the ml_dtypes "
                            f"package), got {_arrays.describe(t)}; CuPy says: {exc}") from exc
    return _torch_views.cupy_from_dlpack(t)


def as_array(x, name="x"):
    """The NumPy or CuPy array that ``x`` is, without a copy.

    Accepts NumPy and CuPy arrays (returned as they are), torch tensors (as
    :func:`from_torch`), objects with ``__cuda_array_interface__`` (Numba, PyCUDA, cuDF, ...),
    objects with ``__dlpack__`` (JAX, TensorFlow, CV-CUDA, ...: host memory becomes NumPy,
    device memory CuPy), and objects with ``__array_interface__`` (PIL images).

    Convention
    ----------
    Device memory from DLPack is exchanged on CuPy's current stream (the producer orders its
    pending work before it); the CUDA array interface's ``stream`` entry is honored by
    CuPy as its documentation describes (``CUPY_CUDA_ARRAY_INTERFACE_SYNC``).

    Example
    -------
    >>> a = cupyprep.as_array(numba_device_array)                     # doctest: +SKIP
    """
    if isinstance(x, np.ndarray) or _arrays.is_cupy(x):
        return x
    if _arrays.is_torch(x):
        return _tensor_as_array(x, name)
    if hasattr(x, "__cuda_array_interface__"):
        import cupy

        return cupy.asarray(x)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        kind, device_id = x.__dlpack_device__()
        kind = int(kind)
        if kind in (_DL_CPU, _DL_CUDA_HOST):
            return np.from_dlpack(x)
        if kind in (_DL_CUDA, _DL_CUDA_MANAGED):
            import cupy

            with cupy.cuda.Device(int(device_id)):
                return cupy.from_dlpack(x)
        raise TypeError(f"{name}: DLPack device type {kind} is neither host nor CUDA memory, "
                        f"got {_arrays.describe(x)}")
    if hasattr(x, "__array_interface__"):
        return np.asarray(x)
    raise TypeError(
        f"{name}: expected an array (numpy, cupy, torch, or an object with __dlpack__ or "
        f"__cuda_array_interface__), got {_arrays.describe(x)}"
    )


def _stream_choice(s):
    if s is None:
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(s, torch.cuda.Stream):
        return _streams.StreamChoice(s.cuda_stream, s.device.index, torch_obj=s)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(s, cupy.cuda.stream._BaseStream):
        device_id = getattr(s, "device_id", -1)
        if device_id is None or device_id < 0:
            device_id = cupy.cuda.Device().id
        return _streams.StreamChoice(s.ptr, device_id, cupy_obj=s)
    raise TypeError(f"s: expected a torch.cuda.Stream, a cupy.cuda.Stream or None, "
                    f"got {_arrays.describe(s)}")


@contextlib.contextmanager
def stream(s):
    """Run cupyprep's kernels on stream ``s`` inside the block, whatever the input kind.

    Parameters
    ----------
    s : torch.cuda.Stream, cupy.cuda.Stream (or one made from an external handle), or None
        ``None`` restores the default choice inside an enclosing block.

    Convention
    ----------
    Without this block a kernel runs on the stream of its input's library: CuPy's current
    stream for CuPy arrays, ``torch.cuda.current_stream()`` for torch tensors. Inside it,
    each op first makes ``s`` wait, on the device, for the work already queued on that
    stream (which wrote the input, or last read an ``out=`` array), then launches on ``s``;
    torch outputs are allocated for ``s``. Work that uses the results on another stream must
    wait for ``s`` (``torch.cuda.current_stream().wait_stream(s)``), as with
    ``torch.cuda.stream``. The choice is per thread; blocks nest. It does not change torch's
    or CuPy's own current stream. The inputs are read on ``s``, while their memory belongs
    to the stream they were allocated on: keep an input alive until ``s`` is done with it,
    or record it for ``s`` (``tensor.record_stream(s)``), before its memory can be handed
    out again, as with ``torch.cuda.stream``.

    Example
    -------
    >>> side = torch.cuda.Stream()                                    # doctest: +SKIP
    >>> with cupyprep.stream(side):                                   # doctest: +SKIP
    ...     batch, meta = cupyprep.preprocess(frames, (640, 640))
    >>> torch.cuda.current_stream().wait_stream(side)                 # doctest: +SKIP
    """
    choice = _stream_choice(s)
    with _streams.choose_stream(choice):
        yield s


# --- one memory pool --------------------------------------------------------------------------
class _AllocatorSwitch:
    """The effect of :func:`use_torch_allocator`; as a context manager it restores the
    previous allocator on exit."""

    def __init__(self, previous):
        self.previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        import cupy

        cupy.cuda.set_allocator(self.previous)
        return False


def use_torch_allocator(enable=True):
    """Make CuPy allocate device memory from torch's caching allocator (one pool, not two).

    CuPy and torch each keep a caching pool: memory one of them has freed stays reserved
    for it and the other cannot use it, so a process that runs both (cupyprep's kernels on
    CuPy arrays next to a torch model) can run out of memory with plenty cached, and
    ``torch.cuda.memory_allocated()`` / ``empty_cache()`` see only torch's share. With this
    switched on, CuPy arrays (cupyprep's outputs for CuPy inputs, kernel tables, CuPy's own
    temporaries) come from torch's pool: they are counted by torch's memory statistics, and
    freed blocks serve either library.

    Use it when a process runs torch and CuPy work on the same GPU and memory is tight or
    must be accounted in one place (an inference server with a model next to the
    preprocessing). Leave it off when only CuPy runs (CuPy's own pool is then the right one),
    and note that an op on torch tensors takes all its device memory (outputs, tables,
    scratch) from torch's pool either way.
    Each CuPy allocation then takes one Python call into torch (a few microseconds).

    Parameters
    ----------
    enable : bool
        ``False`` goes back to CuPy's default memory pool.

    Returns
    -------
    A handle; ``with cupyprep.use_torch_allocator(): ...`` restores the allocator that was
    in place before, on exit.

    Convention
    ----------
    A block is requested for CuPy's current stream at the time of the allocation (torch
    reuses it on that stream only, as CuPy's pool does) and returned to torch when the last
    CuPy array using it is collected. The setting is process-wide (``cupy.cuda.set_allocator``).

    Example
    -------
    >>> cupyprep.use_torch_allocator()                                  # doctest: +SKIP
    >>> batch, meta = cupyprep.preprocess(cupy_frames, (640, 640))      # doctest: +SKIP
    >>> torch.cuda.memory_allocated() >= batch.nbytes                   # doctest: +SKIP
    True
    """
    import cupy

    previous = cupy.cuda.get_allocator()
    if enable:
        import torch  # noqa: F401  (fail here, not at the first allocation)

        cupy.cuda.set_allocator(_allocators.torch_malloc)
    else:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    return _AllocatorSwitch(previous)


def release_graph_memory():
    """Let go of the device memory kept for CUDA graphs captured from CuPy arrays.

    While a stream is captured (``cupy.cuda.Stream.begin_capture``), every block an op on
    CuPy arrays allocates (its outputs, tables, scratch arrays and CuPy's temporaries) is
    held for as long as the process runs: the graph's replays may use it at any time, and
    CuPy's pool would otherwise hand it to other arrays. A program that captures graphs
    again and again (new shapes, a notebook) calls this once the graphs captured so far
    will not be replayed again, and their memory goes back to the pool. Arrays still in
    use (outputs the program kept) stay valid: their memory is given back when they go.

    Graphs captured with ``torch.cuda.graph`` need none of this: ops on torch tensors
    allocate from the graph's own pool, which torch frees with the graph.

    Returns
    -------
    int
        The bytes of the blocks held until now.

    Example
    -------
    >>> del graph                                                       # doctest: +SKIP
    >>> cupyprep.release_graph_memory()                                 # doctest: +SKIP
    """
    return _allocators.release_kept_for_graphs()
