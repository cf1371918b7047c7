"""preprocess: geometry of every mode, the CPU recipe, meta round trips, and the fused
kernel against the CPU backend on ragged batches."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import cupyprep
from conftest import assert_close, photo, random_image
from cupyprep import cpu
from cupyprep.preprocess import plan
from test_resize import ipp

cv2 = pytest.importorskip("cv2")


# --- geometry (CI) ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "h0, w0, size, mode, expect",
    [
        (1080, 1920, (640, 640), "letterbox", (360, 640, 140, 0)),
        (1920, 1080, (640, 640), "letterbox", (640, 360, 0, 140)),
        (3, 2, (640, 640), "letterbox", (640, 427, 0, 106)),      # 213 px of padding: 106 left, 107 right
        (1, 1, (640, 480), "letterbox", (480, 480, 80, 0)),
        (720, 1280, (384, 640), "letterbox", (360, 640, 12, 0)),
        (1080, 1920, (640, 640), "letterbox_top_left", (360, 640, 0, 0)),
        (1080, 1920, (640, 640), "stretch", (640, 640, 0, 0)),
        (480, 640, (224, 224), "center_crop", (224, 298, 0, -37)),  # int(224*640/480) = 298; round(74/2)
        (640, 480, (224, 224), "center_crop", (298, 224, -37, 0)),
        (500, 500, (224, 224), "center_crop", (224, 224, 0, 0)),
        (2, 3, (4, 4), "center_crop", (4, 6, 0, -1)),                # round(2/2) = 1
        (10, 30, (8, 8), "center_crop", (8, 24, 0, -8)),
    ],
)
def test_plan(h0, w0, size, mode, expect):
    assert plan(h0, w0, size, mode) == expect


def test_plan_center_crop_resize_size_and_padding():
    assert plan(480, 640, (224, 224), "center_crop", resize_size=256) == (256, 341, -16, -58)
    # a crop larger than the resized image pads it (torchvision's CenterCrop)
    assert plan(100, 100, (224, 300), "center_crop", resize_size=200) == (200, 200, 12, 50)


def yolo_letterbox(img, size, pad=114):
    """The usual YOLO recipe written out, as a second opinion on the geometry."""
    h0, w0 = img.shape[:2]
    r = min(size[0] / h0, size[1] / w0)
    nw, nh = int(round(w0 * r)), int(round(h0 * r))
    dw, dh = (size[1] - nw) / 2, (size[0] - nh) / 2
    if (nh, nw) != (h0, w0):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(pad,) * 3)


def test_cpu_letterbox_equals_yolo_recipe():
    imgs = [photo("astronaut"), photo("coffee"), photo("chelsea"), random_image(np.random.default_rng(0), (7, 3, 3), np.uint8)]
    batch, meta = cupyprep.preprocess(imgs, (640, 640), scale=1.0, swap_rb=False, dtype="uint8", layout="NHWC")
    for i, img in enumerate(imgs):
        np.testing.assert_array_equal(batch[i], yolo_letterbox(img, (640, 640)))


def test_cpu_normalization_and_layout():
    img = random_image(np.random.default_rng(1), (2, 30, 40, 3), np.uint8)
    batch, _ = cupyprep.preprocess(img, (30, 40), mode="stretch", mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4))
    ref = cupyprep.normalize(img, (0.5, 0.4, 0.3), (0.2, 0.3, 0.4), scale=1 / 255, swap_rb=True, layout="NCHW")
    np.testing.assert_array_equal(batch, ref)
    nhwc, _ = cupyprep.preprocess(img, (30, 40), mode="stretch", layout="NHWC", dtype="float16")
    assert nhwc.shape == (2, 30, 40, 3) and nhwc.dtype == np.float16
    # the same size: no resampling; RGB * float32(1 / 255) in float32 (mean 0, std 1 leave
    # it as it is), rounded once to float16
    rgb = img[..., ::-1].astype(np.float32)
    np.testing.assert_array_equal(nhwc, (rgb * np.float32(1 / 255)).astype(np.float16))


def torchvision_center_crop(img, size, resize_size, interpolation, pad):
    """torchvision's ``Resize(resize_size)`` then ``CenterCrop(size)`` written out from its
    documentation, with cv2.resize for the resize: the shorter side to ``resize_size``, the
    longer to ``int(resize_size * long / short)``; then per axis a side ``n`` longer than
    the crop's ``S`` is cut from ``int(round((n - S) / 2.0))`` (Python's round, half to
    even), a shorter one padded ``(S - n) // 2`` before and the rest after (torchvision
    pads with 0, preprocess with ``pad_value``)."""
    h0, w0 = img.shape[:2]
    if w0 <= h0:
        nh, nw = int(resize_size * h0 / w0), resize_size
    else:
        nh, nw = resize_size, int(resize_size * w0 / h0)
    flag = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR}[interpolation]
    resized = cv2.resize(img, (nw, nh), interpolation=flag)

    def span(n, S):  # (first source row / column, first canvas row / column, count)
        return (int(round((n - S) / 2.0)), 0, S) if n >= S else (0, (S - n) // 2, n)

    (sy, dy, ly), (sx, dx, lx) = span(nh, size[0]), span(nw, size[1])
    out = np.full(tuple(size) + img.shape[2:], pad, img.dtype)
    out[dy:dy + ly, dx:dx + lx] = resized[sy:sy + ly, sx:sx + lx]
    return out


# (image height, width), resize_size, crop: the resized image and the offsets
CENTER_CROPS = [
    ((48, 250), 24, (24, 24)),  # 24 x 125: x cut from round(50.5) = 50 (half to even)
    ((48, 254), 24, (24, 24)),  # 24 x 127: x cut from round(51.5) = 52
    ((250, 48), 24, (24, 24)),  # 125 x 24: y cut from 50
    ((40, 66), 20, (24, 30)),   # 20 x 33: y padded 2 before, 2 after; x cut from round(1.5) = 2
    ((66, 40), 20, (31, 25)),   # 33 x 20: y cut from 1; x padded 2 before, 3 after
    ((9, 13), 12, (8, 8)),      # enlarged to 12 x 17: y cut from 2, x from round(4.5) = 4
]


@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_cpu_center_crop_equals_torchvision_recipe(interpolation):
    """mode="center_crop" against torchvision's Resize + CenterCrop written out
    (torchvision_center_crop), pixel for pixel: independent of plan(), and run without
    torchvision."""
    rng = np.random.default_rng(17)
    cases = CENTER_CROPS + [((400, 512), 256, (224, 224))]  # 256 x 327, cut at (16, 52)
    for shape, resize_size, size in cases:
        img = photo("astronaut")[:400] if shape == (400, 512) else random_image(rng, shape + (3,), np.uint8)
        batch, _ = cupyprep.preprocess(img, size, mode="center_crop", resize_size=resize_size,
                                       interpolation=interpolation, pad_value=(7, 8, 9), scale=1.0,
                                       swap_rb=False, dtype="uint8", layout="NHWC")
        ref = torchvision_center_crop(img, size, resize_size, interpolation, (7, 8, 9))
        np.testing.assert_array_equal(batch[0], ref, err_msg=f"{shape} {resize_size} {size}")


def test_kernel_center_crop_equals_torchvision_recipe(kernels):
    """The fused kernel's center crop against torchvision_center_crop, for single images, a
    list of the CENTER_CROPS images of one crop size and a batch."""
    rng = np.random.default_rng(18)
    for interpolation in ("nearest", "linear"):
        batch = random_image(rng, (2, 48, 254, 3), np.uint8)
        out = kernels.poisoned((2, 24, 24, 3), np.uint8)
        cupyprep.preprocess(kernels.put(batch), (24, 24), mode="center_crop", interpolation=interpolation,
                            pad_value=(7, 8, 9), scale=1.0, swap_rb=False, dtype="uint8", layout="NHWC",
                            out=out)
        for got, img in zip(kernels.get(out), batch):
            np.testing.assert_array_equal(got, torchvision_center_crop(img, (24, 24), 24, interpolation, (7, 8, 9)))
        for shape, resize_size, size in CENTER_CROPS:
            img = random_image(rng, shape + (3,), np.uint8)
            out = kernels.poisoned((1,) + size + (3,), np.uint8)
            cupyprep.preprocess(kernels.put(img), size, mode="center_crop", resize_size=resize_size,
                                interpolation=interpolation, pad_value=(7, 8, 9), scale=1.0,
                                swap_rb=False, dtype="uint8", layout="NHWC", out=out)
            ref = torchvision_center_crop(img, size, resize_size, interpolation, (7, 8, 9))
            np.testing.assert_array_equal(kernels.get(out)[0], ref, err_msg=f"{shape} {resize_size} {size}")
        square = [(shape, r) for shape, r, size in CENTER_CROPS if size == (24, 24)]
        images = [random_image(rng, shape + (3,), np.uint8) for shape, _ in square]
        out = kernels.poisoned((len(images), 24, 24, 3), np.uint8)
        cupyprep.preprocess([kernels.put(i) for i in images], (24, 24), mode="center_crop", resize_size=24,
                            interpolation=interpolation, pad_value=(7, 8, 9), scale=1.0, swap_rb=False,
                            dtype="uint8", layout="NHWC", out=out)
        for got, img in zip(kernels.get(out), images):
            np.testing.assert_array_equal(got, torchvision_center_crop(img, (24, 24), 24, interpolation, (7, 8, 9)))


@pytest.mark.torchvision
def test_cpu_center_crop_equals_torchvision_when_available():
    tvf = pytest.importorskip("torchvision.transforms.functional")
    import torch

    img = photo("astronaut")[:400]  # 400 x 512
    batch, _ = cupyprep.preprocess(img, (224, 224), mode="center_crop", resize_size=256, scale=1.0,
                                   swap_rb=False, dtype="uint8", layout="NHWC",
                                   interpolation="nearest")
    t = torch.from_numpy(img).permute(2, 0, 1)
    ref = tvf.center_crop(tvf.resize(t, 256, interpolation=tvf.InterpolationMode.NEAREST), [224, 224])
    assert batch.shape[1:] == (224, 224, 3) and tuple(ref.shape) == (3, 224, 224)
    # same geometry (resize to 256 x 327, crop at (16, 52)); torchvision's nearest steps by a
    # float32 scale where cv2 takes 1 / (new / old) in double, which can move a sampled
    # column by one on a few pixels
    same = (batch[0] == ref.permute(1, 2, 0).numpy()).all(axis=2).mean()
    assert same > 0.98, same


def test_meta_round_trip_and_corners():
    rng = np.random.default_rng(2)
    imgs = [random_image(rng, s + (3,), np.uint8) for s in [(1080, 1920), (300, 200), (1, 1), (640, 640)]]
    for mode in ("letterbox", "stretch", "center_crop", "letterbox_top_left"):
        _, meta = cupyprep.preprocess(imgs, (320, 480), mode=mode)
        boxes = rng.uniform(0, 1, (4, 5, 4)) * np.array([480, 320, 480, 320])
        back = meta.to_network(meta.to_original(boxes, clip=False))
        np.testing.assert_allclose(back, boxes, rtol=1e-9, atol=1e-9)
        pts = meta.to_original(rng.uniform(0, 300, (4, 6, 2)))
        assert pts.shape == (4, 6, 2) and (pts >= 0).all()
        # flat detections with an image index give the same as the per-image form
        flat = boxes.reshape(-1, 4)
        idx = np.repeat(np.arange(4), 5)
        np.testing.assert_allclose(meta.to_original(flat, image_index=idx).reshape(4, 5, 4), meta.to_original(boxes))
    _, meta = cupyprep.preprocess(imgs, (640, 640))
    full = np.array([[[0, 140, 640, 500]], [[106, 0, 533, 640]], [[0, 0, 640, 640]], [[0, 0, 640, 640]]], float)
    np.testing.assert_allclose(meta.to_original(full)[0], [[0, 0, 1920, 1080]])
    np.testing.assert_allclose(meta.to_original(full)[1], [[0, 0, 200, 300]], atol=0.5)
    as_list = meta.to_original([b for b in full])
    np.testing.assert_allclose(as_list[0], [[0, 0, 1920, 1080]])


def _metas():
    """Letterboxed ragged sizes (a 1 x 1 image among them), center crops (negative offsets),
    and 70 images (more than the kernel takes by value: its table is uploaded)."""
    rng = np.random.default_rng(21)
    sizes = [(1080, 1920), (300, 200), (1, 1), (640, 640), (37, 53)]
    imgs = [np.zeros(s + (3,), np.uint8) for s in sizes]
    metas = [cupyprep.preprocess(imgs, (320, 480))[1], cupyprep.preprocess(imgs, (64, 64), mode="center_crop")[1]]
    many = [np.zeros((int(h), int(w), 3), np.uint8) for h, w in rng.integers(1, 90, (70, 2))]
    return metas + [cupyprep.preprocess(many, (48, 40))[1]]


def _coords(rng, shape, dtype):
    """Coordinates around the canvas with NaN, infinities, -0.0 and far values mixed in."""
    a = rng.uniform(-60, 700, shape)
    flat = a.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 7e4, 1e-30]
    flat[::7][:len(specials)] = specials[:len(flat[::7])]
    if np.dtype(dtype).kind in "iu":
        return np.nan_to_num(a, posinf=900, neginf=-900).astype(dtype)
    with np.errstate(over="ignore"):
        return a.astype(dtype)


@pytest.mark.filterwarnings("ignore:overflow encountered")  # float16 past its range: inf, in both
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("width", [2, 4])
def test_kernel_meta_mapping_equals_the_expressions(kernels, poisoned_outputs, dtype, width):
    """PreprocessMeta.to_original / to_network in one kernel equal the CPU backend's array
    expressions bit for bit (the table rounded to the coordinates' dtype, each operation on
    its own), in every form: per image, a list, a host or device image_index, strided."""
    from cupyprep._preprocess_meta import _map_expression

    rng = np.random.default_rng(22)
    for meta in _metas():
        n = len(meta)
        coords = _coords(rng, (n, 6, width), dtype)
        flat = coords.reshape(-1, width)
        idx = rng.permutation(np.repeat(np.arange(n), 6))
        strided = _coords(rng, (n, 12, 2 * width), dtype)[:, ::-2, ::2]
        for inverse in (True, False):
            table = meta._table(inverse)
            fn = meta.to_original if inverse else meta.to_network
            for clip in (False, True):
                cases = [
                    (fn(kernels.put(coords), clip=clip), _map_expression(coords, table, None, inverse, clip)),
                    (fn(kernels.put(strided), clip=clip), _map_expression(strided, table, None, inverse, clip)),
                    (fn(kernels.put(flat), image_index=idx, clip=clip),
                     _map_expression(flat, table, idx, inverse, clip)),
                    (fn(kernels.put(flat), image_index=kernels.put(idx), clip=clip),
                     _map_expression(flat, table, idx, inverse, clip)),
                ] + [(got, _map_expression(c, table, np.full(len(c), i), inverse, clip))
                     for i, (got, c) in enumerate(zip(fn([kernels.put(c) for c in coords], clip=clip), coords))]
                for got, want in cases:
                    got = kernels.get(got)
                    assert got.dtype == want.dtype and got.shape == want.shape
                    np.testing.assert_array_equal(got, want)


def test_kernel_meta_mapping_edges(kernels, poisoned_outputs):
    """No rows, and a device image_index outside [0, N) (the row becomes NaN; a host one is
    refused, naming it)."""
    meta = _metas()[0]
    got = kernels.get(meta.to_original(kernels.put(np.zeros((0, 4), np.float32)), image_index=np.zeros(0, int)))
    assert got.shape == (0, 4) and got.dtype == np.float32
    assert kernels.get(meta.to_original(kernels.put(np.zeros((5, 0, 2))))).shape == (5, 0, 2)
    boxes = np.full((3, 4), 10.0, np.float32)
    got = kernels.get(meta.to_original(kernels.put(boxes), image_index=kernels.put(np.array([0, 5, -1]))))
    assert np.isfinite(got[0]).all() and np.isnan(got[1:]).all()
    if kernels.name == "gpu":  # (under the emulator a NumPy index is a device one)
        with pytest.raises(ValueError, match=r"image_index: expected values in \[0, 5\)"):
            meta.to_original(kernels.put(boxes), image_index=np.array([0, 5, 1]))
    with pytest.raises(ValueError, match="image_index: expected"):
        meta.to_original(kernels.put(boxes), image_index=kernels.put(np.zeros(2, np.int64)))


def test_cpu_meta_mapping_refuses_an_image_index_out_of_range():
    meta = _metas()[0]
    with pytest.raises(ValueError, match=r"image_index: expected values in \[0, 5\), got -1..1"):
        meta.to_original(np.zeros((3, 4)), image_index=np.array([0, -1, 1]))


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: cupyprep.preprocess([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 3), np.float32)], (8, 8)),
         TypeError, ["images[1]", "uint8", "float32"]),
        (lambda: cupyprep.preprocess([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)], (8, 8)),
         ValueError, ["images[1]", "3 channels"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (0, 8)), ValueError, ["size"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), mean=(1, 2)), ValueError, ["mean", "3"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), mode="pad"), ValueError, ["mode", "letterbox"]),
        (lambda: cupyprep.preprocess([], (8, 8)), ValueError, ["images", "at least one"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 2), np.uint8), (8, 8)), ValueError,
         ["images", "expected 1, 3 or 4 channels", "got 2", "shape (1, 4, 4, 2)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 5), np.uint8), (8, 8)), ValueError,
         ["images", "expected 1, 3 or 4 channels", "got 5", "shape (1, 4, 4, 5)"]),
        (lambda: cupyprep.preprocess([np.zeros((4, 4, 5), np.uint8)], (8, 8)), ValueError,
         ["images", "expected 1, 3 or 4 channels", "got 5", "images[0] is", "shape (4, 4, 5)"]),
        (lambda: cupyprep.preprocess([np.zeros((4, 4, 2), np.uint8)], (8, 8)), ValueError,
         ["images", "expected 1, 3 or 4 channels", "got 2", "images[0] is", "shape (4, 4, 2)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), interpolation="bicubic"),
         ValueError, ["interpolation", "'cubic'", "got 'bicubic'"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), dtype="int32"), ValueError,
         ["dtype", "'float32', 'float16', 'uint8'", "got 'int32'"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), dtype="pixels"), TypeError,
         ["dtype", "'float32', 'float16', 'uint8'", "got 'pixels'"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), mode="center_crop",
                                     resize_size=0), ValueError, ["resize_size", "positive int", "got 0"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), mode="center_crop",
                                     resize_size=2.5), ValueError, ["resize_size", "positive int", "got 2.5"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), mode="center_crop",
                                     resize_size=True), ValueError, ["resize_size", "positive int", "got True"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), std=(1, 0, 1)), ValueError,
         ["std", "non-zero", "got (1.0, 0.0, 1.0)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), scale="1/255"), TypeError,
         ["scale", "a number", "got '1/255'"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), out=np.zeros((1, 3, 8, 9), np.float32)),
         ValueError, ["out", "shape (1, 3, 8, 8) and dtype float32", "shape (1, 3, 8, 9)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), out=np.zeros((1, 3, 8, 8), np.float16)),
         ValueError, ["out", "shape (1, 3, 8, 8) and dtype float32", "dtype float16"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), layout="NHWC", dtype="uint8",
                                     out=np.zeros((1, 3, 8, 8), np.uint8)),
         ValueError, ["out", "shape (1, 8, 8, 3) and dtype uint8", "shape (1, 3, 8, 8)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), out=[[0.0]]), TypeError,
         ["out", "expected a numpy.ndarray", "builtins.list"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), resize_size=10), ValueError, ["resize_size", "center_crop"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), layout="CHW"), ValueError, ["layout"]),
        (lambda: cupyprep.preprocess([np.zeros((0, 4, 3), np.uint8)], (8, 8)), ValueError, ["images[0]", "non-empty"]),
        (lambda: cupyprep.preprocess([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 3, 1), np.uint8)], (8, 8)),
         ValueError, ["images[1]", "HWC (or HW)"]),
        (lambda: cupyprep.preprocess(np.zeros((1, 4, 4, 3), np.uint8), (8, 8), pad_value=(1, 2)), ValueError, ["pad_value"]),
        (lambda: cupyprep.preprocess("frames", (8, 8)), TypeError, ["images"]),
    ],
)
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_empty_batch():
    batch, meta = cupyprep.preprocess(np.zeros((0, 10, 10, 3), np.uint8), (8, 8))
    assert batch.shape == (0, 3, 8, 8) and batch.dtype == np.float32 and len(meta) == 0


# --- kernels ----------------------------------------------------------------------------------
MODES = ["letterbox", "stretch", "center_crop", "letterbox_top_left"]


def reference(images, size, **kw):
    """The CPU backend's answer (cv2 recipe + NumPy normalization), with OpenCV's IPP off
    (test_resize.ipp: the kernels follow OpenCV's own arithmetic, not IPP's)."""
    opts = dict(mode="letterbox", resize_size=None, interpolation="linear", pad_value=114, mean=None,
                std=None, scale=1 / 255, swap_rb=True, layout="NCHW", dtype="float32")
    opts.update(kw)
    from cupyprep._validate import fill_values

    c = images.shape[-1] if isinstance(images, np.ndarray) and images.ndim == 4 else \
        (images[0].shape[2] if images[0].ndim == 3 else 1)
    in_dtype = images.dtype if isinstance(images, np.ndarray) else images[0].dtype
    plans = np.array([plan(i.shape[0], i.shape[1], size, opts["mode"], opts["resize_size"]) for i in images])
    mean = tuple(float(v) for v in np.broadcast_to(0.0 if opts["mean"] is None else opts["mean"], (c,)))
    std = tuple(float(v) for v in np.broadcast_to(1.0 if opts["std"] is None else opts["std"], (c,)))
    with ipp(False):
        return cpu.preprocess(list(images), size, plans, opts["interpolation"],
                              fill_values("pad_value", opts["pad_value"], c, in_dtype, in_dtype),
                              mean, std, opts["scale"], opts["swap_rb"] and c >= 3,
                              opts["layout"] == "NHWC", np.dtype(opts["dtype"]), c)


# How far a kernel's resized pixel may be from cv2.resize's (IPP off) for the inputs that
# check(exact=False) takes, in input units, given the largest input magnitude ``peak``. The
# resize step follows OpenCV's float32 operation order, which OpenCV's CPU dispatch may
# fuse into multiply-adds (see test_resize.assert_matches_opencv): the float32 results are
# then a few float32 roundings apart, and only their rounding to the stored pixel shows.
RESIZED_STEP = {
    # an integer pixel: a float32 result on the other side of a .5 tie rounds 1 apart
    np.dtype(np.uint16): lambda peak: 1.0,
    # a float16 pixel: a float32 result on the other side of a float16 tie rounds one
    # float16 ulp apart (np.spacing of the largest magnitude bounds every value's ulp)
    np.dtype(np.float16): lambda peak: float(np.spacing(np.float16(peak))),
    # a float32 pixel: a few float32 roundings of a weighted mean, whose magnitude linear
    # and area keep within the input's: 4 float32 ulps of the largest magnitude
    np.dtype(np.float32): lambda peak: 4 * float(np.spacing(np.float32(peak))),
}


def check(kernels, images, size, exact=True, **kw):
    ref = reference(images, size, **kw)
    out = kernels.poisoned(ref.shape, ref.dtype)
    arg = [kernels.put(i) for i in images] if isinstance(images, list) else kernels.put(images)
    batch, meta = cupyprep.preprocess(arg, size, out=out, **kw)
    assert batch is out and len(meta) == len(images)
    got = kernels.get(batch)
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        # RESIZED_STEP carried through the normalization (times scale / std), plus one
        # rounding of the output, which can land either side for the two results: an integer
        # step, or one ulp of the largest normalized pixel, (peak * scale + |mean|) / std
        in_dtype = np.dtype(images.dtype if isinstance(images, np.ndarray) else images[0].dtype)
        peak = max([float(np.abs(i.astype(np.float64)).max()) for i in images if i.size] or [0.0])
        scale, std = kw.get("scale", 1 / 255), float(np.min(kw.get("std") or 1.0))
        mean = float(np.max(np.abs(kw.get("mean") or 0.0)))
        step = RESIZED_STEP[in_dtype](peak) * scale / std
        top = (peak * scale + mean) / std
        out_step = 1.0 if ref.dtype.kind == "u" else float(np.spacing(ref.dtype.type(top)))
        assert_close(got, ref, atol=step + out_step, reason="OpenCV's CPU-dependent float "
                     "rounding of a resized pixel (RESIZED_STEP), scaled")
    return got


def template_args(expr):
    """The template arguments of a kernel name expression, as strings."""
    return expr[expr.index("<") + 1:expr.rindex(">")].split(", ")


def ragged_images(rng, dtype, big):
    shapes = [(48, 64), (64, 48), (1, 1), (2, 3), (33, 17), (5, 90)]
    if big:
        shapes += [(4000, 3000), (1080, 1920), (3000, 4000)]
    return [random_image(rng, s + (3,), dtype) for s in shapes]


# uint8 cubic is OpenCV's fixed point (weights taken from its plain float code, integer sums,
# no CPU-dispatched float arithmetic): with IPP off (reference()) the kernels give its bits,
# under the emulator and on an H200
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_kernel_ragged_uint8(kernels, mode, interpolation):
    rng = np.random.default_rng(3)
    images = ragged_images(rng, np.uint8, kernels.name == "gpu")
    for layout in ("NCHW", "NHWC"):
        check(kernels, images, (24, 40), mode=mode, interpolation=interpolation, layout=layout,
              mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


@pytest.mark.parametrize("mode", MODES)
def test_kernel_cubic_uniform_batches(kernels, launched, mode):
    """interpolation="cubic" on uniform batches (one geometry: shrunk, enlarged, and 1, 3
    and 4 channels) runs the fused cubic kernel and equals the CPU recipe (cv2.resize with
    INTER_CUBIC, IPP off, then the normalization), also as NHWC uint8 at scale 1 (the
    resized pixels themselves)."""
    rng = np.random.default_rng(16)
    for shape in [(3, 27, 35, 3), (2, 9, 13, 3), (2, 30, 41, 1), (2, 17, 23, 4)]:
        batch = random_image(rng, shape, np.uint8)
        check(kernels, batch, (20, 24), mode=mode, interpolation="cubic")
        check(kernels, batch, (20, 24), mode=mode, interpolation="cubic", layout="NHWC",
              dtype="uint8", scale=1.0, swap_rb=False)
    check(kernels, np.zeros((0, 27, 35, 3), np.uint8), (20, 24), mode=mode, interpolation="cubic")
    # <in, out, channels, dense, ragged, nhwc, columns per thread>: the uniform form
    assert launched and all(f == "preprocess.cu" and e.startswith("cupyprep_preprocess_cubic<")
                            and template_args(e)[4] == "false" for f, e in launched)


@pytest.mark.parametrize("mode", MODES)
def test_kernel_area(kernels, mode):
    """interpolation="area" (resize()'s area kernel, then the fused placement and
    normalization) equals the CPU recipe (cv2.resize with INTER_AREA) for a list and a
    batch, through each of OpenCV's three area algorithms: an integer factor (48 x 64 to
    the canvas's 24 x 32), other shrinks, enlargements (9 x 13, 1 x 1); with views in the
    list."""
    rng = np.random.default_rng(9)
    images = [random_image(rng, s + (3,), np.uint8) for s in [(48, 64), (37, 50), (9, 13), (1, 1)]]
    images.append(random_image(rng, (30, 44, 3), np.uint8)[::-1, ::2])
    check(kernels, images, (24, 32), mode=mode, interpolation="area", mean=(0.485, 0.456, 0.406),
          std=(0.229, 0.224, 0.225))
    check(kernels, random_image(rng, (3, 48, 64, 3), np.uint8), (24, 32), mode=mode, interpolation="area",
          layout="NHWC", dtype="uint8", scale=1.0)
    check(kernels, random_image(rng, (2, 31, 45, 3), np.uint8), (24, 32), mode=mode, interpolation="area")
    one, _ = cupyprep.preprocess(kernels.put(images[1]), (24, 32), mode=mode, interpolation="area")
    np.testing.assert_array_equal(kernels.get(one), reference([images[1]], (24, 32), mode=mode,
                                                              interpolation="area"))


def test_kernel_area_dtypes_and_channels(kernels):
    """Area for float and uint16 images (OpenCV's float arithmetic, which its CPU dispatch
    may fuse: check()'s written tolerance), an HW image beside an H x W x 1 one, 4 channels,
    and an empty batch."""
    rng = np.random.default_rng(10)
    for dtype in (np.float32, np.uint16, np.float16):
        images = [np.abs(random_image(rng, s + (3,), dtype)) for s in [(50, 38), (17, 23)]]
        check(kernels, images, (16, 20), exact=False, interpolation="area", scale=1.0)
    gray = [random_image(rng, (40, 30), np.uint8), random_image(rng, (21, 33, 1), np.uint8)]
    check(kernels, gray, (16, 16), interpolation="area")
    check(kernels, random_image(rng, (2, 33, 47, 4), np.uint8), (16, 16), interpolation="area")
    check(kernels, np.zeros((0, 27, 35, 3), np.uint8), (20, 20), interpolation="area")


def whole_factor_images(rng, dtype, channels):
    """Images that shrink by whole factors 1 to 5 on both axes to 16 x 21 (the letterbox of
    a 16 x 32 canvas, a center crop with resize_size 16, a 16 x 21 stretch), as a list with
    a view of reversed rows and a strided (not dense) view."""
    shape = (lambda h, w: (h, w)) if channels == 1 else (lambda h, w: (h, w, channels))
    images = [np.abs(random_image(rng, shape(16 * k, 21 * k), dtype)) for k in (3, 2, 1, 5, 4)]
    images.append(images[0][::-1])
    images.append(np.abs(random_image(rng, shape(96, 126), dtype))[::2, ::2])
    return images


@pytest.mark.parametrize("mode", MODES)
def test_kernel_area_whole_factors_fused(kernels, launched, mode):
    """interpolation="area" where every image shrinks by whole factors (OpenCV's fast area
    regime: 2 x 2 cells, 3 x 3 and larger, 1 x 1) runs in the fused kernel, with no resize
    launch, and equals the CPU recipe (cv2.resize with INTER_AREA, then the normalization)
    for lists with views and batches, dense or not; NHWC uint8 at scale 1 makes the
    output the resized pixels themselves."""
    rng = np.random.default_rng(11)
    images = whole_factor_images(rng, np.uint8, 3)
    size = (16, 21) if mode == "stretch" else (16, 32)
    if mode == "stretch":  # factors that differ between the axes: 2 x 3, 5 x 2, 1 x 4
        images += [random_image(rng, s, np.uint8) for s in [(32, 63, 3), (80, 42, 3), (16, 84, 3)]]
    kw = dict(mode=mode, interpolation="area", resize_size=16 if mode == "center_crop" else None)
    check(kernels, images, size, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), **kw)
    check(kernels, images, size, layout="NHWC", dtype="uint8", scale=1.0, swap_rb=False, **kw)
    batch = random_image(rng, (3, 48, 63, 3), np.uint8)
    check(kernels, batch, size, **kw)
    check(kernels, np.ascontiguousarray(batch[..., ::-1])[..., ::-1], size, **kw)
    assert {f for f, _ in launched} == {"preprocess.cu"}
    assert all(e.startswith("cupyprep_preprocess_area<") for _, e in launched)
    # one image that does not shrink by whole factors: every image through resize() first
    launched.clear()
    check(kernels, images + [random_image(rng, (50, 70, 3), np.uint8)], size, **kw)
    assert ("preprocess.cu", "cupyprep_preprocess_area<") not in {(f, e[:25]) for f, e in launched}
    assert any(f == "resize.cu" for f, _ in launched)


def test_kernel_area_whole_factors_dtypes_and_channels(kernels, launched):
    """The fused area kernel for uint16, float16 and float32 lists (OpenCV's float sums
    four at a time: cells of 9, 16 and 25 leave a remainder; check()'s written tolerance
    for OpenCV's float rounding), 1 (HW) and 4 channels, and an empty batch."""
    rng = np.random.default_rng(12)
    for dtype in (np.uint16, np.float16, np.float32):
        check(kernels, whole_factor_images(rng, dtype, 3), (16, 32), exact=False,
              interpolation="area", scale=1.0)
    for channels in (1, 4):
        check(kernels, whole_factor_images(rng, np.uint8, channels), (16, 32), interpolation="area")
    check(kernels, np.zeros((0, 32, 42, 3), np.uint8), (16, 32), interpolation="area")
    assert launched and all(e.startswith("cupyprep_preprocess_area<") for _, e in launched)


def word_path_images(kernels, rng, channels):
    """Dense uint8 images for the linear word path (kernel side, host copies): factors of
    exactly 3 (each second tap row weighs 0), 2.5 and 1.5, an enlargement (rows and columns
    clamped at the edges), widths 5..12 (the last columns, whose words would reach past
    the row, read their bytes one by one), one image starting one element into its buffer
    (off a 32-bit word), a window of a wider image (its row pitch no multiple of 4) and one
    with reversed rows."""
    shape = (lambda h, w: (h, w)) if channels == 1 else (lambda h, w: (h, w, channels))
    hosts, srcs = [], []
    for h, w in [(30, 36), (25, 30), (15, 18), (7, 9)] + [(8, w) for w in range(5, 13)]:
        hosts.append(random_image(rng, shape(h, w), np.uint8))
        srcs.append(kernels.put(hosts[-1]))
    flat = random_image(rng, (1 + 19 * 23 * channels,), np.uint8)
    hosts.append(flat[1:].reshape(shape(19, 23)))
    srcs.append(kernels.put(flat)[1:].reshape(shape(19, 23)))
    wide = random_image(rng, shape(21, 27), np.uint8)
    hosts.append(wide[1:, 2:])
    srcs.append(kernels.put(wide)[1:, 2:])
    hosts.append(hosts[0][::-1])
    srcs.append(srcs[0][::-1])
    return hosts, srcs


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_linear_uint8_word_path(kernels, launched, channels):
    """uint8 linear on dense images reads each tap row as aligned 32-bit words and blends
    packed bytes (the path W1 and W2 take): equal to the CPU recipe (cv2.resize, then the
    normalization) for every image of word_path_images, as a list and as uniform batches,
    stretched and letterboxed, into float32 and float16 planes whose size is even (two
    pixels per store) or odd (one element per store), and into NHWC uint8 at scale 1 (the
    resized pixels themselves)."""
    rng = np.random.default_rng(14)
    hosts, srcs = word_path_images(kernels, rng, channels)
    norm = dict(mean=(0.485, 0.456, 0.406, 0.5)[:channels], std=(0.229, 0.224, 0.225, 0.25)[:channels])
    for size, mode in (((10, 12), "stretch"), ((9, 11), "letterbox")):
        for dtype in ("float32", "float16"):
            ref = reference(hosts, size, mode=mode, dtype=dtype, **norm)
            out = kernels.poisoned(ref.shape, ref.dtype)
            cupyprep.preprocess(srcs, size, mode=mode, dtype=dtype, out=out, **norm)
            np.testing.assert_array_equal(kernels.get(out), ref)
    kw = dict(layout="NHWC", dtype="uint8", scale=1.0, swap_rb=False, mode="stretch")
    ref = reference(hosts, (10, 12), **kw)
    out = kernels.poisoned(ref.shape, ref.dtype)
    cupyprep.preprocess(srcs, (10, 12), out=out, **kw)
    np.testing.assert_array_equal(kernels.get(out), ref)
    for k in (0, 1, 3):  # uniform batches: factors 3, 2.5 and an enlargement
        batch = np.stack([hosts[k], random_image(rng, hosts[k].shape, np.uint8)])
        batch = batch.reshape(batch.shape[:3] + (channels,))  # NHWC, also for one channel
        check(kernels, batch, (10, 12), mode="stretch")
        check(kernels, batch, (9, 11), mode="letterbox", dtype="float16")
    # every launch (4 + 1 of the list, 6 of the batches) was the dense uint8 linear variant,
    # the one that holds the word path: <in, out, channels, dense, ragged, nhwc, columns>
    assert len(launched) == 4 + 1 + 6
    for f, e in launched:
        args = template_args(e)
        assert f == "preprocess.cu" and e.startswith("cupyprep_preprocess_linear<"), e
        assert args[0] == "unsigned char" and args[2] == str(channels) and args[3] == "true", e


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_nhwc_pair_stores(kernels, channels):
    """NHWC outputs: a thread's two adjacent pixels (2 * channels adjacent elements) go as
    pairs of elements, one store each, where q is aligned to a pair; element by element
    elsewhere (the rows of an odd-width canvas alternate for 1 and 3 channels, and so does
    an output view one pixel in, whose first pixel is off the pair grid). Equal to the CPU
    recipe in float32, float16 and uint8, through the uint8 word path (linear) and the
    element path (nearest), stretched and letterboxed (pad pixels take the pairs too)."""
    rng = np.random.default_rng(15)
    images = [random_image(rng, s + (channels,), np.uint8) for s in [(30, 41), (17, 9), (1, 1)]]
    norm = dict(mean=(0.485, 0.456, 0.406, 0.5)[:channels], std=(0.229, 0.224, 0.225, 0.25)[:channels])
    for size in ((10, 12), (9, 11)):
        for mode, interpolation in (("stretch", "linear"), ("letterbox", "linear"), ("stretch", "nearest")):
            for dtype, kw in (("float32", norm), ("float16", norm), ("uint8", dict(scale=1.0))):
                opts = dict(mode=mode, interpolation=interpolation, layout="NHWC", dtype=dtype, **kw)
                check(kernels, images, size, **opts)
                ref = reference(images, size, **opts)
                wide = kernels.poisoned((ref.shape[0], ref.shape[1], ref.shape[2] + 1, channels), ref.dtype)
                view = wide[:, :, 1:]
                batch, _ = cupyprep.preprocess([kernels.put(i) for i in images], size, out=view, **opts)
                assert batch is view
                got = kernels.get(wide)
                np.testing.assert_array_equal(got[:, :, 1:], ref)
                if dtype == "uint8":
                    assert (got[:, :, 0] == np.iinfo(np.uint8).max // 3 + 7).all()
                else:
                    assert np.isnan(got[:, :, 0]).all()


@pytest.mark.parametrize("in_dtype", [np.uint16, np.float16, np.float32])
def test_kernel_input_dtypes(kernels, in_dtype):
    rng = np.random.default_rng(4)
    images = [np.abs(random_image(rng, s + (3,), in_dtype)) for s in [(20, 30), (31, 7), (1, 1)]]
    for mode in MODES:
        check(kernels, images, (16, 16), exact=False, mode=mode, scale=1.0, pad_value=0.5)
    check(kernels, images, (16, 16), exact=True, mode="stretch", interpolation="nearest", scale=1.0)


@pytest.mark.parametrize("dtype", ["float16", "uint8"])
@pytest.mark.parametrize("channels", [1, 4])
def test_kernel_out_dtypes_and_channels(kernels, dtype, channels):
    rng = np.random.default_rng(5)
    images = [random_image(rng, s + (channels,), np.uint8) for s in [(20, 30), (9, 40)]]
    scale = 1 / 255 if dtype == "float16" else 1.0
    check(kernels, images, (16, 24), dtype=dtype, scale=scale, pad_value=tuple(range(100, 100 + channels)))
    check(kernels, np.stack([images[0]] * 2), (16, 24), dtype=dtype, scale=scale, mode="stretch")


def test_kernel_long_lists_take_one_table(kernels):
    """A list's per-image records and plans go to the kernel by value up to 64 images, and
    a longer list's as one uploaded table: both forms equal the CPU recipe, at the boundary
    too, with views (reversed rows, every other column) among the images."""
    rng = np.random.default_rng(8)
    images = [random_image(rng, (3 + i % 7, 2 + i % 11, 3), np.uint8) for i in range(70)]
    images[5] = images[5][::-1]
    images[66] = random_image(rng, (9, 12, 3), np.uint8)[:, ::2]
    for n in (64, 65, 70):
        check(kernels, images[:n], (6, 8), mode="letterbox", interpolation="linear")
    check(kernels, images, (5, 7), mode="center_crop", interpolation="nearest", layout="NHWC")


@pytest.mark.parametrize("interpolation", ["linear", "nearest", "area"])
def test_kernel_blocks_loop_past_the_grid(kernels, monkeypatch, interpolation):
    """A grid smaller than the work (past 65535 images or row groups it is) makes each
    block loop over several images, row groups and column strips: a list's image is then
    replaced in the block's shared memory between images (after every thread is done with
    the last one), and the results stay the CPU recipe's, for lists (by value and as a
    table) and batches."""
    pp_module = importlib.import_module("cupyprep.preprocess")  # the module, not the function
    launch = pp_module.launch_3d

    def small_grid(fn, n, h, w, args, block_x, block_y=1):
        launch(fn, min(n, 2), min(h, 2), min(w, block_x), args, block_x=block_x, block_y=block_y)

    monkeypatch.setattr(pp_module, "launch_3d", small_grid)
    rng = np.random.default_rng(12)
    images = [random_image(rng, s + (3,), np.uint8) for s in [(48, 64), (9, 13), (1, 1), (33, 70), (26, 20)]]
    images[3] = images[3][::-1, ::2]
    kw = dict(interpolation=interpolation, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    check(kernels, images, (24, 32), **kw)
    check(kernels, images * 14, (6, 8), mode="center_crop", **kw)  # 70 images: the table
    check(kernels, random_image(rng, (5, 31, 45, 3), np.uint8), (24, 32), mode="stretch", **kw)


def test_kernel_uniform_equals_list(kernels):
    rng = np.random.default_rng(6)
    batch = random_image(rng, (3, 27, 35, 3), np.uint8)
    for mode in MODES:
        a, _ = cupyprep.preprocess(kernels.put(batch), (20, 20), mode=mode)
        b, _ = cupyprep.preprocess([kernels.put(i) for i in batch], (20, 20), mode=mode)
        np.testing.assert_array_equal(kernels.get(a), kernels.get(b))
    check(kernels, batch, (20, 20))
    check(kernels, np.zeros((0, 27, 35, 3), np.uint8), (20, 20))


def test_kernel_photographs(kernels):
    names = ["astronaut", "coffee", "chelsea", "rocket"]
    images = [photo(n) for n in names]
    if kernels.name == "emulated":
        images = [i[::6, ::6] for i in images]  # strided views: same content, fewer threads
    check(kernels, images, (64, 64) if kernels.name == "emulated" else (640, 640))
    check(kernels, images, (56, 56) if kernels.name == "emulated" else (224, 224), mode="center_crop",
          mean=cupyprep.IMAGENET_MEAN, std=cupyprep.IMAGENET_STD, dtype="float16")


@pytest.mark.gpu
def test_gpu_torch_zero_copy_and_stream(torch_cuda):
    torch = torch_cuda
    rng = np.random.default_rng(7)
    frames = [random_image(rng, s + (3,), np.uint8) for s in [(1080, 1920), (720, 1280), (480, 640)]]
    tensors = [torch.from_numpy(f).cuda() for f in frames]
    out = torch.empty((3, 3, 640, 640), device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        batch, meta = cupyprep.preprocess(tensors, (640, 640), out=out)
    stream.synchronize()
    assert batch is out and batch.data_ptr() == out.data_ptr()
    np.testing.assert_array_equal(batch.cpu().numpy(), reference(frames, (640, 640)))
