"""Every kernel variant compiles through NVRTC for sm_75, sm_80 and sm_90, with no GPU."""
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


def test_every_source_has_variants():
    assert set(_by_file()) == set(_kernels.kernel_files())


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("filename", sorted(_by_file()))
def test_compiles(filename, arch):
    exprs = _by_file()[filename]
    lowered = nvrtc_check.compile_variants(filename, exprs, arch)
    assert len(lowered) == len(exprs)
    assert all(name.startswith("_Z") and "cupyprep_" in name for name in lowered.values())


def test_compile_error_names_file_and_variant():
    with pytest.raises(_kernels.KernelCompileError) as info:
        nvrtc_check.compile_variants("resize.cu", ["cupyprep_resize_linear<no_such_type, 3>"], "sm_90")
    msg = str(info.value)
    assert "resize.cu" in msg and "no_such_type" in msg


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
