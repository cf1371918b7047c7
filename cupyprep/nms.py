"""Non-maximum suppression with torchvision's semantics: ``nms``, ``batched_nms``, and
``multiclass_nms`` for a batch of detector heads (TensorRT EfficientNMS's layout)."""
from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from . import _arrays, _nms_pipeline, _plans, _transfers, _validate
from ._launch import pointer
from ._specs import nms as nms_spec
from ._torch import TensorView
from .cpu import detection as cpu

__all__ = ["nms", "batched_nms", "multiclass_nms", "Detections", "FlatDetections"]

# integer dtypes batched_nms takes for the categories
_INT_DTYPES = (np.int64, np.int32, np.int16, np.int8, np.uint8)


# --- argument checks -------------------------------------------------------------------------------
def _check_boxes(name, arr, ndim=2):
    if arr.ndim != ndim or arr.shape[-1] != 4:
        want = "(N, 4)" if ndim == 2 else "(B, N, 4)"
        raise ValueError(f"{name}: expected shape {want}, got {_arrays.describe(arr)}")
    return _validate.dtype_in(name, arr, nms_spec.BOX_DTYPES)


def _to_numpy_like(call, array):
    """A CPU-backend result handed back as the caller's kind (numpy or torch CPU); 0-d
    results stay 0-d."""
    array = np.asarray(array)
    return call.result(array if array.flags.c_contiguous else array.copy()).reshape(array.shape)


def _cpu_count_form(call, keep, n, return_count):
    if not return_count:
        return _to_numpy_like(call, keep)
    padded = np.full((n,), -1, np.int64)
    padded[: len(keep)] = keep
    return _to_numpy_like(call, padded), _to_numpy_like(call, np.array(len(keep), np.int64))


def nms(boxes, scores, iou_threshold, *, return_count=False):
    """Non-maximum suppression, exactly ``torchvision.ops.nms``.

    Parameters
    ----------
    boxes : (N, 4) float32 or float16, xyxy (numpy, cupy or torch)
    scores : (N,) float32 or float16, same kind
    iou_threshold : float
        A box is removed when its IoU with a kept, higher-scoring box is ``> iou_threshold``.
        NaN is a ValueError. Outside [0, 1] it is accepted, as torchvision accepts it, with
        the same rule: at 1 or above nothing is suppressed; below 0 every box that has a
        kept, higher-scoring box in its category is suppressed, overlapping or not (an IoU
        is never below 0), so only the best box of each category remains (pairs whose IoU
        is NaN, from NaN coordinates or two boxes of zero area, excepted).
    return_count : bool
        ``False``: return the kept indices; their number is read back from the device (one
        8-byte device-to-host copy, which waits for the kernels). ``True``: return
        ``(indices, count)`` with ``indices`` (N,) int64 padded with -1 after the first
        ``count`` and ``count`` a 0-d int64 device array: no synchronization, legal inside
        CUDA graph capture (torch inputs allocate every temporary through torch).

    Returns
    -------
    (K,) int64 indices of the kept boxes, by descending score; same kind as ``boxes``.

    Convention
    ----------
    Boxes are sorted by descending score with a stable sort: equal scores keep ascending
    index order (torchvision's CUDA sort is not guaranteed stable, so its order among exact
    ties may differ); NaN scores sort first (as ``torch.sort`` puts them), ``-0.0`` ties
    with ``0.0``. IoU is torchvision's CUDA arithmetic in float32 (float16 boxes: the side
    lengths rounded to float16, as its half arithmetic does), every operation rounded
    separately; the threshold is compared as float32 (as torchvision's CUDA kernel does).
    Degenerate boxes (x2 < x1 or y2 < y1) follow the same arithmetic (their area is
    negative or zero); NaN coordinates give NaN IoU, which suppresses nothing. The whole
    greedy pass runs on the GPU (one warp per 64 boxes, chained in score order): no mask
    goes to the host.

    Example
    -------
    >>> keep = cupyprep.nms(boxes, scores, 0.5)                        # doctest: +SKIP
    """
    return _nms_call(boxes, scores, None, iou_threshold, return_count)


def batched_nms(boxes, scores, idxs, iou_threshold, *, return_count=False):
    """NMS per category, equal to ``torchvision.ops.batched_nms``.

    Parameters
    ----------
    boxes : (N, 4) float32 / float16 xyxy; scores : (N,) float32 / float16;
    idxs : (N,) integer category of each box; iou_threshold : float (NaN: ValueError;
    outside [0, 1] as :func:`nms` says); return_count : bool, as :func:`nms`.

    Returns
    -------
    (K,) int64 indices of the kept boxes, by descending score (across categories).

    Convention
    ----------
    Boxes of different categories never suppress each other; IoU is computed only within
    a category, so the result is the per-category :func:`nms`, not torchvision's
    coordinate-offset trick (whose shifted coordinates can round an IoU differently).
    Ties in score across categories are ordered by index. Above 16384 boxes the boxes are
    sorted by category first, so each category's suppression runs on its own (in parallel)
    and only boxes of one category are compared; the kept boxes are then sorted back into
    score order.

    Example
    -------
    >>> keep = cupyprep.batched_nms(boxes, scores, labels, 0.5)        # doctest: +SKIP
    """
    return _nms_call(boxes, scores, idxs, iou_threshold, return_count)


# Launch plans (see _nms_plan): a repeated call with the same geometry (boxes, scores and
# int64 idxs: kind, dtype, shape, strides, device) and the same other arguments (plain
# numbers, of the same types), under the same tuning, replays the first call's launches.
_PLANS = _plans.PlanCache()


def _plan_key(op, boxes, scores, idxs, options):
    """The key of a call's plan, or None where the call takes the general path every time
    (host arrays, an option that cannot be a key (see ``_plans.options_key``), idxs other
    than int64)."""
    b = _plans.array_key(boxes)
    if b is None:
        return None
    s = _plans.array_key(scores)
    c = None if idxs is None else _plans.array_key(idxs)
    if s is None or (idxs is not None and (c is None or not _is_int64(c))):
        return None
    options = _plans.options_key(options)
    return None if options is None else (op, b, s, c, nms_spec.SPEC, options)


def _is_int64(key):
    if key[0] == "torch":
        return key[1] is sys.modules["torch"].int64
    return key[1] == np.int64


def _replay(plan, key, boxes, scores, idxs, finish):
    """Run ``plan`` on the arrays of a call with ``key``; returns ``finish(carve)``, which
    runs in the same launch context (a count read back waits for the stream the kernels
    ran on, and a capture refuses it)."""
    kind = key[1][0]
    if kind == "torch":
        call = _arrays.Prepared(TensorView(boxes), kind, True, boxes)
        inputs = (pointer(boxes.data_ptr()), pointer(scores.data_ptr()),
                  None if idxs is None else pointer(idxs.data_ptr()))
    else:
        call = _arrays.Prepared(boxes, kind, True)
        inputs = (boxes, scores, idxs)
    with call.launch():
        return finish(plan.run(call, inputs))


def _nms_call(boxes, scores, idxs, iou_threshold, return_count):
    key = _plan_key("nms", boxes, scores, idxs, (iou_threshold,))
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None:
            return _replay(plan, key, boxes, scores, idxs,
                           lambda carve: _nms_pipeline.finish(plan, carve, return_count))
    call = _arrays.prepare(boxes, "boxes")
    b = call.array
    _check_boxes("boxes", b)
    s = call.convert(scores, "scores")
    _validate.dtype_in("scores", s, nms_spec.BOX_DTYPES)
    n = b.shape[0]
    if s.shape != (n,):
        raise ValueError(f"scores: expected shape ({n},) like boxes, got {_arrays.describe(s)}")
    cls = None
    if idxs is not None:
        cls = call.convert(idxs, "idxs")
        _validate.dtype_in("idxs", cls, _INT_DTYPES)
        if cls.shape != (n,):
            raise ValueError(f"idxs: expected shape ({n},) like boxes, got {_arrays.describe(cls)}")
    thr = _validate.iou_threshold("iou_threshold", iou_threshold)
    if n >= 2**31:
        raise ValueError(f"boxes: expected fewer than 2**31 boxes, got {n}")
    if not call.device:
        keep = cpu.nms(b, s, thr, None if cls is None else np.asarray(cls))
        return _cpu_count_form(call, keep, n, return_count)
    with call.launch():
        if n == 0:
            return _nms_pipeline.empty_result(call, return_count)
        bs = _arrays.element_strides(b, "boxes")
        ss = _arrays.element_strides(s, "scores")
        if cls is not None:
            if cls.dtype != np.int64:
                cls = cls.astype(np.int64)
            cls_mode, s_cls = nms_spec.CLASS_FROM_BOX, _arrays.element_strides(cls, "idxs")[0]
        else:
            cls_mode, s_cls = nms_spec.CLASS_NONE, 0
        plan = _nms_pipeline.plan_pipeline(
            call, b, (0, bs[0], bs[1]), s, (0, ss[0], 0), 1, n, 1, iou_threshold=thr,
            score_threshold=None, top_k=None, max_det=n, cls_mode=cls_mode, class_src=cls,
            s_cls=s_cls, grouped=cls is not None and n > nms_spec.SPEC.grouped_min_boxes)
        if key is not None:
            _PLANS.put(key, plan)
        return _nms_pipeline.finish(plan, plan.run(call, (b, s, cls)), return_count)


# --- batched multiclass NMS ----------------------------------------------------------------------------
class FlatDetections(NamedTuple):
    """All images' detections in one list: ``boxes`` (K, 4), ``scores`` (K,), ``classes``
    (K,) int64, ``image_index`` (K,) int64, ``indices`` (K,) int64 box index in its image."""

    boxes: object
    scores: object
    classes: object
    image_index: object
    indices: object


class Detections(NamedTuple):
    """Per-image detections padded to ``max_detections`` (TensorRT EfficientNMS's layout).

    ``counts`` (B,) int64: valid detections per image; ``boxes`` (B, D, 4) in the boxes'
    dtype; ``scores`` (B, D) in the scores' dtype; ``classes`` (B, D) int64; ``indices``
    (B, D) int64, the box index in its image. Slots at and after ``counts[b]`` hold zero
    boxes and scores and -1 classes and indices.
    """

    counts: object
    boxes: object
    scores: object
    classes: object
    indices: object

    def flatten(self):
        """The valid detections of every image concatenated, image by image (one read of
        ``counts`` from the device, on the stream the ops use)."""
        with _arrays.prepare(self.counts, "counts").launch():  # device and stream as the ops'
            counts = _transfers.read_back(self.counts, "counts", "flatten outside the capture").astype(np.int64)
            B, D = self.classes.shape[:2]
            sel = (np.arange(D)[None, :] < counts[:, None]).reshape(-1)
            image = np.repeat(np.arange(B, dtype=np.int64), counts)
            flat = np.nonzero(sel)[0]
            hint = "flatten reads counts back to the host: call it outside the capture"
            take = _transfers.upload_like(self.counts, flat, np.int64, "the detections' indices", hint)
            image_index = _transfers.upload_like(self.counts, image, np.int64, "their images", hint)
            return FlatDetections(self.boxes.reshape(B * D, 4)[take], self.scores.reshape(-1)[take],
                                  self.classes.reshape(-1)[take], image_index,
                                  self.indices.reshape(-1)[take])

    def to_original(self, meta, clip=True):
        """The boxes in original-image coordinates through a
        :class:`cupyprep.PreprocessMeta` (``meta.to_original``); other fields unchanged.
        Padded slots stay meaningless."""
        return self._replace(boxes=meta.to_original(self.boxes, clip=clip))


def multiclass_nms(boxes, scores, *, iou_threshold=0.5, score_threshold=None, top_k=None,
                   max_detections=100, class_agnostic=False):
    """NMS for a batch of images in one call, per class or across classes.

    Parameters
    ----------
    boxes : (B, N, 4) or (N, 4) float32 / float16 xyxy
    scores : (B, N) / (N,) one class, or (B, N, C) / (N, C) per class; float32 / float16
    iou_threshold : float
        Suppress when IoU > iou_threshold (as :func:`nms`: NaN is a ValueError; at 1 or
        above nothing is suppressed, below 0 all but the best candidate of each class, or
        of each image when class-agnostic).
    score_threshold : float, optional
        Candidates need ``score > score_threshold`` (NaN scores never pass); without it
        every candidate takes part, NaN scores first.
    top_k : int, optional
        Per image, only the ``top_k`` best candidates (after the score threshold) enter NMS.
        The suppression mask is sized for ``top_k`` candidates per image (all of them
        without it). Where a ``score_threshold`` is given and that would take more than
        1 GiB, the call first counts the candidates that pass (one read back: it then
        waits for the GPU) and sizes the mask by that count. A mask larger than the
        device's memory is a ValueError asking for ``top_k``.
    max_detections : int
        Per image, the first ``max_detections`` kept (by descending score) are returned.
    class_agnostic : bool
        ``False``: every (box, class) pair with a passing score is a candidate and only
        candidates of the same class suppress each other. ``True``: one candidate per box,
        its best class (the highest score, NaN highest, the lowest class among ties), and
        any two boxes suppress each other.

    Returns
    -------
    :class:`Detections` (padded per image; a single image's (N, 4) boxes still give B = 1, counts on the device: no synchronization);
    ``.flatten()`` gives :class:`FlatDetections`, ``.to_original(meta)`` maps the boxes back
    through a :class:`cupyprep.PreprocessMeta`.

    Convention
    ----------
    Per image, equal to: candidates filtered by score, ordered by descending score (stable:
    ties by ascending ``n * C + c``), cut to ``top_k``, then
    ``torchvision.ops.batched_nms(boxes, scores, classes, iou_threshold)`` (or ``nms`` when
    class-agnostic), then cut to ``max_detections``.

    Example
    -------
    >>> det = cupyprep.multiclass_nms(boxes, scores, score_threshold=0.25)   # doctest: +SKIP
    >>> det.counts, det.boxes[0, :det.counts[0]]                               # doctest: +SKIP
    """
    key = _plan_key("multiclass_nms", boxes, scores, None,
                    (iou_threshold, score_threshold, top_k, max_detections, class_agnostic))
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None:
            return _replay(plan, key, boxes, scores, None, lambda carve: _detections(plan, carve))
    call = _arrays.prepare(boxes, "boxes")
    b = call.array
    squeeze = b.ndim == 2
    if squeeze:
        _check_boxes("boxes", b)
        b = b[None]
    else:
        _check_boxes("boxes", b, ndim=3)
    s = call.convert(scores, "scores")
    _validate.dtype_in("scores", s, nms_spec.BOX_DTYPES)
    if squeeze:
        s = s[None]
    B, N = b.shape[:2]
    if s.ndim == 2:
        s = s[:, :, None]
    if s.ndim != 3 or s.shape[:2] != (B, N):
        want = f"({N},) or ({N}, C)" if squeeze else f"({B}, {N}) or ({B}, {N}, C)"
        raise ValueError(f"scores: expected shape {want} like boxes, got {_arrays.describe(scores)}")
    C = s.shape[2]
    if C == 0:
        raise ValueError(f"scores: expected at least one class, got {_arrays.describe(scores)}")
    thr = _validate.iou_threshold("iou_threshold", iou_threshold)
    sthr = None if score_threshold is None else _validate.number("score_threshold", score_threshold)
    top_k = _validate.positive_int("top_k", top_k, allow_none=True)
    D = _validate.positive_int("max_detections", max_detections)
    agnostic = _validate.flag("class_agnostic", class_agnostic)
    per_box = 1 if (agnostic or C == 1) else C
    if N * per_box >= 2**31:
        raise ValueError(f"scores: expected fewer than 2**31 candidates per image, got {N * per_box}")
    if not call.device:
        idx, cls, counts = cpu.multiclass_nms(np.asarray(b), np.asarray(s), thr, sthr, top_k, D, agnostic)
        bnp, snp = np.asarray(b), np.asarray(s)
        # the kept slots gathered, the padding zero (N = 0: no slot kept, none indexed)
        out_boxes = np.zeros((B, D, 4), b.dtype)
        out_scores = np.zeros((B, D), s.dtype)
        img, slot = np.nonzero(idx >= 0)
        out_boxes[img, slot] = bnp[img, idx[img, slot]]
        out_scores[img, slot] = snp[img, idx[img, slot], cls[img, slot]]
        det = (counts, out_boxes, out_scores, cls, idx)
        return Detections(*(_to_numpy_like(call, a) for a in det))
    with call.launch():
        if N == 0 or B == 0:
            return _empty_detections(call, B, D, b.dtype, s.dtype)
        bs = _arrays.element_strides(b, "boxes")
        ss = _arrays.element_strides(s, "scores")
        if agnostic and C > 1:
            cls_mode = nms_spec.CLASS_BEST
        else:
            cls_mode = nms_spec.CLASS_PER_CANDIDATE
        plan = _nms_pipeline.plan_pipeline(
            call, b, (bs[0], bs[1], bs[2]), s, (ss[0], ss[1], ss[2]), B, N, C, iou_threshold=thr,
            score_threshold=sthr, top_k=top_k, max_det=D, cls_mode=cls_mode, want_classes=True,
            too_large="; pass top_k (or a smaller one) to bound the candidates per image", emit_per_box=per_box)
        if key is not None and plan.reusable:
            _PLANS.put(key, plan)
        return _detections(plan, plan.run(call, (b, s, None)))


def _detections(plan, carve):
    return Detections(*(carve.array(plan.results[k])
                        for k in ("counts", "det_boxes", "det_scores", "classes", "det_index")))


def _empty_detections(call, B, D, bdt, sdt):
    shapes = [((B,), np.int64, 0), ((B, D, 4), bdt, 0), ((B, D), sdt, 0), ((B, D), np.int64, -1),
              ((B, D), np.int64, -1)]
    out = []
    for shape, dt, fill in shapes:
        native, view = call.output(None, shape, dt)
        view.fill(fill)
        out.append(native)
    return Detections(*out)
