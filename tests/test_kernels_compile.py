"""Every kernel variant compiles through NVRTC for sm_75, sm_80 and sm_90, with no GPU.

Every variant compiles with NVRTC's fast-compile mode (``--Ofast-compile=mid``, NVRTC
12.8+: the same front end and code generation, fewer optimization passes; several times
faster on the largest files; a program that mode refuses is compiled with the default
options, see nvrtc_check), and the first part of each file also with the options the
library compiles with at run time, so both paths are exercised on every architecture."""
from __future__ import annotations

from collections import defaultdict

import pytest

from cupyprep import _kernels

nvrtc_check = pytest.importorskip("nvrtc_check")


def _nvrtc_available():
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")


def _by_file():
    by = defaultdict(list)
    for filename, expr in _kernels.variants():
        by[filename].append(expr)
    return dict(by)


# Variants compiled per NVRTC program: NVRTC's time per variant grows with the number of
# name expressions in one program (preprocess.cu's 1152 variants took 0.43 s each in one
# program, 0.16 s each in programs of 32), so each file is compiled in parts of at most
# this many, which also lets parallel test workers share the big files.
PART = 48


def _parts():
    return [(filename, k, -(-len(exprs) // PART)) for filename, exprs in sorted(_by_file().items())
            for k in range(-(-len(exprs) // PART))]


def test_every_source_has_variants():
    assert set(_by_file()) == set(_kernels.kernel_files())


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("filename, part, parts", _parts(),
                         ids=[f"{f}-{k + 1}of{n}" for f, k, n in _parts()])
def test_compiles(filename, part, parts, arch):
    """Every variant of every kernel file compiles for each architecture (the file's
    variants in ``parts`` programs; this test compiles part ``part``)."""
    exprs = _by_file()[filename][part * PART:(part + 1) * PART]
    lowered = nvrtc_check.compile_variants(filename, exprs, arch, fast=True)
    assert len(lowered) == len(exprs)
    assert all(name.startswith("_Z") and "cupyprep_" in name for name in lowered.values())


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("filename", sorted(_by_file()))
def test_compiles_with_the_run_time_options(filename, arch):
    """The first part of each file with the options CuPy compiles with at run time (full
    optimization), beside the fast-compile check of every variant above."""
    exprs = _by_file()[filename][:PART]
    lowered = nvrtc_check.compile_variants(filename, exprs, arch)
    assert len(lowered) == len(exprs)
    assert all(name.startswith("_Z") and "cupyprep_" in name for name in lowered.values())


def test_compile_error_names_file_and_variant():
    with pytest.raises(_kernels.KernelCompileError) as info:
        nvrtc_check.compile_variants("resize.cu", ["cupyprep_resize_linear<no_such_type, 3>"], "sm_90")
    msg = str(info.value)
    assert "resize.cu" in msg and "no_such_type" in msg


def test_parts_cover_every_variant():
    for filename, exprs in _by_file().items():
        parts = [p for f, _, p in _parts() if f == filename]
        assert len(parts) == parts[0] and parts[0] * PART >= len(exprs) > (parts[0] - 1) * PART


def test_kernel_names_are_prefixed():
    for filename, expr in _kernels.variants():
        assert expr.startswith("cupyprep_"), expr


def test_warmup_rejects_unknown_op():
    with pytest.raises(ValueError, match="op"):
        _kernels.warmup("no_such_op")


@pytest.mark.gpu
def test_gpu_warmup_and_compile_error():
    import cupy

    assert _kernels.warmup("color") == len(_kernels.variants("color"))
    device = cupy.cuda.runtime.getDevice()
    assert all((device, f, e) in _kernels._cuda_cache for f, e in _kernels.variants("color"))
    with pytest.raises(_kernels.KernelCompileError) as info:
        _kernels.get_function("resize.cu", "cupyprep_resize_linear<no_such_type, 3>")
    assert "resize.cu" in str(info.value) and "no_such_type" in str(info.value)
