"""gaussian_blur and box_filter: the CPU backend (cv2 itself) through the public API, OpenCV's
kernel tables, and the kernels against cv2.GaussianBlur / cv2.boxFilter."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, photo, random_image

import cupyprep
from cupyprep import cv2compat
from cupyprep.cpu import filter as cpu_filter

cv2 = pytest.importorskip("cv2")

BORDERS = {"reflect101": cv2.BORDER_REFLECT_101, "replicate": cv2.BORDER_REPLICATE,
           "reflect": cv2.BORDER_REFLECT, "constant": cv2.BORDER_CONSTANT}


def cv2_gaussian(img, ksize, sx, sy=0.0, border="reflect101"):
    """cv2.GaussianBlur on one HW / HWC image (float16 through float32)."""
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    res = cv2.GaussianBlur(np.ascontiguousarray(src), (ksize[1], ksize[0]), sigmaX=sx, sigmaY=sy,
                           borderType=BORDERS[border])
    return (res[:, :, None] if img.ndim == 3 and res.ndim == 2 else res).astype(img.dtype)


def cv2_box(img, ksize, normalize=True, anchor=(-1, -1), border="reflect101"):
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    res = cv2.boxFilter(np.ascontiguousarray(src), -1, (ksize[1], ksize[0]), anchor=(anchor[1], anchor[0]),
                        normalize=normalize, borderType=BORDERS[border])
    return (res[:, :, None] if img.ndim == 3 and res.ndim == 2 else res).astype(img.dtype)


# --- OpenCV's kernel tables (CI) --------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 5, 7, 9, 11, 15, 31])
@pytest.mark.parametrize("sigma", [0.0, 0.5, 0.8, 1.3, 2.0, 5.0])
def test_gaussian_fixed_point_weights(n, sigma):
    """8 and 16 fractional bits summing to exactly 1, each within one unit of the float
    weight (the rounding error is carried from tap to tap), symmetric."""
    k = cv2.getGaussianKernel(n, sigma, cv2.CV_64F)[:, 0]
    np.testing.assert_array_equal(cpu_filter.gaussian_kernel(n, sigma), k)
    for bits in (8, 16):
        fixed = cpu_filter.gaussian_fixed(n, sigma, bits)
        assert fixed.sum() == 1 << bits
        np.testing.assert_array_equal(fixed, fixed[::-1])
        assert np.abs(fixed - k * (1 << bits)).max() <= 1.0


def test_gaussian_ksize_from_sigma():
    # OpenCV: round(sigma * 3 * 2 + 1) | 1 for uint8, * 4 otherwise; a given size is kept
    assert cpu_filter.gaussian_ksize(0, 1.0, np.uint8) == 7
    assert cpu_filter.gaussian_ksize(0, 1.0, np.float32) == 9
    assert cpu_filter.gaussian_ksize(0, 0.7, np.uint8) == 5
    assert cpu_filter.gaussian_ksize(5, 3.0, np.uint8) == 5


# --- CPU backend (CI) ---------------------------------------------------------------------
@pytest.mark.parametrize("border", list(BORDERS))
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32])
def test_cpu_matches_cv2(border, dtype):
    rng = np.random.default_rng(0)
    img = random_image(rng, (23, 31, 3), dtype)
    np.testing.assert_array_equal(cupyprep.gaussian_blur(img, (5, 3), 1.1, 0.7, border=border),
                                  cv2_gaussian(img, (5, 3), 1.1, 0.7, border))
    np.testing.assert_array_equal(cupyprep.box_filter(img, (4, 3), border=border),
                                  cv2_box(img, (4, 3), border=border))


def test_cpu_layouts_lists_and_channels():
    rng = np.random.default_rng(1)
    batch = random_image(rng, (2, 19, 23, 3), np.uint8)
    res = cupyprep.gaussian_blur(batch, 5, 1.0, layout="NHWC")
    for n in range(2):
        np.testing.assert_array_equal(res[n], cv2_gaussian(batch[n], (5, 5), 1.0))
    nchw = cupyprep.gaussian_blur(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)), 5, 1.0, layout="NCHW")
    np.testing.assert_array_equal(nchw, res.transpose(0, 3, 1, 2))
    frames = [batch[0], batch[1, :11, :7]]
    listed = cupyprep.box_filter(frames, 3)
    assert isinstance(listed, list)
    for got, f in zip(listed, frames):
        np.testing.assert_array_equal(got, cv2_box(f, (3, 3)))
    wide = random_image(rng, (9, 8, 6), np.uint8)  # OpenCV takes at most 4 channels a call
    np.testing.assert_array_equal(cupyprep.gaussian_blur(wide, 3, 0.0)[:, :, 4:],
                                  cv2_gaussian(np.ascontiguousarray(wide[:, :, 4:]), (3, 3), 0.0))
    assert cupyprep.box_filter(batch[:0], 3, layout="NHWC").shape == (0, 19, 23, 3)
    torch = pytest.importorskip("torch")
    t = cupyprep.gaussian_blur(torch.from_numpy(batch[0]), 3, 0.8)
    assert isinstance(t, torch.Tensor)
    np.testing.assert_array_equal(t.numpy(), cv2_gaussian(batch[0], (3, 3), 0.8))


def test_cv2compat_on_numpy():
    img = random_image(np.random.default_rng(2), (17, 22, 3), np.uint8)
    np.testing.assert_array_equal(cv2compat.GaussianBlur(img, (5, 3), 1.5),
                                  cv2.GaussianBlur(img, (5, 3), 1.5))
    np.testing.assert_array_equal(cv2compat.blur(img, (4, 2), anchor=(0, 1)),
                                  cv2.blur(img, (4, 2), anchor=(0, 1)))
    np.testing.assert_array_equal(cv2compat.boxFilter(img, -1, (3, 5), normalize=False,
                                                      borderType=cv2compat.BORDER_REPLICATE),
                                  cv2.boxFilter(img, -1, (3, 5), normalize=False,
                                                borderType=cv2.BORDER_REPLICATE))


@pytest.mark.parametrize("call,exc,words", [
    (lambda im: cupyprep.gaussian_blur(im, 4, 1.0), ValueError, "ksize: expected odd"),
    (lambda im: cupyprep.gaussian_blur(im, 0, 0.0), ValueError, "ksize: expected odd"),
    (lambda im: cupyprep.gaussian_blur(im, (3, 3.5), 1.0), TypeError, "ksize: expected an int"),
    (lambda im: cupyprep.gaussian_blur(im, 3, float("nan")), ValueError, "sigma_x: expected a finite"),
    (lambda im: cupyprep.gaussian_blur(im, 3, 1.0, border="wrap"), ValueError, "no 'wrap' border"),
    (lambda im: cupyprep.box_filter(im, 0), ValueError, "ksize: expected positive"),
    (lambda im: cupyprep.box_filter(im, 3, anchor=(3, 0)), ValueError, "anchor: expected a point"),
    (lambda im: cupyprep.box_filter(im, 3, normalize=1), TypeError, "normalize: expected True"),
    (lambda im: cupyprep.box_filter(im.astype(np.int32), 3), TypeError, "img: expected dtype"),
    (lambda im: cupyprep.box_filter([im, im], 3, out=im), ValueError, "out: expected a list"),
    (lambda im: cv2compat.blur(im, (3, 3), borderType=cv2compat.BORDER_WRAP), ValueError, "BORDER_WRAP"),
    (lambda im: cv2compat.boxFilter(im, cv2.CV_32F, (3, 3)), ValueError, "ddepth: expected -1"),
])
def test_bad_input(call, exc, words):
    with pytest.raises(exc, match=words):
        call(np.zeros((8, 9, 3), np.uint8))


# --- kernels (emulated on the CPU in CI; on a GPU with -m gpu) ------------------------------
# float32: OpenCV's float code sums the same products in other orders (and fused or not, by
# CPU): within 1e-5 of the values' magnitude
FLOAT_ATOL = {np.dtype(np.float32): 1e-5 * 2, np.dtype(np.float16): 2.0 ** -10}


def check(kernels, op, img, ref, **kwargs):
    out = kernels.poisoned(img.shape, img.dtype)
    res = op(kernels.put(img), out=out, **kwargs)
    assert res is out
    got = kernels.get(res)
    if img.dtype.kind == "f":
        assert_close(got, ref, atol=FLOAT_ATOL[img.dtype], reason="OpenCV's float summation order")
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("border", list(BORDERS))
def test_kernel_every_border_uint8(kernels, border):
    rng = np.random.default_rng(3)
    img = random_image(rng, (21, 26, 3), np.uint8)
    for ksize, sx, sy in [((5, 5), 0.0, 0.0), ((3, 7), 1.3, 0.6), ((0, 0), 1.1, 0.0), ((9, 9), 0.0, 0.0)]:
        check(kernels, cupyprep.gaussian_blur, img, cv2_gaussian(img, ksize, sx, sy, border),
              ksize=ksize, sigma_x=sx, sigma_y=sy, border=border)
    for ksize, anchor in [((5, 5), (-1, -1)), ((2, 4), (0, 3)), ((16, 17), (-1, -1))]:
        check(kernels, cupyprep.box_filter, img, cv2_box(img, ksize, True, anchor, border),
              ksize=ksize, anchor=anchor, border=border)
    check(kernels, cupyprep.box_filter, img, cv2_box(img, (3, 3), False, border=border),
          ksize=3, normalize=False, border=border)


@pytest.mark.parametrize("dtype", [np.uint16, np.float16, np.float32])
def test_kernel_other_dtypes(kernels, dtype):
    rng = np.random.default_rng(4)
    img = random_image(rng, (2, 17, 20, 3), dtype)
    ref = np.stack([cv2_gaussian(im, (7, 5), 1.4, 0.9) for im in img])
    check(kernels, cupyprep.gaussian_blur, img, ref, ksize=(7, 5), sigma_x=1.4, sigma_y=0.9, layout="NHWC")
    ref = np.stack([cv2_box(im, (5, 5)) for im in img])
    out = kernels.poisoned(img.shape, dtype)
    got = kernels.get(cupyprep.box_filter(kernels.put(img), 5, layout="NHWC", out=out))
    if dtype == np.uint16:
        # OpenCV rounds the mean of the last few elements of each row in double and of the
        # others in float32 (its vector code, which the kernels follow): the two can differ
        # by 1 where the mean is within float32 rounding of a half
        diff = np.abs(got.astype(np.int64) - ref)
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    else:
        assert_close(got, ref, atol=FLOAT_ATOL[np.dtype(dtype)], reason="OpenCV's float summation order")


def test_kernel_odd_shapes_and_views(kernels):
    rng = np.random.default_rng(5)
    for shape in [(1, 1, 3), (1, 9, 3), (9, 1, 3), (2, 3, 3), (4, 5, 3)]:
        img = random_image(rng, shape, np.uint8)
        for border in ("reflect101", "constant"):
            check(kernels, cupyprep.gaussian_blur, img, cv2_gaussian(img, (7, 5), 0.0, 0.0, border),
                  ksize=(7, 5), sigma_x=0.0, border=border)
            check(kernels, cupyprep.box_filter, img, cv2_box(img, (6, 7), border=border),
                  ksize=(6, 7), border=border)
    base = random_image(rng, (30, 40, 4), np.uint8)
    view = base[2:27:2, 38:3:-3, :3]  # negative and uneven strides, read in place
    check(kernels, cupyprep.gaussian_blur, view, cv2_gaussian(view, (5, 5), 1.0), ksize=5, sigma_x=1.0)
    gray = base[:, :, 1]
    check(kernels, cupyprep.box_filter, gray, cv2_box(gray, (3, 5)), ksize=(3, 5))
    chw = np.ascontiguousarray(base.transpose(2, 0, 1))
    ref = np.stack([cv2_gaussian(chw[c], (3, 3), 0.0) for c in range(4)])
    check(kernels, cupyprep.gaussian_blur, chw, ref, ksize=3, sigma_x=0.0, layout="CHW")
    empty = random_image(rng, (0, 5, 6, 3), np.uint8)
    res = cupyprep.box_filter(kernels.put(empty), 3, layout="NHWC")
    assert kernels.get(res).shape == (0, 5, 6, 3)


def test_kernel_in_place_list_and_cv2compat(kernels):
    rng = np.random.default_rng(6)
    img = random_image(rng, (15, 18, 3), np.uint8)
    dev = kernels.put(img)
    res = cupyprep.gaussian_blur(dev, 5, 1.2, out=dev)
    assert res is dev
    np.testing.assert_array_equal(kernels.get(dev), cv2_gaussian(img, (5, 5), 1.2))
    frames = [img, img[:7, :11]]
    got = cupyprep.box_filter([kernels.put(f) for f in frames], (3, 2))
    for g, f in zip(got, frames):
        np.testing.assert_array_equal(kernels.get(g), cv2_box(f, (3, 2)))
    np.testing.assert_array_equal(kernels.get(cv2compat.GaussianBlur(kernels.put(img), (3, 5), 0.9)),
                                  cv2.GaussianBlur(img, (3, 5), 0.9))
    np.testing.assert_array_equal(kernels.get(cv2compat.blur(kernels.put(img), (5, 3))),
                                  cv2.blur(img, (5, 3)))


def test_kernel_photograph(kernels):
    img = photo()
    if kernels.name == "emulated":
        img = img[100:161, 200:283]  # fewer threads on the emulator, the same content
    check(kernels, cupyprep.gaussian_blur, img, cv2_gaussian(img, (5, 5), 0.0), ksize=5, sigma_x=0.0)
    check(kernels, cupyprep.box_filter, img, cv2_box(img, (5, 5)), ksize=5)
    f = img.astype(np.float32) / 255
    check(kernels, cupyprep.gaussian_blur, f, cv2_gaussian(f, (0, 0), 2.0), ksize=0, sigma_x=2.0)


@pytest.mark.gpu
def test_gpu_torch_and_torchvision(torch_cuda):
    """A torch CUDA tensor in, the same out, equal to OpenCV; torchvision's gaussian_blur
    (float weights, reflect padding, rounded) differs from OpenCV's 8-bit fixed-point
    weights by at most 255 times the weights' total quantization error, plus the rounding.
    Prints the measured max and mean difference."""
    img = photo()
    t = torch_cuda.from_numpy(img).cuda()
    res = cupyprep.gaussian_blur(t, 5, 1.5)
    assert isinstance(res, torch_cuda.Tensor) and res.is_cuda
    np.testing.assert_array_equal(res.cpu().numpy(), cv2_gaussian(img, (5, 5), 1.5))
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    tv = F.gaussian_blur(t.permute(2, 0, 1), [5, 5], [1.5, 1.5]).permute(1, 2, 0)
    diff = (tv.int() - res.int()).abs()
    print(f"gaussian_blur 5x5 against torchvision: max {int(diff.max())} mean {float(diff.float().mean()):.5f}")
    quantization = np.abs(cpu_filter.gaussian_fixed(5, 1.5, 8) / 256 - cpu_filter.gaussian_kernel(5, 1.5)).sum()
    assert int(diff.max()) <= int(np.ceil(255 * 2 * quantization + 1))
