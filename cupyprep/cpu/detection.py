"""Detection post-processing on the CPU, in NumPy: NMS (plain, per class, per image),
box ops, anchor and YOLO decoders, roi_align.

OpenCV has none of these, so NumPy computes them, with the float32 operation order of the
kernels (and of torchvision's CUDA kernels, without their fused multiply-adds); the kernels
are tested against this module and this module against torchvision.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32


# --- ordering ------------------------------------------------------------------------------------
def score_key(scores):
    """uint32 keys that sort like the scores ascending: NaN above +inf (as torch.sort
    treats it), -0.0 equal to +0.0."""
    s = np.asarray(scores).astype(F32)
    s = np.where(s == 0, F32(0), s)  # -0.0 -> +0.0
    bits = s.view(np.uint32)
    key = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    key = np.where(np.isnan(s), np.uint32(0xFFFFFFFF), key)
    return key.astype(np.uint32)


def descending_order(scores):
    """Indices by descending score, ties by ascending index (a stable sort); NaN first."""
    s = np.asarray(scores).astype(F32)
    if np.isnan(s).any():
        return np.argsort(~score_key(s), kind="stable")
    # one int64 key a score, (descending score, index), in one unstable sort (several times
    # faster than a stable argsort): the float's bits as an int that sorts like it, inverted
    s += F32(0)  # -0.0 -> +0.0
    bits = s.view(np.int32)
    bits ^= (bits >> 31) & np.int32(0x7FFFFFFF)
    key = (~bits).astype(np.int64) << 32
    key |= np.arange(len(s))
    return np.sort(key) & 0xFFFFFFFF


# --- IoU -----------------------------------------------------------------------------------------
def _round_half(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16).astype(F32)


def iou_over(box, others, threshold, half):
    """``IoU(box, others[j]) > threshold`` for one box against many, in torchvision's CUDA
    arithmetic: float32, or for float16 boxes the side lengths rounded to float16 as
    ``c10::Half`` arithmetic rounds them."""
    a = box.astype(F32)
    b = others.astype(F32)
    left = np.fmax(a[0], b[:, 0])
    right = np.fmin(a[2], b[:, 2])
    top = np.fmax(a[1], b[:, 1])
    bottom = np.fmin(a[3], b[:, 3])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        w = right - left
        h = bottom - top
        ah = a[3] - a[1]
        bh = b[:, 3] - b[:, 1]
        if half:
            w, h, ah, bh = _round_half(w), _round_half(h), _round_half(ah), _round_half(bh)
        w = np.fmax(w, F32(0))
        h = np.fmax(h, F32(0))
        inter = w * h
        area_a = (a[2] - a[0]) * ah
        area_b = (b[:, 2] - b[:, 0]) * bh
        iou = inter / ((area_a + area_b) - inter)
        return iou > F32(threshold)


def _columns(sorted_boxes, half):
    """x1, y1, x2, y2 and the area as iou_over computes it: (5, n) float32 columns."""
    b = np.asarray(sorted_boxes)
    cols = np.empty((5, len(b)), F32)
    cols[:4] = b.T
    with np.errstate(over="ignore", invalid="ignore"):
        h = cols[3] - cols[1]
        if half:
            h = _round_half(h)
        np.multiply(cols[2] - cols[0], h, out=cols[4])
    return cols


def _over(a, b, threshold, half):
    """iou_over's arithmetic on columns (5, ...) from _columns: box a against box b,
    element by element, broadcast (a (5, k, 1) against b (5, 1, m) gives a (k, m) matrix).
    The caller sets np.errstate (overflow, 0 / 0 and inf - inf are part of the rule)."""
    sides = np.fmin(a[2:4], b[2:4])  # the overlap's width and height, one array
    sides -= np.fmax(a[:2], b[:2])
    if half:
        sides = _round_half(sides)
    np.fmax(sides, F32(0), out=sides)
    inter = sides[0] * sides[1]
    union = a[4] + b[4]
    union -= inter
    inter /= union
    return inter > threshold


# Greedy NMS keeps a box unless an earlier kept box overlaps it by more than the threshold.
# With a threshold >= 0 only pairs whose open x and y extents intersect can suppress (IoU > 0
# needs a positive intersection), so the greedy pass runs in two phases, each exact. The
# first takes the alive boxes in order, a block at a time: the block's IoU matrix with itself
# says which of its boxes are kept, and one (kept, later) matrix drops the later boxes they
# suppress (a crowded scene is soon resolved, in few array operations: no Python step a
# box). It runs until its work passes what the second phase would cost for what is left;
# the second phase lists the intersecting pairs of the boxes still alive (a sweep over x in
# horizontal strips, by class), computes their IoU in one pass and resolves the greedy
# order over those pairs alone. Comparing every kept box with every later box, suppressed or
# not, took 30 ms for 1000 boxes and seconds for 20000; one kept box a step, 1.4 ms for the
# 1000 clustered boxes of benchmarks.cpu_nms (cv2.dnn.NMSBoxes: 0.37 ms).
_PAIR_CHUNK = 1 << 14  # candidate pairs a pass of the second phase (arrays that stay in cache)
_MAX_STRIPS = 4096
_BLOCK = 64  # boxes a block of the first phase
_REST_BLOCK = 2 * _BLOCK  # alive boxes up to which the rest is one block
_UPPER = np.triu(np.ones((_REST_BLOCK, _REST_BLOCK), bool), 1)
_MATRIX_ELEMENTS = 1 << 16  # IoU elements a pass of the first phase
_BLOCK_COST = 16384  # a block's fixed cost, in IoU elements
_PAIR_COST = 4  # a second-phase candidate pair, in IoU elements of the first phase
_SWEEP_AT = 256  # first-phase elements a box left from which the second phase is costed


def _sweep(cols, cls):
    """Candidate pairs of boxes (finite, positive width and height) for the second phase.

    Each box is entered in every horizontal strip its y extent touches (strips one median
    height high); within a strip and class, entries sorted by x1 and each entry's
    partners are the entries after it whose x1 is below its x2. A pair is taken in the
    strip of the higher of the two y1 (where both are entered), so once. Returns the
    entries' boxes and strips, each box's first strip, the entries' sort order, each sorted
    entry's first and past-last partner, and the number of candidates."""
    x1, y1, x2, y2 = cols[:4]
    n = len(x1)
    y0 = float(y1.min())
    height = max(float(np.median(y2 - y1)), (float(y2.max()) - y0) / _MAX_STRIPS, 1e-30)
    s1 = np.floor((y1.astype(np.float64) - y0) / height).astype(np.int64)
    s2 = np.maximum(np.floor((y2.astype(np.float64) - y0) / height).astype(np.int64), s1)
    span = s2 - s1 + 1
    box = np.repeat(np.arange(n), span)
    strip = np.repeat(s1, span) + np.arange(len(box)) - np.repeat(np.cumsum(span) - span, span)
    xs = np.sort(x1)
    rank = np.searchsorted(xs, x1, "left")  # x1 ordered as integers (ties equal)
    reach = np.searchsorted(xs, x2, "left")  # partners have x1 < x2: rank < reach
    group = (cls.astype(np.int64)[box] * (int(s2.max()) + 1) + strip) * (n + 1)
    key = group + rank[box]
    order = np.argsort(key, kind="stable")
    first = np.arange(1, len(box) + 1)
    last = np.maximum(np.searchsorted(key[order], (group + reach[box])[order], "left"), first)
    return box, strip, s1, order, first, last, int((last - first).sum())


def _suppressing_pairs(cols, cls, threshold, half, swept=None):
    """(u, v) with u < v, positions in ``cols``, where box u suppresses box v if kept
    (``swept``: what _sweep(cols, cls) returns, where that is known)."""
    box, strip, s1, order, first, last, _ = _sweep(cols, cls) if swept is None else swept
    sbox = box[order]  # each sorted entry's box, its columns, and whether the entry is in
    ecols = cols.take(sbox, axis=1)  # the box's first strip
    y1, y2 = ecols[1], ecols[3]
    top = s1[sbox] == strip[order]
    counts = last - first
    ends = np.cumsum(counts)
    us, vs = [], []
    i, entries = 0, len(order)
    while i < entries:
        # sorted entries i..j-1: about _PAIR_CHUNK candidates at a time; entry pa's
        # partners pb (the a side repeated, not gathered)
        j = int(np.searchsorted(ends, (ends[i - 1] if i else 0) + _PAIR_CHUNK, "right")) + 1
        j = min(max(j, i + 1), entries)
        c = counts[i:j]
        m = int(c.sum())
        if m:
            pb = np.arange(m) + np.repeat(first[i:j] - (np.cumsum(c) - c), c)
            # y extents intersect, and the pair is taken in the strip of the higher y1
            # (the entry's strip is the first strip of one of the two boxes)
            ok = y1[pb] < np.repeat(y2[i:j], c)
            ok &= np.repeat(y1[i:j], c) < y2[pb]
            ok &= np.repeat(top[i:j], c) | top[pb]
            pa = np.repeat(np.arange(i, j), c)[ok]
            pb = pb[ok]
            hit = _over(ecols.take(pa, axis=1), ecols.take(pb, axis=1), threshold, half)
            us.append(sbox[pa[hit]])
            vs.append(sbox[pb[hit]])
        i = j
    if not us:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    u, v = np.concatenate(us), np.concatenate(vs)
    return np.minimum(u, v), np.maximum(u, v)


def _resolve(n, u, v):
    """Which of n boxes in order survive greedy suppression along pairs (u -> v, u < v)."""
    suppressed = np.zeros(n, bool)
    if len(u):
        by = np.argsort(u, kind="stable")
        u, v = u[by], v[by]
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        ends = np.r_[starts[1:], len(u)].tolist()
        dst = v.tolist()
        flags = bytearray(n)
        for s, e, src in zip(starts.tolist(), ends, u[starts].tolist()):
            if not flags[src]:
                for t in dst[s:e]:
                    flags[t] = 1
        suppressed = np.frombuffer(bytes(flags), np.uint8).astype(bool)
    return ~suppressed


def _block_survivors(over):
    """Which boxes of a block survive greedy suppression among themselves: ``over`` (b, b)
    says which box suppresses which, strictly upper triangular. Kept is the fixed point of
    "kept = no kept box before it suppresses it"; there is one (each box's entry depends on
    the entries before it), and iterating from all kept reaches it (after r rounds the
    first r entries are right), in as many rounds as the longest chain of suppressions."""
    kept = ~over.any(axis=0)  # the first round
    while True:
        now = ~(kept @ over)  # boolean: suppressed by a box kept in the last round
        if now.tobytes() == kept.tobytes():
            return now
        kept = now


def _suppressed(cols, kept, later, cls, thr, half):
    """Which of the boxes ``later`` the boxes ``kept`` suppress, in pieces of about
    _MATRIX_ELEMENTS IoU elements (a matrix that stays in cache)."""
    a = cols.take(kept, axis=1)[:, :, None]
    step = max(_MATRIX_ELEMENTS // kept.size, 1)
    if later.size <= step and cls is None:
        return _over(a, cols.take(later, axis=1)[:, None, :], thr, half).any(axis=0)
    out = np.empty(later.size, bool)
    for i in range(0, later.size, step):
        part = later[i:i + step]
        over = _over(a, cols.take(part, axis=1)[:, None, :], thr, half)
        if cls is not None:
            over &= cls[kept][:, None] == cls[part]
        over.any(axis=0, out=out[i:i + step])
    return out


def _zeros_or(cls, sub):
    """The classes of boxes ``sub``, or all 0 where there are none."""
    return np.zeros(sub.size, np.int64) if cls is None else cls[sub]


def _paired(cols):
    """The boxes that can take part in a pair (IoU > 0 needs a finite box of positive
    sides)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(cols[:4]).all(axis=0) & (cols[2] > cols[0]) & (cols[3] > cols[1])


def _greedy(sorted_boxes, threshold, half, classes=None, limit=None):
    """Greedy NMS over boxes already in processing order: positions kept (in order), the
    first ``limit`` of them."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _phases(sorted_boxes, threshold, half, classes, limit)


def _phases(sorted_boxes, threshold, half, classes, limit):
    n = len(sorted_boxes)
    limit = n if limit is None else limit
    thr = F32(threshold)
    if n == 0 or limit <= 0 or np.isnan(thr):
        return np.arange(min(n, max(limit, 0)), dtype=np.int64)  # IoU > NaN never holds
    cols = _columns(sorted_boxes, half)
    cls = None if classes is None else np.unique(np.asarray(classes), return_inverse=True)[1].reshape(-1)
    # first phase, a block of the next _BLOCK alive boxes at a time: the block's IoU with
    # itself resolves which of them are kept, and those kept drop the later alive boxes they
    # suppress (two array operations a block, on (block, block) and (kept, later) matrices).
    # Where finishing so looks costly (over _SWEEP_AT elements a box), the second phase's
    # cost is counted (candidate pairs: thresholds below 0 suppress disjoint boxes too, and
    # take the first phase alone); the first phase stops where finishing would cost more
    # than that, or once its work (elements compared, and a block's fixed cost) reaches it
    pairs = np.inf if thr < 0 else None
    swept = None
    alive = np.arange(n)
    keep, kept = [], 0
    work = blocks = 0
    while alive.size and kept < limit and (pairs is None or work < pairs):
        size = alive.size if alive.size <= _REST_BLOCK else _BLOCK  # a small rest: one block
        block, later = alive[:size], alive[size:]
        c = cols.take(block, axis=1)
        over = _over(c[:, :, None], c[:, None, :], thr, half)
        over &= _UPPER[:block.size, :block.size]
        if cls is not None:
            over &= cls[block][:, None] == cls[block]
        block = block[_block_survivors(over)]
        keep.append(block)
        kept += block.size
        work += _BLOCK_COST + over.size + block.size * later.size
        blocks += 1
        if later.size and block.size:
            later = later[~_suppressed(cols, block, later, cls, thr, half)]
        alive = later
        if alive.size and pairs != np.inf and kept < limit:
            # what is left, were it done so: each box to keep compared with about half the
            # alive boxes, and the blocks' fixed cost
            per_kept = (n - alive.size) / max(kept, 1)  # boxes decided per box kept
            left = alive.size * (alive.size / (2 * per_kept) + _BLOCK_COST * blocks / (n - alive.size))
            if pairs is None and left > _SWEEP_AT * n:
                sub = alive[_paired(cols)[alive]]
                swept = _sweep(cols[:, sub], _zeros_or(cls, sub)) if sub.size else None
                pairs = _PAIR_COST * swept[-1] if sub.size else 0
                if left > pairs:
                    break
                swept = None
            elif pairs is not None and left > pairs:
                break
    keep = np.concatenate(keep) if keep else np.zeros(0, np.int64)
    if alive.size and len(keep) < limit:
        # second phase: what is still alive, in order, resolved over its intersecting pairs
        # (the sweep that costed it is of these boxes where the first phase stopped there)
        if swept is None:
            sub = alive[_paired(cols)[alive]]
        survive = np.ones(n, bool)
        if sub.size:
            u, v = _suppressing_pairs(cols[:, sub], _zeros_or(cls, sub), thr, half, swept)
            survive[sub] = _resolve(len(sub), u, v)
        keep = np.concatenate([keep, alive[survive[alive]]])
    return keep[:limit].astype(np.int64, copy=False)


def nms(boxes, scores, iou_threshold, classes=None):
    """Kept indices (int64), by descending score; ``classes`` limits suppression to boxes
    of the same class (batched_nms)."""
    order = descending_order(scores)
    half = boxes.dtype == np.float16
    cls = None if classes is None else np.asarray(classes)[order]
    keep = _greedy(np.take(boxes, order, axis=0), iou_threshold, half, cls)
    return order[keep].astype(np.int64, copy=False)


def multiclass_nms(boxes, scores, iou_threshold, score_threshold, top_k, max_detections,
                   class_agnostic):
    """Per image: candidates (box, class) with score > score_threshold, the top_k best,
    NMS within a class (or across classes), the first max_detections kept.

    ``boxes`` (B, N, 4); ``scores`` (B, N, C). Returns padded ``(indices (B, D) box index,
    classes (B, D), counts (B,))`` with -1 in unused slots.
    """
    B, N, C = scores.shape
    D = max_detections
    indices = np.full((B, D), -1, np.int64)
    classes = np.full((B, D), -1, np.int64)
    counts = np.zeros(B, np.int64)
    half = boxes.dtype == np.float16
    for b in range(B):
        s = scores[b]
        if class_agnostic:
            box_idx = np.arange(N)
            cls = best_class(s)
            cand = s[box_idx, cls]
        else:
            box_idx = np.repeat(np.arange(N), C)
            cls = np.tile(np.arange(C), N)
            cand = s.reshape(-1)
        if score_threshold is not None:
            with np.errstate(invalid="ignore"):
                valid = cand.astype(F32) > F32(score_threshold)
            box_idx, cls, cand = box_idx[valid], cls[valid], cand[valid]
        order = descending_order(cand)
        if top_k is not None:
            order = order[:top_k]
        keep = _greedy(boxes[b][box_idx[order]], iou_threshold, half,
                       None if class_agnostic else cls[order], limit=D)
        k = len(keep)
        counts[b] = k
        indices[b, :k] = box_idx[order][keep]
        classes[b, :k] = cls[order][keep]
    return indices, classes, counts


def best_class(scores):
    """Per row, the class of the highest score in the sort order (NaN highest); the lowest
    class index among ties."""
    key = score_key(scores)
    return np.argmax(key, axis=-1)


# --- box ops -------------------------------------------------------------------------------------
def box_convert(boxes, in_fmt, out_fmt):
    """torchvision's box_convert arithmetic in the boxes' dtype (via xyxy); the
    specification of kernels/boxes.cu's cupyprep_box_convert."""
    b = np.asarray(boxes)
    if in_fmt == out_fmt:  # torchvision returns a copy (no round trip through xyxy)
        return b.copy()
    dt = b.dtype
    h = dt.type(0.5)
    x, y, p, q = (b[..., i] for i in range(4))
    with np.errstate(over="ignore", invalid="ignore"):
        if in_fmt == "xyxy":
            x1, y1, x2, y2 = x, y, p, q
        elif in_fmt == "xywh":
            x1, y1, x2, y2 = x, y, x + p, y + q
        else:  # cxcywh
            x1, y1, x2, y2 = x - h * p, y - h * q, x + h * p, y + h * q
        if out_fmt == "xyxy":
            out = (x1, y1, x2, y2)
        elif out_fmt == "xywh":
            out = (x1, y1, x2 - x1, y2 - y1)
        else:
            out = ((x1 + x2) / dt.type(2), (y1 + y2) / dt.type(2), x2 - x1, y2 - y1)
    return np.stack(out, axis=-1).astype(dt)


def clip_boxes(boxes, size):
    """x to [0, width], y to [0, height]."""
    b = np.asarray(boxes)
    H, W = size
    hi = np.array([W, H, W, H], b.dtype)
    return np.minimum(np.maximum(b, b.dtype.type(0)), hi).astype(b.dtype, copy=False)


def box_iou(boxes1, boxes2):
    """(N, M) IoU in float32 (float16 boxes: inputs read exactly, arithmetic in float32)."""
    a = np.asarray(boxes1).astype(F32)
    b = np.asarray(boxes2).astype(F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        w = np.fmax(np.fmin(a[:, None, 2], b[None, :, 2]) - np.fmax(a[:, None, 0], b[None, :, 0]), F32(0))
        h = np.fmax(np.fmin(a[:, None, 3], b[None, :, 3]) - np.fmax(a[:, None, 1], b[None, :, 1]), F32(0))
        inter = w * h
        return (inter / ((area_a[:, None] + area_b[None, :]) - inter)).astype(F32, copy=False)


# --- decoders ------------------------------------------------------------------------------------
def decode_anchors(loc, priors, variances):
    """SSD / RetinaFace: ``loc`` (..., P, 4) offsets against ``priors`` (P, 4) cxcywh ->
    xyxy in the priors' units, float32, in this operation order on either side."""
    v0, v1 = F32(variances[0]), F32(variances[1])
    l = np.asarray(loc).astype(F32)
    p = np.asarray(priors).astype(F32, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        cx = p[:, 0] + (l[..., 0] * v0) * p[:, 2]
        cy = p[:, 1] + (l[..., 1] * v0) * p[:, 3]
        w = p[:, 2] * np.exp(l[..., 2] * v1)
        h = p[:, 3] * np.exp(l[..., 3] * v1)
        x1 = cx - w / F32(2)
        y1 = cy - h / F32(2)
        return np.stack([x1, y1, x1 + w, y1 + h], axis=-1)


def decode_landmarks(pre, priors, variances):
    """RetinaFace landmarks: ``pre`` (..., P, 2L) -> points (..., P, L, 2) in the priors'
    units, float32."""
    v0 = F32(variances[0])
    l = np.asarray(pre).astype(F32)
    p = np.asarray(priors).astype(F32, copy=False)
    pts = l.reshape(l.shape[:-1] + (l.shape[-1] // 2, 2))  # (not -1: P may be 0)
    with np.errstate(over="ignore", invalid="ignore"):
        return p[:, None, :2] + (pts * v0) * p[:, None, 2:]


def encode_anchors(boxes, priors, variances, xp=np):
    """The inverse of :func:`decode_anchors` (float64 math, float32 out); elementwise, so
    ``xp`` (NumPy, or CuPy for device arrays) computes the same formula."""
    b = xp.asarray(boxes, xp.float64)
    p = xp.asarray(priors, xp.float64)
    cx = (b[..., 0] + b[..., 2]) / 2
    cy = (b[..., 1] + b[..., 3]) / 2
    w = b[..., 2] - b[..., 0]
    h = b[..., 3] - b[..., 1]
    return xp.stack([(cx - p[:, 0]) / (variances[0] * p[:, 2]),
                     (cy - p[:, 1]) / (variances[0] * p[:, 3]),
                     xp.log(w / p[:, 2]) / variances[1],
                     xp.log(h / p[:, 3]) / variances[1]], axis=-1).astype(F32)


def decode_yolo(pred, objectness):
    """YOLO rows (cx, cy, w, h, [obj,] class scores...) -> xyxy boxes and per-class scores
    (obj * class score when ``objectness``), float32 and contiguous."""
    x = np.asarray(pred).astype(F32)
    cx, cy, w, h = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    hw, hh = w * F32(0.5), h * F32(0.5)
    boxes = np.stack([cx - hw, cy - hh, cx + hw, cy + hh], axis=-1)
    if objectness:
        scores = x[..., 5:] * x[..., 4:5]
    else:
        scores = np.ascontiguousarray(x[..., 4:])
    return boxes, scores


# --- roi_align -----------------------------------------------------------------------------------
def roi_align(features, rois, output_size, spatial_scale, sampling_ratio, aligned):
    """torchvision's roi_align forward, in float32 with its CUDA kernel's operation order
    (no fused multiply-adds). ``features`` (N, C, H, W); ``rois`` (K, 5) float32."""
    N, C, H, W = features.shape
    PH, PW = output_size
    K = rois.shape[0]
    out = np.zeros((K, C, PH, PW), F32)
    feats = features.astype(F32)
    scale = F32(spatial_scale)
    offset = F32(0.5 if aligned else 0.0)
    ph = np.arange(PH, dtype=F32)[:, None]
    pw = np.arange(PW, dtype=F32)[None, :]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for k in range(K):
            r = rois[k].astype(F32)
            if not np.isfinite(r[0]) or not (0 <= int(r[0]) < N):
                continue  # an image index outside the batch: zeros
            img = feats[int(r[0])]
            sw = r[1] * scale - offset
            sh = r[2] * scale - offset
            ew = r[3] * scale - offset
            eh = r[4] * scale - offset
            rw, rh = ew - sw, eh - sh
            if not aligned:
                rw, rh = np.fmax(rw, F32(1)), np.fmax(rh, F32(1))
            bh = rh / F32(PH)
            bw = rw / F32(PW)
            gh = sampling_ratio if sampling_ratio > 0 else _ceil_int(rh / F32(PH))
            gw = sampling_ratio if sampling_ratio > 0 else _ceil_int(rw / F32(PW))
            count = F32(max(gh * gw, 1))
            acc = np.zeros((C, PH, PW), F32)
            for iy in range(gh):
                y = (sh + ph * bh) + (F32(iy + 0.5) * bh) / F32(gh)
                for ix in range(gw):
                    x = (sw + pw * bw) + (F32(ix + 0.5) * bw) / F32(gw)
                    acc += _bilinear(img, np.broadcast_to(y, (PH, PW)), np.broadcast_to(x, (PH, PW)))
            out[k] = acc / count
    return out


def _ceil_int(v):
    # as the kernel: a count that is not finite or absurdly large is an empty grid
    v = float(v)
    if not (-1048576.0 < v < 1048576.0):
        return 0
    return int(np.ceil(v))


def _bilinear(img, y, x):
    """One bilinear sample per (ph, pw) for all channels: (C, PH, PW)."""
    C, H, W = img.shape
    y = y.astype(F32).copy()
    x = x.astype(F32).copy()
    inside = (y >= -1.0) & (y <= H) & (x >= -1.0) & (x <= W)
    y = np.where(inside, y, F32(0))
    x = np.where(inside, x, F32(0))
    y = np.where(y <= 0, F32(0), y)
    x = np.where(x <= 0, F32(0), x)
    y_low = y.astype(np.int64)
    x_low = x.astype(np.int64)
    y_top = y_low >= H - 1
    x_top = x_low >= W - 1
    y_low = np.where(y_top, H - 1, y_low)
    x_low = np.where(x_top, W - 1, x_low)
    y_high = np.where(y_top, H - 1, y_low + 1)
    x_high = np.where(x_top, W - 1, x_low + 1)
    y = np.where(y_top, y_low.astype(F32), y)
    x = np.where(x_top, x_low.astype(F32), x)
    ly = y - y_low.astype(F32)
    lx = x - x_low.astype(F32)
    hy = F32(1) - ly
    hx = F32(1) - lx
    w1, w2, w3, w4 = hy * hx, hy * lx, ly * hx, ly * lx
    v1 = img[:, y_low, x_low]
    v2 = img[:, y_low, x_high]
    v3 = img[:, y_high, x_low]
    v4 = img[:, y_high, x_high]
    val = ((w1 * v1 + w2 * v2) + w3 * v3) + w4 * v4
    return np.where(inside, val, F32(0))
