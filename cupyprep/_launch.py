"""Launch shapes and kernel arguments passed by value.

The op modules launch through these: grid-stride 1-D launches, the (image, row, column)
3-D launch, ``ByValue<T, N>`` structs (kernels/common.cuh) and a list of images' records,
which go to a kernel by value for up to ``IMAGES_BY_VALUE`` images (nothing to upload,
so a CUDA graph captures the launch).
"""
from __future__ import annotations

import functools

import numpy as np

from . import _kernels
from ._specs._common import IMAGES_BY_VALUE

__all__ = ["grid_1d", "launch_1d", "launch_3d", "by_value", "held", "held_bytes", "launch_filled", "no_ragged",
           "pointer", "ragged_records",
           "BLOCK_3D"]

BLOCK_1D = 256  # threads per block of launch_1d
_MAX_BLOCKS = 1 << 20
BLOCK_3D = 128  # threads per block of launch_3d


def grid_1d(total):
    """``(grid, block)`` of a grid-stride kernel over ``total`` (> 0) items."""
    return (min((total + BLOCK_1D - 1) // BLOCK_1D, _MAX_BLOCKS),), (BLOCK_1D,)


def launch_1d(fn, total, args):
    """Launch a grid-stride kernel over ``total`` items (nothing for zero items). Returns
    the ``(grid, block)`` launched, None for no items."""
    if total <= 0:
        return None
    grid, block = grid_1d(total)
    fn(grid, block, args)
    return grid, block


def launch_3d(fn, n, h, w, args, block_x=BLOCK_3D, block_y=1):
    """Launch a kernel over an (n, h, w) grid: x across blocks and threads, a row (or, with
    ``block_y`` threads along y, ``block_y`` rows) per blockIdx.y, an image per blockIdx.z
    (the kernel loops past the grid's limits). Returns the ``(grid, block)`` launched, None
    for an empty grid."""
    if n <= 0 or h <= 0 or w <= 0:
        return None
    grid = (min((w + block_x - 1) // block_x, 65535), min((h + block_y - 1) // block_y, 65535),
            min(n, 65535))
    block = (block_x, block_y, 1)
    fn(grid, block, args)
    return grid, block


def held(args):
    """A launch's arguments, for launches that repeat them (launch plans): each NumPy
    scalar (a number or a ``ByValue`` struct) held as its bytes in a form CuPy passes as
    it is. CuPy turns a NumPy scalar argument into its C value at every launch (about
    0.2 µs each: several µs for a launch of 40 arguments); a held one it passes on. Holding
    costs more than one conversion, so only a plan, launched again and again, holds its
    arguments. The same bytes reach the kernel. Unchanged under the emulator, whose kernels
    read NumPy values."""
    if _kernels.current_emulator() is not None:
        return tuple(args)
    return tuple(held_bytes(np.array(a)) if isinstance(a, np.generic) else a for a in args)


def launch_filled(fn, grid, block, packed, fills, values):
    """A stored launch of a plan: ``packed`` (its :func:`held` arguments) with the holes
    ``fills`` (``(position, key)`` pairs) filled from ``values[key]`` at each call."""
    args = list(packed)
    for at, key in fills:
        args[at] = values[key]
    fn(grid, block, tuple(args))


def pointer(address):
    """A device address as a kernel argument (a pointer parameter), in the form CuPy
    passes as it is (a NumPy ``uint64`` costs CuPy a conversion at every launch)."""
    return _cupy_arguments()[0](address)


def held_bytes(array):
    """A NumPy array of one element (a ``ByValue`` struct made for this launch) as a kernel
    argument in the form CuPy passes as it is."""
    return _cupy_arguments()[1](array)


_CUPY_ARGUMENTS = None


def _cupy_arguments():
    """CuPy's ``(CIntptr, CNumpyArray)``, looked up once (an import statement at every
    launch cost more than the conversion it saves)."""
    global _CUPY_ARGUMENTS
    if _CUPY_ARGUMENTS is None:
        from cupy.cuda.function import CIntptr, CNumpyArray

        _CUPY_ARGUMENTS = CIntptr, CNumpyArray
    return _CUPY_ARGUMENTS


def by_value(values, dtype, count):
    """``values`` (at most ``count`` of them) as a kernel parameter of type
    ``ByValue<T, count>`` (``struct { T v[count]; }``, kernels/common.cuh) passed by value,
    ``T`` the C type of ``dtype``: a NumPy structured scalar, zeros after the values."""
    arg = np.zeros((), _struct_dtype(np.dtype(dtype), count))
    arg["v"][:np.size(values)] = np.ravel(values)
    return arg[()]


@functools.lru_cache(maxsize=None)
def _struct_dtype(dtype, count):
    return np.dtype([("v", dtype, (count,))])


@functools.lru_cache(maxsize=None)
def _ragged_dtypes():
    record = np.dtype([("ptr", "<u8"), ("h", "<i4"), ("w", "<i4"), ("s_y", "<i8"),
                       ("s_x", "<i8"), ("s_c", "<i8")])
    return record, np.dtype([("v", record, (IMAGES_BY_VALUE,))])


def no_ragged(count=IMAGES_BY_VALUE):
    """The ``ByValue<RaggedImage, count>`` argument of a launch that reads no list (zeros)."""
    return _no_ragged(count)


@functools.lru_cache(maxsize=None)
def _no_ragged(count):
    return by_value((), _ragged_dtypes()[0], count)


def ragged_records(arrays, sizes, strides, plans=None):
    """Kernel arguments for a list of images: ``(table_bytes, records, plans_arg)``.

    ``arrays`` are the images (anything with ``.data.ptr``; NumPy under the emulator),
    ``sizes`` their (h, w) and ``strides`` their (s_y, s_x, s_c) in elements; ``plans``
    optional per-image int32 rows the kernel reads beside the records. Up to
    ``IMAGES_BY_VALUE`` images go by value: ``table_bytes`` is None, ``records`` a
    ``ByValue<RaggedImage, IMAGES_BY_VALUE>`` and ``plans_arg`` a ``ByValue<int,
    IMAGES_BY_VALUE * k>``. A longer list's records, followed by its plans, come back as
    the bytes of one table for the caller to upload (``_device_memory.ragged``), and both
    structs are zeros. Under the emulator the records carry the arrays themselves.
    """
    n = len(arrays)
    record, list_dtype = _ragged_dtypes()
    small = n <= IMAGES_BY_VALUE
    if small:
        arg = np.zeros((), list_dtype)
        recs = arg["v"][:n]
    else:
        recs = np.zeros(n, record)
    emulator = _kernels.current_emulator()
    if emulator is None:
        recs["ptr"] = [a.data.ptr for a in arrays]
    recs["h"], recs["w"] = np.asarray(sizes, np.int32).reshape(n, 2).T
    recs[["s_y", "s_x", "s_c"]] = [tuple(st) for st in strides]
    plans = None if plans is None else np.ascontiguousarray(plans, np.int32).reshape(n, -1)

    def with_pointers(data):
        return emulator.records(data, [(record.itemsize * i, a) for i, a in enumerate(arrays)])

    if small:
        plans_arg = (None if plans is None
                     else by_value(plans, np.int32, IMAGES_BY_VALUE * plans.shape[1]))
        return None, (arg[()] if emulator is None else with_pointers(arg)), plans_arg
    data = recs.tobytes() + (b"" if plans is None else plans.tobytes())
    no_plans = None if plans is None else by_value((), np.int32, IMAGES_BY_VALUE * plans.shape[1])
    return (data if emulator is None else with_pointers(data)), no_ragged(), no_plans
