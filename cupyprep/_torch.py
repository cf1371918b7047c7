"""torch tensors as CuPy arrays without a copy, and the dtype tables between them.

torch is imported only when a torch input arrives (``import cupyprep`` works without it).
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from ._streams import cupy_stream, torch_current_stream

__all__ = ["is_torch", "torch_dtype", "numpy_dtypes", "from_torch", "cupy_from_dlpack", "TensorView"]


def is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def tensor_type():
    """torch.Tensor, for a caller that holds a torch input (torch is imported)."""
    return sys.modules["torch"].Tensor


def torch_dtype(dtype):
    table = torch_dtypes()
    found = table.get(dtype)  # a NumPy dtype object: no np.dtype() call
    return found if found is not None else table[np.dtype(dtype)]


@functools.lru_cache(maxsize=None)
def numpy_dtypes():
    """torch dtype -> NumPy dtype (the inverse of torch_dtypes)."""
    return {v: k for k, v in torch_dtypes().items()}


@functools.lru_cache(maxsize=None)
def torch_dtypes():
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


def from_torch(tensor):
    """A zero-copy cupy view of a CUDA tensor.

    The tensor's memory is wrapped as cupy memory that keeps the tensor alive: no DLPack
    exchange, so no stream handshake and no synchronization (legal inside CUDA graph
    capture), at a few microseconds instead of DLPack's ~30 per array, which the ops pay
    for every torch input, output and scratch array. dtypes outside cupyprep's dtype table
    (int8, bfloat16, ...) and empty tensors go through DLPack on torch's current stream,
    where the handshake inserts no synchronization either.
    """
    import cupy

    dtype = numpy_dtypes().get(tensor.dtype)
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
        dtype = numpy_dtypes().get(tensor.dtype)
        if dtype is None:
            raise TypeError(f"images: dtype {tensor.dtype} is not supported, got a torch.Tensor of "
                            f"shape {self.shape} and dtype {tensor.dtype} on {tensor.device}")
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


def torch_bf16():
    import torch

    return torch.bfloat16