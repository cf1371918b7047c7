"""swap_rb / to_gray and the cv2compat wrappers, against cv2.cvtColor / cv2.resize."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import assert_close, photo, random_image
from cupyprep import cv2compat

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
        if name.isupper():
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
