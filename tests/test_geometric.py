"""flip, rotate90, pad / copy_make_border and crop: the CPU backend against NumPy and
OpenCV, and the kernels against the CPU backend (bit for bit: they copy pixels, and crop
runs resize's arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import photo, random_image, tune
from test_resize import assert_matches_opencv, ipp
from cupyprep import cv2compat
from cupyprep._specs import flip_pad as flip_pad_spec
from cupyprep.cpu.crop import box_bounds

cv2 = pytest.importorskip("cv2")

DTYPES = [np.uint8, np.uint16, np.float16, np.float32]
FLIP_CODES = {"horizontal": 1, "vertical": 0, "both": -1}
CV2_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
               "reflect": cv2.BORDER_REFLECT, "reflect101": cv2.BORDER_REFLECT_101,
               "wrap": cv2.BORDER_WRAP}
# OpenCV's border modes in np.pad's words: an independent statement of what each one is
NP_PAD_MODES = {"constant": "constant", "replicate": "edge", "reflect": "symmetric",
                "reflect101": "reflect", "wrap": "wrap"}
SHAPES = [(7, 9), (7, 9, 1), (5, 6, 2), (9, 4, 3), (3, 8, 4), (1, 1, 3), (1, 5), (6, 1, 4),
          (4, 5, 6)]


def np_flip(img, direction, axes=(0, 1)):
    if direction == "horizontal":
        return np.flip(img, axes[1])
    if direction == "vertical":
        return np.flip(img, axes[0])
    return np.flip(np.flip(img, axes[0]), axes[1])


def cv2_pad(img, sides, mode, value):
    """cv2.copyMakeBorder on one HW / HWC image (the channel axis kept)."""
    t, b, left, r = sides
    if np.ndim(value) == 0:
        value = (value,) * min(4, img.shape[2] if img.ndim == 3 else 1)
    scalar = tuple(value) + (0,) * (4 - len(value))
    res = cv2.copyMakeBorder(np.ascontiguousarray(img), t, b, left, r, CV2_BORDERS[mode], value=scalar)
    return res.reshape(res.shape[:2] + img.shape[2:])


# --- CPU backend (CI) ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_cpu_flip_and_rotate_are_numpy(dtype, shape):
    img = random_image(np.random.default_rng(0), shape, dtype)
    for direction in FLIP_CODES:
        res = cupyprep.flip(img, direction)
        assert res.dtype == img.dtype
        np.testing.assert_array_equal(res, np_flip(img, direction))
    for k in range(-5, 6):
        np.testing.assert_array_equal(cupyprep.rotate90(img, k), np.rot90(img, k))


@pytest.mark.parametrize("mode", list(CV2_BORDERS))
@pytest.mark.parametrize("shape", [(7, 9, 3), (1, 1, 2), (2, 3), (4, 5, 6)])
def test_cpu_pad_is_opencv_and_numpy(mode, shape):
    """Every border against cv2.copyMakeBorder and against np.pad's name for it, with
    borders wider than the image (periodic modes repeat)."""
    img = random_image(np.random.default_rng(1), shape, np.uint8)
    for sides in [(1, 2, 3, 4), (0, 0, 0, 0), (9, 0, 11, 2), (0, 5, 0, 0)]:
        value = 7 if len(shape) == 3 and shape[2] > 4 else (1, 2, 3, 4)[:shape[2] if len(shape) == 3 else 1]
        res = cupyprep.pad(img, sides, border_mode=mode, value=value)
        np.testing.assert_array_equal(res, cv2_pad(img, sides, mode, value))
        if mode != "constant" and (min(shape[:2]) > 1 or mode in ("replicate", "wrap")):
            t, b, left, r = sides
            widths = [(t, b), (left, r)] + [(0, 0)] * (img.ndim - 2)
            np.testing.assert_array_equal(res, np.pad(img, widths, mode=NP_PAD_MODES[mode]))


def test_cpu_pad_values_are_stored_as_opencv_stores_them():
    img = np.zeros((2, 2, 3), np.uint8)
    res = cupyprep.pad(img, 1, value=(2.5, 300, -4))  # half to even, saturated
    assert tuple(res[0, 0]) == (2, 255, 0)
    np.testing.assert_array_equal(res, cv2_pad(img, (1,) * 4, "constant", (2.5, 300, -4)))
    half = np.zeros((2, 2), np.float16)
    res = cupyprep.copy_make_border(half, 1, 0, 0, 1, "constant", 0.1)
    assert res[0, 0] == np.float16(np.float32(0.1))


def test_cpu_layouts_lists_torch_and_out():
    rng = np.random.default_rng(2)
    batch = random_image(rng, (3, 5, 7, 3), np.float32)
    chw = np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(cupyprep.flip(chw, "horizontal", layout="NCHW"), chw[..., ::-1])
    np.testing.assert_array_equal(cupyprep.rotate90(chw[0], layout="CHW"),
                                  np.rot90(chw[0], 1, axes=(1, 2)))
    np.testing.assert_array_equal(
        cupyprep.pad(chw, (1, 0, 2, 1), border_mode="reflect", layout="NCHW"),
        np.pad(chw, [(0, 0), (0, 0), (1, 0), (2, 1)], mode="symmetric"))
    images = [random_image(rng, s, np.uint8) for s in [(5, 7, 3), (2, 9, 3), (8, 1, 3)]]
    res = cupyprep.rotate90(images, 3)
    assert isinstance(res, list)
    for r, i in zip(res, images):
        np.testing.assert_array_equal(r, np.rot90(i, 3))
    out = np.zeros_like(batch)
    assert cupyprep.flip(batch, "vertical", out=out) is out
    np.testing.assert_array_equal(out, batch[:, ::-1])
    empty = np.zeros((0, 5, 7, 3), np.uint8)
    assert cupyprep.pad(empty, (1, 2, 3, 4)).shape == (0, 8, 14, 3)
    assert cupyprep.rotate90(empty).shape == (0, 7, 5, 3)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(batch)
    res = cupyprep.flip(t, "horizontal")
    assert isinstance(res, torch.Tensor)
    np.testing.assert_array_equal(res.numpy(), torch.flip(t, (2,)).numpy())
    np.testing.assert_array_equal(cupyprep.rotate90(t, 1).numpy(), torch.rot90(t, 1, (1, 2)).numpy())


def test_cpu_crop_is_resize_of_the_slice():
    rng = np.random.default_rng(3)
    img = random_image(rng, (30, 40, 3), np.uint8)
    boxes = np.array([[3.4, 2.5, 20.6, 17.0], [2.5, 3.5, 4.5, 5.5], [-5, -5, 100, 100],
                      [10, 10, 10, 10], [39.7, 29.9, 50, 50], [np.nan, 1, 5, np.nan]], np.float32)
    # the integer bounds (rint half to even, clamped, at least one pixel)
    bounds = [(3, 2, 21, 17), (2, 4, 4, 6), (0, 0, 40, 30), (10, 10, 11, 11), (39, 29, 40, 30),
              (0, 1, 5, 2)]
    for mode, flag in [("nearest", cv2.INTER_NEAREST), ("linear", cv2.INTER_LINEAR),
                       ("cubic", cv2.INTER_CUBIC)]:
        res = cupyprep.crop(img, boxes, (8, 9), interpolation=mode)
        assert res.shape == (6, 8, 9, 3) and res.dtype == np.uint8
        for k, (x1, y1, x2, y2) in enumerate(bounds):
            with ipp(False):  # OpenCV's own code, as the CPU backend runs it (docs/exactness.md)
                ref = cv2.resize(np.ascontiguousarray(img[y1:y2, x1:x2]), (9, 8), interpolation=flag)
            np.testing.assert_array_equal(res[k], ref.reshape(8, 9, 3), err_msg=f"{mode} box {k}")


def test_cpu_crop_batches_lists_and_index_forms():
    rng = np.random.default_rng(4)
    batch = random_image(rng, (2, 20, 24, 2), np.float32)
    rows = np.array([[1, 2, 3, 10, 12], [0, 0, 0, 24, 20], [1, 5, 5, 6, 6]], np.float32)
    res = cupyprep.crop(batch, rows, (5, 4))
    assert res.shape == (3, 5, 4, 2)
    per_image = cupyprep.crop(batch, [rows[1:2, 1:], rows[[0, 2], 1:]], (5, 4))
    np.testing.assert_array_equal(per_image, res[[1, 0, 2]])
    ragged = cupyprep.crop([batch[0], batch[1, :15]], rows, (5, 4))
    np.testing.assert_array_equal(ragged, res)
    gray = cupyprep.crop([batch[0, ..., 0], batch[1, ..., 0]], rows, (5, 4))
    np.testing.assert_array_equal(gray, cupyprep.crop(batch[..., :1], rows, (5, 4))[..., 0])
    assert cupyprep.crop(batch, np.zeros((0, 5)), (5, 4)).shape == (0, 5, 4, 2)
    assert cupyprep.crop(np.zeros((0, 4, 4, 3), np.uint8), np.zeros((0, 5)), (2, 2)).shape == (0, 2, 2, 3)


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda im: cupyprep.flip(im, "sideways"), ValueError, ["direction", "sideways"]),
        (lambda im: cupyprep.flip(im.astype(np.int32)), TypeError, ["img", "int32"]),
        (lambda im: cupyprep.flip([[1, 2]]), TypeError, ["img[0]", "list"]),
        (lambda im: cupyprep.flip(np.zeros(4, np.uint8)), ValueError, ["img", "(4,)"]),
        (lambda im: cupyprep.flip(im, out=np.zeros((3, 3, 3), np.uint8)), ValueError, ["out", "shape"]),
        (lambda im: cupyprep.flip([im, im[..., :2]]), ValueError, ["img[1]", "channels"]),
        (lambda im: cupyprep.rotate90(im, 1.5), TypeError, ["k", "1.5"]),
        (lambda im: cupyprep.pad(im, (1, 2)), TypeError, ["padding", "(top, bottom, left, right)"]),
        (lambda im: cupyprep.pad(im, -1), ValueError, ["padding", ">= 0"]),
        (lambda im: cupyprep.pad(im, 1, border_mode="mirror"), ValueError, ["border_mode", "mirror"]),
        (lambda im: cupyprep.pad(im, 1, value=(1, 2)), ValueError, ["value", "3 values"]),
        (lambda im: cupyprep.pad(np.zeros((4, 4, 6), np.uint8), 1, value=[1, 2, 3, 4, 5, 6]),
         ValueError, ["value", "one number"]),
        (lambda im: cupyprep.crop(im, np.zeros((2, 3)), (4, 4)), ValueError, ["boxes", "(K, 4)"]),
        (lambda im: cupyprep.crop(im[None], np.zeros((2, 4)), (4, 4)), ValueError, ["boxes", "(K, 5)"]),
        (lambda im: cupyprep.crop(im[None], np.array([[1, 0, 0, 2, 2]]), (4, 4)), ValueError,
         ["boxes", "image index", "[0, 1)"]),
        (lambda im: cupyprep.crop(im[None], np.array([[0.5, 0, 0, 2, 2]]), (4, 4)), ValueError,
         ["boxes", "image index"]),
        (lambda im: cupyprep.crop(im[None], [np.zeros((1, 4)), np.zeros((1, 4))], (4, 4)),
         ValueError, ["boxes", "1 arrays"]),
        (lambda im: cupyprep.crop(im, np.zeros((1, 4)), (4, 4), interpolation="area"), ValueError,
         ["interpolation", "area"]),
        (lambda im: cupyprep.crop(im, np.zeros((1, 4)), (0, 4)), ValueError, ["size"]),
        (lambda im: cupyprep.crop(np.zeros((4, 4, 5), np.uint8), np.zeros((1, 4)), (2, 2)),
         ValueError, ["img", "1 to 4 channels"]),
        (lambda im: cupyprep.crop(im, [["a", "b", "c", "d"]], (2, 2)), TypeError, ["boxes"]),
        (lambda im: cv2compat.rotate(im, 7), ValueError, ["rotateCode", "ROTATE_180"]),
        (lambda im: cv2compat.flip(im, "x"), TypeError, ["flipCode"]),
        (lambda im: cv2compat.copyMakeBorder(im, 1, 1, 1, 1, 5), ValueError, ["borderType"]),
    ],
)
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call(np.zeros((6, 6, 3), np.uint8))
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_cv2compat_names_on_the_cpu():
    img = random_image(np.random.default_rng(5), (5, 8, 3), np.uint8)
    for code in (1, 0, -1, 3, -2):
        np.testing.assert_array_equal(cv2compat.flip(img, code), cv2.flip(img, code))
    for code in (cv2.ROTATE_90_CLOCKWISE, cv2.ROTATE_180, cv2.ROTATE_90_COUNTERCLOCKWISE):
        np.testing.assert_array_equal(cv2compat.rotate(img, code), cv2.rotate(img, code))
    for mode in CV2_BORDERS.values():
        for value in (None, 9, (1, 2, 3, 4)):
            kw = {} if value is None else {"value": value}
            np.testing.assert_array_equal(cv2compat.copyMakeBorder(img, 2, 1, 0, 3, mode, **kw),
                                          cv2.copyMakeBorder(img, 2, 1, 0, 3, mode, **kw))
    np.testing.assert_array_equal(
        cv2compat.copyMakeBorder(img, 1, 1, 1, 1, cv2.BORDER_REFLECT | cv2.BORDER_ISOLATED),
        cv2.copyMakeBorder(img, 1, 1, 1, 1, cv2.BORDER_REFLECT | cv2.BORDER_ISOLATED))


# --- kernels (emulated on the CPU in CI; on a GPU with -m gpu) ------------------------------
def kernel_call(kernels, fn, img, ref, **kw):
    """``fn`` on the kernel side into a poisoned output; bit for bit equal to ``ref``."""
    out = kernels.poisoned(ref.shape, ref.dtype)
    res = fn(kernels.put(img), out=out, **kw)
    assert res is out
    got = kernels.get(res)
    np.testing.assert_array_equal(got, ref)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_flip_and_rotate(kernels, dtype):
    rng = np.random.default_rng(10)
    for shape in SHAPES:
        img = random_image(rng, shape, dtype)
        for direction, code in FLIP_CODES.items():
            ref = cv2.flip(img, code).reshape(img.shape)
            kernel_call(kernels, lambda a, d=direction, **kw: cupyprep.flip(a, d, **kw), img, ref)
        for k in (1, 2, 3, 4, -1):
            kernel_call(kernels, lambda a, k=k, **kw: cupyprep.rotate90(a, k, **kw), img, np.rot90(img, k))


@pytest.mark.parametrize("mode", list(CV2_BORDERS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_pad_every_border(kernels, mode, dtype):
    """Against cv2.copyMakeBorder: per-side sizes, borders wider than the image, one-pixel
    sides, 1 to 4 and 6 channels, and border values that round and saturate."""
    rng = np.random.default_rng(11)
    values = {1: (-3.5,), 2: (2.5, 70000.0), 3: (1.5, 0.1, 300.0), 4: (1, 2, 3, 4), 6: 5.0}
    for shape in SHAPES:
        img = random_image(rng, shape, dtype)
        c = shape[2] if len(shape) == 3 else 1
        for sides in [(1, 2, 3, 4), (0, 0, 0, 0), (12, 0, 1, 17), (0, 3, 5, 0)]:
            ref = cv2_pad(img, sides, mode, values[c])
            kernel_call(kernels, lambda a, sides=sides, c=c, **kw: cupyprep.pad(
                a, sides, border_mode=mode, value=values[c], **kw), img, ref)


def test_kernel_layouts_views_lists_and_in_place(kernels):
    rng = np.random.default_rng(12)
    batch = random_image(rng, (3, 7, 10, 3), np.uint16)
    chw = np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
    kernel_call(kernels, lambda a, **kw: cupyprep.flip(a, "both", **kw), batch, batch[:, ::-1, ::-1])
    kernel_call(kernels, lambda a, **kw: cupyprep.flip(a, "horizontal", layout="NCHW", **kw), chw,
                chw[..., ::-1])
    kernel_call(kernels, lambda a, **kw: cupyprep.rotate90(a, 1, layout="NCHW", **kw), chw,
                np.rot90(chw, 1, axes=(2, 3)))
    ref = np.stack([np.stack([cv2_pad(p, (2, 1, 0, 3), "constant", v) for p, v in zip(i, (4, 5, 6))])
                    for i in chw])
    kernel_call(kernels, lambda a, **kw: cupyprep.pad(a, (2, 1, 0, 3), value=(4, 5, 6), layout="NCHW",
                                                      **kw), chw, ref)
    kernel_call(kernels, lambda a, **kw: cupyprep.rotate90(a, 3, layout="CHW", **kw), chw[0],
                np.rot90(chw[0], 3, axes=(1, 2)))
    # strided, flipped and offset views are read in place
    base = random_image(rng, (20, 31, 4), np.float32)
    view = kernels.put(base)[1::2, ::-3, 1:]
    expect = base[1::2, ::-3, 1:]
    got = kernels.get(cupyprep.rotate90(view, 1))
    np.testing.assert_array_equal(got, np.rot90(expect, 1))
    got = kernels.get(cupyprep.pad(view, (3, 4, 5, 6), border_mode="reflect101"))
    np.testing.assert_array_equal(got, cv2_pad(expect, (3, 4, 5, 6), "reflect101", 0))
    # out= the input itself: the result is the flip, not a half-flipped image
    same = kernels.put(base)
    res = cupyprep.flip(same, "horizontal", out=same)
    assert res is same
    np.testing.assert_array_equal(kernels.get(same), base[:, ::-1])
    # empty batch; ragged list
    empty = cupyprep.pad(kernels.put(np.zeros((0, 4, 5, 3), np.uint8)), 2, border_mode="wrap")
    assert empty.shape == (0, 8, 9, 3)
    images = [random_image(rng, s, np.uint8) for s in [(5, 7, 3), (1, 9, 3), (8, 2, 3)]]
    res = cupyprep.pad([kernels.put(i) for i in images], (1, 0, 2, 0), border_mode="reflect")
    for r, i in zip(res, images):
        np.testing.assert_array_equal(kernels.get(r), cv2_pad(i, (1, 0, 2, 0), "reflect", 0))
    outs = [kernels.poisoned((s[1], s[0], 3), np.uint8) for s in [(5, 7), (1, 9), (8, 2)]]
    res = cupyprep.rotate90([kernels.put(i) for i in images], 1, out=outs)
    for r, o, i in zip(res, outs, images):
        assert r is o
        np.testing.assert_array_equal(kernels.get(r), np.rot90(i, 1))


def test_kernel_photograph(kernels):
    img = photo("astronaut")
    if kernels.name == "emulated":
        img = img[100:161, 200:283]  # emulated kernels get a crop: same content, fewer threads
    kernel_call(kernels, lambda a, **kw: cupyprep.flip(a, "horizontal", **kw), img, cv2.flip(img, 1))
    kernel_call(kernels, lambda a, **kw: cupyprep.rotate90(a, -1, **kw), img,
                cv2.rotate(img, cv2.ROTATE_90_CLOCKWISE))
    ref = cv2.copyMakeBorder(img, 0, 37, 5, 0, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    kernel_call(kernels, lambda a, **kw: cupyprep.copy_make_border(a, 0, 37, 5, 0, value=114, **kw),
                img, ref)


def test_kernel_cv2compat(kernels):
    img = random_image(np.random.default_rng(13), (6, 9, 3), np.float16)
    a = kernels.put(img)
    np.testing.assert_array_equal(kernels.get(cv2compat.flip(a, -1)), cv2.flip(img, -1))
    np.testing.assert_array_equal(kernels.get(cv2compat.rotate(a, cv2.ROTATE_90_CLOCKWISE)),
                                  cv2.rotate(img, cv2.ROTATE_90_CLOCKWISE))
    np.testing.assert_array_equal(
        kernels.get(cv2compat.copyMakeBorder(a, 1, 2, 3, 4, cv2.BORDER_CONSTANT, value=0.3)),
        cv2.copyMakeBorder(img, 1, 2, 3, 4, cv2.BORDER_CONSTANT, value=0.3))


# --- the byte kernels (rows in order, mirrored rows, quarter-turn tiles) --------------------
# Widths around the kernels' 16- and 48-byte runs and 32- / 64-pixel tiles; with the views
# below every row starts at a different alignment
BYTE_SHAPES = [(1, 1), (3, 5), (7, 16), (6, 21), (5, 70), (2, 131), (67, 3)]
BYTE_KERNELS = ("copy_rows", "mirror_rows", "turn_tiles")
BYTE_CASES = [  # (call, numpy reference, the kernel it takes)
    (lambda a, **kw: cupyprep.flip(a, "horizontal", **kw), lambda i: i[:, ::-1], "mirror_rows"),
    (lambda a, **kw: cupyprep.flip(a, "vertical", **kw), lambda i: i[::-1], "copy_rows"),
    (lambda a, **kw: cupyprep.flip(a, "both", **kw), lambda i: i[::-1, ::-1], "mirror_rows"),
    (lambda a, **kw: cupyprep.rotate90(a, 1, **kw), lambda i: np.rot90(i, 1), "turn_tiles"),
    (lambda a, **kw: cupyprep.rotate90(a, 2, **kw), lambda i: np.rot90(i, 2), "mirror_rows"),
    (lambda a, **kw: cupyprep.rotate90(a, 3, **kw), lambda i: np.rot90(i, 3), "turn_tiles"),
    (lambda a, **kw: cupyprep.rotate90(a, 0, **kw), lambda i: i, "copy_rows"),
]


def byte_call(kernels, launched, fn, src, ref, kernel, out_lead=0):
    """``fn(src)`` into a poisoned output (a view ``out_lead`` pixels into wider rows when
    given, whose other pixels must stay poisoned), bit for bit ``ref``, made by ``kernel``
    (a name or a tuple of names)."""
    shape = ref.shape[:1] + (ref.shape[1] + 2 * out_lead,) + ref.shape[2:]
    whole = kernels.poisoned(shape, ref.dtype)
    out = whole[:, out_lead:out_lead + ref.shape[1]]
    del launched[:]
    assert fn(src, out=out) is out
    got = kernels.get(whole)
    np.testing.assert_array_equal(got[:, out_lead:out_lead + ref.shape[1]], ref)
    untouched = np.concatenate([got[:, :out_lead], got[:, out_lead + ref.shape[1]:]], axis=1)
    np.testing.assert_array_equal(untouched, kernels.get(kernels.poisoned(untouched.shape, ref.dtype)))
    names = (kernel,) if isinstance(kernel, str) else kernel
    assert launched and all(any(k in e for k in names) for _, e in launched), (kernel, launched)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_byte_kernels_every_alignment(kernels, launched, dtype):
    """Flips, turns and pads of 1 to 4 channels on every path of the byte kernels: images
    contiguous, read from inside wider rows (each row starting at another alignment) and
    written into wider rows; against NumPy and cv2.copyMakeBorder, nothing written outside
    the output."""
    rng = np.random.default_rng(20)
    for h, w in BYTE_SHAPES:
        for c in (1, 2, 3, 4):
            tail = () if c == 1 else (c,)
            img = random_image(rng, (h, w) + tail, dtype)
            for lead, extra in ((0, 0), (1, 2), (3, 0)):
                base = random_image(rng, (h, w + lead + extra) + tail, dtype)
                base[:, lead:lead + w] = img
                src = kernels.put(base)[:, lead:lead + w]
                out_lead = 1 if lead == 3 else 0
                for fn, ref, kernel in BYTE_CASES:
                    # a one-pixel row or column is a row copy to more than one kernel
                    kernel = kernel if min(h, w) > 1 else BYTE_KERNELS
                    byte_call(kernels, launched, fn, src, ref(img), kernel, out_lead)
                for sides, mode in (((2, 1, 5, 3), "constant"), ((0, 0, 1, 0), "reflect101"),
                                    ((9, 2, 0, 19), "wrap")):
                    value = (7, 200, 3, 1)[:c]
                    byte_call(kernels, launched, lambda a, s=sides, m=mode, v=value, **kw: cupyprep.pad(
                        a, s, border_mode=m, value=v, **kw), src, cv2_pad(img, sides, mode, value),
                        "copy_rows", out_lead)


@pytest.mark.parametrize("mode", list(CV2_BORDERS))
def test_kernel_byte_rows_every_border(kernels, launched, mode):
    """Pads on cupyprep_copy_rows: borders wider than the image, one-pixel sides, 3-byte and
    6-byte pixels starting anywhere in a word, border values that round and saturate."""
    rng = np.random.default_rng(21)
    for dtype, c in ((np.uint8, 3), (np.uint16, 3), (np.float16, 1), (np.uint8, 6)):
        values = {1: (-3.5,), 3: (2.5, 70000.0, -1), 6: 5.0}[c]
        for h, w in ((1, 1), (1, 7), (5, 1), (4, 13), (3, 45)):
            img = random_image(rng, (h, w, c), dtype)
            base = kernels.put(np.concatenate([img[:, :1], img], axis=1))
            for sides in ((1, 2, 3, 4), (12, 0, 1, 17), (0, 3, 5, 0), (2, 2, 33, 40)):
                byte_call(kernels, launched, lambda a, s=sides, v=values, **kw: cupyprep.pad(
                    a, s, border_mode=mode, value=v, **kw), base[:, 1:],
                    cv2_pad(img, sides, mode, values), "copy_rows")


def test_kernel_byte_kernels_layouts_and_fallbacks(kernels, launched):
    """Channel planes (NCHW) and 2-D images take the byte kernels plane by plane, 6-channel
    pixels whole; what they cannot take falls back to cupyprep_copy_border, which also
    makes every copy with the byte kernels switched off."""
    rng = np.random.default_rng(22)
    batch = random_image(rng, (2, 9, 37, 3), np.uint8)
    chw = np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
    nchw = lambda f: lambda a, **kw: f(a, layout="NCHW", **kw)
    byte_call(kernels, launched, nchw(lambda a, **kw: cupyprep.flip(a, "horizontal", **kw)), kernels.put(chw),
              chw[..., ::-1], "mirror_rows<1>")
    byte_call(kernels, launched, nchw(lambda a, **kw: cupyprep.rotate90(a, 1, **kw)), kernels.put(chw),
              np.rot90(chw, 1, axes=(2, 3)), "turn_tiles<1>")
    ref = np.pad(chw, [(0, 0), (0, 0), (1, 2), (3, 4)], constant_values=9)
    byte_call(kernels, launched, nchw(lambda a, **kw: cupyprep.pad(a, (1, 2, 3, 4), value=9, **kw)),
              kernels.put(chw), ref, "copy_rows")
    byte_call(kernels, launched, lambda a, **kw: cupyprep.flip(a, "both", **kw), kernels.put(batch),
              batch[:, ::-1, ::-1], "mirror_rows<3>")
    six = random_image(rng, (5, 11, 6), np.uint16)
    byte_call(kernels, launched, lambda a, **kw: cupyprep.rotate90(a, 3, **kw), kernels.put(six),
              np.rot90(six, 3), "turn_tiles<12>")
    # a reversed view is a row copy to flip, a mirror to pad with no border
    view = kernels.put(batch)[0, :, ::-1]
    byte_call(kernels, launched, lambda a, **kw: cupyprep.flip(a, "horizontal", **kw), view,
              batch[0], "copy_rows")
    byte_call(kernels, launched, lambda a, **kw: cupyprep.pad(a, 0, **kw), view,
              batch[0, :, ::-1], "mirror_rows<3>")
    # fallbacks: strided pixels, planes with different border values, 24-byte pixels, a
    # border around mirrored rows
    byte_call(kernels, launched, lambda a, **kw: cupyprep.flip(a, "horizontal", **kw),
              kernels.put(batch)[:, :, ::2], batch[:, :, ::-2], "copy_border")
    ref = np.stack([np.stack([np.pad(p, [(1, 0), (0, 2)], constant_values=v) for p, v in zip(i, (4, 5, 6))])
                    for i in chw])
    byte_call(kernels, launched, nchw(lambda a, **kw: cupyprep.pad(a, (1, 0, 0, 2), value=(4, 5, 6), **kw)),
              kernels.put(chw), ref, "copy_border")
    wide = random_image(rng, (4, 7, 6), np.float32)
    byte_call(kernels, launched, lambda a, **kw: cupyprep.rotate90(a, 1, **kw), kernels.put(wide),
              np.rot90(wide, 1), "copy_border")
    byte_call(kernels, launched, lambda a, **kw: cupyprep.pad(a, (0, 0, 1, 1), border_mode="replicate", **kw),
              view, np.pad(batch[0, :, ::-1], [(0, 0), (1, 1), (0, 0)], mode="edge"), "copy_border")


def test_kernel_byte_kernels_into_odd_addresses(kernels, launched):
    """Outputs starting at an odd byte (a view into a flat buffer): rows in order and turns
    take their byte paths, mirrored rows of 4-byte pixels the general kernel."""
    rng = np.random.default_rng(24)
    img = random_image(rng, (9, 70, 4), np.uint8)
    cases = [(lambda a, **kw: cupyprep.flip(a, "horizontal", **kw), img[:, ::-1], "copy_border"),
             (lambda a, **kw: cupyprep.flip(a, "vertical", **kw), img[::-1], "copy_rows"),
             (lambda a, **kw: cupyprep.rotate90(a, 1, **kw), np.rot90(img, 1), "turn_tiles"),
             (lambda a, **kw: cupyprep.pad(a, (1, 2, 3, 4), border_mode="reflect", **kw),
              cv2_pad(img, (1, 2, 3, 4), "reflect", 0), "copy_rows")]
    for fn, ref, kernel in cases:
        flat = kernels.poisoned((ref.size + 2,), np.uint8)
        out = flat[1:-1].reshape(ref.shape)
        del launched[:]
        assert fn(kernels.put(img), out=out) is out
        got = kernels.get(flat)
        np.testing.assert_array_equal(got[1:-1].reshape(ref.shape), ref)
        assert got[0] == got[-1] == kernels.get(kernels.poisoned((1,), np.uint8))[0]
        assert [e for _, e in launched] and all(kernel in e for _, e in launched), (kernel, launched)


def test_kernel_general_kernel_alone(kernels, launched, monkeypatch):
    """With the byte kernels off every copy is cupyprep_copy_border's, and the same."""
    tune(monkeypatch, flip_pad_spec, byte_kernels=False)
    rng = np.random.default_rng(23)
    for shape in [(7, 9), (5, 6, 2), (9, 4, 3), (1, 1, 3), (6, 1, 4)]:
        img = random_image(rng, shape, np.uint8)
        for fn, ref, _ in BYTE_CASES:
            byte_call(kernels, launched, fn, kernels.put(img), ref(img), "copy_border")
        byte_call(kernels, launched, lambda a, **kw: cupyprep.pad(a, (1, 2, 3, 4), border_mode="wrap", **kw),
                  kernels.put(img), cv2_pad(img, (1, 2, 3, 4), "wrap", 0), "copy_border")


# --- crop on the kernels ------------------------------------------------------------------
CROP_BOXES = np.array([[3.4, 2.5, 20.6, 17.0], [2.5, 3.5, 4.5, 5.5], [-5, -5, 100, 100],
                       [10, 10, 10, 10], [39.7, 29.9, 50, 50], [np.nan, 1, 5, np.inf],
                       [0, 0, 20, 15], [1, 1, 39, 29]], np.float32)


def crop_reference(images, rows, size, mode):
    """The CPU backend's crops (cv2.resize of each box's slice, OpenCV's own code)."""
    return cupyprep.cpu.crop(images, rows, mode, True,
                             np.empty((len(rows),) + size + images[0].shape[2:], images[0].dtype))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [None, 1, 2, 3, 4])
def test_kernel_crop(kernels, mode, dtype, channels):
    """Each crop equals the kernels' resize of the box's slice bit for bit (the same
    arithmetic), and the CPU backend's cv2.resize of it: bit for bit for nearest and uint8
    linear, as test_resize's assert_matches_opencv says for the others (the box sizes
    include the exact factor of 2, where linear is area's cell mean)."""
    rng = np.random.default_rng(14)
    tail = () if channels is None else (channels,)
    batch = random_image(rng, (2, 30, 40) + tail, dtype)
    rows = np.concatenate([np.repeat([[0], [1]], len(CROP_BOXES) // 2, axis=0).reshape(-1, 1),
                           CROP_BOXES], axis=1).astype(np.float32)
    images = kernels.put(batch) if channels else [kernels.put(i) for i in batch]  # gray: a list
    for size in [(8, 9), (1, 1), (10, 7)]:
        ref = crop_reference(list(batch), rows, size, mode)
        out = kernels.poisoned(ref.shape, dtype)
        got = kernels.get(cupyprep.crop(images, rows, size, interpolation=mode, out=out))
        assert_matches_opencv(got, ref, mode)
        if size != (8, 9):
            continue
        for k, row in enumerate(rows):
            x1, y1, x2, y2 = box_bounds(row[1:], 30, 40)
            part = kernels.put(np.ascontiguousarray(batch[int(row[0]), y1:y2, x1:x2]))
            np.testing.assert_array_equal(
                got[k], kernels.get(cupyprep.resize(part, size, interpolation=mode)))


def test_kernel_crop_single_image_list_and_views(kernels):
    rng = np.random.default_rng(15)
    img = random_image(rng, (30, 40, 3), np.uint8)
    ref = cupyprep.cpu.crop([img], CROP_BOXES, "linear", False, np.empty((8, 6, 5, 3), np.uint8))
    got = cupyprep.crop(kernels.put(img), CROP_BOXES, (6, 5))
    np.testing.assert_array_equal(kernels.get(got), ref)
    # a list of images of different sizes (and strided views among them)
    images = [random_image(rng, s, np.uint8) for s in [(30, 40, 3), (12, 50, 3), (41, 9, 3)]]
    rows = np.array([[2, 1, 2, 8, 30], [0, 5, 5, 35, 25], [1, 40, 2, 49.5, 11], [2, 0, 0, 9, 41]],
                    np.float32)
    ref = crop_reference(images, rows, (7, 7), "cubic")
    put = [kernels.put(i) for i in images]
    put[1] = kernels.put(np.ascontiguousarray(images[1][:, ::-1]))[:, ::-1]
    got = cupyprep.crop(put, rows, (7, 7), interpolation="cubic")
    np.testing.assert_array_equal(kernels.get(got), ref)
    per_image = cupyprep.crop(put, [rows[1:2, 1:], rows[2:3, 1:], rows[[0, 3], 1:]], (7, 7),
                              interpolation="cubic")
    np.testing.assert_array_equal(kernels.get(per_image), ref[[1, 2, 0, 3]])
    # a long list: its records go in a device table
    many = [random_image(rng, (5 + i % 7, 6 + i % 5, 3), np.uint8) for i in range(70)]
    rows = np.array([[i, 0.5, 1, 4, 4] for i in range(69, -1, -7)], np.float32)
    ref = crop_reference(many, rows, (3, 4), "linear")
    got = cupyprep.crop([kernels.put(i) for i in many], rows, (3, 4))
    np.testing.assert_array_equal(kernels.get(got), ref)
    # a batch view (every other row, a channel subset)
    batch = random_image(rng, (2, 30, 40, 4), np.float32)
    rows = np.array([[1, 2, 2, 20, 10], [0, 0, 0, 40, 15]], np.float32)
    ref = crop_reference(list(batch[:, ::2, :, 1:]), rows, (4, 6), "nearest")
    got = cupyprep.crop(kernels.put(batch)[:, ::2, :, 1:], rows, (4, 6), interpolation="nearest")
    np.testing.assert_array_equal(kernels.get(got), ref)
    empty = cupyprep.crop(kernels.put(batch), np.zeros((0, 5), np.float32), (4, 6))
    assert empty.shape == (0, 4, 6, 4)


# --- GPU only -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_torch_tensors_and_device_boxes(torch_cuda):
    """torch CUDA tensors in and out (views read in place); boxes on the device, where an
    image index outside [0, N) gives a crop of zeros (it is not read back to raise)."""
    torch = torch_cuda
    rng = np.random.default_rng(16)
    batch = random_image(rng, (3, 40, 50, 3), np.uint8)
    t = torch.from_numpy(batch).cuda()
    view = t[:, 3::2, 1::3]
    res = cupyprep.flip(view, "horizontal")
    assert isinstance(res, torch.Tensor) and res.is_cuda
    np.testing.assert_array_equal(res.cpu().numpy(), torch.flip(view, (2,)).cpu().numpy())
    res = cupyprep.rotate90(view, 1)
    np.testing.assert_array_equal(res.cpu().numpy(), torch.rot90(view, 1, (1, 2)).cpu().numpy())
    res = cupyprep.pad(view, (1, 2, 3, 4), border_mode="reflect101")
    ref = torch.nn.functional.pad(view.permute(0, 3, 1, 2).float(), (3, 4, 1, 2), mode="reflect")
    np.testing.assert_array_equal(res.cpu().numpy(), ref.permute(0, 2, 3, 1).byte().cpu().numpy())
    rows = torch.tensor([[0, 1, 2, 30, 20], [2, 0, 0, 50, 40], [3, 0, 0, 5, 5], [-1, 0, 0, 5, 5],
                         [1.5, 0, 0, 5, 5]], dtype=torch.float32, device="cuda")
    got = cupyprep.crop(t, rows, (16, 16)).cpu().numpy()
    ref = crop_reference(list(batch), rows[:2].cpu().numpy(), (16, 16), "linear")
    np.testing.assert_array_equal(got[:2], ref)
    assert not got[2:].any()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_random_sizes_against_cpu(dtype):
    import cupy

    rng = np.random.default_rng(17)
    for _ in range(10):
        h, w = (int(v) for v in rng.integers(1, 300, 2))
        c = int(rng.integers(1, 5))
        img = random_image(rng, (h, w, c), dtype)
        d = cupy.asarray(img)
        for direction in FLIP_CODES:
            np.testing.assert_array_equal(cupyprep.flip(d, direction).get(), cupyprep.flip(img, direction))
        for k in range(4):
            np.testing.assert_array_equal(cupyprep.rotate90(d, k).get(), cupyprep.rotate90(img, k))
        sides = tuple(int(v) for v in rng.integers(0, 400, 4))
        for mode in CV2_BORDERS:
            np.testing.assert_array_equal(cupyprep.pad(d, sides, border_mode=mode, value=3).get(),
                                          cupyprep.pad(img, sides, border_mode=mode, value=3))
        # (x1, y1) <= (x2, y2) coordinate by coordinate, some reaching past the image
        boxes = np.sort(rng.uniform(-10, max(h, w) + 10, (50, 2, 2)), axis=1).reshape(50, 4)
        boxes = boxes.astype(np.float32)
        for mode in ("nearest", "linear", "cubic"):
            size = tuple(int(v) for v in rng.integers(1, 80, 2))
            got = cupyprep.crop(d, cupy.asarray(boxes), size, interpolation=mode).get()
            ref = cupyprep.cpu.crop([img], boxes, mode, False, np.empty((50,) + size + (c,), dtype))
            for k, b in enumerate(boxes):
                x1, y1, x2, y2 = box_bounds(b, h, w)
                part = cupy.asarray(np.ascontiguousarray(img[y1:y2, x1:x2]))
                np.testing.assert_array_equal(got[k], cupyprep.resize(part, size, interpolation=mode).get())
            assert_matches_opencv(got, ref, mode)


@pytest.mark.gpu
def test_gpu_byte_kernels_on_full_frames(launched):
    """1080p frames on the byte kernels, contiguous and read from inside wider rows (every
    row at another alignment), equal the CPU backend."""
    import cupy

    rng = np.random.default_rng(18)
    frames = rng.integers(0, 256, (2, 1080, 1920, 3), np.uint8)
    wide = cupy.asarray(rng.integers(0, 256, (2, 1080, 1925, 3), np.uint8))
    wide[:, :, 1:1921] = cupy.asarray(frames)
    calls = [(lambda a, d=d: cupyprep.flip(a, d)) for d in FLIP_CODES]
    calls += [(lambda a, k=k: cupyprep.rotate90(a, k)) for k in (1, 2, 3)]
    calls += [lambda a: cupyprep.pad(a, 32, value=114),
              lambda a: cupyprep.pad(a, 32, border_mode="reflect101"),
              lambda a: cupyprep.pad(a, (3, 0, 1, 2), border_mode="wrap")]
    for fn in calls:
        ref = fn(frames)
        for src in (cupy.asarray(frames), wide[:, :, 1:1921]):
            del launched[:]
            np.testing.assert_array_equal(fn(src).get(), ref)
            assert all(any(k in e for k in BYTE_KERNELS) for _, e in launched), launched
