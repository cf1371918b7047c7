"""Detection post-processing: NMS (plain, per class, per image), box ops, decoders,
roi_align. The NumPy backend against hand-worked cases and a plain-Python NMS (CI) and
against torchvision where it imports; the kernels against the NumPy backend (emulated in
CI, on the GPU with -m gpu) and against torchvision on the GPU."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep.detection as det
from conftest import assert_close, torch_graphs_need_caching, tune
from cupyprep import _arrays, _kernels, _nms_pipeline, _nms_plan
from cupyprep._specs import nms as nms_spec
from cupyprep._specs import roi_align as roi_spec
from cupyprep.cpu import detection as cpu


def random_boxes(rng, n, extent=100.0, sides=(5.0, 30.0), dtype=np.float32):
    """W3's recipe at a smaller scale: random centers, random sides."""
    c = rng.uniform(0, extent, (n, 2))
    s = rng.uniform(sides[0], sides[1], (n, 2))
    return np.concatenate([c - s / 2, c + s / 2], axis=1).astype(dtype)


def distinct_scores(rng, n, dtype=np.float32):
    """Scores without ties (a permutation of evenly spaced values)."""
    s = (rng.permutation(n) + 1) / (n + 1)
    return s.astype(dtype)


@np.errstate(all="ignore")
def reference_nms(boxes, scores, threshold, classes=None, half=False):
    """torchvision's algorithm in plain Python: sort, then for each kept box suppress the
    later boxes over the threshold; IoU in float32 scalars.

    ``half``: its arithmetic for float16 boxes (devIoU with T = c10::Half), where the
    difference of two float16 coordinates is a float16 again: the overlap's width and
    height and each box's height y2 - y1 are rounded to float16 (round to nearest even),
    while a box's width is taken in float32 (its area is ``(float(x2) - x1) * (y2 - y1)``,
    the cast applied to x2 only); everything else in float32."""
    f = np.float32

    def side(d):  # a difference of two coordinates, as T computes it
        return f(np.float16(d)) if half else d
    # NaN scores first (torch.sort's order), then descending, ties by index
    order = sorted(range(len(scores)), key=lambda i: (not np.isnan(scores[i]),
                                                      -float(np.nan_to_num(scores[i])), i))
    removed = set()
    keep = []
    for a, i in enumerate(order):
        if i in removed:
            continue
        keep.append(i)
        x1, y1, x2, y2 = (f(v) for v in boxes[i])
        with np.errstate(invalid="ignore", over="ignore"):
            area_i = (x2 - x1) * side(y2 - y1)
        for j in order[a + 1:]:
            if classes is not None and classes[j] != classes[i]:
                continue
            u1, v1, u2, v2 = (f(v) for v in boxes[j])
            # fmin / fmax: NaN-ignoring, as CUDA's min / max on floats
            w = np.fmax(side(np.fmin(x2, u2) - np.fmax(x1, u1)), f(0))
            h = np.fmax(side(np.fmin(y2, v2) - np.fmax(y1, v1)), f(0))
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                inter = w * h
                if inter / (area_i + (u2 - u1) * side(v2 - v1) - inter) > f(threshold):
                    removed.add(j)
    return np.array(keep, np.int64)


# --- NMS: the NumPy backend (CI) --------------------------------------------------------------------
def test_cpu_nms_hand_case():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.95], np.float32)
    # IoU(box 0, box 1) = 81 / 119 = 0.68; box 3 equals box 0 and scores higher
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), [3, 2])
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.7), [3, 1, 2])
    np.testing.assert_array_equal(det.nms(boxes, scores, 1.0), [3, 0, 1, 2])


def test_cpu_nms_threshold_is_strict():
    # IoU exactly 0.5 (50 / 100, exact in float32): kept at 0.5, removed just below
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), [0, 1])
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5 - 1e-5), [0])
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5 + 1e-5), [0, 1])


def test_cpu_nms_ties_keep_index_order():
    boxes = random_boxes(np.random.default_rng(0), 40, extent=400)
    scores = np.full(40, 0.5, np.float32)
    keep = det.nms(boxes, scores, 0.5)
    assert list(keep) == sorted(keep)  # equal scores: ascending index
    scores[[3, 7]] = [0.0, -0.0]  # -0.0 ties with 0.0: index order again
    order = cpu.descending_order(scores)
    assert list(order[-2:]) == [3, 7]


def test_cpu_nms_nan_scores_sort_first_and_nan_boxes_suppress_nothing():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10], [np.nan, 0, 10, 10]], np.float32)
    scores = np.array([0.9, np.nan, 0.1, 0.99], np.float32)
    # order: NaN score (1), 0.99 (3), 0.9 (0), 0.1 (2); box 3 has a NaN coordinate, which
    # fmax ignores: its IoU with an equal box is 1 as if x1 were the other's
    keep = det.nms(boxes, scores, 0.5)
    np.testing.assert_array_equal(keep, reference_nms(boxes, scores, 0.5))
    assert keep[0] == 1


def test_cpu_nms_degenerate_boxes():
    # zero-area boxes: IoU 0 / 0 = NaN never exceeds the threshold; inverted boxes have a
    # negative area and an inter of 0
    boxes = np.array([[5, 5, 5, 5], [5, 5, 5, 5], [10, 10, 0, 0], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6], np.float32)
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), [0, 1, 2, 3])


def test_cpu_nms_everything_suppressed_and_empty():
    boxes = np.tile(np.array([[1, 2, 30, 40]], np.float32), (10, 1))
    scores = distinct_scores(np.random.default_rng(1), 10)
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), [int(np.argmax(scores))])
    empty = det.nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.5)
    assert empty.shape == (0,) and empty.dtype == np.int64


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cpu_nms_matches_plain_python(dtype):
    rng = np.random.default_rng(2)
    boxes = random_boxes(rng, 300, dtype=dtype)
    scores = distinct_scores(rng, 300, dtype=np.float32)
    # float16 boxes: torchvision's half arithmetic (side lengths rounded to float16)
    half = dtype == np.float16
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), reference_nms(boxes, scores, 0.5, half=half))
    # boxes about the origin: a side from a coordinate near 0 to one far from it needs
    # more digits than float16 has, and there the rounding changes what is kept
    rng = np.random.default_rng(1)
    boxes = random_boxes(rng, 300, extent=10, sides=(0.5, 10), dtype=dtype)
    scores = distinct_scores(rng, 300)
    differ = False
    for thr in (0.5, 0.7):
        ref = reference_nms(boxes, scores, thr, half=half)
        np.testing.assert_array_equal(det.nms(boxes, scores, thr), ref)
        differ |= not np.array_equal(ref, reference_nms(boxes, scores, thr))
    assert differ == half


def half_rounding_case():
    """float16 boxes whose IoU the float16 rounding of the side lengths changes, two pairs
    apart (every IoU across the pairs is 0), scores falling with the index; e = 2**-13
    (a float16 normal number, so every coordinate is exact):

    pair 1, box 0 (0, 0, 1, 1) and box 1 (0, e, 1, 1): their overlap's height and box 1's
    height are 1 - e, which float16 rounds to 1 (its neighbours below 1 are 2**-11 apart,
    1 - e is e from 1 and 3e from 1 - 2**-11). float32: IoU = (1 - e) / (1 + (1 - e) -
    (1 - e)) = 1 - e = 0.99987793 (every step exact); float16: 1 / (1 + 1 - 1) = 1.

    pair 2, box 2 (-1, -1, 0, 0) and box 3 (-1, -1, -e, 0): the overlap's width is 1 - e,
    rounded to 1, but box 3's width enters its area unrounded. float32: IoU = 1 - e again;
    float16: 1 / (1 + (1 - e) - 1) = 1 / (1 - e) = 1.000122 (rounding box 3's width too
    would give 1).

    Returns (boxes, scores, {threshold: (kept as float16, kept as float32)}): at 0.9999
    IoU 1 and 1.000122 are over it, 1 - e is not; at 1.0 only 1.000122 is over it."""
    e = 2.0 ** -13
    boxes = np.array([[0, 0, 1, 1], [0, e, 1, 1], [-1, -1, 0, 0], [-1, -1, -e, 0]], np.float16)
    scores = np.array([0.9, 0.8, 0.7, 0.6], np.float32)
    return boxes, scores, {0.9999: ([0, 2], [0, 1, 2, 3]), 1.0: ([0, 1, 2], [0, 1, 2, 3])}


def test_cpu_nms_float16_rounds_side_lengths():
    boxes, scores, expected = half_rounding_case()
    for thr, (kept16, kept32) in expected.items():
        np.testing.assert_array_equal(reference_nms(boxes, scores, thr, half=True), kept16, err_msg=str(thr))
        np.testing.assert_array_equal(reference_nms(boxes, scores, thr), kept32, err_msg=str(thr))
        np.testing.assert_array_equal(det.nms(boxes, scores, thr), kept16, err_msg=str(thr))
        np.testing.assert_array_equal(det.nms(boxes.astype(np.float32), scores, thr), kept32, err_msg=str(thr))
        # per class (batched_nms, multiclass_nms) the same arithmetic
        np.testing.assert_array_equal(det.batched_nms(boxes, scores, np.zeros(4, np.int64), thr), kept16)
        d = det.multiclass_nms(boxes, scores, iou_threshold=thr, max_detections=4)
        np.testing.assert_array_equal(d.indices[0, :int(d.counts[0])], kept16)


def test_cpu_return_count_form():
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(rng, 50), distinct_scores(rng, 50)
    keep = det.nms(boxes, scores, 0.4)
    padded, count = det.nms(boxes, scores, 0.4, return_count=True)
    assert padded.shape == (50,) and int(count) == len(keep)
    np.testing.assert_array_equal(padded[: len(keep)], keep)
    assert (padded[len(keep):] == -1).all()


def test_cpu_batched_nms_is_per_class_nms():
    rng = np.random.default_rng(4)
    boxes, scores = random_boxes(rng, 200), distinct_scores(rng, 200)
    idxs = rng.integers(0, 4, 200)
    keep = det.batched_nms(boxes, scores, idxs, 0.5)
    per_class = np.concatenate([np.flatnonzero(idxs == c)[reference_nms(boxes[idxs == c], scores[idxs == c], 0.5)]
                                for c in range(4)])
    np.testing.assert_array_equal(keep, per_class[np.argsort(-scores[per_class], kind="stable")])


def as_kind(kind, a):
    """A NumPy input as the array kind of a CPU-backend call: NumPy or a torch CPU tensor."""
    if kind == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(np.ascontiguousarray(a))
    return a


def from_kind(kind, a):
    """A result of a ``kind`` call (checked to be of that kind, on the CPU) as NumPy."""
    if kind == "torch":
        import torch

        assert isinstance(a, torch.Tensor) and a.device.type == "cpu", type(a)
        return a.numpy()
    assert isinstance(a, np.ndarray), type(a)
    return a


def reference_multiclass(boxes, scores, iou_threshold, score_threshold, top_k, max_detections):
    """One image's per-class multiclass_nms from the documented convention: candidates
    (box, class) over the threshold by descending score (ties by n * C + c), the first
    top_k, reference_nms per class, the first max_detections. Returns (indices, classes,
    boxes, scores) of the kept."""
    C = scores.shape[1]
    flat = scores.reshape(-1)
    cand = np.flatnonzero(flat > score_threshold)
    cand = cand[np.argsort(-flat[cand], kind="stable")][:top_k]
    box_i, cls_i = cand // C, cand % C
    keep = reference_nms(boxes[box_i], flat[cand], iou_threshold, cls_i)[:max_detections]
    return box_i[keep], cls_i[keep], boxes[box_i[keep]], flat[cand[keep]]


def check_flatten(d, host):
    """``d.flatten()`` against the valid slots of every field, image by image (``host``
    brings a field back as NumPy, checking its kind)."""
    counts = host(d.counts)
    B = len(counts)
    flat = d.flatten()
    for name in ("boxes", "scores", "classes", "indices"):
        field = host(getattr(d, name))
        parts = [field[b, :counts[b]] for b in range(B)]
        want = np.concatenate(parts) if parts else field.reshape((0,) + field.shape[2:])
        got = host(getattr(flat, name))
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
        np.testing.assert_array_equal(got, want, err_msg=name)
    want = np.concatenate([np.full(counts[b], b, np.int64) for b in range(B)] or [np.zeros(0, np.int64)])
    got = host(flat.image_index)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want, err_msg="image_index")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_cpu_multiclass_is_per_image_batched_nms(kind):
    """NumPy arrays and torch CPU tensors (the NumPy backend, torch tensors back), and
    flatten() of either (torch CPU results are read back without a device)."""
    rng = np.random.default_rng(5)
    B, N, C = 3, 60, 4
    boxes = np.stack([random_boxes(rng, N) for _ in range(B)])
    scores = rng.random((B, N, C)).astype(np.float32)
    scores[1] *= 0.33  # 23 candidates over 0.3: fewer than max_detections
    scores[2] *= 0.3  # none over 0.3
    d = det.multiclass_nms(as_kind(kind, boxes), as_kind(kind, scores), iou_threshold=0.45, score_threshold=0.3,
                           top_k=150, max_detections=25)
    h = d._replace(**{name: from_kind(kind, a) for name, a in d._asdict().items()})
    assert h.boxes.shape == (B, 25, 4) and h.scores.shape == (B, 25) and h.counts.shape == (B,)
    assert h.counts.dtype == h.classes.dtype == h.indices.dtype == np.int64
    for b in range(B):
        idx, cls, kept_boxes, kept_scores = reference_multiclass(boxes[b], scores[b], 0.45, 0.3, 150, 25)
        k = int(h.counts[b])
        assert k == len(idx)
        np.testing.assert_array_equal(h.indices[b, :k], idx)
        np.testing.assert_array_equal(h.classes[b, :k], cls)
        np.testing.assert_array_equal(h.boxes[b, :k], kept_boxes)
        np.testing.assert_array_equal(h.scores[b, :k], kept_scores)
        assert (h.classes[b, k:] == -1).all() and (h.indices[b, k:] == -1).all()
        assert (h.boxes[b, k:] == 0).all() and (h.scores[b, k:] == 0).all()
    assert h.counts[0] == 25 and 0 < h.counts[1] < 25 and h.counts[2] == 0  # cut, padded, empty
    check_flatten(d, lambda a: from_kind(kind, a))


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_cpu_multiclass_agnostic_takes_best_class(kind):
    boxes = as_kind(kind, np.array([[[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]]], np.float32))
    scores = as_kind(kind, np.array([[[0.1, 0.8], [0.9, 0.2], [0.3, 0.3]]], np.float32))
    d = det.multiclass_nms(boxes, scores, class_agnostic=True, max_detections=5)
    assert int(from_kind(kind, d.counts)[0]) == 2
    np.testing.assert_array_equal(from_kind(kind, d.indices)[0, :2], [1, 2])
    np.testing.assert_array_equal(from_kind(kind, d.classes)[0, :2], [0, 0])  # tie 0.3 / 0.3: class 0
    check_flatten(d, lambda a: from_kind(kind, a))
    # per class: class 0 keeps boxes 1, 2; class 1 keeps boxes 0, 2
    d = det.multiclass_nms(boxes, scores, max_detections=5)
    assert int(from_kind(kind, d.counts)[0]) == 4
    np.testing.assert_array_equal(from_kind(kind, d.indices)[0, :4], [1, 0, 2, 2])
    np.testing.assert_array_equal(from_kind(kind, d.classes)[0, :4], [0, 1, 0, 1])
    check_flatten(d, lambda a: from_kind(kind, a))


def test_cpu_multiclass_one_image_and_empty_batch():
    """(N, 4) boxes with (N, C) or (N,) scores are one image: B = 1, the documented
    per-image convention; a batch of no images (B = 0) gives no detections, shaped (0, ...);
    images of no boxes (N = 0) give padding only."""
    rng = np.random.default_rng(42)
    N, C, D = 50, 3, 60
    boxes = random_boxes(rng, N)
    scores = rng.random((N, C)).astype(np.float32)
    for s in (scores, scores[:, 1]):  # per class; one class
        d = det.multiclass_nms(boxes, s, iou_threshold=0.5, score_threshold=0.6, max_detections=D)
        shapes = [a.shape for a in d]
        assert shapes == [(1,), (1, D, 4), (1, D), (1, D), (1, D)], shapes
        idx, cls, kept_boxes, kept_scores = reference_multiclass(boxes, s.reshape(N, -1), 0.5, 0.6, None, D)
        k = int(d.counts[0])
        assert k == len(idx) and 0 < k < D
        np.testing.assert_array_equal(d.indices[0, :k], idx)
        np.testing.assert_array_equal(d.classes[0, :k], cls)
        np.testing.assert_array_equal(d.boxes[0, :k], kept_boxes)
        np.testing.assert_array_equal(d.scores[0, :k], kept_scores)
        assert (d.indices[0, k:] == -1).all() and (d.classes[0, k:] == -1).all()
        assert (d.boxes[0, k:] == 0).all() and (d.scores[0, k:] == 0).all()
        check_flatten(d, np.asarray)
    for s in (np.zeros((0, N, C), np.float16), np.zeros((0, N), np.float32)):
        d = det.multiclass_nms(np.zeros((0, N, 4), np.float32), s, max_detections=D)
        ref = det.Detections(np.zeros(0, np.int64), np.zeros((0, D, 4), np.float32), np.zeros((0, D), s.dtype),
                             np.zeros((0, D), np.int64), np.zeros((0, D), np.int64))
        assert_detections_equal(d, ref, np.asarray)
        check_flatten(d, np.asarray)
    for b in (2, None):  # two images of no boxes; one image of no boxes
        lead = (b,) if b else ()
        d = det.multiclass_nms(np.zeros(lead + (0, 4), np.float32), np.zeros(lead + (0, C), np.float16),
                               max_detections=4)
        B = b or 1
        ref = det.Detections(np.zeros(B, np.int64), np.zeros((B, 4, 4), np.float32), np.zeros((B, 4), np.float16),
                             np.full((B, 4), -1, np.int64), np.full((B, 4), -1, np.int64))
        assert_detections_equal(d, ref, np.asarray)
        check_flatten(d, np.asarray)


def raises_naming(exc, call, words):
    """``call()`` raises ``exc`` with every one of ``words`` in its message: the argument's
    name, what was expected and what came."""
    with pytest.raises(exc) as info:
        call()
    missing = [w for w in words if w not in str(info.value)]
    assert not missing, f"{missing} not in {str(info.value)!r}"


def test_nms_argument_errors():
    boxes = np.zeros((3, 4), np.float32)
    raises_naming(ValueError, lambda: det.nms(boxes, np.zeros(4, np.float32), 0.5),
                  ["scores:", "expected shape (3,) like boxes", "got numpy.ndarray of shape (4,)"])
    raises_naming(ValueError, lambda: det.nms(np.zeros((3, 5), np.float32), np.zeros(3, np.float32), 0.5),
                  ["boxes:", "expected shape (N, 4)", "got numpy.ndarray of shape (3, 5)"])
    raises_naming(TypeError, lambda: det.nms(boxes.astype(np.float64), np.zeros(3, np.float32), 0.5),
                  ["boxes:", "expected dtype float32 / float16", "and dtype float64"])
    raises_naming(TypeError, lambda: det.nms(boxes, np.zeros(3, np.float32), "0.5"),
                  ["iou_threshold:", "expected a number", "got '0.5'"])
    raises_naming(ValueError, lambda: det.multiclass_nms(boxes[None], np.zeros((1, 3), np.float32), max_detections=0),
                  ["max_detections:", "expected a positive int", "got 0"])


def _z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


_ROI_FEATURES = _z(1, 2, 5, 5)

# (call, exception, words its message must hold: the argument, the expected, the actual)
ARGUMENT_ERRORS = [
    pytest.param(lambda: det.batched_nms(_z(3, 4), _z(3), _z(3), 0.5), TypeError,
                 ["idxs:", "expected dtype int64 / int32 / int16 / int8 / uint8", "and dtype float32"],
                 id="batched_nms-idxs-dtype"),
    pytest.param(lambda: det.batched_nms(_z(3, 4), _z(3), _z(4, dtype=np.int64), 0.5), ValueError,
                 ["idxs:", "expected shape (3,) like boxes", "of shape (4,)"], id="batched_nms-idxs-shape"),
    pytest.param(lambda: det.batched_nms(_z(3, 4), _z(3), _z(3, 1, dtype=np.int64), 0.5), ValueError,
                 ["idxs:", "expected shape (3,) like boxes", "of shape (3, 1)"], id="batched_nms-idxs-2d"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 4, 2)), ValueError,
                 ["scores:", "expected shape (2, 3) or (2, 3, C) like boxes", "of shape (2, 4, 2)"],
                 id="multiclass-scores-shape"),
    pytest.param(lambda: det.multiclass_nms(_z(3, 4), _z(4)), ValueError,
                 ["scores:", "expected shape (3,) or (3, C) like boxes", "of shape (4,)"],
                 id="multiclass-one-image-scores-shape"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 3, 0)), ValueError,
                 ["scores:", "expected at least one class", "of shape (2, 3, 0)"], id="multiclass-no-class"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 3), top_k=0), ValueError,
                 ["top_k:", "expected a positive int or None", "got 0"], id="multiclass-top_k-zero"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 3), top_k=-5), ValueError,
                 ["top_k:", "expected a positive int or None", "got -5"], id="multiclass-top_k-negative"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 3), top_k=2.5), ValueError,
                 ["top_k:", "expected a positive int or None", "got 2.5"], id="multiclass-top_k-float"),
    pytest.param(lambda: det.multiclass_nms(_z(2, 3, 4), _z(2, 3), score_threshold="0.3"), TypeError,
                 ["score_threshold:", "expected a number", "got '0.3'"], id="multiclass-score_threshold-type"),
    pytest.param(lambda: det.box_convert(_z(3, 4), "xyxy", "xyzw"), ValueError,
                 ["out_fmt:", "expected one of ['xyxy', 'xywh', 'cxcywh']", "got 'xyzw'"], id="box_convert-out_fmt"),
    pytest.param(lambda: det.box_convert(_z(3, 5), "xyxy", "xywh"), ValueError,
                 ["boxes:", "expected shape (..., 4)", "of shape (3, 5)"], id="box_convert-shape"),
    pytest.param(lambda: det.box_convert(_z(3, 4, dtype=np.float64), "xyxy", "xywh"), TypeError,
                 ["boxes:", "expected dtype float32 / float16", "and dtype float64"], id="box_convert-dtype"),
    pytest.param(lambda: det.clip_boxes(_z(3, 4), (0, 10)), ValueError,
                 ["size:", "expected positive height and width", "got (0, 10)"], id="clip_boxes-size-zero"),
    pytest.param(lambda: det.clip_boxes(_z(3, 4), (10,)), TypeError,
                 ["size:", "expected a (height, width) pair of ints", "got (10,)"], id="clip_boxes-size-one"),
    pytest.param(lambda: det.box_iou(_z(3, 4), _z(2, 5)), ValueError,
                 ["boxes2:", "expected shape (N, 4)", "of shape (2, 5)"], id="box_iou-boxes2-shape"),
    pytest.param(lambda: det.box_iou(_z(3, 4), _z(4)), ValueError,
                 ["boxes2:", "expected shape (N, 4)", "of shape (4,)"], id="box_iou-boxes2-1d"),
    pytest.param(lambda: det.box_iou(_z(3, 4), _z(2, 4, dtype=np.float64)), TypeError,
                 ["boxes2:", "expected dtype float32 / float16", "and dtype float64"], id="box_iou-boxes2-dtype"),
    pytest.param(lambda: det.decode_boxes(_z(4, 4), _z(3, 4)), ValueError,
                 ["priors:", "expected shape (4, 4)", "of shape (3, 4)"], id="decode_boxes-priors-count"),
    pytest.param(lambda: det.decode_boxes(_z(2, 4, 4), _z(4, 2)), ValueError,
                 ["priors:", "expected shape (4, 4)", "of shape (4, 2)"], id="decode_boxes-priors-columns"),
    pytest.param(lambda: det.decode_landmarks(_z(4, 10), _z(5, 4)), ValueError,
                 ["priors:", "expected shape (4, 4)", "of shape (5, 4)"], id="decode_landmarks-priors"),
    pytest.param(lambda: det.decode_boxes(_z(4, 4), _z(4, 4), (0.1,)), ValueError,
                 ["variances:", "expected two numbers", "got (0.1,)"], id="decode_boxes-variances-one"),
    pytest.param(lambda: det.decode_boxes(_z(4, 4), _z(4, 4), 0.1), TypeError,
                 ["variances:", "expected two numbers", "got 0.1"], id="decode_boxes-variances-number"),
    pytest.param(lambda: det.decode_landmarks(_z(4, 10), _z(4, 4), (0.1, 0.2, 0.3)), ValueError,
                 ["variances:", "expected two numbers", "got (0.1, 0.2, 0.3)"],
                 id="decode_landmarks-variances-three"),
    pytest.param(lambda: det.decode_landmarks(_z(4, 10), _z(4, 4), ("0.1", 0.2)), TypeError,
                 ["variances:", "expected a number", "got '0.1'"], id="decode_landmarks-variances-type"),
    pytest.param(lambda: det.decode_yolo(_z(1, 3, 5)), ValueError,
                 ["pred:", "expected shape (..., N, 5 + C) with C >= 1", "of shape (1, 3, 5)"],
                 id="decode_yolo-columns"),
    pytest.param(lambda: det.decode_yolo(_z(1, 3, 4), objectness=False), ValueError,
                 ["pred:", "expected shape (..., N, 4 + C) with C >= 1", "of shape (1, 3, 4)"],
                 id="decode_yolo-columns-no-objectness"),
    pytest.param(lambda: det.decode_yolo(_z(1, 3, 7, dtype=np.float64)), TypeError,
                 ["pred:", "expected dtype float32 / float16", "and dtype float64"], id="decode_yolo-dtype"),
    pytest.param(lambda: det.prior_boxes((32, 32), [[16], [32]], [16]), ValueError,
                 ["min_sizes:", "expected one entry per step (1)", "got 2"], id="prior_boxes-count"),
    pytest.param(lambda: det.prior_boxes((32, 32), [[16]], [0]), ValueError,
                 ["steps:", "expected positive values", "got [0]"], id="prior_boxes-step-zero"),
    pytest.param(lambda: det.prior_boxes((32, 32), [[16], [8]], [16, -8]), ValueError,
                 ["steps:", "expected positive values", "got [16, -8]"], id="prior_boxes-step-negative"),
    pytest.param(lambda: det.roi_align(_z(2, 5, 5), _z(1, 5), 2), ValueError,
                 ["features:", "expected an (N, C, H, W) array", "of shape (2, 5, 5)"], id="roi_align-features-ndim"),
    pytest.param(lambda: det.roi_align(_z(1, 2, 5, 5, dtype=np.float64), _z(1, 5), 2), TypeError,
                 ["features:", "expected dtype float32 / float16", "and dtype float64"],
                 id="roi_align-features-dtype"),
    pytest.param(lambda: det.roi_align(_ROI_FEATURES, _z(1, 4), 2), ValueError,
                 ["rois:", "expected shape (K, 5) or a list of (K_i, 4)", "of shape (1, 4)"],
                 id="roi_align-rois-shape"),
    pytest.param(lambda: det.roi_align(_ROI_FEATURES, [_z(2, 4), _z(1, 5)], 2), ValueError,
                 ["rois[1]:", "expected shape (K, 4)", "of shape (1, 5)"], id="roi_align-rois-list-element"),
    pytest.param(lambda: det.roi_align(_ROI_FEATURES, _z(1, 5), 2, 1.0, 2.0), TypeError,
                 ["sampling_ratio:", "expected an int", "got 2.0"], id="roi_align-sampling_ratio-float"),
    pytest.param(lambda: det.roi_align(_ROI_FEATURES, _z(1, 5), 0), ValueError,
                 ["output_size:", "expected positive height and width", "got (0, 0)"],
                 id="roi_align-output_size-zero"),
]


@pytest.mark.parametrize("call, exc, words", ARGUMENT_ERRORS)
def test_argument_errors_name_expected_and_actual(call, exc, words):
    raises_naming(exc, call, words)


# --- box ops and decoders (CI) --------------------------------------------------------------------
def test_box_convert_round_trips_and_hand_values():
    xyxy = np.array([[1, 2, 5, 10]], np.float32)
    np.testing.assert_array_equal(det.box_convert(xyxy, "xyxy", "xywh"), [[1, 2, 4, 8]])
    np.testing.assert_array_equal(det.box_convert(xyxy, "xyxy", "cxcywh"), [[3, 6, 4, 8]])
    np.testing.assert_array_equal(det.box_convert(np.array([[3, 6, 4, 8]], np.float32), "cxcywh", "xyxy"), xyxy)
    np.testing.assert_array_equal(det.box_convert(np.array([[1, 2, 4, 8]], np.float32), "xywh", "xyxy"), xyxy)
    with pytest.raises(ValueError, match="in_fmt"):
        det.box_convert(xyxy, "xyzw", "xyxy")


def test_clip_boxes_and_box_iou():
    b = np.array([[-5, 3, 700, 20]], np.float32)
    np.testing.assert_array_equal(det.clip_boxes(b, (480, 640)), [[0, 3, 640, 20]])
    a = np.array([[0, 0, 10, 10], [0, 0, 10, 5]], np.float32)
    iou = det.box_iou(a, a)
    np.testing.assert_array_equal(iou, [[1, 0.5], [0.5, 1]])


def test_prior_boxes_retinaface_layout():
    pri = det.prior_boxes((640, 640), [[16, 32], [64, 128], [256, 512]], [8, 16, 32])
    assert pri.shape == (2 * (80 * 80 + 40 * 40 + 20 * 20), 4) and pri.dtype == np.float32
    np.testing.assert_allclose(pri[0], [4 / 640, 4 / 640, 16 / 640, 16 / 640], rtol=1e-7)
    np.testing.assert_allclose(pri[1], [4 / 640, 4 / 640, 32 / 640, 32 / 640], rtol=1e-7)
    np.testing.assert_allclose(pri[2], [12 / 640, 4 / 640, 16 / 640, 16 / 640], rtol=1e-7)
    assert det.prior_boxes((100, 60), [[200]], [64], clip=True).max() <= 1


def test_prior_boxes_non_square_hand_values():
    """image (48, 64) (height, width), levels of step 16 (sizes 8 and 24) and step 32 (size
    40). Step 16: ceil(48 / 16) = 3 rows by ceil(64 / 16) = 4 columns; cell (i, j): cx =
    (j + 0.5) * 16 / 64 = (2j + 1) / 8, cy = (i + 0.5) * 16 / 48 = (2i + 1) / 6; size s:
    (s / 64, s / 48), so 8 -> (1/8, 1/6) and 24 -> (3/8, 1/2). Step 32: ceil(48 / 32) = 2
    rows (the second reaching past the bottom, centred on it) by 2 columns; cx = (j + 0.5)
    * 32 / 64 = (2j + 1) / 4, cy = (i + 0.5) * 32 / 48 = (2i + 1) / 3; size 40 -> (5/8,
    5/6). Rows by level, then row-major cells, then sizes: 3 * 4 * 2 + 2 * 2 = 28. Each
    value is the float32 nearest the fraction (the double quotient rounded once)."""
    pri = det.prior_boxes((48, 64), [[8, 24], [40]], [16, 32])
    expected = []
    for i in range(3):
        for j in range(4):
            cx, cy = (2 * j + 1) / 8, (2 * i + 1) / 6
            expected += [[cx, cy, 1 / 8, 1 / 6], [cx, cy, 3 / 8, 1 / 2]]
    for i in range(2):
        for j in range(2):
            expected.append([(2 * j + 1) / 4, (2 * i + 1) / 3, 5 / 8, 5 / 6])
    assert pri.shape == (28, 4) and pri.dtype == np.float32
    np.testing.assert_array_equal(pri, np.array(expected, np.float64).astype(np.float32))
    # a few rows written out: cell (0, 0) size 8; cell (1, 2) size 24; the last, step 32 cell (1, 1)
    np.testing.assert_array_equal(pri[0], np.float32([1 / 8, 1 / 6, 1 / 8, 1 / 6]))
    np.testing.assert_array_equal(pri[2 * (1 * 4 + 2) + 1], np.float32([5 / 8, 1 / 2, 3 / 8, 1 / 2]))
    np.testing.assert_array_equal(pri[27], np.float32([3 / 4, 1, 5 / 8, 5 / 6]))
    # clip: cy = 1 stays, nothing in [0, 1] changes
    np.testing.assert_array_equal(det.prior_boxes((48, 64), [[8, 24], [40]], [16, 32], clip=True), pri)


def test_decoders_hand_values_non_square_priors():
    """decode_boxes and decode_landmarks with non-zero offsets against priors whose width
    and height differ, the default variances (0.1, 0.2), RetinaFace's decode:

    prior 0 (cx, cy, w, h) = (0.5, 0.25, 0.25, 0.5), loc (2, -1, 5 ln 2, -5 ln 2):
      cx = 0.5 + 2 * 0.1 * 0.25 = 0.55, cy = 0.25 - 1 * 0.1 * 0.5 = 0.2,
      w = 0.25 * exp(5 ln 2 * 0.2) = 0.5, h = 0.5 * exp(-ln 2) = 0.25,
      x1 = 0.55 - 0.25 = 0.3, y1 = 0.2 - 0.125 = 0.075, x2 = 0.8, y2 = 0.325;
    prior 1 (0.125, 0.75, 0.5, 0.125), loc (-1, 4, 0, 5 ln 2):
      cx = 0.125 - 0.1 * 0.5 = 0.075, cy = 0.75 + 4 * 0.1 * 0.125 = 0.8, w = 0.5, h = 0.25,
      x1 = -0.175, y1 = 0.675, x2 = 0.325, y2 = 0.925.
    Landmarks, p_c + pre * 0.1 * p_wh per point:
    prior 0, pre (2, -1, -4, 3): (0.5 + 0.05, 0.25 - 0.05) = (0.55, 0.2),
      (0.5 - 0.1, 0.25 + 0.15) = (0.4, 0.4);
    prior 1, pre (-1, 4, 10, -2): (0.125 - 0.05, 0.75 + 0.05) = (0.075, 0.8),
      (0.125 + 0.5, 0.75 - 0.025) = (0.625, 0.725).
    The decoders compute in float32 (0.1 and 0.2 and ln 2 are not exact there): the table's
    float32 tolerance."""
    ln2 = np.log(2.0)
    pri = np.array([[0.5, 0.25, 0.25, 0.5], [0.125, 0.75, 0.5, 0.125]], np.float32)
    loc = np.array([[2, -1, 5 * ln2, -5 * ln2], [-1, 4, 0, 5 * ln2]], np.float32)
    boxes = det.decode_boxes(loc, pri)
    assert boxes.shape == (2, 4) and boxes.dtype == np.float32
    assert_close(boxes, [[0.3, 0.075, 0.8, 0.325], [-0.175, 0.675, 0.325, 0.925]], dtype=np.float32)
    pre = np.array([[2, -1, -4, 3], [-1, 4, 10, -2]], np.float32)
    points = det.decode_landmarks(pre, pri)
    assert points.shape == (2, 2, 2) and points.dtype == np.float32
    assert_close(points, [[[0.55, 0.2], [0.4, 0.4]], [[0.075, 0.8], [0.625, 0.725]]], dtype=np.float32)


def test_decode_encode_round_trip_and_landmarks():
    pri = det.prior_boxes((64, 64), [[16]], [16])
    rng = np.random.default_rng(6)
    boxes = np.concatenate([pri[:, :2] - pri[:, 2:] / 2, pri[:, :2] + pri[:, 2:] / 2], 1)
    boxes = boxes + rng.uniform(-0.02, 0.02, boxes.shape).astype(np.float32)
    loc = det.encode_boxes(boxes, pri)
    assert_close(det.decode_boxes(loc, pri), boxes, atol=1e-6, reason="float32 exp/log round trip")
    zero = det.decode_boxes(np.zeros_like(loc), pri)
    np.testing.assert_allclose(zero[0], [0, 0, 16 / 64, 16 / 64], atol=1e-7)
    pts = det.decode_landmarks(np.zeros((len(pri), 10), np.float32), pri)
    assert pts.shape == (len(pri), 5, 2)
    np.testing.assert_array_equal(pts[:, 2], pri[:, :2])
    torch = pytest.importorskip("torch")
    got = det.encode_boxes(torch.from_numpy(boxes), pri)  # torch boxes: a torch result
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), loc)


def test_decode_yolo():
    pred = np.array([[[10, 20, 4, 6, 0.5, 0.2, 0.8]]], np.float32)
    boxes, scores = det.decode_yolo(pred)
    np.testing.assert_array_equal(boxes, [[[8, 17, 12, 23]]])
    np.testing.assert_allclose(scores, [[[0.1, 0.4]]], rtol=1e-7)
    boxes, scores = det.decode_yolo(pred[..., [0, 1, 2, 3, 5, 6]], objectness=False)
    np.testing.assert_allclose(scores, [[[0.2, 0.8]]])


# --- box ops and decoders on kernels (emulated in CI, GPU with -m gpu) ------------------------------
@pytest.fixture
def poisoned_all_outputs(poisoned_outputs, monkeypatch):
    """poisoned_outputs for integer allocations too: the int64 indices, classes and counts
    multiclass_nms returns, and the scratch they are carved from, start with every element
    (every byte, for the uint8 allocations carved into arrays) at KernelSide.poisoned's
    integer value, which no kernel writes by accident."""
    allocate = _arrays.Prepared.output  # poisoned_outputs' float poisoning in it

    def output(self, out, shape, dtype, name="out"):
        native, view = allocate(self, out, shape, dtype, name)
        dtype = np.dtype(dtype)
        if out is None and dtype.kind in "iu":
            view.fill(np.iinfo(dtype).max // 3 + 7)
        return native, view

    monkeypatch.setattr(_arrays.Prepared, "output", output)


def odd_values(rng, shape, dtype, lo=-50.0, hi=150.0):
    """Random values with NaN, infinities, -0.0, zero-size and inverted boxes mixed in (and,
    as float16, values past its range that become infinities)."""
    a = rng.uniform(lo, hi, shape)
    flat = a.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 7e4, -1e-3, 1e-30]
    flat[:: 5][: len(specials)] = specials[: len(flat[:: 5])]
    if a.ndim >= 2 and a.shape[-2] > 2 and a.shape[-1] >= 4:
        a[..., 1, 2:4] = a[..., 1, :2]  # a zero-size box
        a[..., 2, 2:4] = a[..., 2, :2] - 5  # an inverted one
    with np.errstate(over="ignore"):
        return a.astype(dtype)


def box_layouts(rng, dtype):
    """(name, host array (..., 4)) in the layouts the ops must read: contiguous, rows of a
    wider array, reversed, leading dimensions whose strides do not merge, 1-D, empty."""
    base = odd_values(rng, (3, 5, 4), dtype)
    wide = odd_values(rng, (2, 6, 9), dtype)
    unmerged = odd_values(rng, (5, 3, 2, 4), dtype).transpose(1, 0, 2, 3)
    return [("contiguous", base), ("rows", wide[..., 1:5]), ("reversed", base[::-1, ::-2]),
            ("unmerged", unmerged), ("one", base[0, 0]), ("empty", base[:, :0]),
            ("two-d", base[1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_box_convert_equals_cpu(kernels, poisoned_outputs, dtype):
    rng = np.random.default_rng(31)
    for name, host in box_layouts(rng, dtype):
        for in_fmt in det.BOX_FORMATS:
            for out_fmt in det.BOX_FORMATS:
                with np.errstate(all="ignore"):
                    ref = cpu.box_convert(host, in_fmt, out_fmt)
                got = kernels.get(det.box_convert(kernels.put(host), in_fmt, out_fmt))
                assert got.dtype == ref.dtype and got.shape == ref.shape, (name, in_fmt, out_fmt)
                np.testing.assert_array_equal(got, ref, err_msg=f"{name} {in_fmt}->{out_fmt}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_clip_boxes_equals_cpu(kernels, poisoned_outputs, dtype):
    rng = np.random.default_rng(32)
    for name, host in box_layouts(rng, dtype):
        # (1, 1): most values clip; 70000: past float16's range, an infinite bound there
        for size in [(20, 30), (1, 1), (70000, 70000)]:
            with np.errstate(over="ignore"):
                ref = cpu.clip_boxes(host, size)
            got = kernels.get(det.clip_boxes(kernels.put(host), size))
            assert got.dtype == ref.dtype and got.shape == ref.shape, name
            np.testing.assert_array_equal(got, ref, err_msg=f"{name} {size}")


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float16, np.float32),
                                    (np.float32, np.float16), (np.float16, np.float16)])
def test_kernel_box_iou_equals_cpu(kernels, poisoned_outputs, dtypes):
    """NaN / infinite / zero-size / inverted boxes, equal boxes (IoU 1), disjoint ones,
    strided and reversed inputs, and empty sides."""
    rng = np.random.default_rng(33)
    a = odd_values(rng, (37, 6), dtypes[0], 0, 60)[:, 1:5]  # rows of a wider array
    b = odd_values(rng, (53, 4), dtypes[1], 0, 60)[::-1]
    b[5] = a[9]  # an equal pair (rows without special values)
    a[9] = b[5]  # (exact again after a rounding to float16)
    sides = [(a, b), (b[:1], a), (a[:0], b), (a, b[:0]), (a[:1], b[:1])]
    for p, q in sides:
        ref = cpu.box_iou(p, q)
        got = kernels.get(det.box_iou(kernels.put(p), kernels.put(q)))
        assert got.dtype == np.float32 and got.shape == (len(p), len(q))
        np.testing.assert_array_equal(got, ref)
    assert kernels.get(det.box_iou(kernels.put(a), kernels.put(b)))[9, 5] == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_decoders_equal_cpu(kernels, poisoned_outputs, dtype):
    """decode_boxes / decode_landmarks of contiguous, strided and 2-D heads; decode_yolo of
    YOLOv5 rows and of YOLOv8's (B, 4 + C, N) output transposed to rows (a strided view)."""
    rng = np.random.default_rng(34)
    pri = det.prior_boxes((48, 64), [[16, 32], [48]], [8, 16])
    P = len(pri)
    heads = [rng.normal(0, 1, (2, P, 4)), rng.normal(0, 1, (2, P, 7))[..., 2:6], rng.normal(0, 1, (P, 4))]
    for loc in (h.astype(dtype) for h in heads):
        got = kernels.get(det.decode_boxes(kernels.put(loc), pri, (0.1, 0.25)))
        ref = cpu.decode_anchors(loc, pri, (0.1, 0.25))
        assert got.dtype == np.float32 and got.shape == ref.shape
        assert_close(got, ref, atol=1e-6, reason="the platform's expf against NumPy's exp: last-place differences")
    for pre in (rng.normal(0, 1, (2, P, 10)), rng.normal(0, 1, (2, P, 13))[..., 1:11], rng.normal(0, 1, (P, 2))):
        pre = pre.astype(dtype)
        got = kernels.get(det.decode_landmarks(kernels.put(pre), pri, (0.1, 0.2)))
        ref = cpu.decode_landmarks(pre, pri, (0.1, 0.2))
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
    # rows and columns below, at and past the kernel's 128 x 32 tiles, read along either stride
    v5 = odd_values(rng, (2, 31, 5 + 3), dtype, 0, 1)
    v8 = odd_values(rng, (2, 4 + 3, 31), dtype, 0, 1).transpose(0, 2, 1)
    big5 = odd_values(rng, (3, 150, 5 + 60), dtype, 0, 1)
    big8 = odd_values(rng, (2, 4 + 28, 140), dtype, 0, 1).transpose(0, 2, 1)
    cases = [(v5, True), (v5[0], True), (v8, False), (v5[:, :0], True), (big5, True), (big5[:, ::-1], False),
             (big8, False), (big8, True), (big8[:, :32], False)]
    for pred, obj in cases:
        got_b, got_s = (kernels.get(r) for r in det.decode_yolo(kernels.put(pred), objectness=obj))
        ref_b, ref_s = cpu.decode_yolo(pred, obj)
        assert got_b.dtype == got_s.dtype == np.float32
        assert got_b.shape == ref_b.shape and got_s.shape == ref_s.shape
        np.testing.assert_array_equal(got_b, ref_b)
        np.testing.assert_array_equal(got_s, ref_s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gpu_box_ops_equal_torchvision(dtype):
    """box_convert (every pair), clip_boxes and box_iou of torch CUDA tensors against
    torchvision on the same tensors (finite boxes: torchvision's clamp keeps NaN where
    NumPy's fmax drops it). torchvision's box_iou works in the boxes' dtype; ours in float32
    (float16 boxes read exactly), so for float16 boxes it is compared with torchvision's
    box_iou of the boxes cast to float32."""
    tv, torch = _torchvision()
    rng = np.random.default_rng(35)
    boxes = random_boxes(rng, 300, extent=200.0, sides=(0.0, 40.0), dtype=dtype)
    t = _cuda(boxes)
    for in_fmt in det.BOX_FORMATS:
        for out_fmt in det.BOX_FORMATS:
            got = det.box_convert(t, in_fmt, out_fmt)
            assert isinstance(got, torch.Tensor) and got.device == t.device and got.dtype == t.dtype
            ref = tv.ops.box_convert(t, in_fmt, out_fmt)
            np.testing.assert_array_equal(got.cpu().numpy(), ref.cpu().numpy(), err_msg=f"{in_fmt}->{out_fmt}")
    shifted = t - 100
    np.testing.assert_array_equal(det.clip_boxes(shifted, (90, 120)).cpu().numpy(),
                                  tv.ops.clip_boxes_to_image(shifted, (90, 120)).cpu().numpy())
    got = det.box_iou(t[:120], t[100:])
    assert isinstance(got, torch.Tensor) and got.device == t.device and got.dtype == torch.float32
    t32 = t.float()  # exact: every float16 is a float32
    np.testing.assert_array_equal(got.cpu().numpy(), tv.ops.box_iou(t32[:120], t32[100:]).cpu().numpy())


# --- roi_align (CI) ----------------------------------------------------------------------------------
def test_cpu_roi_align_of_a_linear_ramp():
    # bilinear sampling of f(y, x) = x is exact inside: an aligned bin's mean is its center
    H, W = 12, 16
    feat = np.tile(np.arange(W, dtype=np.float32), (1, 1, H, 1))
    rois = np.array([[0, 2, 2, 10, 8]], np.float32)
    out = det.roi_align(feat, rois, (3, 4), 1.0, 2, aligned=True)
    centers = 2 - 0.5 + (np.arange(4) + 0.5) * 2  # bins of width 2 from x = 1.5
    np.testing.assert_allclose(out[0, 0], np.tile(centers, (3, 1)), atol=1e-6)
    const = det.roi_align(np.full((2, 3, 5, 5), 7, np.float32), [np.zeros((0, 4), np.float32),
                                                                   np.array([[0, 0, 4, 4]], np.float32)], 2)
    assert const.shape == (1, 3, 2, 2)
    np.testing.assert_array_equal(const, 7)


def test_cpu_roi_align_out_of_batch_roi_is_zero():
    feat = np.ones((1, 1, 4, 4), np.float32)
    out = det.roi_align(feat, np.array([[3, 0, 0, 2, 2], [-2, 0, 0, 2, 2]], np.float32), 2)
    np.testing.assert_array_equal(out, 0)


def test_roi_align_too_many_bins_is_an_error():
    # the kernel counts a roi's bins in int32
    with pytest.raises(ValueError, match=r"output_size: expected fewer than 2\*\*31 bins, got 65536 x 32768"):
        det.roi_align(np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 5), np.float32), (65536, 32768))


# --- the NumPy backend against torchvision (where it imports) ----------------------------------------
def _torchvision():
    tv = pytest.importorskip("torchvision")
    import torch

    return tv, torch


@pytest.mark.torchvision
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_cpu_nms_equals_torchvision(threshold):
    tv, torch = _torchvision()
    rng = np.random.default_rng(7)
    boxes, scores = random_boxes(rng, 1000, extent=300), distinct_scores(rng, 1000)
    ref = tv.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), threshold).numpy()
    np.testing.assert_array_equal(det.nms(boxes, scores, threshold), ref)
    idxs = rng.integers(0, 5, 1000)
    ref = tv.ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores), torch.from_numpy(idxs),
                             threshold).numpy()
    np.testing.assert_array_equal(det.batched_nms(boxes, scores, idxs, threshold), ref)


def planted_pairs(delta):
    """Pairs of boxes at IoU = 0.5 + delta: (0,0,10,10) against (0,0,10,h), IoU h / 10."""
    hs = np.float32(5 + 10 * delta)
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, hs]], np.float32)
    return boxes, np.array([0.9, 0.8], np.float32)


@pytest.mark.torchvision
@pytest.mark.parametrize("delta", [-1e-5, 1e-5])
def test_cpu_nms_planted_threshold_equals_torchvision(delta):
    tv, torch = _torchvision()
    boxes, scores = planted_pairs(delta)
    ref = tv.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.5).numpy()
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), ref)
    assert len(ref) == (2 if delta < 0 else 1)


@pytest.mark.torchvision
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_cpu_roi_align_equals_torchvision(aligned, sampling_ratio):
    tv, torch = _torchvision()
    rng = np.random.default_rng(8)
    feat = rng.standard_normal((2, 3, 20, 24)).astype(np.float32)
    rois = roi_table(rng, 30, 2, 80)
    ref = tv.ops.roi_align(torch.from_numpy(feat), torch.from_numpy(rois), (5, 4), 0.25, sampling_ratio,
                           aligned).numpy()
    # torchvision's CPU kernel sums the same samples in the same order; 1e-5 absorbs a
    # compiler's fused multiply-adds in its bilinear weights
    assert_close(det.roi_align(feat, rois, (5, 4), 0.25, sampling_ratio, aligned), ref, atol=1e-5,
                 reason="float32 rounding of the sample positions (FMA or not)")


def roi_table(rng, k, n_images, extent):
    xy = rng.uniform(-5, extent, (k, 2))
    wh = rng.uniform(0.5, extent / 2, (k, 2))
    return np.concatenate([rng.integers(0, n_images, (k, 1)), xy, xy + wh], 1).astype(np.float32)


# --- kernels against the NumPy backend (emulated in CI, GPU with -m gpu) ---------------------------
@pytest.mark.parametrize("n", [1, 2, 64, 65, 200])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_nms_equals_cpu(kernels, n, dtype):
    rng = np.random.default_rng(n)
    boxes, scores = random_boxes(rng, n, dtype=dtype), rng.random(n).astype(dtype)
    scores[: n // 4] = scores[n // 2: n // 2 + n // 4]  # ties
    ref = cpu.nms(boxes, scores, 0.5)
    got = kernels.get(det.nms(kernels.put(boxes), kernels.put(scores), 0.5))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref)
    padded, count = det.nms(kernels.put(boxes), kernels.put(scores), 0.5, return_count=True)
    padded, count = kernels.get(padded), kernels.get(count)
    assert int(count) == len(ref) and padded.shape == (n,)
    np.testing.assert_array_equal(padded[: len(ref)], ref)
    assert (padded[len(ref):] == -1).all()


@pytest.mark.parametrize("n", [1, 2, 3, 31, 64, 100, 1000, 2048, 2049, 3000, 4096])
def test_kernel_small_sort_is_a_stable_argsort(kernels, n):
    """The one-block sort of nms's keys: many equal keys (index order kept) and the int32
    extremes (the sign flip into unsigned order)."""
    rng = np.random.default_rng(n)
    keys = rng.integers(-4, 4, n).astype(np.int32)
    info = np.iinfo(np.int32)
    keys[::5] = rng.integers(info.min, info.max, len(keys[::5]), dtype=np.int32, endpoint=True)
    keys[:2] = [info.max, info.min][:n]
    m = 1 << max(n - 1, 1).bit_length()
    perm = kernels.poisoned((n,), np.int64)
    fn = _kernels.get_function("nms.cu", "cupyprep_nms_small_sort")
    fn((1,), (max(32, min(1024, m // 2)),), (kernels.put(keys), np.int32(n), np.int32(m), perm))
    np.testing.assert_array_equal(kernels.get(perm), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("n", [99, 100, 101])
def test_kernel_nms_either_side_of_the_small_sort(kernels, monkeypatch, n):
    """nms takes the one-block sort up to NmsSpec.small_sort keys and the array library's sort
    above it (here the limit lowered to 100): equal results on both sides, with ties and
    NaN scores."""
    tune(monkeypatch, nms_spec, small_sort=100)
    rng = np.random.default_rng(n)
    boxes = random_boxes(rng, n, extent=50)
    scores = (rng.integers(0, 6, n) / 5).astype(np.float32)  # six values: many ties
    scores[::17] = np.nan
    for thr in (0.3, 0.6):
        got = kernels.get(det.nms(kernels.put(boxes), kernels.put(scores), thr))
        np.testing.assert_array_equal(got, cpu.nms(boxes, scores, thr))


def test_kernel_nms_special_values(kernels):
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [5, 5, 5, 5], [5, 5, 5, 5], [np.nan, 0, 10, 10],
                      [10, 10, 0, 0], [0, 0, np.inf, 10], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, np.nan, 0.5, 0.5, 0.7, -np.inf, np.inf, -0.0], np.float32)
    for thr in (0.5, 0.0, -1.0, 1.0):
        got = kernels.get(det.nms(kernels.put(boxes), kernels.put(scores), thr))
        np.testing.assert_array_equal(got, cpu.nms(boxes, scores, thr))
        np.testing.assert_array_equal(got, reference_nms(boxes, scores, thr))


def test_kernel_nms_float16_rounds_side_lengths(kernels, monkeypatch):
    """half_rounding_case on the kernels: nms, batched_nms (both paths), multiclass_nms."""
    boxes, scores, expected = half_rounding_case()
    idxs = np.zeros(4, np.int64)
    for thr, (kept16, kept32) in expected.items():
        np.testing.assert_array_equal(kernels.get(det.nms(kernels.put(boxes), kernels.put(scores), thr)), kept16)
        got = det.nms(kernels.put(boxes.astype(np.float32)), kernels.put(scores), thr)
        np.testing.assert_array_equal(kernels.get(got), kept32)
        for grouped_min in (nms_spec.SPEC.grouped_min_boxes, 0):
            tune(monkeypatch, nms_spec, grouped_min_boxes=grouped_min)
            got = det.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(idxs), thr)
            np.testing.assert_array_equal(kernels.get(got), kept16, err_msg=f"{thr} {grouped_min}")
        d = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), iou_threshold=thr, max_detections=4)
        np.testing.assert_array_equal(kernels.get(d.indices)[0], kept16 + [-1] * (4 - len(kept16)))


def test_kernel_nms_empty_and_all_suppressed(kernels):
    got = det.nms(kernels.put(np.zeros((0, 4), np.float32)), kernels.put(np.zeros(0, np.float32)), 0.5)
    assert kernels.get(got).shape == (0,) and kernels.get(got).dtype == np.int64
    boxes = np.tile(np.array([[1, 2, 30, 40]], np.float32), (70, 1))
    scores = distinct_scores(np.random.default_rng(9), 70)
    got = kernels.get(det.nms(kernels.put(boxes), kernels.put(scores), 0.5))
    np.testing.assert_array_equal(got, [int(np.argmax(scores))])


def test_kernel_nms_non_contiguous(kernels):
    rng = np.random.default_rng(10)
    wide = np.concatenate([random_boxes(rng, 90), random_boxes(rng, 90)], axis=1)  # (90, 8)
    boxes = wide[:, 4:]
    scores = np.stack([distinct_scores(rng, 90)] * 2, axis=1)[:, 1]
    got = kernels.get(det.nms(kernels.put(wide)[:, 4:], kernels.put(np.stack([scores] * 2, 1))[:, 1], 0.4))
    np.testing.assert_array_equal(got, cpu.nms(boxes, scores, 0.4))


def test_kernel_batched_nms(kernels):
    rng = np.random.default_rng(11)
    boxes, scores = random_boxes(rng, 150), distinct_scores(rng, 150)
    idxs = rng.integers(-2, 3, 150).astype(np.int32)
    got = kernels.get(det.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(idxs), 0.5))
    np.testing.assert_array_equal(got, cpu.nms(boxes, scores, 0.5, idxs))


@pytest.mark.parametrize("n", [150, 700])
def test_kernel_batched_nms_grouped(kernels, monkeypatch, n):
    """The class-sorted path (used above NmsSpec.grouped_min_boxes boxes), here at small sizes;
    classes that agree in their low 32 bits share a sorted run and must still not suppress
    each other."""
    tune(monkeypatch, nms_spec, grouped_min_boxes=0)
    rng = np.random.default_rng(n)
    boxes, scores = random_boxes(rng, n, extent=60), distinct_scores(rng, n)
    idxs = rng.integers(-2, 3, n).astype(np.int64)
    idxs[::7] += 2**32  # same low 32 bits as another class
    ref = cpu.nms(boxes, scores, 0.5, idxs)
    got = kernels.get(det.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(idxs), 0.5))
    np.testing.assert_array_equal(got, ref)
    padded, count = det.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(idxs), 0.5,
                                    return_count=True)
    padded, count = kernels.get(padded), kernels.get(count)
    assert int(count) == len(ref)
    np.testing.assert_array_equal(padded[: len(ref)], ref)
    assert (padded[len(ref):] == -1).all()


@pytest.mark.parametrize("grouped", [False, True])
def test_kernel_nms_long_suppression_chain(kernels, monkeypatch, grouped):
    """Boxes in a row, each overlapping only its neighbours with IoU > 0.5 (7 / 13), scores
    falling along the row: every kept box depends on the whole chain before it, across
    many 64-row chunks (more than 32, so chunks are read in several rounds)."""
    tune(monkeypatch, nms_spec, grouped_min_boxes=0)
    n = 64 * 35 + 5
    x = np.arange(n, dtype=np.float32) * 3
    boxes = np.stack([x, np.zeros(n, np.float32), x + 10, np.full(n, 10, np.float32)], axis=1)
    scores = np.linspace(1, 0, n, dtype=np.float32)
    ref = cpu.nms(boxes, scores, 0.5)
    np.testing.assert_array_equal(ref, np.arange(0, n, 2))
    if grouped:
        got = det.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(np.zeros(n, np.int64)), 0.5)
    else:
        got = det.nms(kernels.put(boxes), kernels.put(scores), 0.5)
    np.testing.assert_array_equal(kernels.get(got), ref)


def cpu_multiclass(boxes, scores, iou_threshold=0.5, score_threshold=None, top_k=None, max_detections=100,
                   class_agnostic=False):
    """multiclass_nms of (B, N, 4) boxes and (B, N) or (B, N, C) scores by the NumPy backend
    directly (under emulation the public op would run the kernels too), as Detections."""
    B, D = boxes.shape[0], max_detections
    s3 = scores if scores.ndim == 3 else scores[:, :, None]
    idx, cls, counts = cpu.multiclass_nms(boxes, s3, iou_threshold, score_threshold, top_k, max_detections,
                                          class_agnostic)
    out_boxes, out_scores = np.zeros((B, D, 4), boxes.dtype), np.zeros((B, D), scores.dtype)
    for b, k in enumerate(counts):
        out_boxes[b, :k] = boxes[b, idx[b, :k]]
        out_scores[b, :k] = s3[b, idx[b, :k], cls[b, :k]]
    return det.Detections(counts, out_boxes, out_scores, cls, idx)


def assert_detections_equal(got, ref, get):
    """Every field of ``got`` (brought back by ``get``) equal to ``ref``'s, dtype and shape
    included."""
    for name, a, b in zip(ref._fields, got, ref):
        a = get(a)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, a.shape, b.dtype, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("case", ["per_class", "agnostic", "one_class", "no_threshold"])
def test_kernel_multiclass(kernels, poisoned_all_outputs, case):
    rng = np.random.default_rng(12)
    B, N, C = 3, 70, 3
    boxes = np.stack([random_boxes(rng, N) for _ in range(B)])
    scores = rng.random((B, N, C)).astype(np.float32)
    scores[1] *= 0.3  # few over 0.25: image 1 keeps fewer than max_detections (padding after)
    kw = dict(iou_threshold=0.5, score_threshold=0.25, top_k=90, max_detections=30)
    if case == "agnostic":
        kw["class_agnostic"] = True
    if case == "one_class":
        scores = scores[:, :, 0].astype(np.float16)
    if case == "no_threshold":
        kw.update(score_threshold=None, top_k=None, max_detections=8)
    ref = cpu_multiclass(boxes, scores, **kw)
    got = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), **kw)
    assert ref.counts.sum() > 0 and (case == "no_threshold" or ref.counts[1] < kw["max_detections"])
    assert_detections_equal(got, ref, kernels.get)


@pytest.mark.parametrize("agnostic", [False, True])
def test_kernel_multiclass_counts_candidates_for_a_large_mask(kernels, poisoned_all_outputs, monkeypatch, agnostic):
    """With a score threshold and no top_k, a worst-case mask above the budget is sized by a
    count of the passing candidates (here a budget of one byte forces it): the mask is
    sized for that count, and the result is the CPU backend's without top_k. NaN scores
    and an image where nothing passes are among the inputs."""
    tune(monkeypatch, nms_spec, mask_budget=1)
    seen = []
    mask_bytes = _nms_pipeline.mask_bytes

    def spy(B, K):
        seen.append(K)
        return mask_bytes(B, K)

    monkeypatch.setattr(_nms_pipeline, "mask_bytes", spy)
    rng = np.random.default_rng(40)
    B, N, C = 3, 120, 5
    boxes = np.stack([random_boxes(rng, N) for _ in range(B)])
    scores = rng.random((B, N, C)).astype(np.float32)
    scores[1, ::9, 2] = np.nan
    scores[2] *= 0.5  # nothing above 0.7
    kw = dict(iou_threshold=0.5, score_threshold=0.7, max_detections=40, class_agnostic=agnostic)
    ref = cpu_multiclass(boxes, scores, **kw)
    got = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), **kw)
    passing = scores >= np.float32(0.7)
    if agnostic:
        passing = passing.any(axis=2)
    count = int(passing.reshape(B, -1).sum(axis=1).max())
    assert seen == [N * (1 if agnostic else C), count] and count < seen[0]
    assert_detections_equal(got, ref, kernels.get)
    assert ref.counts[0] > 0 and ref.counts[2] == 0


@pytest.mark.parametrize("agnostic", [False, True])
def test_kernel_multiclass_one_image_and_empty_batch(kernels, poisoned_all_outputs, agnostic):
    """(N, 4) boxes with (N, C) or (N,) scores: the NumPy backend's result for the batch of
    that one image (B = 1); a batch of no images (B = 0): counts (0,) and (0, D, ...) fields.
    flatten() of both."""
    rng = np.random.default_rng(43)
    N, C, D = 80, 4, 64
    boxes = random_boxes(rng, N)
    scores = rng.random((N, C)).astype(np.float32)
    kw = dict(iou_threshold=0.5, score_threshold=0.8, max_detections=D, class_agnostic=agnostic)
    for s in (scores, scores[:, 2].astype(np.float16)):
        ref = cpu_multiclass(boxes[None], s[None], **kw)
        assert 0 < ref.counts[0] < D
        got = det.multiclass_nms(kernels.put(boxes), kernels.put(s), **kw)
        assert_detections_equal(got, ref, kernels.get)
        check_flatten(got, kernels.get)
    for s in (np.zeros((0, N, C), np.float32), np.zeros((0, N), np.float16)):
        got = det.multiclass_nms(kernels.put(np.zeros((0, N, 4), np.float16)), kernels.put(s), **kw)
        ref = det.Detections(np.zeros(0, np.int64), np.zeros((0, D, 4), np.float16), np.zeros((0, D), s.dtype),
                             np.zeros((0, D), np.int64), np.zeros((0, D), np.int64))
        assert_detections_equal(got, ref, kernels.get)
        check_flatten(got, kernels.get)


@pytest.mark.parametrize("agnostic", [False, True])
@pytest.mark.parametrize("D", [64, 2100])
def test_kernel_one_image_sorts_in_one_block(kernels, poisoned_all_outputs, launched, agnostic, D):
    """One image of few candidates: keys, sort and gather in one launch (cupyprep_nms_small),
    or, where the outputs to pre-fill (two rows of max_detections) pass NmsSpec.small_sort,
    the keys, the one-block sort and the gather as three; the NumPy backend's result both
    ways (boxes float16, scores float32: the two dtypes of the one-block kernel apart)."""
    rng = np.random.default_rng(44)
    N, C = 300, 3
    boxes = random_boxes(rng, N, extent=60, dtype=np.float16)
    scores = rng.random((N, C)).astype(np.float32)
    scores[::7] = np.nan
    kw = dict(iou_threshold=0.45, score_threshold=0.3, max_detections=D, class_agnostic=agnostic)
    got = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), **kw)
    assert_detections_equal(got, cpu_multiclass(boxes[None], scores[None], **kw), kernels.get)
    names = [expr.split("<")[0] for _, expr in launched]
    fused = 2 * D <= nms_spec.SPEC.small_sort
    assert ("cupyprep_nms_small" in names) == fused
    assert ("cupyprep_nms_small_sort" in names) == (not fused)
    assert ("cupyprep_nms_keys" in names) == (not fused)


@pytest.mark.gpu
def test_gpu_multiclass_yolo_sized_without_top_k():
    """8 x 8400 anchors x 80 classes (a YOLO head), per class, as the docstring's example
    calls it (a score threshold, no top_k): the worst-case mask would be about 226 GB, so
    the candidates are counted and the result equals the call with a top_k above that
    count. Without a threshold the mask cannot fit: a ValueError asking for top_k."""
    import cupy

    rng = np.random.default_rng(41)
    B, N, C = 8, 8400, 80
    boxes = cupy.asarray(np.stack([random_boxes(rng, N, extent=640, sides=(10, 110)) for _ in range(B)]))
    scores = cupy.asarray(rng.random((B, N, C), dtype=np.float32))
    assert _nms_pipeline.mask_bytes(B, N * C) > 200e9
    got = det.multiclass_nms(boxes, scores, score_threshold=0.99)
    ref = det.multiclass_nms(boxes, scores, score_threshold=0.99, top_k=20000)
    assert int((scores > 0.99).sum(axis=(1, 2)).max()) < 20000
    for name, a, b in zip(ref._fields, got, ref):
        np.testing.assert_array_equal(cupy.asnumpy(a), cupy.asnumpy(b), err_msg=name)
    assert int(got.counts.min()) > 0
    with pytest.raises(ValueError, match="top_k"):
        det.multiclass_nms(boxes, scores)


def test_kernel_multiclass_empty(kernels, poisoned_all_outputs):
    """No boxes in either of two images, or in one (N, 4) image: counts 0, every slot
    padding (zero boxes and scores, -1 classes and indices)."""
    for b in (2, None):
        lead = (b,) if b else ()
        boxes, scores = np.zeros(lead + (0, 4), np.float32), np.zeros(lead + (0, 3), np.float16)
        d = det.multiclass_nms(kernels.put(boxes), kernels.put(scores), max_detections=4)
        B = b or 1
        ref = det.Detections(np.zeros(B, np.int64), np.zeros((B, 4, 4), np.float32), np.zeros((B, 4), np.float16),
                             np.full((B, 4), -1, np.int64), np.full((B, 4), -1, np.int64))
        assert_detections_equal(d, ref, kernels.get)
        check_flatten(d, kernels.get)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_kernel_roi_align_equals_cpu(kernels, poisoned_outputs, dtype, aligned, sampling_ratio):
    rng = np.random.default_rng(13)
    feat = rng.standard_normal((2, 3, 9, 11)).astype(dtype)
    rois = roi_table(rng, 6, 2, 40)
    rois[0, 0] = 2  # outside the batch: zeros
    ref = cpu.roi_align(feat, rois, (3, 2), 0.25, sampling_ratio, aligned).astype(dtype)
    got = kernels.get(det.roi_align(kernels.put(feat), kernels.put(rois), (3, 2), 0.25, sampling_ratio, aligned))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref)


def test_kernel_roi_align_list_rois_non_contiguous(kernels, poisoned_outputs):
    rng = np.random.default_rng(14)
    feat = rng.standard_normal((2, 9, 11, 4)).astype(np.float32)
    nchw = np.moveaxis(feat, 3, 1)  # (2, 4, 9, 11) with channel stride 1
    boxes = [roi_table(rng, 3, 1, 40)[:, 1:], roi_table(rng, 2, 1, 40)[:, 1:]]
    table = np.concatenate([np.concatenate([np.full((len(b), 1), i, np.float32), b], 1)
                            for i, b in enumerate(boxes)])
    ref = cpu.roi_align(np.ascontiguousarray(nchw), table, (2, 2), 0.25, 2, True)
    got = det.roi_align(np.moveaxis(kernels.put(feat), 3, 1), [kernels.put(b) for b in boxes], 2, 0.25, 2, True)
    np.testing.assert_array_equal(kernels.get(got), ref)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("items", [7, 1024])
@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("size", [(3, 2), (1, 1)])
def test_kernel_roi_align_big_adaptive_grids_and_channel_chunks(kernels, poisoned_outputs, monkeypatch, aligned,
                                                                items, narrow, size):
    """Rois whose adaptive grids are too long for the block's shared sample table (they
    compute each sample's taps per output), next to rois that use it; with 7 outputs per
    block every channel is a block of its own, with 1024 one block takes all 5. Not
    narrow: every roi takes the per-output path with 64-bit offsets. One bin: the kernel
    divides plainly instead of by multiply-high."""
    tune(monkeypatch, roi_spec, items_per_block=items)
    if not narrow:
        tune(monkeypatch, roi_spec, narrow_limit=0)
    rng = np.random.default_rng(15)
    feat = rng.standard_normal((2, 5, 23, 31)).astype(np.float32)
    rois = np.array([[0, -20, -10, 90, 70],     # 110 x 80 px, partly outside: grid 55 x 27
                     [1, 2.5, 3.0, 9.5, 6.0],    # small: grid 4 x 1
                     [1, 0, 0, 30, 300],         # grid_h 100 (table too long), grid_w 15
                     [0, 5, 5, 5, 5],            # empty
                     [5, 0, 0, 4, 4]], np.float32)  # outside the batch: zeros
    ref = cpu.roi_align(feat, rois, size, 1.0, -1, aligned)
    got = det.roi_align(kernels.put(feat), kernels.put(rois), size, 1.0, -1, aligned)
    np.testing.assert_array_equal(kernels.get(got), ref)
    assert np.abs(ref[:3]).max() > 0 and not ref[4].any()


# --- kernels against torchvision (GPU) ---------------------------------------------------------------
def _cuda(a):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 5000, 20000, 100000])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gpu_nms_equals_torchvision(n, dtype):
    tv, torch = _torchvision()
    rng = np.random.default_rng(n)
    boxes = random_boxes(rng, n, extent=1000, sides=(10, 110), dtype=dtype)
    scores = distinct_scores(rng, n, dtype=np.float32)
    tb, ts = _cuda(boxes), _cuda(scores)
    ref = tv.ops.nms(tb, ts, 0.5).cpu().numpy()
    got = det.nms(tb, ts, 0.5)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    np.testing.assert_array_equal(got.cpu().numpy(), ref)
    if dtype == np.float32:
        np.testing.assert_array_equal(cpu.nms(boxes, scores, 0.5), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("delta", [-1e-5, 1e-5])
def test_gpu_nms_planted_threshold_equals_torchvision(delta):
    tv, torch = _torchvision()
    boxes, scores = planted_pairs(delta)
    ref = tv.ops.nms(_cuda(boxes), _cuda(scores), 0.5).cpu().numpy()
    np.testing.assert_array_equal(det.nms(_cuda(boxes), _cuda(scores), 0.5).cpu().numpy(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [5000, 20000, 100000])
def test_gpu_batched_nms_equals_torchvision(n):
    tv, torch = _torchvision()
    rng = np.random.default_rng(15)
    boxes = random_boxes(rng, n, extent=1000, sides=(10, 110))
    scores = distinct_scores(rng, n)
    idxs = rng.integers(0, 80, n)
    # 5000: score order with a class test (below NmsSpec.grouped_min_boxes); 20000, 100000:
    # class-sorted. torchvision runs nms per class above 20000 coordinates and shifts
    # coordinates by class below: the shifted boxes here never change an IoU's rounding
    # enough to matter (the kept lists are equal)
    ref = tv.ops.batched_nms(_cuda(boxes), _cuda(scores), _cuda(idxs), 0.5).cpu().numpy()
    np.testing.assert_array_equal(det.batched_nms(_cuda(boxes), _cuda(scores), _cuda(idxs), 0.5).cpu().numpy(), ref)


@pytest.mark.gpu
def test_gpu_nms_more_chunks_than_resident_blocks():
    # 4400 chunks of 64 rows: more reduce blocks than an H200 holds at once (132 SMs x 32),
    # so later chunks start only after earlier ones finish
    tv, torch = _torchvision()
    rng = np.random.default_rng(16)
    n = 4400 * 64
    boxes = random_boxes(rng, n, extent=1000, sides=(10, 110))
    scores = distinct_scores(rng, n)
    ref = tv.ops.nms(_cuda(boxes), _cuda(scores), 0.5).cpu().numpy()
    got = det.nms(_cuda(boxes), _cuda(scores), 0.5).cpu().numpy()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["nms", "batched_nms"])
def test_gpu_nms_sync_free_form_under_graph_capture(monkeypatch, op):
    torch_graphs_need_caching()
    _, torch = _torchvision()
    tune(monkeypatch, nms_spec, grouped_min_boxes=0)  # batched_nms: the class-sorted path
    rng = np.random.default_rng(17)
    boxes, scores = _cuda(random_boxes(rng, 3000, extent=1000, sides=(10, 110))), _cuda(distinct_scores(rng, 3000))
    idxs = _cuda(rng.integers(0, 5, 3000))

    def run(**kw):
        if op == "nms":
            return det.nms(boxes, scores, 0.5, **kw)
        return det.batched_nms(boxes, scores, idxs, 0.5, **kw)

    ref = run()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run(return_count=True)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        padded, count = run(return_count=True)
    g.replay()
    torch.cuda.synchronize()
    assert int(count) == len(ref)
    np.testing.assert_array_equal(padded[: len(ref)].cpu().numpy(), ref.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_gpu_roi_align_equals_torchvision(dtype, aligned, sampling_ratio):
    # sampling_ratio -1: rois up to 67 feature pixels have adaptive grids of up to 10 per
    # bin, so the longer ones compute their taps per output instead of in the shared table
    tv, torch = _torchvision()
    rng = np.random.default_rng(18)
    feat = rng.standard_normal((2, 16, 50, 68)).astype(np.float32)
    rois = roi_table(rng, 200, 2, 270)
    ref = tv.ops.roi_align(_cuda(feat), _cuda(rois), 7, 0.25, sampling_ratio, aligned).cpu().numpy()
    got = det.roi_align(_cuda(feat.astype(dtype)), _cuda(rois), 7, 0.25, sampling_ratio, aligned).cpu().numpy()
    if dtype == np.float32:
        # torchvision's kernel is compiled with fused multiply-adds in the sample positions
        # (ours rounds each operation, as the CPU backend does): a position differs by up
        # to an ulp of its ~70-pixel range (8e-6), times feature slopes of up to ~6 per
        # pixel in this standard-normal map, summed over 4 taps: measured 1.6e-5
        assert_close(got, ref, atol=1e-4, reason="FMA contraction in torchvision's CUDA build")
    else:
        # computed in float32 from exact float16 inputs, rounded once: torchvision's float32
        # result (on the float16-rounded features) rounded to float16, within one half-ulp
        ref16 = tv.ops.roi_align(_cuda(feat.astype(np.float16).astype(np.float32)), _cuda(rois), 7, 0.25,
                                 sampling_ratio, aligned).cpu().numpy().astype(np.float16)
        assert_close(got, ref16, atol=2.0 ** -10, reason="one float16 rounding of a float32 result")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("prior_side", ["host", "device"])
def test_gpu_decoders_equal_cpu(kind, prior_side, torch_cuda):
    """decode_boxes / decode_landmarks on device heads, with host priors or priors on the
    head's device (used where they are), against the NumPy backend."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(21)
    pri = det.prior_boxes((96, 128), [[16, 32], [64]], [8, 32])
    loc = rng.normal(0, 1, (2, len(pri), 4)).astype(np.float32)
    pre = rng.normal(0, 1, (2, len(pri), 10)).astype(np.float32)
    put = cupy.asarray if kind == "cupy" else (lambda a: torch_cuda.from_numpy(a).cuda())
    priors = pri if prior_side == "host" else put(pri)
    boxes = det.decode_boxes(put(loc), priors)
    points = det.decode_landmarks(put(pre), priors)
    if kind == "torch":
        assert isinstance(boxes, torch_cuda.Tensor) and boxes.is_cuda
        boxes, points = boxes.cpu().numpy(), points.cpu().numpy()
    else:
        boxes, points = boxes.get(), points.get()
    # the same float32 operations on both sides; exp is CUDA's expf on the GPU and NumPy's
    # on the CPU, which may differ in the last place
    assert_close(boxes, det.decode_boxes(loc, pri), atol=1e-6,
                 reason="expf on the GPU vs NumPy's exp: last-place differences")
    np.testing.assert_array_equal(points, det.decode_landmarks(pre, pri))


# --- the pipeline's carved scratch arrays -------------------------------------------------------
_CARVE_SPECS = {
    "keys": ((1001,), np.int32),
    "none": None,
    "boxes": ((3, 4), np.float32),
    "ids": ((2, 1, 7), np.int64),
    "one": ((1,), np.int32),
    "empty": ((0,), np.uint64),
}


def _check_carve(carve, get):
    """Every array: its shape and dtype, at a 256-byte boundary of the allocation, no two
    overlapping (each filled with its own value, then all read back)."""
    assert carve.view("none") is None
    arrays = {k: carve.view(k) for k, v in _CARVE_SPECS.items() if v is not None}
    starts = []
    for k, a in arrays.items():
        shape, dtype = _CARVE_SPECS[k]
        assert a.shape == shape and a.dtype == np.dtype(dtype), k
        addr = a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]
        starts.append((addr, a.nbytes, k))
    base = min(s for s, _, _ in starts)
    starts.sort()
    for (s0, n0, k0), (s1, _, k1) in zip(starts, starts[1:]):
        assert (s0 - base) % 256 == 0 and s0 + n0 <= s1, (k0, k1)
    for i, a in enumerate(arrays.values()):
        a[...] = i + 1
    for i, a in enumerate(arrays.values()):
        assert (get(a) == i + 1).all()


def test_carve_lays_arrays_apart():
    call = _arrays.Prepared(np.zeros(1), "numpy", True)
    _check_carve(_nms_plan.Carve(call, _nms_plan.Layout.of(_CARVE_SPECS)), np.asarray)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["torch", "cupy"])
def test_carve_on_the_callers_allocator(kind):
    """torch inputs: one torch allocation, whose typed views (what torch.sort and the caller
    get) share memory with the kernels' cupy views."""
    import cupy
    import torch

    x = torch.zeros(3, device="cuda") if kind == "torch" else cupy.zeros(3)
    call = _arrays.prepare(x, "boxes")
    with call.launch():
        carve = _nms_plan.Carve(call, _nms_plan.Layout.of(_CARVE_SPECS))
        _check_carve(carve, cupy.asnumpy)
        ids = carve.native("ids")
        if kind == "torch":
            assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int64
            assert ids.shape == (2, 1, 7) and ids.data_ptr() == carve.view("ids").data.ptr
            assert (ids == 3).all()  # the value _check_carve wrote through the cupy view
        else:
            assert ids.data.ptr == carve.view("ids").data.ptr


# --- the CPU nms's two phases (cupyprep/cpu/detection.py) -------------------------------------
def all_pairs_nms(boxes, scores, threshold, classes=None):
    """The rule without shortcuts, vectorised: each kept box against every later box."""
    order = cpu.descending_order(scores)
    b = np.asarray(boxes)[order]
    half = b.dtype == np.float16
    cls = None if classes is None else np.asarray(classes)[order]
    suppressed = np.zeros(len(b), bool)
    keep = []
    for i in range(len(b)):
        if suppressed[i]:
            continue
        keep.append(i)
        over = cpu.iou_over(b[i], b[i + 1:], threshold, half)
        if cls is not None:
            over &= cls[i + 1:] == cls[i]
        suppressed[i + 1:] |= over
    return order[np.asarray(keep, np.int64)]


def scenes(rng, n):
    """Spread boxes (most kept), detector-like clusters (most suppressed), one crowd, and
    degenerate / NaN / infinite boxes among them."""
    c = rng.uniform(0, 1000, (n, 2))
    s = rng.uniform(10, 110, (n, 2))
    spread = np.concatenate([c - s / 2, c + s / 2], axis=1)
    centers = rng.uniform(100, 900, (n // 30 + 1, 2))[rng.integers(0, n // 30 + 1, n)]
    sides = rng.uniform(40, 80, (n, 2))
    jitter = rng.normal(0, 6, (n, 4))
    clusters = np.concatenate([centers - sides / 2, centers + sides / 2], axis=1) + jitter
    crowd = np.concatenate([rng.uniform(0, 20, (n, 2)), rng.uniform(30, 60, (n, 2))], axis=1)
    odd = spread.copy()
    odd[::37, 2] = odd[::37, 0]  # zero width
    odd[5::41, 1] = np.nan
    odd[7::43, 3] = np.inf
    return {"spread": spread, "clusters": clusters, "crowd": crowd, "odd": odd}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cpu_nms_phases_match_all_pairs(dtype):
    rng = np.random.default_rng(7)
    n = 1500
    for name, boxes in scenes(rng, n).items():
        boxes = boxes.astype(dtype)
        scores = rng.uniform(0, 1, n).astype(np.float32)
        classes = rng.integers(0, 3, n)
        for thr in (0.0, 0.3, 0.5, 0.9, -0.1):  # a NaN threshold raises (test_porting_traps)
            np.testing.assert_array_equal(det.nms(boxes, scores, thr), all_pairs_nms(boxes, scores, thr),
                                          err_msg=f"{name} {thr}")
        np.testing.assert_array_equal(det.batched_nms(boxes, scores, classes, 0.5),
                                      all_pairs_nms(boxes, scores, 0.5, classes), err_msg=name)


def test_cpu_nms_compares_boxes_still_in_play(monkeypatch):
    """20000 spread boxes (10069 kept): IoU is computed for a few hundred pairs a box, not
    for every kept box against every later one (10^8 pairs, seconds)."""
    rng = np.random.default_rng(0)
    c = rng.uniform(0, 1000, (20000, 2))
    s = rng.uniform(10, 110, (20000, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], axis=1).astype(np.float32)
    scores = rng.uniform(0, 1, 20000).astype(np.float32)
    compared = []
    over = cpu._over

    def counting(a, b, threshold, half):
        res = over(a, b, threshold, half)
        compared.append(np.size(res))
        return res

    monkeypatch.setattr(cpu, "_over", counting)
    keep = det.nms(boxes, scores, 0.5)
    assert len(keep) == 10069
    assert sum(compared) < 500 * len(boxes), sum(compared)


# --- the CPU nms's first phase: blocks of alive boxes (cupyprep/cpu/detection.py) ----------------
def test_cpu_block_survivors_is_the_greedy_rule():
    """The fixed point over a block's matrix equals the greedy loop over its rows, for
    sparse and dense matrices and for the longest chain (every box suppresses the next:
    as many rounds as boxes)."""
    rng = np.random.default_rng(11)
    for b in (1, 2, 5, 64, 128):
        chain = np.eye(b, k=1, dtype=bool)
        for over in [np.triu(rng.uniform(0, 1, (b, b)) < p, 1) for p in (0.02, 0.2, 0.7)] + [chain]:
            removed = np.zeros(b, bool)
            for i in range(b):
                if not removed[i]:
                    removed |= over[i]
            np.testing.assert_array_equal(cpu._block_survivors(over), ~removed)
        np.testing.assert_array_equal(np.flatnonzero(cpu._block_survivors(chain)), np.arange(0, b, 2))


def suppression_chain(n):
    """n boxes in a row, each overlapping the next by IoU 0.6 and the one after by 0.2
    (width 10, step 2.5), scores falling along the row: greedy keeps every other box, a
    chain that runs through every block boundary."""
    x = np.arange(n, dtype=np.float32) * np.float32(2.5)
    boxes = np.stack([x, np.zeros(n, np.float32), x + 10, np.full(n, 10, np.float32)], axis=1)
    return boxes, np.linspace(1, 0.1, n).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 127, 128, 129, 191, 300])
def test_cpu_nms_blocks_at_every_size(n):
    boxes, scores = suppression_chain(n)
    np.testing.assert_array_equal(det.nms(boxes, scores, 0.5), np.arange(0, n, 2))
    rng = np.random.default_rng(n)
    boxes = random_boxes(rng, n, extent=60)
    scores = rng.uniform(0, 1, n).astype(np.float32)
    classes = rng.integers(0, 3, n)
    for thr in (0.0, 0.3, 0.7, -0.1):
        np.testing.assert_array_equal(det.nms(boxes, scores, thr), all_pairs_nms(boxes, scores, thr),
                                      err_msg=str(thr))
    np.testing.assert_array_equal(det.batched_nms(boxes, scores, classes, 0.5),
                                  all_pairs_nms(boxes, scores, 0.5, classes))


@pytest.mark.parametrize("switch", ["first phase only", "second phase after one block"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cpu_nms_either_phase_matches_all_pairs(monkeypatch, switch, dtype):
    """Each scene through the first phase alone, and through the second phase from the
    first block on (where the cost model would not take it)."""
    if switch == "first phase only":
        monkeypatch.setattr(cpu, "_SWEEP_AT", np.inf)
    else:
        monkeypatch.setattr(cpu, "_SWEEP_AT", 0)
        monkeypatch.setattr(cpu, "_PAIR_COST", 0)
    rng = np.random.default_rng(12)
    n = 700
    for name, boxes in scenes(rng, n).items():
        boxes = boxes.astype(dtype)
        scores = rng.uniform(0, 1, n).astype(np.float32)
        classes = rng.integers(0, 3, n)
        for thr in (0.0, 0.5, 0.9):
            np.testing.assert_array_equal(det.nms(boxes, scores, thr), all_pairs_nms(boxes, scores, thr),
                                          err_msg=f"{name} {thr}")
        np.testing.assert_array_equal(det.batched_nms(boxes, scores, classes, 0.5),
                                      all_pairs_nms(boxes, scores, 0.5, classes), err_msg=name)
        d = det.multiclass_nms(boxes[None], scores[None, :, None], iou_threshold=0.5,
                               max_detections=30)
        np.testing.assert_array_equal(d.indices[0, :int(d.counts[0])],
                                      all_pairs_nms(boxes, scores, 0.5)[:30], err_msg=name)


def test_cpu_nms_phase_switch_is_taken_on_the_benchmark_scenes():
    """The cost model takes the second phase where many boxes are kept, not where few are
    (each scene's time is in benchmarks/README.md)."""
    rng = np.random.default_rng(0)
    c = rng.uniform(0, 1000, (1000, 2))
    s = rng.uniform(10, 110, (1000, 2))
    spread = np.concatenate([c - s / 2, c + s / 2], axis=1).astype(np.float32)
    crowd = np.repeat(spread[:25], 40, axis=0) + rng.normal(0, 2, (1000, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, 1000).astype(np.float32)
    calls = []
    sweep = cpu._sweep

    def counting(*args):
        calls.append(1)
        return sweep(*args)

    for boxes, second in ((spread, True), (crowd, False)):
        calls.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cpu, "_sweep", counting)
            keep = det.nms(boxes, scores, 0.5)
        np.testing.assert_array_equal(keep, all_pairs_nms(boxes, scores, 0.5))
        assert bool(calls) == second, len(keep)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_cpu_descending_order_is_a_stable_sort_by_score(dtype):
    """Descending score, ties (-0.0 and +0.0 among them) by index; the sort of one int64
    key a score against a stable sort of the scores, with and without NaN."""
    rng = np.random.default_rng(13)
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 1e-40, -1e-40, 3.5, 0.25, 65504.0])
    for n in (1, 7, 1000, 5000):
        s = rng.choice(pool, n).astype(dtype)
        spread = rng.random(n) < 0.3
        s[spread] = rng.normal(0, 10, int(spread.sum()))
        expected = sorted(range(n), key=lambda i: (-float(np.float32(s[i])), i))
        np.testing.assert_array_equal(cpu.descending_order(s), expected)
        s[::5] = np.nan  # NaN first, in index order
        order = cpu.descending_order(s)
        nan = np.flatnonzero(np.isnan(s))
        np.testing.assert_array_equal(order[:nan.size], nan)
        np.testing.assert_array_equal(order, np.argsort(~cpu.score_key(s), kind="stable"))
