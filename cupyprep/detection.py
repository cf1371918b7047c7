"""Detection post-processing: NMS (torchvision's, per class, per image of a batch), box
ops, anchor (SSD / RetinaFace) and YOLO decoders, roi_align.

On CuPy arrays and torch CUDA tensors everything runs on the GPU, the greedy NMS pass
included; NumPy arrays and torch CPU tensors run the NumPy backend (``cupyprep.cpu``).
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from . import _arrays, _kernels, _validate
from .cpu import detection as cpu
from ._kernels import C_TYPES, launch_1d

__all__ = [
    "nms",
    "batched_nms",
    "multiclass_nms",
    "Detections",
    "FlatDetections",
    "box_convert",
    "clip_boxes",
    "box_iou",
    "prior_boxes",
    "decode_boxes",
    "decode_landmarks",
    "encode_boxes",
    "decode_yolo",
    "roi_align",
]

BOX_DTYPES = (np.float32, np.float16)
BOX_FORMATS = ("xyxy", "xywh", "cxcywh")
_INT_DTYPES = (np.int64, np.int32, np.int16, np.int8, np.uint8)

_CLS_NONE, _CLS_PER_CANDIDATE, _CLS_FROM_BOX, _CLS_BEST = 0, 1, 2, 3


def _t(dtype):
    return C_TYPES[np.dtype(dtype)]


def _b(flag):
    return "true" if flag else "false"


def _nms_variants():
    out = []
    for ts in BOX_DTYPES:
        for best in (False, True):
            for tk in ("int", "long long"):
                out.append(f"cupyprep_nms_keys<{_t(ts)}, {_b(best)}, {tk}>")
    for tb in BOX_DTYPES:
        for cls in range(4):
            for tk in ("int", "long long"):
                out.append(f"cupyprep_nms_gather<{_t(tb)}, {cls}, {tk}>")
    out.append("cupyprep_nms_first_chunk")
    out.append("cupyprep_nms_small_sort")
    for half in (False, True):
        for classes in (False, True):
            for first in (False, True):
                out.append(f"cupyprep_nms_mask<{_b(half)}, {_b(classes)}, {_b(first)}>")
    for grouped in (False, True):
        out.append(f"cupyprep_nms_reduce<{_b(grouped)}>")
    for ts in BOX_DTYPES:
        out.append(f"cupyprep_nms_final_keys<{_t(ts)}>")
    out.append("cupyprep_nms_final_ids")
    for tb in BOX_DTYPES:
        for ts in BOX_DTYPES:
            out.append(f"cupyprep_nms_emit<{_t(tb)}, {_t(ts)}>")
    return out


def _roi_align_variants():
    return [f"cupyprep_roi_align<{_t(d)}, {_b(a)}>" for d in BOX_DTYPES for a in (False, True)]


def _boxes_variants():
    out = []
    for t in BOX_DTYPES:
        out += [f"cupyprep_box_convert<{_t(t)}, {i}, {o}>" for i in range(3) for o in range(3)]
        out += [f"cupyprep_box_iou<{_t(t)}, {_t(u)}>" for u in BOX_DTYPES]
        out += [f"cupyprep_{op}<{_t(t)}>" for op in ("clip_boxes", "decode_boxes", "decode_landmarks")]
        out += [f"cupyprep_decode_yolo_{k}<{_t(t)}, {_b(obj)}>" for k in ("rows", "tiles") for obj in (False, True)]
    return out


_kernels.register_variants("nms", "nms.cu", _nms_variants)
_kernels.register_variants("boxes", "boxes.cu", _boxes_variants)
_kernels.register_variants("roi_align", "roi_align.cu", _roi_align_variants)

# batched_nms with more boxes than this sorts by class first, so the mask and the greedy
# pass see each class's boxes alone (fewer launches and sorts below it)
_GROUPED_MIN_BOXES = 16384
_SMALL_SORT = 2048  # kernels/nms.cu kSmallSort: one segment up to this many keys sorts in one block
_MASK_Y = 32  # blocks per row of 64-row chunks in the mask launch (each loops over tiles)
# multiclass_nms with a score threshold and no (or a large) top_k: a worst-case suppression
# mask (every candidate passing) above this many bytes is sized by a count of the passing
# candidates instead (one read back)
_MASK_BUDGET = 1 << 30


def _mask_bytes(B, K):
    """Bytes of the suppression mask for B segments of up to K candidates (the upper
    triangle of 64 x 64 blocks, one bit per pair)."""
    cb = (K + 63) // 64
    return B * 64 * (cb * (cb + 1) // 2) * 8


# --- argument checks -------------------------------------------------------------------------------
def _check_boxes(name, arr, ndim=2):
    if arr.ndim != ndim or arr.shape[-1] != 4:
        want = "(N, 4)" if ndim == 2 else "(B, N, 4)"
        raise ValueError(f"{name}: expected shape {want}, got {_arrays.describe(arr)}")
    return _validate.dtype_in(name, arr, BOX_DTYPES)


def _positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name}: expected a positive int{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


def _to_numpy_like(call, array):
    """A CPU-backend result handed back as the caller's kind (numpy or torch CPU); 0-d
    results stay 0-d."""
    array = np.asarray(array)
    return call.result(array if array.flags.c_contiguous else array.copy()).reshape(array.shape)


# --- the GPU NMS pipeline ----------------------------------------------------------------------------
def _argsort(call, native, view):
    if call.kind == "torch":
        import torch

        order = torch.sort(native, stable=True).indices
        return _arrays._from_torch(order)
    if call.kind == "cupy":
        return call.xp.argsort(view)  # thrust's stable sort
    return np.argsort(view, kind="stable")


def _sorted(call, native, view):
    """The values in ascending order (a device array of the caller's library)."""
    if call.kind == "torch":
        import torch

        return _arrays._from_torch(torch.sort(native).values)
    return call.xp.sort(view)


def _scratch(call, shape, dtype):
    """A temporary on the caller's allocator (torch's caching allocator for torch inputs,
    so the pipeline stays capturable in a CUDA graph)."""
    return call.output(None, shape, dtype)


_ALIGN = 256  # bytes between the arrays of one allocation


class _Carve:
    """Several arrays carved from one allocation of the caller's allocator: one
    ``torch.empty`` (or cupy / numpy ``empty``) and one device view for all of them,
    instead of one of each per array, which is most of a small call's host time.

    ``specs`` maps names to ``(shape, dtype)`` (None: no array). :meth:`view` gives an
    array as cupy (or numpy, emulated) for the kernels; :meth:`native` as the caller's
    library, for the few that a library call (a sort) or the caller sees."""

    def __init__(self, call, specs):
        self._call = call
        self._at = {}
        size = 0
        for name, spec in specs.items():
            if spec is None:
                continue
            shape, dtype = spec
            dtype = np.dtype(dtype)
            nbytes = dtype.itemsize * math.prod(shape)
            self._at[name] = (size, shape, dtype, nbytes)
            size += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
        self._native, self._bytes = call.output(None, (max(size, _ALIGN),), np.uint8)

    def view(self, name):
        if name not in self._at:
            return None
        off, shape, dtype, nbytes = self._at[name]
        buf = self._bytes
        if isinstance(buf, np.ndarray):
            return buf[off:off + nbytes].view(dtype).reshape(shape)
        import cupy

        return cupy.ndarray(shape, dtype, buf.data + off)

    def native(self, name):
        off, shape, dtype, nbytes = self._at[name]
        if self._call.kind == "torch":
            return self._native[off:off + nbytes].view(_arrays._torch_dtype(dtype)).view(shape)
        return self.view(name)


def _nms_pipeline(call, boxes, b_strides, scores, s_strides, B, N, C, *, iou_threshold,
                  score_threshold, top_k, max_det, cls_mode, class_src=None, s_cls=0,
                  want_classes=False, grouped=False, too_large=""):
    """Launch keys -> argsort -> gather -> mask -> reduce. Returns device arrays
    ``(ids (B, max_det) int64, classes (B, max_det) int64 or None, counts (B,) int64)``.

    ``grouped`` (batched_nms: one segment, classes from ``class_src``): candidates sorted by
    class, then score; each class is reduced on its own and the kept ids put back in score
    order by a final sort. ``too_large``: what the error for a mask larger than the
    device adds (what the caller can pass to bound it)."""
    i32, i64, f32 = np.int32, np.int64, np.float32
    best = cls_mode == _CLS_BEST
    S = N if (best or cls_mode != _CLS_PER_CANDIDATE) else N * C
    Kc = S if top_k is None else min(S, top_k)
    if score_threshold is not None and _mask_bytes(B, Kc) > _MASK_BUDGET:
        # size the mask by the candidates that pass (counted with >=, a superset of the
        # keys kernel's >; a box counts once in the best-class mode): at least that many
        # slots select the same candidates as S
        passing = scores >= np.float32(score_threshold)
        if best:
            passing = passing.any(axis=-1)
        Kc = max(1, min(Kc, int(_arrays.read_back(
            passing.reshape(B, -1).sum(axis=1).max(),
            "the count of candidates passing score_threshold (without top_k their mask would "
            "pass 1 GiB)", "pass top_k"))))
    need = _mask_bytes(B, Kc)
    if call.xp is not np and need > _MASK_BUDGET:
        total_memory = call.xp.cuda.runtime.memGetInfo()[1]
        if need > total_memory:
            raise ValueError(
                f"scores: NMS over up to {Kc} candidates per image needs a {need / 2**30:.1f} GiB "
                f"suppression mask for {B} image(s), more than the device's "
                f"{total_memory / 2**30:.1f} GiB{too_large}")
    cb = (Kc + 63) // 64
    total = B * S
    # one segment: 32-bit keys (the segment part is zero) sort faster
    key_type, key_dtype = ("int", np.int32) if (B == 1 and not grouped) else ("long long", np.int64)
    classes = cls_mode != _CLS_NONE
    # one segment of few keys: argsorted by one block (cupyprep_nms_small_sort)
    small = key_dtype == np.int32 and total <= _SMALL_SORT
    tri = B * 64 * (cb * (cb + 1) // 2)
    scratch = _Carve(call, {
        "keys": ((total,), key_dtype),
        "perm": ((total,), np.int64) if small else None,
        "best": ((total,), np.int64) if best else None,
        "sboxes": ((B * Kc * 4,), np.float32),
        "sid": ((B * Kc,), np.int64),
        "mcount": ((B,), np.int32),
        "scls": ((B * Kc,), np.int64) if classes else None,
        # the reduce's state, zeroed by the gather: a ticket word, the grouped count, and
        # two words per chunk
        "state": ((2 + 2 * B * cb,), np.uint64),
        "first": ((cb,), np.int32) if grouped else None,
        "kept": ((cb,), np.uint64) if grouped else None,
        "final": ((Kc,), np.int64) if grouped else None,
    })
    # the mask on its own: at 100k boxes it is most of the memory, and a separate
    # allocation lets the caching allocator reuse the small ones around it
    mask = _scratch(call, (tri,), np.uint64)[1]
    # what the caller gets: kept ids (and their classes), -1 past each count (pre-filled
    # by the gather, except where the final class-sorted step writes every slot), then
    # the counts
    rows = 2 if want_classes else 1
    results = _Carve(call, {"ids": ((rows, B, max_det), np.int64), "counts": ((B,), np.int64)})
    keys = scratch.view("keys")
    best_arr = scratch.view("best")
    fn = _kernels.get_function("nms.cu", f"cupyprep_nms_keys<{_t(scores.dtype)}, {_b(best)}, {key_type}>")
    has_thr = score_threshold is not None
    launch_1d(fn, total, (scores, i64(s_strides[0]), i64(s_strides[1]), i64(s_strides[2]), i32(N),
                          i32(C), i32(has_thr), f32(score_threshold if has_thr else 0.0),
                          class_src if grouped else None, i64(s_cls if grouped else 0), i64(total),
                          keys, best_arr))
    if small:
        m = 1 << max(total - 1, 1).bit_length()  # a power of two >= total, >= 2
        perm = scratch.view("perm")
        _kernels.get_function("nms.cu", "cupyprep_nms_small_sort")(
            (1,), (max(32, min(1024, m // 2)),), (keys, i32(total), i32(m), perm))
    else:
        perm = _argsort(call, scratch.native("keys"), keys)
    sboxes, sid, mcount = scratch.view("sboxes"), scratch.view("sid"), scratch.view("mcount")
    scls = scratch.view("scls")
    state = scratch.view("state")
    out_native, out = results.native("ids"), results.view("ids")
    ids = (out_native[0], out[0])
    cls_out = (out_native[1], out[1]) if want_classes else (None, None)
    counts = (results.native("counts"), results.view("counts"))
    n_fill = 0 if grouped else out.size
    src = best_arr if best else class_src
    fn = _kernels.get_function("nms.cu", f"cupyprep_nms_gather<{_t(boxes.dtype)}, {cls_mode}, {key_type}>")
    launch_1d(fn, max(B * Kc, state.size, n_fill),
              (boxes, i64(b_strides[0]), i64(b_strides[1]), i64(b_strides[2]), keys, perm, src, i64(s_cls),
               i64(S), i32(C), i32(Kc), i64(B * Kc), sboxes, scls, sid, mcount, state, i64(state.size),
               out, i64(n_fill)))
    first = None
    if grouped:
        first = scratch.view("first")
        launch_1d(_kernels.get_function("nms.cu", "cupyprep_nms_first_chunk"), cb,
                  (scls, i32(cb), first))
    half = boxes.dtype == np.float16
    # best-class candidates carry a class for the output but suppress across classes
    mask_classes = cls_mode == _CLS_FROM_BOX or (cls_mode == _CLS_PER_CANDIDATE and C > 1)
    fn = _kernels.get_function("nms.cu", f"cupyprep_nms_mask<{_b(half)}, {_b(mask_classes)}, {_b(grouped)}>")
    fn((cb, max(1, min((cb + 1) // 2, _MASK_Y)), B), (64,),
       (sboxes, scls, mcount, first, i32(Kc), i32(cb), f32(iou_threshold), mask))
    ticket, grouped_count, chain = state[0:1].view(np.uint32), state[1:2], state[2:]
    kept = scratch.view("kept")
    fn = _kernels.get_function("nms.cu", f"cupyprep_nms_reduce<{_b(grouped)}>")
    fn((B * cb,), (32,), (mask, mcount, first, sid, scls if want_classes else None, i32(Kc), i32(cb),
                          i32(max_det), chain, ticket, ids[1], cls_out[1],
                          grouped_count.view(np.int64) if grouped else counts[1], kept))
    if grouped:
        final_native, final = scratch.native("final"), scratch.view("final")
        launch_1d(_kernels.get_function("nms.cu", f"cupyprep_nms_final_keys<{_t(scores.dtype)}>"), Kc,
                  (scores, i64(s_strides[1]), sid, kept, i32(Kc), final))
        ordered = _sorted(call, final_native, final)
        launch_1d(_kernels.get_function("nms.cu", "cupyprep_nms_final_ids"), max_det,
                  (ordered, grouped_count, i32(max_det), ids[1], counts[1]))
    return ids, cls_out, counts


def _finish(ids, counts, return_count):
    """``(ids (1, N), counts (1,))`` -> the kept indices, or the sync-free pair."""
    ids_native, _ = ids
    counts_native, counts_view = counts
    if return_count:
        return ids_native[0], counts_native[0]
    k = int(_arrays.read_back(counts_view, "the number of boxes kept",  # the one 8-byte read
                              "pass return_count=True (a padded result and its count, on the device)")[0])
    return ids_native[0, :k]


def _empty_result(call, return_count):
    """nms of no boxes: empty indices, or the sync-free pair (empty, count 0)."""
    if call.kind == "torch":
        import torch

        dev = call.tensor.device
        idx = torch.empty((0,), dtype=torch.int64, device=dev)
        return (idx, torch.zeros((), dtype=torch.int64, device=dev)) if return_count else idx
    xp = call.xp
    idx = xp.empty((0,), np.int64)
    return (idx, xp.zeros((), np.int64)) if return_count else idx


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
    idxs : (N,) integer category of each box; iou_threshold : float;
    return_count : bool, as :func:`nms`.

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


def _nms_call(boxes, scores, idxs, iou_threshold, return_count):
    call = _arrays.prepare(boxes, "boxes")
    b = call.array
    _check_boxes("boxes", b)
    s = call.convert(scores, "scores")
    _validate.dtype_in("scores", s, BOX_DTYPES)
    n = b.shape[0]
    if s.shape != (n,):
        raise ValueError(f"scores: expected shape ({n},) like boxes, got {_arrays.describe(s)}")
    cls = None
    if idxs is not None:
        cls = call.convert(idxs, "idxs")
        _validate.dtype_in("idxs", cls, _INT_DTYPES)
        if cls.shape != (n,):
            raise ValueError(f"idxs: expected shape ({n},) like boxes, got {_arrays.describe(cls)}")
    thr = _validate.number("iou_threshold", iou_threshold)
    if n >= 2**31:
        raise ValueError(f"boxes: expected fewer than 2**31 boxes, got {n}")
    if not call.device:
        keep = cpu.nms(b, s, thr, None if cls is None else np.asarray(cls))
        return _cpu_count_form(call, keep, n, return_count)
    with call.launch():
        if n == 0:
            return _empty_result(call, return_count)
        bs = _arrays.element_strides(b, "boxes")
        ss = _arrays.element_strides(s, "scores")
        if cls is not None:
            if cls.dtype != np.int64:
                cls = cls.astype(np.int64)
            cls_mode, s_cls = _CLS_FROM_BOX, _arrays.element_strides(cls, "idxs")[0]
        else:
            cls_mode, s_cls = _CLS_NONE, 0
        ids, _, counts = _nms_pipeline(
            call, b, (0, bs[0], bs[1]), s, (0, ss[0], 0), 1, n, 1, iou_threshold=thr,
            score_threshold=None, top_k=None, max_det=n, cls_mode=cls_mode, class_src=cls,
            s_cls=s_cls, grouped=cls is not None and n > _GROUPED_MIN_BOXES)
        return _finish(ids, counts, return_count)


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
            counts = _arrays.read_back(self.counts, "counts", "flatten outside the capture").astype(np.int64)
            B, D = self.classes.shape[:2]
            sel = (np.arange(D)[None, :] < counts[:, None]).reshape(-1)
            image = np.repeat(np.arange(B, dtype=np.int64), counts)
            flat = np.nonzero(sel)[0]
            hint = "flatten reads counts back to the host: call it outside the capture"
            take = _arrays.upload_like(self.counts, flat, np.int64, "the detections' indices", hint)
            image_index = _arrays.upload_like(self.counts, image, np.int64, "their images", hint)
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
        Suppress when IoU > iou_threshold (as :func:`nms`).
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
    call = _arrays.prepare(boxes, "boxes")
    b = call.array
    squeeze = b.ndim == 2
    if squeeze:
        _check_boxes("boxes", b)
        b = b[None]
    else:
        _check_boxes("boxes", b, ndim=3)
    s = call.convert(scores, "scores")
    _validate.dtype_in("scores", s, BOX_DTYPES)
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
    thr = _validate.number("iou_threshold", iou_threshold)
    sthr = None if score_threshold is None else _validate.number("score_threshold", score_threshold)
    top_k = _positive_int("top_k", top_k, allow_none=True)
    D = _positive_int("max_detections", max_detections)
    agnostic = bool(class_agnostic)
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
            cls_mode = _CLS_BEST
        else:
            cls_mode = _CLS_PER_CANDIDATE
        ids, cls_out, counts = _nms_pipeline(
            call, b, (bs[0], bs[1], bs[2]), s, (ss[0], ss[1], ss[2]), B, N, C, iou_threshold=thr,
            score_threshold=sthr, top_k=top_k, max_det=D, cls_mode=cls_mode, want_classes=True,
            too_large="; pass top_k (or a smaller one) to bound the candidates per image")
        out_b = call.output(None, (B, D, 4), b.dtype)
        out_s = call.output(None, (B, D), s.dtype)
        out_i = call.output(None, (B, D), np.int64)
        fn = _kernels.get_function("nms.cu", f"cupyprep_nms_emit<{_t(b.dtype)}, {_t(s.dtype)}>")
        i64 = np.int64
        launch_1d(fn, B * D, (b, i64(bs[0]), i64(bs[1]), i64(bs[2]), s, i64(ss[0]), i64(ss[1]),
                              i64(ss[2]), ids[1], cls_out[1], np.int32(per_box),
                              np.int32(D), i64(B * D), out_b[1], out_s[1], out_i[1]))
        return Detections(counts[0], out_b[0], out_s[0], cls_out[0], out_i[0])


def _empty_detections(call, B, D, bdt, sdt):
    shapes = [((B,), np.int64, 0), ((B, D, 4), bdt, 0), ((B, D), sdt, 0), ((B, D), np.int64, -1),
              ((B, D), np.int64, -1)]
    out = []
    for shape, dt, fill in shapes:
        native, view = call.output(None, shape, dt)
        view.fill(fill)
        out.append(native)
    return Detections(*out)


# --- box ops ---------------------------------------------------------------------------------------
def _box_arg(name, boxes, min_ndim=1):
    call = _arrays.prepare(boxes, name)
    arr = call.array
    if arr.ndim < min_ndim or arr.shape[-1] != 4:
        raise ValueError(f"{name}: expected shape (..., 4), got {_arrays.describe(arr)}")
    _validate.dtype_in(name, arr, BOX_DTYPES)
    return call, arr


def box_convert(boxes, in_fmt, out_fmt):
    """Convert boxes between ``xyxy``, ``xywh`` and ``cxcywh`` (``torchvision.ops.box_convert``).

    ``boxes`` (..., 4) float32 / float16; returns the same shape, dtype and kind.

    Convention
    ----------
    ``xywh``: top-left corner and size; ``cxcywh``: center and size. Conversions go
    through xyxy in the boxes' dtype: ``x1 = cx - 0.5 * w``, ``cx = (x1 + x2) / 2``; the
    same format in and out gives a copy (as torchvision's).

    Example
    -------
    >>> xyxy = cupyprep.box_convert(pred[..., :4], "cxcywh", "xyxy")     # doctest: +SKIP
    """
    in_fmt = _validate.choice("in_fmt", in_fmt, BOX_FORMATS)
    out_fmt = _validate.choice("out_fmt", out_fmt, BOX_FORMATS)
    call, arr = _box_arg("boxes", boxes)
    if not call.device:
        return call.result(cpu.box_convert(arr, in_fmt, out_fmt))
    with call.launch():
        native, out = call.output(None, arr.shape, arr.dtype)
        codes = BOX_FORMATS.index(in_fmt), BOX_FORMATS.index(out_fmt)
        view, A, P, st = _rows(arr, "boxes")
        launch_1d(_boxes_fn(f"cupyprep_box_convert<{_t(arr.dtype)}, {codes[0]}, {codes[1]}>"), A * P,
                  (view, _i64(P), *st, out, _i64(A * P)))
    return native


def _rows(arr, name):
    """``(view, A, P, strides)``: ``arr`` (..., P, K) as the (A, P, K) array the boxes.cu
    kernels read (a view where the leading dimensions' strides merge, a contiguous copy
    where they do not), and its element strides as int64 kernel arguments."""
    P = arr.shape[-2] if arr.ndim >= 2 else 1
    A = math.prod(arr.shape[:-2])
    view = arr.reshape(A, P, arr.shape[-1])
    return view, A, P, tuple(_i64(v) for v in _arrays.element_strides(view, name))


def _boxes_fn(expr):
    return _kernels.get_function("boxes.cu", expr)


_i64 = np.int64
_YOLO_ROWS = 128  # kernels/boxes.cu kYoloRows: rows of a decode_yolo tile


def clip_boxes(boxes, size):
    """Clip xyxy boxes to an image: x to [0, width], y to [0, height]
    (``torchvision.ops.clip_boxes_to_image``).

    ``boxes`` (..., 4) float32 / float16; ``size`` (height, width). Same shape, dtype, kind.
    NaN stays NaN.

    Example
    -------
    >>> boxes = cupyprep.clip_boxes(boxes, (1080, 1920))                 # doctest: +SKIP
    """
    H, W = _validate.size_hw("size", size)
    call, arr = _box_arg("boxes", boxes)
    if not call.device:
        return call.result(cpu.clip_boxes(arr, (H, W)))
    with call.launch():
        native, out = call.output(None, arr.shape, arr.dtype)
        view, A, P, st = _rows(arr, "boxes")
        launch_1d(_boxes_fn(f"cupyprep_clip_boxes<{_t(arr.dtype)}>"), A * P,
                  (view, _i64(P), *st, np.float32(W), np.float32(H), out, _i64(A * P)))
    return native


def box_iou(boxes1, boxes2):
    """Pairwise IoU of xyxy boxes (``torchvision.ops.box_iou``): (N, 4) and (M, 4) -> (N, M)
    float32.

    Convention
    ----------
    ``area = (x2 - x1) * (y2 - y1)``, ``inter = max(0, min(x2) - max(x1)) * max(0, ...)``,
    ``iou = inter / (area1 + area2 - inter)``, in float32 (float16 boxes read exactly).
    Empty unions give NaN, as in torchvision. The min / max ignore NaN coordinates (NumPy's
    ``fmin`` / ``fmax``). On the GPU, one launch.

    Example
    -------
    >>> iou = cupyprep.box_iou(pred, gt)                                  # doctest: +SKIP
    """
    call, a = _box_arg("boxes1", boxes1, 2)
    b = call.convert(boxes2, "boxes2")
    for name, arr in (("boxes1", a), ("boxes2", b)):
        if arr.ndim != 2 or arr.shape[1] != 4:
            raise ValueError(f"{name}: expected shape (N, 4), got {_arrays.describe(arr)}")
        _validate.dtype_in(name, arr, BOX_DTYPES)
    if not call.device:
        return call.result(cpu.box_iou(a, b))
    N, M = a.shape[0], b.shape[0]
    with call.launch():
        native, out = call.output(None, (N, M), np.float32)
        sa, sb = _arrays.element_strides(a, "boxes1"), _arrays.element_strides(b, "boxes2")
        fn = _boxes_fn(f"cupyprep_box_iou<{_t(a.dtype)}, {_t(b.dtype)}>")
        launch_1d(fn, N * M, (a, _i64(sa[0]), _i64(sa[1]), b, _i64(sb[0]), _i64(sb[1]), _i64(M), out,
                              _i64(N * M)))
    return native


# --- decoders --------------------------------------------------------------------------------------
def prior_boxes(image_size, min_sizes, steps, clip=False):
    """SSD / RetinaFace anchors (``PriorBox``): (P, 4) float32 NumPy, cxcywh normalized to
    the image size.

    Parameters
    ----------
    image_size : (height, width) of the network input
    min_sizes : one sequence of anchor sizes (pixels) per feature level
    steps : the stride (pixels) of each feature level
    clip : clamp every value to [0, 1]

    Convention
    ----------
    Level k has ``ceil(H / steps[k]) x ceil(W / steps[k])`` cells, row-major; each cell
    gives one anchor per size: center ``((j + 0.5) * step / W, (i + 0.5) * step / H)``, size
    ``(s / W, s / H)``; computed in double precision and rounded once to float32.

    Example
    -------
    >>> priors = cupyprep.prior_boxes((640, 640), [[16, 32], [64, 128], [256, 512]], [8, 16, 32])   # doctest: +SKIP
    """
    H, W = _validate.size_hw("image_size", image_size)
    if len(min_sizes) != len(steps):
        raise ValueError(f"min_sizes: expected one entry per step ({len(steps)}), got {len(min_sizes)}")
    out = []
    for sizes, step in zip(min_sizes, steps):
        step = _validate.number("steps", step)
        if step <= 0:
            raise ValueError(f"steps: expected positive values, got {steps!r}")
        fh, fw = int(np.ceil(H / step)), int(np.ceil(W / step))
        sizes = np.asarray(sizes, np.float64).reshape(-1)
        i, j, k = np.meshgrid(np.arange(fh), np.arange(fw), np.arange(len(sizes)), indexing="ij")
        cx = (j + 0.5) * step / W
        cy = (i + 0.5) * step / H
        sw = sizes[k] / W
        sh = sizes[k] / H
        out.append(np.stack([cx, cy, sw, sh], axis=-1).reshape(-1, 4))
    pri = np.concatenate(out, axis=0) if out else np.zeros((0, 4))
    if clip:
        pri = np.clip(pri, 0.0, 1.0)
    return pri.astype(np.float32)


def _priors_for(call, priors, n):
    """``priors`` (n, 4) for a decoder of ``call``'s input: priors on the input's device,
    of its kind, are used where they are (not read back to the host); others as float32
    NumPy (uploaded by the decoder)."""
    p = call.sibling(priors, "priors")
    if p is None:
        p = np.asarray(_arrays.to_host(priors), np.float32)
    if p.ndim != 2 or p.shape != (n, 4):
        raise ValueError(f"priors: expected shape ({n}, 4), got {_arrays.describe(priors)}")
    return p


def _variances(variances):
    try:
        n = len(variances)
    except TypeError:  # a lone number (or no sequence at all)
        raise TypeError(f"variances: expected two numbers, got {variances!r}") from None
    if n != 2:
        raise ValueError(f"variances: expected two numbers, got {variances!r}")
    return tuple(_validate.number("variances", v) for v in variances)


def _head_arg(name, head, last_ok, expected):
    """A decoder's head output: (..., P, K) float32 / float16 with ``last_ok(K)``; the
    error names ``name`` and the ``expected`` shape."""
    call = _arrays.prepare(head, name)
    arr = call.array
    if arr.ndim < 2 or not last_ok(arr.shape[-1]):
        raise ValueError(f"{name}: expected shape {expected}, got {_arrays.describe(arr)}")
    _validate.dtype_in(name, arr, BOX_DTYPES)
    return call, arr


def decode_boxes(loc, priors, variances=(0.1, 0.2)):
    """SSD / RetinaFace box decoding: offsets against anchors -> xyxy boxes.

    ``loc`` (..., P, 4) float32 / float16; ``priors`` (P, 4) cxcywh (from
    :func:`prior_boxes`, any kind). Returns (..., P, 4) float32 xyxy in the priors' units
    (normalized: multiply by (W, H, W, H) for pixels), same kind as ``loc``.

    Convention
    ----------
    ``c = p_c + loc_c * v0 * p_wh``, ``wh = p_wh * exp(loc_wh * v1)``, ``x1y1 = c - wh / 2``,
    ``x2y2 = x1y1 + wh`` (RetinaFace's ``decode``), in float32.

    Example
    -------
    >>> boxes = cupyprep.decode_boxes(loc[0], priors) * scale              # doctest: +SKIP
    """
    call, arr = _head_arg("loc", loc, lambda k: k == 4, "(..., P, 4)")
    v = _variances(variances)
    p = _priors_for(call, priors, arr.shape[-2])

    if not call.device:
        return call.result(cpu.decode_anchors(arr, p, v))
    with call.launch():
        native, out = call.output(None, arr.shape, np.float32)
        pri = _device_priors(call, p)
        view, A, P, st = _rows(arr, "loc")
        launch_1d(_boxes_fn(f"cupyprep_decode_boxes<{_t(arr.dtype)}>"), A * P,
                  (view, _i64(P), *st, pri, np.float32(v[0]), np.float32(v[1]), out, _i64(A * P)))
    return native


def decode_landmarks(pre, priors, variances=(0.1, 0.2)):
    """RetinaFace landmark decoding: ``pre`` (..., P, 2L) -> points (..., P, L, 2) float32
    in the priors' units: ``p_c + pre * v0 * p_wh``.

    Example
    -------
    >>> pts = cupyprep.decode_landmarks(landms[0], priors)                 # doctest: +SKIP
    """
    call, arr = _head_arg("pre", pre, lambda k: k > 0 and k % 2 == 0, "(..., P, 2L)")
    v = _variances(variances)
    p = _priors_for(call, priors, arr.shape[-2])

    if not call.device:
        return call.result(cpu.decode_landmarks(arr, p, v))
    K = arr.shape[-1]
    with call.launch():
        native, out = call.output(None, arr.shape[:-1] + (K // 2, 2), np.float32)
        pri = _device_priors(call, p)
        view, A, P, st = _rows(arr, "pre")
        launch_1d(_boxes_fn(f"cupyprep_decode_landmarks<{_t(arr.dtype)}>"), A * P * K,
                  (view, _i64(P), _i64(K), *st, pri, np.float32(v[0]), out, _i64(A * P * K)))
    return native


def _device_priors(call, priors):
    """The decoders' priors as a contiguous float32 array on the call's device: host
    priors are uploaded on the launch stream; device priors that are contiguous float32
    already are used as they are."""
    return call.xp.ascontiguousarray(
        _arrays.upload(call.xp, priors, "priors", "pass them on the input's device", np.float32))


def encode_boxes(boxes, priors, variances=(0.1, 0.2)):
    """The inverse of :func:`decode_boxes` (NumPy): xyxy boxes (..., P, 4) in the priors'
    units -> offsets (..., P, 4) float32. For making targets and synthetic head outputs."""
    return cpu.encode_anchors(np.asarray(boxes), np.asarray(priors), _variances(variances))


def decode_yolo(pred, *, objectness=True):
    """YOLO-style rows -> xyxy boxes and per-class scores, ready for :func:`multiclass_nms`.

    ``pred`` (..., N, 5 + C) rows ``(cx, cy, w, h, obj, cls_0 ... cls_C-1)`` (YOLOv5), or
    with ``objectness=False`` (..., N, 4 + C) rows ``(cx, cy, w, h, cls...)`` (YOLOv8,
    transposed to rows). Returns ``(boxes (..., N, 4), scores (..., N, C))`` float32.

    Convention
    ----------
    ``x1 = cx - w * 0.5``, ``x2 = cx + w * 0.5``; scores ``cls * obj`` (YOLOv5's
    ``conf = obj_conf * cls_conf``), in float32.

    Example
    -------
    >>> boxes, scores = cupyprep.decode_yolo(out)                          # doctest: +SKIP
    >>> det = cupyprep.multiclass_nms(boxes, scores, score_threshold=0.25)   # doctest: +SKIP
    """
    extra = 5 if objectness else 4
    call, arr = _head_arg("pred", pred, lambda k: k > extra, f"(..., N, {extra} + C) with C >= 1")

    if not call.device:
        bx, sc = cpu.decode_yolo(arr, objectness)
        return call.result(bx), call.result(sc)
    K = arr.shape[-1]
    C = K - extra
    with call.launch():
        boxes_native, boxes_out = call.output(None, arr.shape[:-1] + (4,), np.float32)
        scores_native, scores_out = call.output(None, arr.shape[:-1] + (C,), np.float32)
        view, A, N, st = _rows(arr, "pred")
        variant = f"<{_t(arr.dtype)}, {_b(objectness)}>"
        if abs(st[1]) < abs(st[2]):  # rows transposed (YOLOv8): tiles through shared memory
            if A * N:
                _boxes_fn("cupyprep_decode_yolo_tiles" + variant)(
                    (-(-N // _YOLO_ROWS), -(-K // 32), min(A, 65535)), (256,),
                    (view, _i64(A), _i64(N), _i64(C), *st, boxes_out, scores_out))
        else:  # a warp per row
            launch_1d(_boxes_fn("cupyprep_decode_yolo_rows" + variant), 32 * A * N,
                      (view, _i64(N), _i64(C), *st, boxes_out, scores_out, _i64(A * N)))
    return boxes_native, scores_native


# --- roi_align -------------------------------------------------------------------------------------
def _rois_table(call, rois):
    """rois as (K, 5) float32 rows (image, x1, y1, x2, y2) on the features' side."""
    if isinstance(rois, (list, tuple)):
        parts = []
        for i, r in enumerate(rois):
            a = call.convert(r, f"rois[{i}]")
            if a.ndim != 2 or a.shape[1] != 4:
                raise ValueError(f"rois[{i}]: expected shape (K, 4), got {_arrays.describe(a)}")
            _validate.dtype_in(f"rois[{i}]", a, BOX_DTYPES)
            parts.append((i, a))
        xp = call.xp if call.device else np
        cols = [xp.concatenate([xp.full((a.shape[0], 1), i, np.float32), a.astype(np.float32)], axis=1)
                for i, a in parts]
        return xp.concatenate(cols, axis=0) if cols else xp.zeros((0, 5), np.float32)
    a = call.convert(rois, "rois")
    if a.ndim != 2 or a.shape[1] != 5:
        raise ValueError(f"rois: expected shape (K, 5) or a list of (K_i, 4), got {_arrays.describe(a)}")
    _validate.dtype_in("rois", a, BOX_DTYPES)
    return a


# roi_align launch: threads per block, and outputs per block (channels of one roi); the
# largest in-image offset the kernel's shared tap tables take as int32
_ROI_BLOCK = 128
_ROI_ITEMS_PER_BLOCK = 1024
_ROI_NARROW_LIMIT = 2**31


def _divide_magic(d, n_max):
    """m with n * m >> 32 == n // d for every 0 <= n < n_max (the kernel's ``divide``), or 0
    where that does not hold (or d < 2) and the kernel divides plainly."""
    return -(-(2**32) // d) if d >= 2 and n_max * d < 2**32 else 0


def roi_align(features, rois, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    """RoI Align forward, as ``torchvision.ops.roi_align``.

    Parameters
    ----------
    features : (N, C, H, W) float32 or float16 (any strides)
    rois : (K, 5) rows ``(image index, x1, y1, x2, y2)``, or a list of N arrays (K_i, 4)
        of xyxy boxes per image; float32 or float16, same kind as ``features``
    output_size : int or (height, width)
    spatial_scale : float
        Multiplies the roi coordinates (e.g. 0.25 for a stride-4 feature map).
    sampling_ratio : int
        Samples per bin side; <= 0: ``ceil(roi_size / output_size)`` (adaptive).
    aligned : bool
        ``True``: shift the roi by -0.5 pixel (pixel centers at +0.5; the correct
        alignment); ``False``: torchvision's legacy convention (and rois at least 1x1).

    Returns
    -------
    (K, C, PH, PW) in the features' dtype, same kind.

    Convention
    ----------
    torchvision's CUDA kernel, step by step in float32 (every operation rounded separately:
    torchvision's compiled kernel may fuse some into FMAs, so results agree within float32
    rounding): bins of ``roi_size / output_size``, samples at ``(i + 0.5) / grid`` of a
    bin, bilinear with torchvision's edge rules (samples beyond one pixel outside are 0),
    the mean of the samples. float16 features are read exactly and computed in float32,
    rounded once at the end (torchvision's half kernel rounds every step to float16).
    A roi whose image index is outside ``[0, N)`` gives zeros (torchvision reads out of
    bounds); an adaptive grid that is not finite counts as empty.

    Example
    -------
    >>> pooled = cupyprep.roi_align(fmap, rois, 7, 0.25, 2, aligned=True)   # doctest: +SKIP
    """
    call = _arrays.prepare(features, "features")
    f = call.array
    if f.ndim != 4:
        raise ValueError(f"features: expected an (N, C, H, W) array, got {_arrays.describe(f)}")
    dtype = _validate.dtype_in("features", f, BOX_DTYPES)
    if isinstance(output_size, numbers.Integral) and not isinstance(output_size, bool):
        output_size = (int(output_size), int(output_size))
    PH, PW = _validate.size_hw("output_size", output_size)
    scale = _validate.number("spatial_scale", spatial_scale)
    if not isinstance(sampling_ratio, numbers.Integral) or isinstance(sampling_ratio, bool):
        raise TypeError(f"sampling_ratio: expected an int, got {sampling_ratio!r}")
    # list rois are assembled on the features' device and stream
    with call.launch():
        table = _rois_table(call, rois)
        N, C, H, W = f.shape
        K = table.shape[0]
        if PH * PW >= 2**31:
            raise ValueError(f"output_size: expected fewer than 2**31 bins, got {PH} x {PW}")
        if K >= 2**31:
            raise ValueError(f"rois: expected fewer than 2**31 rois, got {K}")
        if not call.device:
            res = cpu.roi_align(np.asarray(f), np.asarray(table, np.float32), (PH, PW), scale,
                                int(sampling_ratio), bool(aligned))
            return call.result(res.astype(dtype))
        native, out = call.output(None, (K, C, PH, PW), dtype)
        if K * C * PH * PW == 0:
            return native
        if table.dtype != np.float32:
            table = table.astype(np.float32)
        rs = _arrays.element_strides(table, "rois")
        fs = _arrays.element_strides(f, "features")
        i32, i64 = np.int32, np.int64
        fn = _kernels.get_function("roi_align.cu", f"cupyprep_roi_align<{_t(dtype)}, {_b(aligned)}>")
        # a block per roi and chunk of channels, rois fastest (see kernels/roi_align.cu)
        c_chunk = max(1, min(C, _ROI_ITEMS_PER_BLOCK // (PH * PW)))
        grid = (K, min(-(-C // c_chunk), 65535))
        narrow = (H - 1) * abs(fs[2]) + (W - 1) * abs(fs[3]) < _ROI_NARROW_LIMIT
        m_bins = _divide_magic(PH * PW, c_chunk * PH * PW)
        m_pw = _divide_magic(PW, PH * PW)
        fn(grid, (_ROI_BLOCK,), (f, i64(fs[0]), i64(fs[1]), i64(fs[2]), i64(fs[3]), i32(N), i32(C), i32(H),
                                 i32(W), table, i64(rs[0]), i64(rs[1]), np.float32(scale), i32(PH), i32(PW),
                                 i32(sampling_ratio), i32(K), i32(c_chunk), i32(narrow), np.uint32(m_bins),
                                 np.uint32(m_pw), out))
        return native
