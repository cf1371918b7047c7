"""swap_rb / to_gray and the cv2compat wrappers, against cv2.cvtColor / cv2.resize."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import assert_close, photo, random_image
from cupyprep import cv2compat
from cupyprep.color import CVT_CODES as CODES_OF_CVT_COLOR

cv2 = pytest.importorskip("cv2")
DTYPES = [np.uint8, np.uint16, np.float16, np.float32]


def cv2_gray(img, order):
    code = {("bgr", 3): cv2.COLOR_BGR2GRAY, ("rgb", 3): cv2.COLOR_RGB2GRAY,
            ("bgr", 4): cv2.COLOR_BGRA2GRAY, ("rgb", 4): cv2.COLOR_RGBA2GRAY}[(order, img.shape[-1])]
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    return cv2.cvtColor(src, code).astype(img.dtype)


def cv2_swap(img):
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    return cv2.cvtColor(src, cv2.COLOR_BGR2RGB).astype(img.dtype)


def each_image(fn, img):
    """``fn`` of a contiguous copy of an HWC image, or of each image of an NHWC batch
    (an empty batch: the shape ``fn`` would give each image, without pixels)."""
    if img.ndim == 3:
        return fn(np.ascontiguousarray(img))
    if len(img) == 0:
        return np.zeros((0,) + fn(np.zeros(img.shape[1:], img.dtype)).shape, img.dtype)
    return np.stack([fn(np.ascontiguousarray(i)) for i in img])


def test_constants_are_opencvs():
    for name in cv2compat.__all__:
        if not callable(getattr(cv2compat, name)):  # GaussianBlur & co. are functions
            assert getattr(cv2compat, name) == getattr(cv2, name), name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [3, 4])
def test_cpu_color(dtype, channels):
    img = random_image(np.random.default_rng(0), (2, 9, 11, channels), dtype)
    np.testing.assert_array_equal(cupyprep.swap_rb(img), img[..., [2, 1, 0] + [3] * (channels == 4)])
    for order in ("bgr", "rgb"):
        np.testing.assert_array_equal(cupyprep.to_gray(img[0], order=order), cv2_gray(img[0], order))
        batch = cupyprep.to_gray(img, order=order)
        assert batch.shape == (2, 9, 11) and batch.dtype == img.dtype
        for got, one in zip(batch, img):
            np.testing.assert_array_equal(got, cv2_gray(one, order))


def test_cv2compat_on_numpy_is_cv2():
    img = photo("astronaut")
    np.testing.assert_array_equal(cv2compat.resize(img, (100, 60)), cv2.resize(img, (100, 60)))
    np.testing.assert_array_equal(cv2compat.resize(img, None, fx=0.3, fy=0.7, interpolation=cv2compat.INTER_NEAREST),
                                  cv2.resize(img, None, fx=0.3, fy=0.7, interpolation=cv2.INTER_NEAREST))
    np.testing.assert_array_equal(cv2compat.cvtColor(img, cv2compat.COLOR_BGR2RGB), cv2.cvtColor(img, cv2.COLOR_BGR2RGB))
    np.testing.assert_array_equal(cv2compat.cvtColor(img, cv2compat.COLOR_RGB2GRAY), cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: cupyprep.swap_rb(np.zeros((4, 4), np.uint8)), ValueError, ["img", "3 or 4"]),
        (lambda: cupyprep.to_gray(np.zeros((4, 4, 3), np.uint8), order="bgra"), ValueError, ["order"]),
        (lambda: cupyprep.to_gray(np.zeros((4, 4, 3), np.int16)), TypeError, ["img", "int16"]),
        (lambda: cv2compat.cvtColor(np.zeros((4, 4, 3), np.uint8), 99), ValueError, ["code", "99"]),
        (lambda: cv2compat.cvtColor(np.zeros((4, 4, 3), np.uint8), cv2compat.COLOR_BGRA2GRAY), ValueError, ["src", "4"]),
        (lambda: cv2compat.resize(np.zeros((4, 4, 3), np.uint8), (2, 2), interpolation=7), ValueError, ["interpolation"]),
        (lambda: cupyprep.swap_rb(np.zeros((4, 4, 3), np.uint8), out=np.zeros((4, 4, 3), np.float32)), ValueError,
         ["out", "shape (4, 4, 3) and dtype uint8", "dtype float32"]),
        (lambda: cupyprep.swap_rb(np.zeros((2, 4, 4, 4), np.uint16), out=np.zeros((2, 4, 4, 3), np.uint16)),
         ValueError, ["out", "shape (2, 4, 4, 4) and dtype uint16", "shape (2, 4, 4, 3)"]),
        (lambda: cupyprep.to_gray(np.zeros((4, 4, 3), np.uint8), out=np.zeros((4, 4, 3), np.uint8)), ValueError,
         ["out", "shape (4, 4) and dtype uint8", "shape (4, 4, 3)"]),
        (lambda: cupyprep.to_gray(np.zeros((2, 4, 4, 3), np.float32), out=np.zeros((2, 4, 4), np.float16)),
         ValueError, ["out", "shape (2, 4, 4) and dtype float32", "dtype float16"]),
        (lambda: cupyprep.to_gray(np.zeros((4, 4, 3), np.uint8), out=[[0]]), TypeError,
         ["out", "expected a numpy.ndarray", "builtins.list"]),
    ],
)
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value)


# --- kernels ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [3, 4])
def test_kernel_color(kernels, dtype, channels):
    rng = np.random.default_rng(channels)
    img = random_image(rng, (2, 7, 13, channels), dtype)
    if dtype == np.float16:
        img = np.abs(img)
    out = kernels.poisoned(img.shape, dtype)
    got = kernels.get(cupyprep.swap_rb(kernels.put(img), out=out))
    np.testing.assert_array_equal(got, img[..., [2, 1, 0] + [3] * (channels == 4)])
    for order in ("bgr", "rgb"):
        out = kernels.poisoned(img.shape[:3], dtype)
        got = kernels.get(cupyprep.to_gray(kernels.put(img), order=order, out=out))
        assert_gray(got, np.stack([cv2_gray(i, order) for i in img]))


def assert_gray(got, ref):
    """A kernel's gray against cv2's: integers bit for bit (OpenCV's fixed point)."""
    if got.dtype.kind == "u":
        np.testing.assert_array_equal(got, ref)
    else:
        # OpenCV's float gray runs vector code whose multiply-add order is its own; the
        # kernel sums B, G, R products in channel order: a float32 ulp or two apart
        assert_close(got, ref, atol=4e-7 if got.dtype == np.float32 else 2 ** -10,
                     reason="OpenCV's float summation order")


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_color_views_empty_and_one_pixel(kernels, dtype):
    """swap_rb and to_gray against cv2.cvtColor for a strided view read in place (every
    other row, reversed; every third column; the first 3 of 4 channels), an empty batch
    and a 1 x 1 image."""
    rng = np.random.default_rng(11)
    base = random_image(rng, (2, 9, 14, 4), dtype)
    one = random_image(rng, (1, 1, 3), dtype)
    if dtype == np.float16:
        base, one = np.abs(base), np.abs(one)
    empty = np.zeros((0, 5, 5, 3), dtype)
    cases = [(kernels.put(base)[:, ::-2, ::3, :3], base[:, ::-2, ::3, :3]),
             (kernels.put(empty), empty), (kernels.put(one), one)]
    for arg, host in cases:
        out = kernels.poisoned(host.shape, dtype)
        assert cupyprep.swap_rb(arg, out=out) is out
        np.testing.assert_array_equal(kernels.get(out), each_image(cv2_swap, host))
        for order in ("bgr", "rgb"):
            out = kernels.poisoned(host.shape[:-1], dtype)
            assert cupyprep.to_gray(arg, order=order, out=out) is out
            assert_gray(kernels.get(out), each_image(lambda i: cv2_gray(i, order), host))


def test_kernel_cv2compat_photo(kernels):
    img = photo("astronaut")[:45, :60]
    for code in (cv2compat.COLOR_BGR2RGB, cv2compat.COLOR_BGR2GRAY, cv2compat.COLOR_RGB2GRAY):
        np.testing.assert_array_equal(kernels.get(cv2compat.cvtColor(kernels.put(img), code)),
                                      cv2.cvtColor(img, code))
    np.testing.assert_array_equal(kernels.get(cv2compat.resize(kernels.put(img), (23, 17))),
                                  cv2.resize(img, (23, 17)))
    for fx, fy in [(0.3, 0.7), (2.5, 1.5), (1 / 3, 0.5)]:
        for flag in (cv2compat.INTER_LINEAR, cv2compat.INTER_NEAREST):
            np.testing.assert_array_equal(
                kernels.get(cv2compat.resize(kernels.put(img), None, fx=fx, fy=fy, interpolation=flag)),
                cv2.resize(img, None, fx=fx, fy=fy, interpolation=flag))


# --- cvt_color: HSV and YCrCb --------------------------------------------------------------
CVT_CODES = sorted(CODES_OF_CVT_COLOR)
CV2_CODE = {code: getattr(cv2, "COLOR_" + name) for code, name in {
    "bgr2hsv": "BGR2HSV", "rgb2hsv": "RGB2HSV", "bgr2hsv_full": "BGR2HSV_FULL",
    "rgb2hsv_full": "RGB2HSV_FULL", "hsv2bgr": "HSV2BGR", "hsv2rgb": "HSV2RGB",
    "hsv2bgr_full": "HSV2BGR_FULL", "hsv2rgb_full": "HSV2RGB_FULL", "bgr2ycrcb": "BGR2YCrCb",
    "rgb2ycrcb": "RGB2YCrCb", "ycrcb2bgr": "YCrCb2BGR", "ycrcb2rgb": "YCrCb2RGB"}.items()}


def cv2_cvt(img, code):
    """OpenCV's own code (IPP off) on each image: the reference of every cvt_color test."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        return each_image(lambda i: cv2.cvtColor(i, CV2_CODE[code]), img)
    finally:
        cv2.ipp.setUseIPP(before)


def color_input(rng, code, shape, dtype):
    """Pixels of the color space ``code`` converts from: BGR anywhere in range, or HSV /
    YCrCb values in their ranges (H below 180 or 256 for uint8, degrees for float32)."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        if code.startswith("hsv"):
            img[..., 0] = rng.integers(0, 256 if code.endswith("full") else 180, shape[:-1])
        return img
    img = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    if code.startswith("hsv"):
        img[..., 0] = rng.uniform(0.0, 360.0, shape[:-1])
    return img


def assert_cvt(got, ref, code):
    """uint8: bit for bit. float32: within 1e-5 of each channel's range (H: 360 degrees)."""
    if got.dtype == np.uint8:
        np.testing.assert_array_equal(got, ref)
        return
    span = np.array([360.0, 1.0, 1.0]) if code[3:].startswith("hsv") else 1.0
    # OpenCV's float code contracts other products into fused multiply-adds than the
    # kernels' and takes its scalar formula for a row's tail: a few float32 ulps of the range
    assert_close(got / span, ref / span, atol=1e-5, reason="float32 operation order, as documented")


def test_cpu_cvt_color_is_opencv():
    img = photo("astronaut")[::3, ::3]
    for code in CVT_CODES:
        src = color_input(np.random.default_rng(0), code, img.shape, np.uint8) if code.startswith(
            ("hsv", "ycrcb")) else img
        np.testing.assert_array_equal(cupyprep.cvt_color(src, code), cv2_cvt(src, code))
        np.testing.assert_array_equal(cupyprep.cvt_color(src[None], code)[0], cv2_cvt(src, code))
        np.testing.assert_array_equal(cv2compat.cvtColor(src, CV2_CODE[code]), cv2_cvt(src, code))


def test_cpu_cvt_color_hand_worked():
    px = np.array([[[255, 0, 0], [0, 0, 255], [10, 20, 30]]], np.uint8)  # BGR: blue, red
    hsv = cupyprep.cvt_color(px, "bgr2hsv")
    assert hsv[0, 0].tolist() == [120, 255, 255] and hsv[0, 1].tolist() == [0, 255, 255]
    assert cupyprep.cvt_color(px, "bgr2hsv_full")[0, 0].tolist() == [171, 255, 255]  # 240 / 360 * 256
    f = cupyprep.cvt_color(px.astype(np.float32) / 255, "bgr2hsv")
    np.testing.assert_allclose(f[0, 0], [240.0, 1.0, 1.0], rtol=1e-6)
    ycc = cupyprep.cvt_color(np.full((1, 1, 3), 77, np.uint8), "bgr2ycrcb")
    assert ycc.tolist() == [[[77, 128, 128]]]  # gray: no chroma


def test_opencv_hsv_block_is_what_opencv_does():
    """The probe's block: a row one pixel short of it takes scalar code only, a row of it
    takes vector code first (the pixel the probe uses converts differently in the two)."""
    from cupyprep import cpu

    block = cpu.opencv_hsv_block()
    assert block in (0, 4, 8, 16, 32, 64, 128)
    if block:
        px = np.array([0, 1, 1], np.uint8)
        long = cv2_cvt(np.tile(px, (1, block + 3, 1)), "hsv2bgr")[0]
        assert long[0].tolist() == [0, 0, 1] and long[-1].tolist() == [1, 1, 1]
        assert cv2_cvt(np.tile(px, (1, block - 1, 1)), "hsv2bgr")[0, 0].tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: cupyprep.cvt_color(np.zeros((4, 4, 3), np.uint8), "bgr2hls"), ValueError, ["code", "bgr2hls"]),
        (lambda: cupyprep.cvt_color(np.zeros((4, 4, 3), np.uint16), "bgr2hsv"), TypeError,
         ["img", "uint8 / float32", "uint16"]),
        (lambda: cupyprep.cvt_color(np.zeros((4, 4, 4), np.uint8), "hsv2bgr"), ValueError,
         ["img", "'hsv2bgr'", "3 channels", "(4, 4, 4)"]),
        (lambda: cupyprep.cvt_color(np.zeros((4, 4), np.uint8), "bgr2ycrcb"), ValueError,
         ["img", "3 or 4 channels"]),
        (lambda: cupyprep.cvt_color(np.zeros((0, 4, 3), np.uint8), "bgr2hsv"), ValueError,
         ["img", "non-empty"]),
        (lambda: cupyprep.cvt_color(np.zeros((4, 4, 3), np.uint8), "bgr2hsv", out=np.zeros((4, 4, 3), np.float32)),
         ValueError, ["out", "dtype uint8"]),
        (lambda: cv2compat.cvtColor(np.zeros((4, 4, 3), np.uint8), 999), ValueError, ["code", "HSV", "999"]),
    ],
)
def test_cvt_color_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_cvt_color_torch_cpu():
    torch = pytest.importorskip("torch")
    img = photo("astronaut")[:20, :30]
    got = cupyprep.cvt_color(torch.from_numpy(img), "rgb2hsv")
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), cv2_cvt(img, "rgb2hsv"))


@pytest.fixture
def opencv_block(monkeypatch):
    """The kernels' HSV -> BGR vector block set to this machine's OpenCV's, so a kernel
    and cv2.cvtColor here convert each pixel with the same code."""
    from conftest import tune

    from cupyprep import cpu
    from cupyprep._specs import color as color_spec

    tune(monkeypatch, color_spec, hsv_vector_block=cpu.opencv_hsv_block())


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("code", CVT_CODES)
def test_kernel_cvt_color(kernels, opencv_block, dtype, code):
    """Each code against cv2.cvtColor: a batch 3 rows by 2 blocks and 3 pixels wide (vector
    and scalar code in each row), BGRA where the code reads BGR, an out= buffer."""
    rng = np.random.default_rng(len(code))
    channels = 4 if code.startswith(("bgr", "rgb")) else 3
    img = color_input(rng, code, (2, 3, 131, channels), dtype)
    out = kernels.poisoned(img.shape[:3] + (3,), dtype)
    assert cupyprep.cvt_color(kernels.put(img), code, out=out) is out
    assert_cvt(kernels.get(out), cv2_cvt(img, code), code)


@pytest.mark.parametrize("code", ["bgr2hsv", "hsv2rgb_full", "rgb2ycrcb", "ycrcb2bgr"])
def test_kernel_cvt_color_views_empty_and_one_pixel(kernels, opencv_block, code):
    rng = np.random.default_rng(5)
    base = color_input(rng, code, (2, 9, 140, 3), np.uint8)
    one = color_input(rng, code, (1, 1, 3), np.uint8)
    empty = np.zeros((0, 5, 5, 3), np.uint8)
    cases = [(kernels.put(base)[:, ::-2, ::2], base[:, ::-2, ::2]), (kernels.put(empty), empty),
             (kernels.put(one), one)]
    for arg, host in cases:
        got = kernels.get(cupyprep.cvt_color(arg, code))
        np.testing.assert_array_equal(got, cv2_cvt(host, code))


@pytest.mark.parametrize("code", ["bgr2hsv", "hsv2bgr", "bgr2ycrcb", "ycrcb2bgr", "hsv2bgr_full"])
def test_kernel_cvt_color_photo_round_trip(kernels, opencv_block, code):
    """A photograph through a conversion and back: each step equal to OpenCV's."""
    img = photo("astronaut")[:64, :97]
    if code.startswith(("hsv", "ycrcb")):
        img = cv2_cvt(img, "bgr2" + code[: code.index("2")] + ("_full" if "full" in code else ""))
    got = kernels.get(cupyprep.cvt_color(kernels.put(img), code))
    np.testing.assert_array_equal(got, cv2_cvt(img, code))
    np.testing.assert_array_equal(kernels.get(cv2compat.cvtColor(kernels.put(img), CV2_CODE[code])), got)


@pytest.mark.gpu
@pytest.mark.parametrize("code", CVT_CODES)
def test_gpu_cvt_color_every_uint8_input(opencv_block, code):
    """Every uint8 pixel a code can take (all 2^24 BGR colors; all in-range HSV triples), in
    rows of 4069 pixels (63 blocks of 64 and a tail of 37: vector and scalar code alike),
    equal to OpenCV's."""
    import cupy

    if code.startswith("hsv"):
        hues = 256 if code.endswith("full") else 180
        h, s, v = np.meshgrid(np.arange(hues), np.arange(256), np.arange(256), indexing="ij")
        pixels = np.stack([h, s, v], -1).astype(np.uint8).reshape(-1, 3)
    else:
        pixels = np.arange(2**24, dtype=np.uint32).view(np.uint8).reshape(-1, 4)[:, :3]
    width = 4069
    pixels = np.concatenate([pixels, pixels[: -len(pixels) % width]])  # whole rows
    img = pixels.reshape(-1, width, 3)
    got = cupy.asnumpy(cupyprep.cvt_color(cupy.asarray(img), code))
    np.testing.assert_array_equal(got, cv2_cvt(img, code))


@pytest.mark.gpu
def test_gpu_cvt_color_torch(torch_cuda, opencv_block):
    """torch CUDA tensors in and out (zero-copy), a channels-first view read in place."""
    torch = torch_cuda
    img = photo("astronaut")[:50, :70]
    x = torch.from_numpy(img).cuda()
    got = cupyprep.cvt_color(x, "bgr2hsv")
    assert isinstance(got, torch.Tensor) and got.is_cuda
    np.testing.assert_array_equal(got.cpu().numpy(), cv2_cvt(img, "bgr2hsv"))
    planes = x.permute(2, 0, 1).contiguous().permute(1, 2, 0)  # HWC view of CHW memory
    back = cupyprep.cvt_color(cupyprep.cvt_color(planes, "rgb2ycrcb"), "ycrcb2rgb")
    np.testing.assert_array_equal(back.cpu().numpy(), cv2_cvt(cv2_cvt(img, "rgb2ycrcb"), "ycrcb2rgb"))
