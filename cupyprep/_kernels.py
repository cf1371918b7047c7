"""Kernel sources, compilation and the launcher every op uses.

One ``cupy.RawModule`` is built per kernel source file and template instantiation
(``name_expression``), lazily on first use, and cached per device. Building per
instantiation rather than all of a file's instantiations at once keeps the first call of an
op to one short NVRTC compile instead of dozens; CuPy's on-disk cache (``CUPY_CACHE_DIR``)
keeps compiled modules across processes. ``warmup()`` compiles ahead of time.

The op layer never touches CuPy's compiler directly: it asks :func:`get_function` for a
launchable function with CuPy's ``RawKernel`` call shape ``fn(grid, block, args,
shared_mem=0)``. Under :func:`cupyprep.testing.emulate` the same call returns a function
of the CPU kernel emulator, and NumPy arrays stand in for device memory, so the op code
paths that launch kernels run unchanged in CI.
"""
from __future__ import annotations

import contextlib
import functools
import re
import threading
from pathlib import Path

import numpy as np

__all__ = ["kernel_dir", "read_source", "get_function", "warmup", "KernelCompileError"]

NVRTC_OPTIONS = ("--std=c++17",)

_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)


class KernelCompileError(RuntimeError):
    """NVRTC (or the emulator's compiler) rejected a kernel variant."""

    def __init__(self, filename, name_expression, log):
        self.filename = filename
        self.name_expression = name_expression
        self.log = log
        super().__init__(
            f"compiling kernels/{filename} for variant {name_expression!r} failed:\n{log}"
        )


def kernel_dir() -> Path:
    """The folder holding the ``.cu`` sources.

    An installed wheel carries them as ``cupyprep/kernels``; a source checkout keeps them
    in ``kernels/`` beside the package.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(
        f"cupyprep kernel sources not found in {here / 'kernels'} or {here.parent / 'kernels'}"
    )


def kernel_files() -> list[str]:
    """Names of every kernel source file (``*.cu``)."""
    return sorted(p.name for p in kernel_dir().glob("*.cu"))


@functools.lru_cache(maxsize=None)
def _read_expanded(path: Path, mtime_ns: int) -> str:
    del mtime_ns  # part of the cache key only: an edited file is read again
    text = path.read_text()

    def include(match):
        target = path.parent / match.group(1)
        return f'// begin {match.group(1)}\n{read_source(target.name)}\n// end {match.group(1)}'

    return _INCLUDE_RE.sub(include, text)


def read_source(filename: str) -> str:
    """Source of ``kernels/<filename>`` with local ``#include "..."`` lines inlined.

    Inlining (rather than ``-I``) makes the text handed to the compiler complete, so CuPy's
    disk cache, keyed by source text, notices an edited header.
    """
    path = kernel_dir() / filename
    if not path.is_file():
        raise FileNotFoundError(f"no kernel source kernels/{filename}")
    return _read_expanded(path, path.stat().st_mtime_ns)


# --- variants --------------------------------------------------------------------------
# Each op module registers the name expressions its kernels can be instantiated with, so
# warmup() and the compile test know every variant without running the ops. An op whose
# kernels lie in several files registers each file's.
_VARIANTS: dict[str, dict[str, callable]] = {}


def register_variants(op: str, filename: str, variants) -> None:
    """Declare ``variants()`` (a callable returning name expressions) for ``op``'s kernels
    in ``kernels/<filename>``."""
    _VARIANTS.setdefault(op, {})[filename] = variants


def variants(op: str | None = None) -> list[tuple[str, str]]:
    """``(filename, name_expression)`` pairs for one op, or for all ops."""
    _import_ops()
    ops = list(_VARIANTS) if op is None else [op]
    out = []
    for name in ops:
        if name not in _VARIANTS:
            raise ValueError(f"op: expected one of {sorted(_VARIANTS)}, got {name!r}")
        for filename, fn in _VARIANTS[name].items():
            out.extend((filename, expr) for expr in fn())
    return out


def _import_ops():
    # the op modules register their variants at import
    from . import color, detection, geometry, normalize, preprocess  # noqa: F401


# --- launching -------------------------------------------------------------------------
_lock = threading.Lock()
_cuda_cache: dict[tuple[int, str, str], object] = {}
_emulators: list = []


def _cuda_function(filename: str, name_expression: str):
    import cupy

    device = cupy.cuda.runtime.getDevice()
    key = (device, filename, name_expression)
    fn = _cuda_cache.get(key)
    if fn is not None:
        return fn
    with _lock:
        fn = _cuda_cache.get(key)
        if fn is None:
            module = cupy.RawModule(
                code=read_source(filename),
                options=NVRTC_OPTIONS,
                name_expressions=[name_expression],
            )
            try:
                fn = module.get_function(name_expression)
            except cupy.cuda.compiler.CompileException as exc:
                raise KernelCompileError(filename, name_expression, str(exc)) from None
            _cuda_cache[key] = fn
    return fn


def get_function(filename: str, name_expression: str):
    """A launchable kernel: ``fn(grid, block, args, shared_mem=0)``.

    ``name_expression`` comes only from the validated tables of the op modules, never from
    user strings.
    """
    if _emulators:
        return _emulators[-1].get_function(filename, name_expression)
    return _cuda_function(filename, name_expression)


# numpy dtype -> the C type that name expressions give it (kernels/common.cuh)
C_TYPES = {
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.float16): "cp_half",
    np.dtype(np.float32): "float",
}

_BLOCK = 256  # threads per block of launch_1d
_MAX_BLOCKS = 1 << 20
BLOCK_3D = 128  # threads per block of launch_3d


def launch_1d(fn, total, args):
    """Launch a grid-stride kernel over ``total`` items (nothing for zero items)."""
    if total <= 0:
        return
    blocks = min((total + _BLOCK - 1) // _BLOCK, _MAX_BLOCKS)
    fn((blocks,), (_BLOCK,), args)


def launch_3d(fn, n, h, w, args, block_x=BLOCK_3D, block_y=1):
    """Launch a kernel over an (n, h, w) grid: x across blocks and threads, a row (or, with
    ``block_y`` threads along y, ``block_y`` rows) per blockIdx.y, an image per blockIdx.z
    (the kernel loops past the grid's limits)."""
    if n <= 0 or h <= 0 or w <= 0:
        return
    grid = (min((w + block_x - 1) // block_x, 65535), min((h + block_y - 1) // block_y, 65535),
            min(n, 65535))
    fn(grid, (block_x, block_y, 1), args)


# Streaming multiprocessors the emulator reports (small, so that launches shaped by the
# GPU's size take their every form on small test inputs)
EMULATED_MULTIPROCESSORS = 2


def multiprocessors() -> int:
    """The current device's streaming multiprocessors (under the emulator,
    ``EMULATED_MULTIPROCESSORS``)."""
    if _emulators:
        return EMULATED_MULTIPROCESSORS
    import cupy

    return _multiprocessors(cupy.cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _multiprocessors(device):
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])


# Images whose per-image data goes to a kernel by value (kernels/common.cuh's
# kImagesByValue): a list's records (RaggedImage), preprocess's plans, PreprocessMeta's
# mapping. A longer list's go in one device table.
IMAGES_BY_VALUE = 64


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


def ragged(arrays, name, sizes, strides, xp, plans=None):
    """Kernel arguments for a list of images: ``(table, records, plans_arg)``.

    ``arrays`` are the images of the list argument ``name`` (anything with ``.data.ptr``;
    NumPy under the emulator), ``sizes`` their (h, w) and ``strides`` their (s_y, s_x, s_c)
    in elements; ``plans`` optional per-image int32 rows the kernel reads beside the
    records. Up to :data:`IMAGES_BY_VALUE` images go by value: ``table`` is None,
    ``records`` a ``ByValue<RaggedImage, IMAGES_BY_VALUE>`` and ``plans_arg`` a
    ``ByValue<int, IMAGES_BY_VALUE * k>`` (nothing to upload, so a CUDA graph can capture
    the launch). A longer list's records, followed by its plans, are uploaded as one table
    (``_arrays.upload_ragged``), and both structs are zeros.
    """
    n = len(arrays)
    record, list_dtype = _ragged_dtypes()
    small = n <= IMAGES_BY_VALUE
    if small:
        arg = np.zeros((), list_dtype)
        recs = arg["v"][:n]
    else:
        recs = np.zeros(n, record)
    if not _emulators:
        recs["ptr"] = [a.data.ptr for a in arrays]
    recs["h"], recs["w"] = np.asarray(sizes, np.int32).reshape(n, 2).T
    recs[["s_y", "s_x", "s_c"]] = [tuple(st) for st in strides]
    plans = None if plans is None else np.ascontiguousarray(plans, np.int32).reshape(n, -1)

    def with_pointers(data):  # the emulator patches each record's pointer in
        from .testing import Records

        return Records(data, [(record.itemsize * i, a) for i, a in enumerate(arrays)])

    if small:
        plans_arg = (None if plans is None
                     else by_value(plans, np.int32, IMAGES_BY_VALUE * plans.shape[1]))
        return None, (with_pointers(arg) if _emulators else arg[()]), plans_arg
    data = recs.tobytes() + (b"" if plans is None else plans.tobytes())
    no_plans = None if plans is None else by_value((), np.int32, IMAGES_BY_VALUE * plans.shape[1])
    if _emulators:
        return with_pointers(data), no_ragged(), no_plans
    from . import _arrays

    return (_arrays.upload_ragged(xp, np.frombuffer(data, np.uint8), name, IMAGES_BY_VALUE),
            no_ragged(), no_plans)


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


def emulating() -> bool:
    """True inside :func:`cupyprep.testing.emulate`: NumPy arrays act as device memory."""
    return bool(_emulators)


@contextlib.contextmanager
def use_emulator(emulator):
    """Route every launch to ``emulator`` (see :mod:`cupyprep.testing`)."""
    _emulators.append(emulator)
    try:
        yield emulator
    finally:
        _emulators.remove(emulator)


def warmup(ops=None) -> int:
    """Compile kernel variants now, so the first real call pays no NVRTC time.

    Parameters
    ----------
    ops : str or sequence of str, optional
        Op names (``"resize"``, ``"normalize"``, ...); all ops when omitted.

    Returns
    -------
    int
        The number of variants compiled (or found in the cache).
    """
    if isinstance(ops, str):
        ops = [ops]
    pairs = variants() if ops is None else [p for op in ops for p in variants(op)]
    for filename, expr in pairs:
        get_function(filename, expr)
    return len(pairs)
