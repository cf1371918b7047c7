"""resize: the CPU backend through the public API, and the kernels against cv2.resize."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import cupyprep
from conftest import assert_close, photo, random_image

cv2 = pytest.importorskip("cv2")

FLAGS = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA,
         "cubic": cv2.INTER_CUBIC}
DTYPES = [np.uint8, np.uint16, np.float16, np.float32]
KERNEL_MODES = ["nearest", "linear", "cubic", "area"]


@contextlib.contextmanager
def ipp(enabled):
    """OpenCV's x86 build hands float32 / uint16 linear resizes to Intel IPP, whose
    summation order is not OpenCV's own; with IPP off cv2 runs its own arithmetic, which
    the kernels reproduce bit for bit."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(enabled)
    try:
        yield
    finally:
        cv2.ipp.setUseIPP(before)


def cv2_resize(img, size, mode):
    """The reference: cv2.resize on one HWC/HW image with IPP off (OpenCV's own code, which
    the kernels and the CPU backend compute; float16 through float32; more than 4 channels
    plane by plane, as the CPU backend and the kernels take them)."""
    if img.ndim == 3 and img.shape[2] > 4:
        return np.stack([cv2_resize(img[:, :, c], size, mode) for c in range(img.shape[2])], axis=2)
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    with ipp(False):
        res = cv2.resize(src, (size[1], size[0]), interpolation=FLAGS[mode])
    if img.ndim == 3 and res.ndim == 2:
        res = res[:, :, None]
    return res.astype(img.dtype)


# --- CPU backend (CI) ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", list(FLAGS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [None, 1, 2, 3, 4])
def test_cpu_matches_cv2(mode, dtype, channels):
    rng = np.random.default_rng(0)
    shape = (23, 31) if channels is None else (23, 31, channels)
    img = random_image(rng, shape, dtype)
    res = cupyprep.resize(img, (17, 45), interpolation=mode)
    assert res.dtype == img.dtype and res.shape == (17, 45) + shape[2:]
    np.testing.assert_array_equal(res, cv2_resize(img, (17, 45), mode))


@pytest.mark.parametrize("mode", list(FLAGS))
def test_cpu_layouts(mode):
    rng = np.random.default_rng(1)
    batch = random_image(rng, (3, 20, 14, 3), np.uint8)
    res = cupyprep.resize(batch, (9, 30), interpolation=mode)
    assert res.shape == (3, 9, 30, 3)
    for n in range(3):
        np.testing.assert_array_equal(res[n], cv2_resize(batch[n], (9, 30), mode))
    chw = np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
    res_chw = cupyprep.resize(chw, (9, 30), interpolation=mode, layout="NCHW")
    np.testing.assert_array_equal(res_chw, res.transpose(0, 3, 1, 2))
    res_one = cupyprep.resize(chw[0], (9, 30), interpolation=mode, layout="CHW")
    np.testing.assert_array_equal(res_one, res_chw[0])


def test_cpu_many_channels_and_empty_batch():
    rng = np.random.default_rng(2)
    img = random_image(rng, (10, 12, 7), np.float32)
    res = cupyprep.resize(img, (4, 7))  # not 2x2 cells (test_cpu_many_channels_cell_means_match_cv2)
    for c in range(7):
        np.testing.assert_array_equal(res[:, :, c], cv2_resize(img[:, :, c], (4, 7), "linear"))
    empty = np.zeros((0, 10, 12, 3), np.uint8)
    out = cupyprep.resize(empty, (5, 6))
    assert out.shape == (0, 5, 6, 3) and out.dtype == np.uint8


def test_cpu_torch_tensor_round_trip():
    torch = pytest.importorskip("torch")
    img = random_image(np.random.default_rng(3), (16, 16, 3), np.uint8)
    res = cupyprep.resize(torch.from_numpy(img), (8, 8))
    assert isinstance(res, torch.Tensor) and res.device.type == "cpu"
    np.testing.assert_array_equal(res.numpy(), cv2_resize(img, (8, 8), "linear"))


def test_cpu_out_argument():
    img = random_image(np.random.default_rng(4), (16, 16, 3), np.uint8)
    out = np.zeros((8, 9, 3), np.uint8)
    res = cupyprep.resize(img, (8, 9), out=out)
    assert res is out
    np.testing.assert_array_equal(out, cv2_resize(img, (8, 9), "linear"))


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(img=np.zeros((4, 4), np.int32)), TypeError, ["img", "uint8", "int32"]),
        (dict(img=np.zeros((4, 4), np.float64)), TypeError, ["img", "float64"]),
        (dict(img=np.zeros(4, np.uint8)), ValueError, ["img", "(4,)"]),
        (dict(img=np.zeros((1, 2, 3, 4, 5), np.uint8)), ValueError, ["img"]),
        (dict(img=np.zeros((0, 4, 3), np.uint8)), ValueError, ["img", "non-empty"]),
        (dict(size=(0, 4)), ValueError, ["size", "positive"]),
        (dict(size=(-3, 4)), ValueError, ["size"]),
        (dict(size=5), TypeError, ["size", "(height, width)"]),
        (dict(size=(2.5, 4)), TypeError, ["size"]),
        (dict(interpolation="bilinear"), ValueError, ["interpolation", "linear", "bilinear"]),
        (dict(img=[[1, 2], [3, 4]]), TypeError, ["img", "list"]),
        (dict(layout="WHC"), ValueError, ["layout", "WHC"]),
        (dict(layout="NHWC"), ValueError, ["img", "NHWC"]),
        (dict(out=np.zeros((3, 3, 3), np.uint8)), ValueError,
         ["out", "shape (4, 4, 3) and dtype uint8", "shape (3, 3, 3)"]),
        (dict(out=np.zeros((4, 4, 3), np.float32)), ValueError,
         ["out", "shape (4, 4, 3) and dtype uint8", "dtype float32"]),
        (dict(out=np.zeros((4, 4, 3), np.uint16)), ValueError,
         ["out", "shape (4, 4, 3) and dtype uint8", "dtype uint16"]),
        (dict(img=np.zeros((2, 6, 6), np.float16), layout="CHW", out=np.zeros((2, 4, 4), np.float32)),
         ValueError, ["out", "shape (2, 4, 4) and dtype float16", "dtype float32"]),
        (dict(out=[[0]]), TypeError, ["out", "expected a numpy.ndarray", "builtins.list"]),
    ],
)
def test_bad_input(kwargs, exc, words):
    args = dict(img=np.zeros((6, 6, 3), np.uint8), size=(4, 4))
    args.update(kwargs)
    img, size = args.pop("img"), args.pop("size")
    with pytest.raises(exc) as info:
        cupyprep.resize(img, size, **args)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# --- kernels (emulated on the CPU in CI; on a GPU with -m gpu) ------------------------------
def check_kernel(kernels, img, size, mode, layout="HWC", exact=False):
    """Resize on the kernel side into a poisoned output; compare with cv2 per image (bit for
    bit with ``exact``, else by assert_matches_opencv)."""
    batched = img.ndim == 4
    chw = layout in ("CHW", "NCHW")
    hwc = img.transpose(0, 2, 3, 1) if chw and batched else (img.transpose(1, 2, 0) if chw else img)
    images = hwc if batched else hwc[None]
    with ipp(False):
        ref = np.stack([cv2_resize(np.ascontiguousarray(i), size, mode) for i in images]) \
            if len(images) else np.zeros((0,) + size + images.shape[3:], img.dtype)
    if not batched:
        ref = ref[0]
    if chw:
        ref = ref.transpose(0, 3, 1, 2) if batched else ref.transpose(2, 0, 1)
    out = kernels.poisoned(ref.shape, img.dtype)
    res = cupyprep.resize(kernels.put(img) if isinstance(img, np.ndarray) else img, size,
                          interpolation=mode, layout=layout, out=out)
    assert res is out
    got = kernels.get(res)
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        assert_matches_opencv(got, ref, mode)
    return got


def assert_matches_opencv(got, ref, mode):
    """Integer-only OpenCV paths (nearest; uint8 linear's fixed point) are reproduced bit
    for bit on any machine. OpenCV's float paths run SIMD code picked at run time for the
    CPU (SSE, AVX2 with FMA, AVX-512): the kernels follow its unfused operation order, which
    is bit-exact against OpenCV on a CPU where that order runs (seen on CI's machine: 0
    mismatches), and where OpenCV's dispatch fuses multiply-adds results move by float32
    rounding, so integers may differ by 1, float32 by a few ulp of the value, and float16
    (OpenCV's float32 resize rounded once) by one float16 ulp of the value: float32 results
    a few float32 ulps apart round to the same float16 or to neighbouring ones."""
    if mode == "nearest" or (mode == "linear" and got.dtype == np.uint8):
        np.testing.assert_array_equal(got, ref)
    elif got.dtype.kind == "u":
        assert_close(got, ref, atol=1, reason="OpenCV's CPU-dependent float rounding (docstring)")
    elif got.dtype == np.float16:
        assert got.shape == ref.shape, (got.shape, ref.shape)
        assert not np.isnan(got).any(), "NaN in the result (an element the kernel did not write?)"
        # one float16 ulp of each reference value (np.spacing of a float16 is its ulp)
        ulp = np.spacing(np.abs(ref.astype(np.float16))).astype(np.float64)
        far = np.abs(got.astype(np.float64) - ref.astype(np.float64)) > ulp
        assert not far.any(), (f"{far.sum()} elements more than one float16 ulp apart, the first "
                               f"at {tuple(np.argwhere(far)[0])}: {got[far][0]} vs {ref[far][0]}")
    else:
        scale = max(1.0, float(np.abs(ref.astype(np.float64)).max()) if ref.size else 1.0)
        assert_close(got, ref, atol=4 * 2.0 ** -23 * scale,
                     reason="OpenCV's CPU-dependent float rounding (docstring)")


@pytest.mark.parametrize("mode", KERNEL_MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_matches_cv2(kernels, mode, dtype, channels):
    rng = np.random.default_rng(channels)
    cases = [((13, 17), (29, 11)), ((32, 32), (16, 16)), ((1, 1), (3, 5)), ((9, 40), (9, 40))]
    if kernels.name == "gpu":
        cases += [((h, w), (max(1, int(h * fy)), max(1, int(w * fx))))
                  for h, w, fy, fx in zip(rng.integers(1, 300, 12), rng.integers(1, 300, 12),
                                          2.0 ** rng.uniform(-3, 3, 12), 2.0 ** rng.uniform(-3, 3, 12))]
    for src, dst in cases:
        img = random_image(rng, src + (channels,), dtype)
        check_kernel(kernels, img, dst, mode)


@pytest.mark.parametrize("mode", KERNEL_MODES)
def test_kernel_gray_2d_and_thin_images(kernels, mode):
    rng = np.random.default_rng(5)
    for src, dst in [((1, 37), (4, 9)), ((37, 1), (5, 3)), ((7, 9), (1, 1)), ((1, 1), (1, 1)),
                     ((64, 48), (8, 6)), ((6, 5), (48, 40))]:
        check_kernel(kernels, random_image(rng, src, np.uint8), dst, mode)


@pytest.mark.parametrize("mode", KERNEL_MODES)
def test_kernel_photograph(kernels, mode):
    img = photo("astronaut")  # 512x512x3
    if kernels.name == "emulated":
        img = img[100:161, 200:283]  # emulated kernels get a crop: same content, fewer threads
    for size in [(img.shape[0] // 3, img.shape[1] // 4), (img.shape[0] * 2 + 1, img.shape[1] + 7),
                 (img.shape[0] // 2, img.shape[1] // 2)]:
        check_kernel(kernels, img, size, mode)
    gray = photo("camera")
    if kernels.name == "emulated":
        gray = gray[:40, :50]
    check_kernel(kernels, gray, (gray.shape[0] // 8 + 1, gray.shape[1] * 3 // 5), mode)


@pytest.mark.parametrize("mode", KERNEL_MODES)
def test_kernel_layouts_and_views(kernels, mode):
    rng = np.random.default_rng(6)
    batch = random_image(rng, (3, 15, 22, 3), np.uint8)
    check_kernel(kernels, batch, (7, 30), mode)
    check_kernel(kernels, np.ascontiguousarray(batch.transpose(0, 3, 1, 2)), (7, 30), mode, "NCHW")
    check_kernel(kernels, np.ascontiguousarray(batch[0].transpose(2, 0, 1)), (7, 30), mode, "CHW")
    check_kernel(kernels, random_image(rng, (9, 11, 6), np.float32), (5, 4), mode)  # 6 channels
    check_kernel(kernels, np.zeros((0, 15, 22, 3), np.uint8), (7, 30), mode)  # empty batch
    # a strided, flipped view on the kernel side is read in place
    base = random_image(rng, (30, 44, 4), np.uint16)
    view = kernels.put(base)[::2, ::-3, :3]
    expect = base[::2, ::-3, :3]
    with ipp(False):
        ref = cv2_resize(np.ascontiguousarray(expect), (11, 13), mode)
    out = cupyprep.resize(view, (11, 13), interpolation=mode)
    assert_matches_opencv(kernels.get(out), ref, mode)


@pytest.mark.gpu
def test_gpu_float_matches_default_cv2_within_tolerance():
    """With IPP on (OpenCV's default), float32 and uint16 linear resizes run IPP, which
    takes source coordinates in double where OpenCV's own code rounds them to float32 (up
    to n * 2^-24 off on an n-pixel side, times a weight slope of at most 1 on each of two
    axes), and sums in its own order: 2 * n * 2^-24 of the value range, plus a float32
    rounding, plus 1 for integers (measured 2e-5 on a 203-pixel float32 side)."""
    import cupy

    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.uint16):
        img = random_image(rng, (97, 131, 3), dtype)
        ref = cv2_resize(img, (61, 203), "linear")
        got = cupy.asnumpy(cupyprep.resize(cupy.asarray(img), (61, 203)))
        value_range = float(np.ptp(img.astype(np.float64)))
        atol = 2 * 203 * 2.0 ** -24 * value_range + (1 if dtype == np.uint16 else 1e-6 * value_range)
        assert_close(got, ref, atol=atol, reason="IPP's coordinates and order (see docstring)")


@pytest.mark.gpu
def test_gpu_torch_zero_copy(torch_cuda, monkeypatch):
    """torch tensors cross without a copy: the kernel reads the input tensor's own memory
    (a strided view's too, at its offset and strides) and writes ``out``'s."""
    from cupyprep import _kernels

    torch = torch_cuda
    launches = []  # (file, source array, destination array) of every kernel launch
    get_function = _kernels.get_function

    def spy(filename, expr):
        fn = get_function(filename, expr)

        def launch(grid, block, args, *rest, **kw):
            launches.append((filename, args[0], args[1]))
            return fn(grid, block, args, *rest, **kw)

        return launch

    monkeypatch.setattr(_kernels, "get_function", spy)
    img = random_image(np.random.default_rng(8), (2, 40, 50, 3), np.uint8)
    t = torch.from_numpy(img).cuda()
    out = torch.full((2, 20, 25, 3), 7, dtype=torch.uint8, device="cuda")
    res = cupyprep.resize(t, (20, 25), out=out)
    assert res is out
    assert [f for f, _, _ in launches] == ["resize.cu"]
    _, src, dst = launches.pop()
    assert src.data.ptr == t.data_ptr() and dst.data.ptr == out.data_ptr()
    fresh = cupyprep.resize(t, (20, 25))
    assert isinstance(fresh, torch.Tensor) and fresh.is_cuda
    assert [f for f, _, _ in launches] == ["resize.cu"]
    _, src, dst = launches.pop()
    assert src.data.ptr == t.data_ptr() and dst.data.ptr == fresh.data_ptr()
    ref = np.stack([cv2_resize(i, (20, 25), "linear") for i in img])
    np.testing.assert_array_equal(fresh.cpu().numpy(), ref)
    np.testing.assert_array_equal(res.cpu().numpy(), ref)
    view = t[:, 3::2, 1::3]  # an offset, every other row, every third column
    got = cupyprep.resize(view, (11, 13))
    assert [f for f, _, _ in launches] == ["resize.cu"]
    _, src, _ = launches.pop()
    assert src.data.ptr == view.data_ptr()
    assert src.strides == tuple(s * view.element_size() for s in view.stride())
    ref = np.stack([cv2_resize(np.ascontiguousarray(i), (11, 13), "linear") for i in img[:, 3::2, 1::3]])
    np.testing.assert_array_equal(got.cpu().numpy(), ref)


# --- cubic and area: each of OpenCV's algorithms, and the edges ----------------------------
def area_kernel(src_hw, dst_hw):
    """The area kernel a resize runs (so each test below provably reaches its regime)."""
    from cupyprep._resizing import area_kernel as _area_kernel
    from cupyprep._resizing import resize_scale as _scale

    return _area_kernel(_scale(src_hw[0], dst_hw[0]), _scale(src_hw[1], dst_hw[1]))[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_area_integer_factors(kernels, dtype, channels):
    """Whole-cell means: factors 2, 3 and 4 on both axes (2x2 has its own arithmetic: for
    integers 2 channels round ties to even where the others round them up, and odd output
    widths leave float 2x2 a scalar tail), factor 1, and a uint16 cell whose float32 sum
    passes 2^24."""
    rng = np.random.default_rng(10 + channels)
    factors = [(fy, fx) for fy in (2, 3, 4) for fx in (2, 3, 4)] + [(1, 1), (1, 3), (17, 17)]
    for fy, fx in factors:
        dst = (2, 3) if fy == 17 else (5, 7)
        src = (dst[0] * fy, dst[1] * fx)
        assert area_kernel(src, dst) == "area_fast"
        img = random_image(rng, src + (channels,), dtype)
        if fy == 17 and dtype == np.uint16:
            img[...] = rng.integers(65000, 65536, img.shape)
        # uint8 cells are summed in int32 and multiplied once: no float order to differ in
        check_kernel(kernels, img, dst, "area", exact=dtype == np.uint8)


# Whole-cell means of pixels of more than 4 channels: OpenCV's integer 2x2 vector path (ties
# rounded up) takes only 1, 3 or 4 channels, its float one 1 or 4; wider pixels take its general
# loop, which sums in order and rounds ties to even, plane by plane or not. Factors 2x2 (area,
# and linear at exactly 2x, which cv2.resize runs as area), 3x3 and 3x2.
WIDE_CELL_CASES = [((10, 14), (5, 7), "area"), ((10, 14), (5, 7), "linear"), ((15, 21), (5, 7), "area"),
                   ((10, 21), (5, 7), "area")]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
@pytest.mark.parametrize("channels", [5, 6, 7, 8])
def test_cpu_many_channels_cell_means_match_cv2(dtype, channels):
    rng = np.random.default_rng(30 + channels)
    for src, dst, mode in WIDE_CELL_CASES:
        img = random_image(rng, src + (channels,), dtype)  # a quarter of 2x2 sums tie
        with ipp(False):
            ref = cv2.resize(img, dst[::-1], interpolation=FLAGS[mode])
        np.testing.assert_array_equal(cupyprep.resize(img, dst, interpolation=mode), ref,
                                      err_msg=f"{src} -> {dst} {mode}")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
@pytest.mark.parametrize("channels", [5, 6, 7, 8])
def test_kernel_many_channels_cell_means_match_cv2(kernels, dtype, channels):
    """cv2.resize itself on the whole image, not plane by plane: integers bit for bit."""
    rng = np.random.default_rng(30 + channels)
    for src, dst, mode in WIDE_CELL_CASES:
        img = random_image(rng, src + (channels,), dtype)  # a quarter of 2x2 sums tie
        with ipp(False):
            ref = cv2.resize(img, dst[::-1], interpolation=FLAGS[mode])
        out = kernels.poisoned(ref.shape, img.dtype)
        got = kernels.get(cupyprep.resize(kernels.put(img), dst, interpolation=mode, out=out))
        if dtype == np.float32:
            assert_matches_opencv(got, ref, mode)
        else:
            np.testing.assert_array_equal(got, ref, err_msg=f"{src} -> {dst} {mode}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_area_weighted_and_upscale(kernels, dtype, channels):
    """Non-integer downscales (weighted cells, also with one axis integer or unchanged),
    upscales, and one axis up with the other down."""
    rng = np.random.default_rng(20 + channels)
    cases = {
        "area_weighted": [((23, 31), (10, 13)), ((20, 31), (10, 13)), ((20, 31), (20, 13)),
                          ((100, 37), (33, 12)), ((9, 9), (2, 2)), ((7, 9), (2, 1))],
        "area_up": [((7, 9), (20, 31)), ((3, 4), (7, 11)), ((1, 1), (3, 5)),
                    ((7, 40), (20, 13)), ((40, 7), (13, 20)), ((10, 10), (10, 11))],
    }
    for kernel, pairs in cases.items():
        for src, dst in pairs:
            assert area_kernel(src, dst) == kernel
            check_kernel(kernels, random_image(rng, src + (channels,), dtype), dst, "area")


@pytest.mark.parametrize("mode", ["cubic", "area"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_thin_images_and_edges(kernels, mode, dtype):
    """1x1, 1xN, Nx1 and 2- or 3-pixel sides, where cubic's taps and area's cells reach
    past the border; odd output widths put elements in OpenCV's scalar tail for every
    channel count."""
    rng = np.random.default_rng(30)
    pairs = [((1, 1), (1, 1)), ((1, 1), (4, 3)), ((1, 37), (4, 9)), ((37, 1), (5, 3)),
             ((1, 40), (1, 7)), ((40, 1), (9, 1)), ((2, 3), (9, 11)), ((3, 2), (1, 1)),
             ((5, 4), (2, 1)), ((64, 3), (5, 40)), ((6, 5), (48, 40))]
    for src, dst in pairs:
        check_kernel(kernels, random_image(rng, src, dtype), dst, mode)
        for channels in (1, 2, 3, 4):
            check_kernel(kernels, random_image(rng, src + (channels,), dtype), dst, mode)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_kernel_cubic_area_cv2compat_factors(kernels, dtype):
    """With fx / fy the step is 1 / fx, not src / dst: area's integer cells can then run
    past the image (an odd side halved), and the weighted and upscale regimes take their
    coordinates from the factors."""
    from cupyprep import cv2compat

    rng = np.random.default_rng(40)
    for shape in [(7, 9, 3), (9, 7), (5, 11, 4)]:
        img = random_image(rng, shape, dtype)
        for fx, fy in [(0.5, 0.5), (1 / 3, 0.5), (0.4, 0.7), (2.5, 1.5), (0.5, 2.0)]:
            for flag in (cv2.INTER_AREA, cv2.INTER_CUBIC):
                with ipp(False):
                    ref = cv2.resize(img, None, fx=fx, fy=fy, interpolation=flag)
                got = cv2compat.resize(kernels.put(img), None, fx=fx, fy=fy, interpolation=flag)
                np.testing.assert_array_equal(kernels.get(got), ref,
                                              err_msg=f"{shape} fx={fx} fy={fy} flag={flag}")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["cubic", "area"])
def test_gpu_matches_default_cv2(mode):
    """Against cv2 as shipped (IPP on). IPP takes no INTER_AREA, so area stays exact. It
    does take cubic resizes of 1-, 3- and 4-channel images of at least 4x4, and computes
    them more accurately than OpenCV's own code, which rounds the source coordinate to
    float32 before taking the weights: that is up to n * 2^-24 off on an n-pixel side, and
    the cubic weights' slopes add up to at most 3 on each of the two axes, so the two
    differ by up to 6 * n * 2^-24 of the value range, plus one for integer rounding
    (measured with OpenCV 5.0 on x86-64: uint8 1 on about 4% of pixels, uint16 2 at a few
    hundred pixels, float32 1.3 * n * 2^-24 of the range)."""
    import cupy

    rng = np.random.default_rng(50)
    for dtype in (np.uint8, np.uint16, np.float32):
        for shape, size in [((97, 131, 3), (61, 203)), ((240, 320), (100, 150)),
                            ((50, 64, 4), (200, 256)), ((31, 17, 2), (12, 40))]:
            img = random_image(rng, shape, dtype)
            ref = cv2_resize(img, size, mode)
            got = cupy.asnumpy(cupyprep.resize(cupy.asarray(img), size, interpolation=mode))
            if mode == "area":
                np.testing.assert_array_equal(got, ref)
                continue
            value_range = float(np.ptp(img.astype(np.float64)))
            atol = 6 * max(shape[:2]) * 2.0 ** -24 * value_range
            atol += 1 if np.dtype(dtype).kind == "u" else 1e-6 * value_range
            assert_close(got, ref, atol=atol, reason="IPP's cubic coordinates (see docstring)")
