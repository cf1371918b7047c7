"""Out of device memory: the error names the op and the bytes asked, is still the
allocator's own error type, and the next call works. On the CPU an allocator that fails
once stands in for a full device (kernels emulated); on a GPU a batch too large."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import cupy_pool_off, not_under_sanitizer, torch_caching_off
from cupyprep import _arrays


def failing_output(monkeypatch, make_error):
    """The next output an op allocates fails with ``make_error(nbytes)``; later ones work."""
    allocate = _arrays.Prepared.output
    calls = []

    def output(self, out, shape, dtype, name="out"):
        if not calls:
            calls.append(shape)
            raise make_error(int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return allocate(self, out, shape, dtype, name)

    monkeypatch.setattr(_arrays.Prepared, "output", output)
    return calls


def cupy_oom(nbytes):
    cupy = pytest.importorskip("cupy")
    return cupy.cuda.memory.OutOfMemoryError(nbytes, 123_456, 0)


def torch_oom(nbytes):
    torch = pytest.importorskip("torch")
    return torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {nbytes / 2**20:.2f} MiB. "
                                  f"GPU 0 has a total capacity of 79.19 GiB")


def cupy_malloc_oom(nbytes):
    """What CuPy without its pool raises (``cupy.cuda.set_allocator(None)``): the failed
    cudaMalloc's CUDA error, without the size."""
    cupy = pytest.importorskip("cupy")
    return cupy.cuda.runtime.CUDARuntimeError(2)  # cudaErrorMemoryAllocation


def torch_malloc_oom(nbytes):
    """What torch without its caching allocator raises (PYTORCH_NO_CUDA_MEMORY_CACHING=1):
    on the device its error_code is 2 (cudaErrorMemoryAllocation; docs/reliability.md, run 9)."""
    torch = pytest.importorskip("torch")
    exc = torch.AcceleratorError("CUDA error: out of memory\nCUDA kernel errors might be "
                                 "asynchronously reported at some other API call")
    exc.error_code = 2
    return exc


def torch_malloc_oom_without_code(nbytes):
    """The same error made without its error_code: recognized by its message."""
    torch = pytest.importorskip("torch")
    return torch.AcceleratorError("CUDA error: out of memory")


@pytest.mark.emulated
@pytest.mark.parametrize("make_error, base", [(cupy_oom, "cupy"), (torch_oom, "torch"),
                                              (cupy_malloc_oom, "cupy malloc"),
                                              (torch_malloc_oom, "torch malloc"),
                                              (torch_malloc_oom_without_code, "torch malloc")])
def test_out_of_memory_names_the_op_and_size_and_the_next_call_works(monkeypatch, make_error, base):
    from cupyprep.testing import emulate

    img = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    with emulate():
        failing_output(monkeypatch, make_error)
        with pytest.raises(cupyprep.DeviceMemoryError) as info:
            cupyprep.resize(img, (300, 200))
        err = info.value
        asked = 300 * 200 * 3
        assert err.op == "cupyprep.resize"
        assert "cupyprep.resize: out of device memory" in str(err)
        if base == "cupy":
            import cupy

            assert err.nbytes == asked and f"{asked:,} bytes" in str(err)
            assert isinstance(err, cupy.cuda.memory.OutOfMemoryError)  # old handlers still catch it
        elif base == "torch":
            import torch

            assert abs(err.nbytes - asked) <= 0.01 * 2**20  # torch's message rounds to 0.01 MiB
            assert isinstance(err, torch.OutOfMemoryError)
        else:  # a plain cudaMalloc's error does not say the size
            assert err.nbytes is None and "the allocator did not say how much" in str(err)
            assert isinstance(err, type(make_error(0)))
            if base == "cupy malloc":
                assert err.status == 2
        assert isinstance(err, MemoryError) and type(err.__cause__) is type(make_error(0))
        out = cupyprep.resize(img, (300, 200))  # the allocator works again: so does the op
    assert out.shape == (300, 200, 3)


@pytest.mark.emulated
def test_out_of_memory_names_the_outermost_public_op(monkeypatch):
    """preprocess calls other ops' machinery: the error names what the user called."""
    from cupyprep.testing import emulate

    frames = [np.zeros((20, 30, 3), np.uint8), np.zeros((10, 12, 3), np.uint8)]
    with emulate():
        failing_output(monkeypatch, cupy_oom)
        with pytest.raises(cupyprep.DeviceMemoryError, match=r"^cupyprep\.preprocess: out of device"):
            cupyprep.preprocess(frames, (32, 32))


def test_other_errors_pass_unchanged():
    from cupyprep import _allocators

    assert _allocators.out_of_memory(RuntimeError("CUDA error: an illegal memory access"), "x") is None
    assert _allocators.out_of_memory(MemoryError("host"), "x") is None
    cupy = pytest.importorskip("cupy")
    assert _allocators.out_of_memory(cupy.cuda.runtime.CUDARuntimeError(700), "x") is None
    torch = pytest.importorskip("torch")
    assert _allocators.out_of_memory(torch.AcceleratorError("CUDA error: an illegal memory access"), "x") is None
    coded = torch.AcceleratorError("CUDA error: out of memory")  # the code decides where there is one
    coded.error_code = 700  # cudaErrorIllegalAddress
    assert _allocators.out_of_memory(coded, "x") is None


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "cupy without pool", "torch"])
def test_gpu_a_batch_too_large_for_the_device(kind):
    """Also without the pools (CuPy's raw allocator here; torch's caching allocator off under
    benchmarks/sanitize.sh), where the failed cudaMalloc's CUDA error does not say the size."""
    not_under_sanitizer("the tools report each failed cudaMalloc as an error, and this test "
                        "makes them on purpose")
    import contextlib

    import cupy

    total = cupy.cuda.runtime.memGetInfo()[1]
    side = int((2 * total / 4) ** 0.5) + 1  # one float32 NHWC output larger than the device
    img = np.zeros((64, 64, 1), np.float32)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        x = torch.from_numpy(img).cuda()
        pooled = not torch_caching_off()
    else:
        x = cupy.asarray(img)
        pooled = kind == "cupy" and not cupy_pool_off()
    # (using_allocator is a one-use context manager: a new one for each block)
    raw = (lambda: cupy.cuda.using_allocator(None)) if kind == "cupy without pool" else contextlib.nullcontext
    with raw(), pytest.raises(cupyprep.DeviceMemoryError) as info:
        cupyprep.resize(x, (side, side))
    assert info.value.op == "cupyprep.resize" and info.value.device == 0
    if pooled:
        assert info.value.nbytes is not None and info.value.nbytes >= side * side * 4 * 0.99
    else:
        assert info.value.nbytes is None and "did not say how much" in str(info.value)
    with raw():
        small = cupyprep.resize(x, (32, 32))
    got = small.cpu().numpy() if kind == "torch" else cupy.asnumpy(small)
    np.testing.assert_array_equal(got, np.zeros((32, 32, 1), np.float32))
