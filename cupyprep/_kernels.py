"""Kernel sources and their compilation: the one place that builds and caches kernels.

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

from . import _specs

__all__ = ["kernel_dir", "read_source", "get_function", "warmup", "variants", "KernelCompileError",
           "GPUUnavailableError", "require_gpu"]

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


class GPUUnavailableError(RuntimeError):
    """The kernels cannot run here: CuPy is not installed, or CUDA finds no usable device.
    NumPy and CPU torch inputs still run, on the CPU backend."""


_INSTALL = ('pip install "cupyprep[cuda13]" (CUDA 13 drivers) or "cupyprep[cuda12]" '
            "(CUDA 12 drivers)")


def require_gpu(what):
    """Raise :class:`GPUUnavailableError` saying what is missing (CuPy, a CUDA device or
    a recent enough driver) and what to install, unless kernels can run on a GPU here."""
    try:
        import cupy
    except ImportError as exc:
        raise GPUUnavailableError(
            f"{what} needs a GPU: CuPy is not installed ({exc}); {_INSTALL}. Without a GPU, "
            "NumPy and CPU torch inputs run on the CPU backend and need no warmup") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise GPUUnavailableError(
            f"{what} needs a GPU: no CUDA device can be used ({exc}). Check that the machine "
            "has an NVIDIA GPU with its driver (nvidia-smi lists it) and that CuPy's CUDA "
            f"matches the driver: {_INSTALL}. Without a GPU, NumPy and CPU torch inputs run "
            "on the CPU backend and need no warmup") from None
    if count == 0:
        raise GPUUnavailableError(
            f"{what} needs a GPU: CUDA reports no device. Without a GPU, NumPy and CPU torch "
            "inputs run on the CPU backend and need no warmup")


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
    if not isinstance(filename, str) or Path(filename).name != filename or filename in ("", ".", ".."):
        raise ValueError(f"filename: expected the name of a file in kernels/, got {filename!r}")
    path = kernel_dir() / filename
    if not path.is_file():
        raise FileNotFoundError(f"no kernel source kernels/{filename}")
    return _read_expanded(path, path.stat().st_mtime_ns)


def variants(op: str | None = None) -> list[tuple[str, str]]:
    """``(filename, name_expression)`` pairs for one op, or for all ops (from the
    registry in :mod:`cupyprep._specs`)."""
    return _specs.variants(op)


# --- compiling, per device --------------------------------------------------------------
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


def multiprocessors() -> int:
    """The current device's streaming multiprocessors (under the emulator,
    ``EMULATED_MULTIPROCESSORS``, small so that launches shaped by the GPU's size take
    their every form on small test inputs)."""
    if _emulators:
        return EMULATED_MULTIPROCESSORS
    import cupy

    return _multiprocessors(cupy.cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _multiprocessors(device):
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])


EMULATED_MULTIPROCESSORS = 2


def current_emulator():
    """The emulator launches go to (:func:`cupyprep.testing.emulate`), or None."""
    return _emulators[-1] if _emulators else None


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

    Raises
    ------
    GPUUnavailableError
        Without CuPy or a usable CUDA device (the message says which, and what to install);
        under :func:`cupyprep.testing.emulate` the emulator compiles instead.
    """
    if isinstance(ops, str):
        ops = [ops]
    pairs = variants() if ops is None else [p for op in ops for p in variants(op)]
    if not _emulators:
        require_gpu("cupyprep.warmup()")
    for filename, expr in pairs:
        get_function(filename, expr)
    return len(pairs)
