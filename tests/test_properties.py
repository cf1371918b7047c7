"""Property-based tests: hypothesis draws the cases (shapes from 1x1 up, dtypes, channel
counts, matrices, modes, borders, strided views, boxes with ties and special values) and
each op's kernels are held to the same references as the hand-picked tests: OpenCV for
the warps and resize, the CPU backend for preprocess, normalize, NMS, multiclass NMS and
RoI Align.

Drawn floats are never subnormal: CuPy compiles every kernel with -ftz=true, so float32
subnormals are zero on the GPU (docs/exactness.md), where OpenCV and NumPy keep them.

The "ci" profile (conftest.py) draws a fixed set of cases, the same on every run; on a GPU,
``python -m pytest -m gpu tests/test_properties.py --hypothesis-profile=deep`` draws many
more, fresh each run. A failure prints the smallest case hypothesis found.
"""
from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
cv2 = pytest.importorskip("cv2")

from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cupyprep  # noqa: E402
import cupyprep.detection as det  # noqa: E402
from conftest import random_image  # noqa: E402
from cupyprep import geometry as G  # noqa: E402
from cupyprep.cpu import detection as cpu_det  # noqa: E402
from test_detection import reference_nms  # noqa: E402
from test_normalize import IN_DTYPES as NORMALIZE_IN, OUT_DTYPES as NORMALIZE_OUT  # noqa: E402
from test_normalize import check_kernel as check_normalize  # noqa: E402
from test_preprocess import MODES as PREPROCESS_MODES  # noqa: E402
from test_preprocess import check as check_preprocess  # noqa: E402
from test_resize import assert_matches_opencv as assert_resize_matches  # noqa: E402
from test_resize import cv2_resize, ipp  # noqa: E402
from test_warp import assert_matches_opencv as assert_warp_matches  # noqa: E402
from test_warp import cv2_warp  # noqa: E402

DTYPES = [np.uint8, np.uint16, np.float16, np.float32]
seeds = st.integers(0, 2**32 - 1)


def f32s(lo, hi):
    """float32 values in [lo, hi] (bounds rounded to float32), none subnormal."""
    return st.floats(float(np.float32(lo)), float(np.float32(hi)), width=32, allow_subnormal=False)


def image(rng, shape, dtype, content):
    """Random values, or only the type's extremes (saturation, cvRound at the ends)."""
    if content == "random":
        return random_image(rng, shape, dtype)
    dtype = np.dtype(dtype)
    lo, hi = (0, np.iinfo(dtype).max) if dtype.kind == "u" else (-1.0, 2.0)
    return rng.choice(np.array([lo, hi], dtype), shape)


def view(kernels, host, how):
    """``host`` on the kernel side as a caller may hand it: contiguous, rows padded (pixels
    still dense), or every other column of a wider array (pixels not dense)."""
    if how == "contiguous":
        return kernels.put(host)
    if how == "padded rows":
        pad = np.zeros((host.shape[0], 3) + host.shape[2:], host.dtype)
        return kernels.put(np.concatenate([host, pad], axis=1))[:, : host.shape[1]]
    return kernels.put(np.repeat(host, 2, axis=1))[:, ::2]


# --- warps ------------------------------------------------------------------------------------
def no_float32_subnormals(M):
    """Whether M and its inverse (the kernels read the dst -> src one, as float32) are free
    of values that are subnormal in float32 (see the module docstring)."""
    tiny = np.finfo(np.float32).tiny
    both = np.concatenate([M.ravel(), np.linalg.inv(np.vstack([M, [0, 0, 1]]) if M.shape[0] == 2
                                                    else M).ravel()])
    return not ((both != 0) & (np.abs(both) < tiny)).any()


@st.composite
def affine_matrices(draw, h, w):
    """Rotations (right angles included), scales from strong zoom-out to zoom-in, shear,
    flips and translations (half-pixel ones put coordinates on rounding ties)."""
    angle = draw(st.one_of(st.sampled_from([0.0, 90.0, -90.0, 180.0, 45.0]),
                           f32s(-180, 180)))
    scale = draw(st.one_of(st.just(1.0), f32s(0.2, 4.0)))
    shear = draw(st.one_of(st.just(0.0), f32s(-0.6, 0.6)))
    flip = draw(st.sampled_from([1.0, -1.0]))
    t = draw(st.one_of(st.tuples(st.integers(-2 * w, 2 * w), st.integers(-2 * h, 2 * h)).map(
                           lambda v: (v[0] / 2, v[1] / 2)),
                       st.tuples(f32s(-w, w), f32s(-h, h))))
    a = np.deg2rad(angle)
    c, s = scale * np.cos(a), scale * np.sin(a)
    M = np.array([[flip * c, -s + shear, t[0]], [flip * s, c, t[1]]])
    assume(abs(np.linalg.det(M[:, :2])) > 1e-3 and no_float32_subnormals(M))
    return M


@st.composite
def homographies(draw, h, w):
    """Corners moved by up to 45% of the side: strong perspective, the horizon (w = 0) may
    cross the output."""
    j = draw(st.lists(f32s(-0.45, 0.45), min_size=8, max_size=8))
    s = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    d = s + (np.float32(j).reshape(4, 2) * [max(w, 2), max(h, 2)]).astype(np.float32)
    H = cv2.getPerspectiveTransform(s, d)
    assume(np.isfinite(H).all() and abs(np.linalg.det(H)) > 1e-6 and no_float32_subnormals(H))
    return H


@st.composite
def warp_cases(draw):
    # uint8 with 3 or 4 channels (the dense kernels, most of the warp code) drawn more often
    dtype = draw(st.sampled_from(DTYPES + [np.uint8] * 2))
    channels = draw(st.sampled_from([None, 1, 2, 3, 4, 3, 4]))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 40))
    perspective = draw(st.booleans())
    batch = draw(st.sampled_from([None, 1, 3]))
    matrices = [draw(homographies(h, w) if perspective else affine_matrices(h, w))
                for _ in range(batch or 1)]
    return dict(
        dtype=dtype, channels=channels, shape=(h, w), perspective=perspective, batch=batch,
        matrices=matrices,
        size=(draw(st.integers(1, 24)), draw(st.integers(1, 40))),
        border=draw(st.sampled_from(["constant", "replicate", "reflect", "reflect101", "wrap"])),
        value=draw(st.integers(0, 255)),
        inverse=draw(st.booleans()),
        content=draw(st.sampled_from(["random", "random", "extremes"])),
        source=draw(st.sampled_from(["contiguous", "contiguous", "padded rows", "every other column"])),
        seed=draw(seeds),
    )


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@given(case=warp_cases())
def test_kernel_warp_any_case(kernels, interpolation, case):
    """warp_affine / warp_perspective against cv2 for one image or an NHWC batch with a
    matrix per image: uint8 (and every integer nearest / linear) bit for bit, the tolerances
    of test_warp.assert_matches_opencv otherwise."""
    rng = np.random.default_rng(case["seed"])
    h, w = case["shape"]
    one = (h, w) if case["channels"] is None else (h, w, case["channels"])
    case["interpolation"] = interpolation
    # cv2's cubic warp never returns for reflect101 on a one-pixel side (test_warp has that
    # case against another reference)
    assume(not (interpolation == "cubic" and case["border"] == "reflect101"
                and min(case["shape"]) == 1))
    n = case["batch"]
    if n is not None and case["channels"] is None:
        one = one + (1,)  # a batch is NHWC
    host = image(rng, (n or 1,) + one, case["dtype"], case["content"])
    mats = np.stack(case["matrices"])
    if n is None:
        host, mats = host[0], mats[0]
    with ipp(False):  # OpenCV's own code, as the kernels (test_warp.no_ipp)
        refs = [cv2_warp(np.ascontiguousarray(img), m, case["size"], case["interpolation"],
                         case["border"], case["value"], case["perspective"], case["inverse"])
                for img, m in zip(host if n else [host], mats if n else [mats])]
    ref = np.stack(refs) if n else refs[0].reshape(case["size"] + one[2:])
    if case["source"] == "contiguous" or n is not None:
        src = kernels.put(host)
    else:
        src = view(kernels, host, case["source"])
    out = kernels.poisoned(ref.shape, host.dtype)
    fn = G.warp_perspective if case["perspective"] else G.warp_affine
    res = fn(src, mats, case["size"], interpolation=case["interpolation"], border_mode=case["border"],
             border_value=case["value"], inverse_map=case["inverse"], out=out)
    assert res is out
    taps = max(float(np.abs(host.astype(np.float64)).max()), float(case["value"]))
    assert_warp_matches(kernels.get(res), ref, case["interpolation"], case["dtype"], scale=taps)


# --- resize -----------------------------------------------------------------------------------
@st.composite
def resize_shapes(draw):
    """(source, output) sizes: any pair, or whole factors down (area's cells, 2x2's own
    arithmetic) and up. The third item says whether the sizes are whole factors down."""
    shape = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    how = draw(st.sampled_from(["any", "any", "whole factors down", "whole factors up"]))
    if how == "any":
        return shape, (draw(st.integers(1, 60)), draw(st.integers(1, 60))), False
    fy, fx = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    if how == "whole factors up":
        return shape, (min(shape[0] * fy, 80), min(shape[1] * fx, 80)), False
    out = (draw(st.integers(1, 16)), draw(st.integers(1, 16)))
    return (out[0] * fy, out[1] * fx), out, True


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic", "area"])
@given(dtype=st.sampled_from(DTYPES), channels=st.sampled_from([None, 1, 2, 3, 4, 5]),
       shapes=resize_shapes(), content=st.sampled_from(["random", "random", "extremes"]),
       source=st.sampled_from(["contiguous", "padded rows", "every other column"]), seed=seeds)
def test_kernel_resize_any_case(kernels, dtype, channels, shapes, mode, content, source, seed):
    """resize against cv2.resize (IPP off), with test_resize.assert_matches_opencv's
    tolerances: size pairs up, down and mixed, 1 to 5 channels, strided sources. Integer
    area by whole factors is held bit for bit: OpenCV sums the cell exactly (in int32, or
    for uint16 in float32, exact for these cells of at most 25 elements) and multiplies
    once by 1 / area, with no multiply-add its CPU dispatch could fuse."""
    shape, size, whole = shapes
    rng = np.random.default_rng(seed)
    host = image(rng, shape if channels is None else shape + (channels,), dtype, content)
    with ipp(False):
        ref = cv2_resize(host, size, mode)
    src = view(kernels, host, source)
    out = kernels.poisoned(ref.shape, host.dtype)
    res = cupyprep.resize(src, size, interpolation=mode, out=out)
    assert res is out
    if mode == "area" and whole and np.dtype(dtype).kind == "u":
        np.testing.assert_array_equal(kernels.get(res), ref)
    else:
        assert_resize_matches(kernels.get(res), ref, mode)


# --- preprocess -------------------------------------------------------------------------------
@given(shapes=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), min_size=1, max_size=3),
       channels=st.sampled_from([1, 3, 4]), size=st.tuples(st.integers(1, 40), st.integers(1, 40)),
       mode=st.sampled_from(PREPROCESS_MODES), interpolation=st.sampled_from(["nearest", "linear"]),
       layout=st.sampled_from(["NCHW", "NHWC"]), out=st.sampled_from(["float32", "float16", "uint8"]),
       normalize=st.booleans(), swap_rb=st.booleans(), pad=st.integers(0, 255), seed=seeds)
def test_kernel_preprocess_any_case(kernels, shapes, channels, size, mode, interpolation, layout,
                                    out, normalize, swap_rb, pad, seed):
    """The fused kernel against the CPU recipe (cv2 resize and border, NumPy normalization)
    on ragged uint8 batches, bit for bit, in every mode, layout and output type."""
    rng = np.random.default_rng(seed)
    images = [random_image(rng, s + (channels,), np.uint8) for s in shapes]
    kw = dict(mode=mode, interpolation=interpolation, layout=layout, dtype=out, pad_value=pad,
              swap_rb=swap_rb and channels >= 3)
    if out == "uint8":
        kw["scale"] = 1.0
    elif normalize:
        kw["mean"] = tuple(rng.uniform(0, 1, channels).round(3))
        kw["std"] = tuple(rng.uniform(0.1, 1, channels).round(3))
    check_preprocess(kernels, images, size, **kw)


# --- normalize --------------------------------------------------------------------------------
@given(in_dtype=st.sampled_from(NORMALIZE_IN), out_dtype=st.sampled_from(NORMALIZE_OUT),
       shape=st.tuples(st.integers(0, 3), st.integers(1, 9), st.integers(1, 9)),
       channels=st.sampled_from([None, 1, 2, 3, 4]), layout=st.sampled_from(["NCHW", "NHWC"]),
       scale=st.sampled_from([1.0, 1 / 255, 40.0, 0.5]), swap_rb=st.booleans(), seed=seeds)
def test_kernel_normalize_any_case(kernels, in_dtype, out_dtype, shape, channels, layout, scale,
                                   swap_rb, seed):
    """normalize against the CPU backend, bit for bit (and float32 against float64 math):
    batches (empty ones too), single images, gray and 1-4 channels, per-channel mean / std."""
    rng = np.random.default_rng(seed)
    n, h, w = shape
    c = 1 if channels is None else channels
    if channels is None:
        img, layout = random_image(rng, (h, w), in_dtype), "CHW"
    else:
        img = random_image(rng, (n, h, w, c), in_dtype)
    mean = tuple(rng.uniform(-0.5, 0.5, c))
    std = tuple(rng.uniform(0.2, 2.0, c))
    check_normalize(kernels, img, mean, std, scale, swap_rb and c >= 3, layout, out_dtype)


# --- NMS --------------------------------------------------------------------------------------
@st.composite
def detections(draw):
    """Boxes from a few shapes: random, repeated, degenerate (zero area, inverted), with a
    NaN or an infinity now and then; scores from a small set (ties) or random, with NaN and
    infinities."""
    n = draw(st.integers(0, 150))
    rng = np.random.default_rng(draw(seeds))
    c = rng.uniform(0, draw(st.sampled_from([20.0, 100.0])), (n, 2))
    s = rng.uniform(1.0, 30.0, (n, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], axis=1)
    if n and draw(st.booleans()):
        boxes[rng.integers(0, n, n // 3)] = boxes[rng.integers(0, n, n // 3)]  # duplicates
    if n and draw(st.booleans()):
        k = rng.integers(0, n, max(1, n // 10))
        boxes[k, 2:] = boxes[k, :2] if draw(st.booleans()) else boxes[k, :2] - 3  # degenerate
    if n and draw(st.booleans()):
        boxes[rng.integers(0, n), rng.integers(0, 4)] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    ties = draw(st.booleans())
    scores = (rng.integers(0, 5, n) / 4) if ties else rng.random(n)
    if n and draw(st.booleans()):
        scores[rng.integers(0, n, max(1, n // 20))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    classes = None if draw(st.booleans()) else rng.integers(-2, 3, n).astype(np.int64)
    threshold = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), f32s(-0.1, 1.1)))
    return boxes.astype(dtype), scores.astype(dtype), classes, threshold


@given(case=detections())
def test_kernel_nms_any_case(kernels, case):
    """nms / batched_nms against the NumPy backend in both forms (kept indices, and padded
    with a count); float32 also against the plain-Python algorithm (float16 boxes take
    torchvision's half-precision side lengths, which that algorithm does not model: two
    equal boxes can then have an IoU above 1)."""
    boxes, scores, classes, threshold = case
    ref = cpu_det.nms(boxes, scores, threshold, classes)
    if boxes.dtype == np.float32:
        np.testing.assert_array_equal(ref, reference_nms(boxes, scores, threshold, classes))
    args = (kernels.put(boxes), kernels.put(scores))
    if classes is None:
        got = det.nms(*args, threshold)
        padded, count = det.nms(*args, threshold, return_count=True)
    else:
        got = det.batched_nms(*args, kernels.put(classes), threshold)
        padded, count = det.batched_nms(*args, kernels.put(classes), threshold, return_count=True)
    np.testing.assert_array_equal(kernels.get(got), ref)
    padded = kernels.get(padded)
    assert int(kernels.get(count)) == len(ref)
    np.testing.assert_array_equal(padded[: len(ref)], ref)
    assert (padded[len(ref):] == -1).all()


# --- RoI Align --------------------------------------------------------------------------------
@given(n=st.integers(1, 2), c=st.integers(1, 5), hw=st.tuples(st.integers(1, 14), st.integers(1, 14)),
       k=st.integers(0, 8), size=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       scale=st.sampled_from([1.0, 0.5, 0.25, 0.125, 0.3]), sampling=st.sampled_from([-1, 0, 1, 2, 3]),
       aligned=st.booleans(), dtype=st.sampled_from([np.float32, np.float16]), seed=seeds)
def test_kernel_roi_align_any_case(kernels, n, c, hw, k, size, scale, sampling, aligned, dtype, seed):
    """roi_align against the NumPy backend, bit for bit: rois inside, across and outside the
    map, tiny and huge, some pointing past the batch."""
    rng = np.random.default_rng(seed)
    feat = rng.standard_normal((n, c) + hw).astype(dtype)
    extent = max(hw) / scale
    xy = rng.uniform(-0.3 * extent, 1.1 * extent, (k, 2))
    wh = rng.uniform(0, extent, (k, 2)) * rng.choice([0.05, 1.0, 3.0], (k, 1))
    idx = rng.integers(0, n + 1, (k, 1))  # n: past the batch, zeros
    rois = np.concatenate([idx, xy, xy + wh], 1).astype(dtype)
    ref = cpu_det.roi_align(feat, rois, size, scale, sampling, aligned).astype(dtype)
    got = det.roi_align(kernels.put(feat), kernels.put(rois), size, scale, sampling, aligned)
    assert kernels.get(got).dtype == dtype
    np.testing.assert_array_equal(kernels.get(got), ref)


@given(b=st.integers(1, 3), n=st.integers(0, 60), c=st.sampled_from([None, 1, 3]),
       agnostic=st.booleans(), score_threshold=st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5]), f32s(0.0, 0.9)),
       top_k=st.one_of(st.none(), st.integers(1, 100)), max_detections=st.integers(1, 40),
       threshold=f32s(0.0, 1.0), dtype=st.sampled_from([np.float32, np.float16]),
       ties=st.booleans(), seed=seeds)
def test_kernel_multiclass_nms_any_case(kernels, b, n, c, agnostic, score_threshold, top_k,
                                        max_detections, threshold, dtype, ties, seed):
    """multiclass_nms against the NumPy backend: every output field, per class or across
    classes, with and without a score threshold (scores equal to it too) and top_k, tied and
    NaN scores."""
    rng = np.random.default_rng(seed)
    c0 = rng.uniform(0, 60, (b, n, 2))
    wh = rng.uniform(2, 25, (b, n, 2))
    boxes = np.concatenate([c0, c0 + wh], axis=2).astype(dtype)
    shape = (b, n) if c is None else (b, n, c)
    scores = (rng.integers(0, 4, shape) / 4 if ties else rng.random(shape)).astype(dtype)
    if scores.size and ties:
        scores.reshape(-1)[rng.integers(0, scores.size)] = np.nan
    s3 = scores if scores.ndim == 3 else scores[:, :, None]
    idx, cls, counts = cpu_det.multiclass_nms(boxes, s3, threshold, score_threshold, top_k,
                                              max_detections, agnostic)
    valid, rows = idx >= 0, np.arange(b)[:, None]
    safe = np.where(valid, idx, 0)
    if n == 0:  # nothing kept: gather from one zero row
        boxes_at, s3_at = np.zeros((b, 1, 4), dtype), np.zeros((b, 1, s3.shape[2]), dtype)
    else:
        boxes_at, s3_at = boxes, s3
    ref = det.Detections(counts, np.where(valid[..., None], boxes_at[rows, safe], 0).astype(dtype),
                         np.where(valid, s3_at[rows, safe, np.where(valid, cls, 0)], 0).astype(dtype),
                         cls, idx)
    got = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), iou_threshold=threshold,
                             score_threshold=score_threshold, top_k=top_k,
                             max_detections=max_detections, class_agnostic=agnostic)
    for name, a, r in zip(ref._fields, got, ref):
        np.testing.assert_array_equal(kernels.get(a), r, err_msg=name)
