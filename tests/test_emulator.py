"""Tests of the CPU kernel emulator itself, with the toy kernels in tests/emu_kernels."""
from __future__ import annotations

import concurrent.futures
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from cupyprep import _kernels
from cupyprep._kernels import KernelCompileError
from cupyprep.testing import (
    Emulator,
    EmulatorError,
    PointerTable,
    Records,
    UnsupportedFeatureError,
    emulate,
)

EMU_DIR = Path(__file__).resolve().parent / "emu_kernels"

F16_KERNEL = """
__global__ void f16_roundtrip(const float* in, cp_half* half, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    half[i].bits = cupyprep_f32_to_f16_bits(in[i]);
    back[i] = cupyprep_f16_bits_to_f32(half[i].bits);
}
"""


def _f16_source():
    # the real common.cuh: its asm is behind #ifndef CUPYPREP_EMULATOR
    return _kernels.read_source("common.cuh") + F16_KERNEL


# Every toy variant the tests use, compiled up front on two workers (a compile takes about
# a second; the on-disk cache makes later runs fast).
VARIANTS = {
    "vector_add": ("basic.cu", "vector_add<float>"),
    "coords": ("basic.cu", "coords"),
    "scale_strided": ("basic.cu", "scale_strided"),
    "row_sums": ("basic.cu", "row_sums"),
    "record_sums": ("basic.cu", "record_sums"),
    "block_sum": ("sync.cu", "block_sum<128>"),
    "histogram": ("sync.cu", "histogram"),
    "warp_ops": ("sync.cu", "warp_ops"),
    "votes": ("sync.cu", "votes"),
    "off_by_one": ("faults.cu", "off_by_one"),
    "undefined": ("faults.cu", "undefined"),
    "shared_overrun": ("faults.cu", "shared_overrun"),
    "divergent_barrier": ("faults.cu", "divergent_barrier"),
    "intrinsics": ("intrinsics.cu", "intrinsics"),
    "fadd_rz": ("intrinsics.cu", "fadd_rz"),
    "fadd_rd": ("intrinsics.cu", "fadd_rd"),
    "f16_roundtrip": (None, "f16_roundtrip"),
}


class Toys:
    def __init__(self, em: Emulator):
        self.em = em
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self._futures = {name: pool.submit(self._compile, *v) for name, v in VARIANTS.items()}
        pool.shutdown(wait=False)

    def _compile(self, filename, name_expression):
        if filename is None:
            return self.em.get_function_from_source(_f16_source(), name_expression, "f16.cu")
        source = (EMU_DIR / filename).read_text()
        return self.em.get_function_from_source(
            source, name_expression, label=f"emu_kernels/{filename}"
        )

    def __getitem__(self, name):
        return self._futures[name].result()


@pytest.fixture(scope="module")
def toys():
    return Toys(Emulator())


def i32(v):
    return np.int32(v)


# --- results ---------------------------------------------------------------------------------
def test_vector_add_ragged_tail(toys):
    k = toys["vector_add"]
    assert not k.uses_fibers
    n = 1000  # 8 blocks of 128: the last 24 threads fall off the end
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    out = np.full(n, -1.0, np.float32)
    k((8,), (128,), (a, b, out, i32(n)))
    np.testing.assert_array_equal(out, a + b)

    # output aliasing an input: both travel as one buffer, as on a GPU
    expected = a + b
    k(8, 128, (a, b, a, i32(n)))
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("grid, block", [((3, 2), (8, 4)), ((2, 3, 2), (4, 2, 3))])
def test_grid_and_block_dimensions(toys, grid, block):
    g = grid + (1,) * (3 - len(grid))
    b = block + (1,) * (3 - len(block))
    nthreads = int(np.prod(g) * np.prod(b))
    out = np.zeros(6 * nthreads, np.uint32)
    toys["coords"](grid, block, (out,))
    got = out.reshape(-1, 6)
    bz, by, bx, tz, ty, tx = np.meshgrid(
        *[np.arange(d) for d in (g[2], g[1], g[0], b[2], b[1], b[0])], indexing="ij"
    )
    expected = np.stack([tx, ty, tz, bx, by, bz], axis=-1).reshape(-1, 6)
    np.testing.assert_array_equal(got, expected)


def test_shared_memory_block_reduction(toys):
    k = toys["block_sum"]
    assert k.uses_fibers
    n = 128 * 20 - 37
    x = np.random.default_rng(1).random(n, dtype=np.float32)
    partial = np.zeros(20, np.float32)
    k(20, 128, (x, partial, i32(n)))
    padded = np.concatenate([x, np.zeros(37, np.float32)]).reshape(20, 128)
    np.testing.assert_allclose(partial, padded.sum(axis=1), rtol=1e-5)


def test_atomic_histogram(toys):
    data = np.random.default_rng(2).integers(0, 256, 5000).astype(np.uint8)
    bins = np.zeros(256, np.uint32)
    toys["histogram"](20, 256, (data, bins, i32(data.size)))
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))


def test_warp_collectives(toys):
    n = 256
    v = np.random.default_rng(3).integers(0, 1000, n).astype(np.int32)
    sums = np.zeros(n // 32, np.int32)
    ballots = np.zeros(n // 32, np.uint32)
    maxes = np.zeros(n // 32, np.int32)
    scans = np.zeros(n, np.int32)
    toys["warp_ops"](2, 128, (v, sums, ballots, maxes, scans, i32(-1)))
    warps = v.reshape(-1, 32)
    np.testing.assert_array_equal(sums, warps.sum(axis=1))
    np.testing.assert_array_equal(maxes, warps.max(axis=1))
    np.testing.assert_array_equal(scans, np.cumsum(warps, axis=1).ravel())
    odd_bits = ((warps & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    np.testing.assert_array_equal(ballots, odd_bits.astype(np.uint32))


def test_warp_mask_must_match_live_lanes(toys):
    v = np.zeros(64, np.int32)
    outs = (np.zeros(2, np.int32), np.zeros(2, np.uint32), np.zeros(2, np.int32),
            np.zeros(64, np.int32))
    with pytest.raises(EmulatorError, match=r"mask 0xffffffff.*0xffffffdf"):
        toys["warp_ops"](1, 64, (v, *outs, i32(5)))  # lane 5 returned early


def test_barrier_votes(toys):
    pred = np.zeros(128, np.int32)
    pred[:32] = np.arange(32) % 2  # warp 0: some
    pred[32:64] = 1  # warp 1: all
    out = np.zeros(3 * 128, np.int32)
    toys["votes"](1, 128, (pred, out))
    out = out.reshape(-1, 3)
    np.testing.assert_array_equal(out[:, 0], 48)  # __syncthreads_count
    np.testing.assert_array_equal(out[:, 1], np.repeat([1, 1, 0, 0], 32))  # __any_sync
    np.testing.assert_array_equal(out[:, 2], np.repeat([0, 1, 0, 0], 32))  # __all_sync


def test_divergent_barrier_is_a_deadlock(toys):
    with pytest.raises(EmulatorError, match="deadlock"):
        toys["divergent_barrier"](1, 64, (np.zeros(64, np.int32),))


def test_float16_round_trip(toys):
    rng = np.random.default_rng(4)
    special = [0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, np.inf, -np.inf,
               6e-8, 2.9e-8, 3e-8, 1e-10, 0.1, 1 / 3, 2049.0, 2051.0]
    x = np.concatenate(
        [np.array(special, np.float32), rng.standard_normal(3000).astype(np.float32) * 300,
         (rng.standard_normal(500) * 1e-5).astype(np.float32)]
    )
    half = np.zeros(x.size, np.float16)
    back = np.zeros_like(x)
    toys["f16_roundtrip"]((x.size + 255) // 256, 256, (x, half, back, i32(x.size)))
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    np.testing.assert_array_equal(half.view(np.uint16), expected.view(np.uint16))
    np.testing.assert_array_equal(back, expected.astype(np.float32))


def test_intrinsics(toys):
    f = np.array([2.5, -2.5, 3.5, -0.5, 1e10, np.nan, 0.7, -1.7], np.float32)
    out = np.zeros(64, np.int64)
    fout = np.zeros(16, np.float32)
    dout = np.zeros(4, np.float64)
    toys["intrinsics"](1, 1, (f, out, fout, dout))
    conversions = [2, -2, 4, -1, 0, -1, 2**31 - 1, 0, 0, 0, 2**32 - 1, 2, -2, -1, 10**13, -2]
    bits = [8, 40, 0, 5, 41, 32, 31, 63, 2**31, 0x3F800000, 2**31, 2**32 - 2, -15, 0x55114400]
    minmax = [-4, 7, -1, 9]
    atomics = [508, 503, -496, 502, 801, 709, 311, 107, 703, 302, 300, 1]
    expected = conversions + bits + minmax + atomics
    n = len(expected)
    assert out[n] == n  # the kernel filled exactly these slots
    np.testing.assert_array_equal(out[:n], expected)
    np.testing.assert_array_equal(
        fout[:9], np.array([26.5, 3.1, 2.1, 1.7, 0.5, 0.0, 2.0, 5.0, 266.0], np.float32)
    )
    # __fmaf_rn rounds once: the double below is exact, so rounding it gives the fma
    assert fout[1] == np.float32(float(np.float32(0.7)) * 3.0 + 1.0)
    assert fout[2] == np.float32(0.7) * np.float32(3.0)
    np.testing.assert_array_equal(dout[:2], [29.75, 0.1 * 3.0 + (0.1 + 0.2) - 2.0 + 1.0])


def directed_inputs(rng, n):
    """Random float32 pairs of every sign and scale, sums that are exact, ties, sums at 2^23
    (where the unit in the last place is 1), cancellations and overflow either way."""
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)).astype(np.float32)
    a[:500] = rng.uniform(0, 2**22, 500).astype(np.float32)
    b[:500] = np.float32(2**23)
    a[500:600] = np.arange(100, dtype=np.float32) + np.float32(0.5)
    b[500:600] = np.float32(2**23)
    a[600:700] = -b[600:700]
    a[700:710] = np.float32(3e38)
    b[700:710] = np.float32(3e38) * np.where(np.arange(10) % 2, 1, -1).astype(np.float32)
    b[705:710] = np.float32(3e38)
    a[710:720] = -np.float32(3e38)
    b[710:720] = -np.float32(3e38)
    # sums in [2^23, 2^24) from negative fractions and 1.5 * 2^23 (floor's bias)
    a[720:900] = rng.uniform(-2**22, 2**22, 180).astype(np.float32)
    b[720:900] = np.float32(1.5 * 2**23)
    return a, b


def directed_reference(a, b, toward):
    """The exact sums rounded toward zero ("zero") or minus infinity ("down"), overflow
    stopping at the largest float as CUDA's directed roundings do."""
    max32 = np.finfo(np.float32).max
    expected = np.empty(len(a), np.float32)
    for i in range(len(a)):
        exact = Fraction(float(a[i])) + Fraction(float(b[i]))
        if abs(exact) > Fraction(float(max32)):
            if toward == "zero":
                expected[i] = max32 if exact > 0 else -max32
            else:
                expected[i] = max32 if exact > 0 else -np.inf
            continue
        near = np.float32(a[i]) + np.float32(b[i])  # rounded to nearest
        if toward == "zero" and abs(Fraction(float(near))) > abs(exact):
            near = np.nextafter(near, np.float32(0))
        if toward == "down" and Fraction(float(near)) > exact:
            near = np.nextafter(near, np.float32(-np.inf))
        expected[i] = near
    return expected


@pytest.mark.parametrize("name, toward", [("fadd_rz", "zero"), ("fadd_rd", "down")])
def test_directed_rounding_adds(toys, name, toward):
    """__fadd_rz and __fadd_rd against the exact sum (fractions). Rounded toward zero, s +
    2^23 is 2^23 + floor(s) for 0 <= s < 2^22; rounded down, s + 1.5 * 2^23 is
    1.5 * 2^23 + floor(s) for |s| < 2^22, negative s included (the staged warp's floor)."""
    rng = np.random.default_rng(6)
    n = 3000
    a, b = directed_inputs(rng, n)
    out = np.full(n, np.nan, np.float32)
    toys[name](n // 128 + 1, 128, (a, b, out, i32(n)))
    np.testing.assert_array_equal(out, directed_reference(a, b, toward))
    if toward == "zero":
        assert (out[:500] == np.floor(a[:500]) + np.float32(2**23)).all()
    else:
        np.testing.assert_array_equal(out[720:900], np.floor(a[720:900]) + np.float32(1.5 * 2**23))


# --- sanitizers --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, access, line", [(0, "READ", 7), (1, "WRITE", 8)])
def test_one_past_the_end_is_reported(toys, mode, access, line):
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    with pytest.raises(EmulatorError) as info:
        toys["off_by_one"](1, 32, (a, out, i32(10), i32(mode)))
    msg = str(info.value)
    assert "AddressSanitizer: heap-buffer-overflow" in msg
    assert f"{access} of size 4" in msg
    assert "0 bytes to the right of 40-byte region" in msg
    assert f"emu_kernels/faults.cu:{line}" in msg
    assert "thread (9, 0, 0)" in msg
    assert info.value.variant.endswith("off_by_one")
    np.testing.assert_array_equal(out, 0)  # nothing written back after a failure


def test_shared_memory_overrun_is_reported(toys):
    out = np.zeros(32, np.float32)
    toys["shared_overrun"](2, 32, (out, i32(0)))
    np.testing.assert_array_equal(out, 1)
    with pytest.raises(EmulatorError, match="AddressSanitizer: global-buffer-overflow"):
        toys["shared_overrun"](1, 32, (out, i32(1)))


@pytest.mark.parametrize(
    "mode, report", [(0, "signed integer overflow"), (1, "load of misaligned address")]
)
def test_undefined_behaviour_is_reported(toys, mode, report):
    data = np.zeros(16, np.uint8)
    out = np.zeros(1, np.int32)
    with pytest.raises(EmulatorError, match="runtime error: " + report):
        toys["undefined"](1, 1, (data, out, i32(2**31 - 1), i32(mode)))
    toys["undefined"](1, 1, (data, out, i32(5), i32(0)))
    assert out[0] == 6


# --- arguments --------------------------------------------------------------------------------
def test_arguments_are_checked(toys):
    k = toys["vector_add"]
    a = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"Python int.*np\.int32"):
        k(1, 32, (a, a, a, 4))
    with pytest.raises(TypeError, match="Python float"):
        k(1, 32, (a, a, a, 4.0))
    with pytest.raises(TypeError, match=r"got np\.int64; pass np\.int32"):
        k(1, 32, (a, a, a, np.int64(4)))
    with pytest.raises(TypeError, match=r"got np\.float64; pass np\.float32"):
        toys["scale_strided"](1, 32, (a, np.int64(1), i32(4), np.float64(2)))
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(1, 32, (a, a, a))
    with pytest.raises(TypeError, match="float64 array"):
        k(1, 32, (a, a, a.astype(np.float64), i32(4)))
    with pytest.raises(TypeError, match="by value"):
        k(1, 32, (a, a, a, np.zeros(1, np.int32)))
    with pytest.raises(ValueError, match="more than 1024 threads"):
        k(1, (64, 32), (a, a, a, i32(4)))
    with pytest.raises(UnsupportedFeatureError, match="dynamic shared memory"):
        k(1, 32, (a, a, a, i32(4)), shared_mem=128)


def test_pointer_table(toys):
    k = toys["row_sums"]
    rng = np.random.default_rng(5)
    rows = [rng.random(n, dtype=np.float32) for n in (3, 7, 1, 10)]
    lens = np.array([r.size for r in rows], np.int32)
    out = np.zeros(4, np.float32)
    k(1, 32, (PointerTable(rows), lens, out, i32(4)))
    np.testing.assert_allclose(out, [r.sum() for r in rows], rtol=1e-6)

    lens[1] += 1  # reads one past the end of rows[1]
    with pytest.raises(EmulatorError) as info:
        k(1, 32, (PointerTable(rows), lens, out, i32(4)))
    assert "AddressSanitizer: heap-buffer-overflow" in str(info.value)
    assert "args[0].arrays[1]" in str(info.value)  # the buffer legend names the row


def _row_records(rows, lens, count):
    """struct Row { const float* p; int n; int pad; } x count, pointers to ``rows``."""
    data = np.zeros(count, np.dtype([("p", "<u8"), ("n", "<i4"), ("pad", "<i4")]))
    data["n"][:len(lens)] = lens
    return Records(data, [(16 * i, r) for i, r in enumerate(rows)])


def test_records_by_value_and_in_memory(toys):
    k = toys["record_sums"]
    rng = np.random.default_rng(6)
    rows = [rng.random(n, dtype=np.float32) for n in (3, 7, 1)]
    lens = [r.size for r in rows]
    expected = [r.sum() for r in rows]
    out = np.zeros(3, np.float32)
    k(1, 32, (None, _row_records(rows, lens, 4), out, i32(3)))  # by value (4 slots)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    out[:] = 0
    k(1, 32, (_row_records(rows, lens, 3), _row_records([], [], 4), out, i32(3)))  # a table
    np.testing.assert_allclose(out, expected, rtol=1e-6)

    long = list(lens)
    long[2] += 1  # reads one past the end of rows[2], through either form
    for args in ((None, _row_records(rows, long, 4)), (_row_records(rows, long, 3), _row_records([], [], 4))):
        with pytest.raises(EmulatorError) as info:
            k(1, 32, args + (out, i32(3)))
        assert "AddressSanitizer: heap-buffer-overflow" in str(info.value)
        assert ".pointers[2]" in str(info.value)  # the buffer legend names the row
    with pytest.raises(TypeError, match="Records of 48 bytes for a parameter of 64"):
        k(1, 32, (None, _row_records(rows, lens, 3), out, i32(3)))
    with pytest.raises(ValueError, match="8-byte aligned offset within"):
        Records(bytes(16), [(12, rows[0])])


def test_non_contiguous_views_are_written_back(toys):
    k = toys["scale_strided"]
    grid = np.arange(30, dtype=np.float32).reshape(5, 6)
    expected = grid.copy()
    expected[:, 2] *= 2
    k(1, 32, (grid[:, 2], np.int64(6), i32(5), np.float32(2)))  # a column: stride 6
    np.testing.assert_array_equal(grid, expected)

    line = np.arange(10, dtype=np.float32)
    expected = line.copy()
    expected[::-1][:4] *= 3
    k(1, 32, (line[::-1], np.int64(-1), i32(4), np.float32(3)))  # negative stride
    np.testing.assert_array_equal(line, expected)


def test_writes_to_read_only_arrays_are_reported(toys):
    a = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(EmulatorError, match="read-only"):
        toys["vector_add"](1, 32, (a, a, out, i32(8)))


# --- compiling ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "snippet, feature",
    [
        ("extern __shared__ float s[]; s[0] = 1; o[0] = s[0];", "extern __shared__"),
        ('asm volatile("trap;");', "inline assembly"),
        ("namespace cg = cooperative_groups; o[0] = 1;", "cooperative groups"),
        ("o[0] = __shfl(o[0], 0);", "without _sync"),
        ("o[0] = (float)clock64();", "clock"),
        ("o[0] = tex2D<float>(0, 0.f, 0.f);", "texture"),
    ],
)
def test_unsupported_features_are_named(snippet, feature):
    em = Emulator()
    source = f"__global__ void k(float* o) {{\n    {snippet}\n}}\n"
    with pytest.raises(UnsupportedFeatureError, match=feature) as info:
        em.get_function_from_source(source, "k", "toy.cu")
    assert "toy.cu:2" in str(info.value)
    assert em.compile_count == 0  # refused before compiling


def test_compile_errors_raise_kernel_compile_error():
    em = Emulator()
    source = "__global__ void k(float* o) {\n    o[0] = undefined_thing;\n}\n"
    with pytest.raises(KernelCompileError, match=r"toy\.cu:2:.*undefined_thing") as info:
        em.get_function_from_source(source, "k", "toy.cu")
    assert info.value.name_expression == "k"


def test_compiled_variants_are_cached(tmp_path):
    source = (EMU_DIR / "basic.cu").read_text()
    first = Emulator(cache_dir=tmp_path)
    k = first.get_function_from_source(source, "vector_add<float>", "emu_kernels/basic.cu")
    assert first.compile_count == 1
    assert first.get_function_from_source(
        source, "vector_add<float>", "emu_kernels/basic.cu") is k
    assert first.compile_count == 1

    second = Emulator(cache_dir=tmp_path)  # a new process would see the same
    k2 = second.get_function_from_source(source, "vector_add<float>", "emu_kernels/basic.cu")
    assert second.compile_count == 0
    a = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    k2(1, 32, (a, a, out, i32(5)))
    np.testing.assert_array_equal(out, 2 * a)


def test_emulate_routes_kernel_launches(monkeypatch):
    monkeypatch.setattr(_kernels, "kernel_dir", lambda: EMU_DIR)
    a = np.arange(6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    assert not _kernels.emulating()
    with emulate() as em:
        assert _kernels.emulating()
        fn = _kernels.get_function("routed.cu", "add_one")
        fn(1, 32, (a, out, i32(6), i32(0)))
        np.testing.assert_array_equal(out, a + 1)
        with pytest.raises(EmulatorError) as info:
            fn(1, 32, (a, out, i32(6), i32(1)))
        assert em.launch_count == 2
    assert not _kernels.emulating()
    # line numbers point into the real file, past the inlined header
    assert "kernels/routed.cu:7" in str(info.value)
