"""Box ops and detector head decoders, each one launch of boxes.cu: ``box_convert``,
``clip_boxes``, ``box_iou`` (torchvision's), ``prior_boxes`` / ``decode_boxes`` /
``decode_landmarks`` / ``encode_boxes`` (SSD, RetinaFace) and ``decode_yolo``."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _plans, _transfers, _validate
from ._arrays import rows_view
from ._launch import launch_1d
from ._specs import boxes as spec
from .cpu import detection as cpu

__all__ = ["box_convert", "clip_boxes", "box_iou", "prior_boxes", "decode_boxes", "decode_landmarks",
           "encode_boxes", "decode_yolo", "BOX_FORMATS"]

BOX_FORMATS = spec.FORMATS
_i64 = np.int64

# Launch plans (see _plans) of box_convert, clip_boxes, box_iou, decode_boxes and
# decode_landmarks: one launch each, keyed by the boxes' geometry (both arrays' for box_iou,
# the head's and the priors' for the decoders) and the options
_PLANS = _plans.PlanCache()


# --- box ops ---------------------------------------------------------------------------------------
def _box_arg(name, boxes, min_ndim=1):
    call = _arrays.prepare(boxes, name)
    arr = call.array
    if arr.ndim < min_ndim or arr.shape[-1] != 4:
        raise ValueError(f"{name}: expected shape (..., 4), got {_arrays.describe(arr)}")
    _validate.dtype_in(name, arr, spec.BOX_DTYPES)
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
    key, native = _PLANS.replay(boxes, None, ("box_convert", in_fmt, out_fmt))
    if native is not None:
        return native
    in_fmt = _validate.choice("in_fmt", in_fmt, spec.FORMATS)
    out_fmt = _validate.choice("out_fmt", out_fmt, spec.FORMATS)
    call, arr = _box_arg("boxes", boxes)
    if not call.device:
        return call.result(cpu.box_convert(arr, in_fmt, out_fmt))
    with call.launch():
        native, out = call.output(None, arr.shape, arr.dtype)
        view, A, P, st = rows_view(arr, "boxes")
        _launch(key, spec.SPEC.convert_expr(arr.dtype, in_fmt, out_fmt), arr, view, A * P,
                (view, _i64(P), *st, out, _i64(A * P)), out)
    return native


def _launch(key, expr, arr, view, total, args, out, per_call=None):
    """Launch ``expr`` over ``total`` boxes (``args``: ``view`` of the boxes first, then
    ``out`` among them, and ``per_call`` (an array the plan takes at every call) where
    given); with a plan ``key``, store the launch as the plan of the next such call where
    the kernel reads the boxes in place (not a copy of them)."""
    fn = _boxes_fn(expr)
    shape = launch_1d(fn, total, args)
    if shape is not None and key is not None and _plans.address(view) == _plans.address(arr):
        at = next(i for i, a in enumerate(args) if a is out)
        more = () if per_call is None else (next(i for i, a in enumerate(args) if a is per_call),)
        _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, at), out.shape, out.dtype, per_call=more))


def _same_memory(a, b):
    """Whether the priors the kernel reads (``a``) are the given ones (``b``) in place, not
    a copy (NumPy under the emulator, CuPy arrays, :class:`TensorView`)."""
    def pointer(x):
        if isinstance(x, np.ndarray):
            return x.__array_interface__["data"][0]
        ptr = getattr(x, "ptr", None)
        return x.data.ptr if ptr is None else ptr

    return pointer(a) == pointer(b)


def _decoder_plan(head, priors, options):
    """``(kind, key, plan)`` of a decoder's call: a key where the priors are a contiguous
    float32 (P, 4) array of the head's kind (the kernel reads them where they are), and
    the plan stored under it; Nones otherwise."""
    kind, key, _ = _PLANS.find(head, None, options)
    if key is None:
        return None, None, None
    p = _plans.array_key(priors)
    if p is None or p[0] != kind or len(p[2]) != 2 or str(p[1]) not in ("float32", "torch.float32") or (
            p[3] != ((16, 4) if kind != "torch" else (4, 1))):
        return None, None, None
    key = (key, p)
    return kind, key, _PLANS.get(key)


def _boxes_fn(expr):
    return _kernels.get_function(spec.FILE, expr)


def clip_boxes(boxes, size):
    """Clip xyxy boxes to an image: x to [0, width], y to [0, height]
    (``torchvision.ops.clip_boxes_to_image``).

    ``boxes`` (..., 4) float32 / float16; ``size`` (height, width). Same shape, dtype, kind.
    NaN stays NaN.

    Example
    -------
    >>> boxes = cupyprep.clip_boxes(boxes, (1080, 1920))                 # doctest: +SKIP
    """
    key, native = _PLANS.replay(boxes, None, ("clip_boxes", size))
    if native is not None:
        return native
    H, W = _validate.size_hw("size", size)
    call, arr = _box_arg("boxes", boxes)
    if not call.device:
        return call.result(cpu.clip_boxes(arr, (H, W)))
    with call.launch():
        native, out = call.output(None, arr.shape, arr.dtype)
        view, A, P, st = rows_view(arr, "boxes")
        _launch(key, spec.SPEC.op_expr("clip_boxes", arr.dtype), arr, view, A * P,
                (view, _i64(P), *st, np.float32(W), np.float32(H), out, _i64(A * P)), out)
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
    kind, key, found = _PLANS.find(boxes1, None, ("box_iou",))
    if key is not None:
        other = _plans.array_key(boxes2)
        key = None if other is None else (key, other)
        found = None if key is None else _PLANS.get(key)
        if found is not None:
            # the second boxes at their slot (the key fixed their kind, geometry, device)
            return found.run(boxes1, kind, None, (_plans.argument(boxes2, kind),))
    call, a = _box_arg("boxes1", boxes1, 2)
    b = call.convert(boxes2, "boxes2")
    for name, arr in (("boxes1", a), ("boxes2", b)):
        if arr.ndim != 2 or arr.shape[1] != 4:
            raise ValueError(f"{name}: expected shape (N, 4), got {_arrays.describe(arr)}")
        _validate.dtype_in(name, arr, spec.BOX_DTYPES)
    if not call.device:
        return call.result(cpu.box_iou(a, b))
    N, M = a.shape[0], b.shape[0]
    with call.launch():
        native, out = call.output(None, (N, M), np.float32)
        sa, sb = _arrays.element_strides(a, "boxes1"), _arrays.element_strides(b, "boxes2")
        fn = _boxes_fn(spec.SPEC.iou_expr(a.dtype, b.dtype))
        args = (a, _i64(sa[0]), _i64(sa[1]), b, _i64(sb[0]), _i64(sb[1]), _i64(M), out, _i64(N * M))
        shape = launch_1d(fn, N * M, args)
        if shape is not None and key is not None:
            _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, 7), (N, M), np.float32,
                                              per_call=(3,)))
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
    for name, value in (("min_sizes", min_sizes), ("steps", steps)):
        if not isinstance(value, (list, tuple, np.ndarray)) or (isinstance(value, np.ndarray) and value.ndim == 0):
            raise TypeError(f"{name}: expected a sequence with one entry per feature level, got {value!r}")
    clip = _validate.flag("clip", clip)
    if len(min_sizes) != len(steps):
        raise ValueError(f"min_sizes: expected one entry per step ({len(steps)}), got {len(min_sizes)}")
    out = []
    for sizes, step in zip(min_sizes, steps):
        step = _validate.number("steps", step)
        if step <= 0:
            raise ValueError(f"steps: expected positive values, got {steps!r}")
        if not np.isfinite(step):
            raise ValueError(f"steps: expected finite values, got {steps!r}")
        fh, fw = int(np.ceil(H / step)), int(np.ceil(W / step))
        sizes = _validate.as_numbers("min_sizes", sizes).reshape(-1)
        if not np.all(np.isfinite(sizes)):
            raise ValueError(f"min_sizes: expected finite sizes, got {min_sizes!r}")
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


def _priors_for(call, priors, n, head):
    """``priors`` (n, 4) for a decoder of ``call``'s input: priors on the input's device,
    of its kind, are used where they are (not read back to the host); others as float32
    NumPy (uploaded by the decoder)."""
    p = call.sibling(priors, "priors")
    if p is None:
        host = _transfers.to_host(priors) if hasattr(priors, "shape") else priors
        p = _validate.as_numbers("priors", host, np.float32)
    if p.ndim != 2 or p.shape != (n, 4):
        raise ValueError(f"priors: expected shape ({n}, 4) (one per row of {head}), got "
                         f"{_arrays.describe(priors)}")
    return p


def _variances(variances):
    try:
        n = len(variances)
    except TypeError:  # a lone number (or no sequence at all)
        raise TypeError(f"variances: expected two numbers, got {variances!r}") from None
    if n != 2:
        raise ValueError(f"variances: expected two numbers, got {variances!r}")
    return tuple(_validate.number("variances", v) for v in variances)


def _head_arg(name, head, last_ok, expected, arr=None):
    """A decoder's head output: (..., P, K) float32 / float16 with ``last_ok(K)``; the
    error names ``name`` and the ``expected`` shape. ``head`` may be prepared already
    (then ``arr`` is the view to read, and errors describe the array as given)."""
    call = head if isinstance(head, _arrays.Prepared) else _arrays.prepare(head, name)
    given = call.array
    arr = given if arr is None else arr
    if arr.ndim < 2 or not last_ok(arr.shape[-1]):
        raise ValueError(f"{name}: expected shape {expected}, got {_arrays.describe(given)}")
    _validate.dtype_in(name, arr, spec.BOX_DTYPES)
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
    kind, key, found = _decoder_plan(loc, priors, ("decode_boxes", variances))
    if found is not None:
        return found.run(loc, kind, None, (_plans.argument(priors, kind),))
    call, arr = _head_arg("loc", loc, lambda k: k == 4, "(..., P, 4)")
    v = _variances(variances)
    p = _priors_for(call, priors, arr.shape[-2], "loc")

    if not call.device:
        return call.result(cpu.decode_anchors(arr, p, v))
    with call.launch():
        native, out = call.output(None, arr.shape, np.float32)
        pri = _device_priors(call, p)
        view, A, P, st = rows_view(arr, "loc")
        _launch(key if _same_memory(pri, p) else None, spec.SPEC.op_expr("decode_boxes", arr.dtype), arr, view, A * P,
                (view, _i64(P), *st, pri, np.float32(v[0]), np.float32(v[1]), out, _i64(A * P)), out, pri)
    return native


def decode_landmarks(pre, priors, variances=(0.1, 0.2)):
    """RetinaFace landmark decoding: ``pre`` (..., P, 2L) -> points (..., P, L, 2) float32
    in the priors' units: ``p_c + pre * v0 * p_wh``.

    Example
    -------
    >>> pts = cupyprep.decode_landmarks(landms[0], priors)                 # doctest: +SKIP
    """
    kind, key, found = _decoder_plan(pre, priors, ("decode_landmarks", variances))
    if found is not None:
        return found.run(pre, kind, None, (_plans.argument(priors, kind),))
    call, arr = _head_arg("pre", pre, lambda k: k > 0 and k % 2 == 0, "(..., P, 2L)")
    v = _variances(variances)
    p = _priors_for(call, priors, arr.shape[-2], "pre")

    if not call.device:
        return call.result(cpu.decode_landmarks(arr, p, v))
    K = arr.shape[-1]
    with call.launch():
        native, out = call.output(None, arr.shape[:-1] + (K // 2, 2), np.float32)
        pri = _device_priors(call, p)
        view, A, P, st = rows_view(arr, "pre")
        _launch(key if _same_memory(pri, p) else None, spec.SPEC.op_expr("decode_landmarks", arr.dtype), arr, view,
                A * P * K, (view, _i64(P), _i64(K), *st, pri, np.float32(v[0]), out, _i64(A * P * K)), out, pri)
    return native


def _device_priors(call, priors):
    """The decoders' priors as a contiguous float32 array on the call's device: host
    priors are uploaded on the launch stream; device priors that are contiguous float32
    already are used as they are."""
    return call.xp.ascontiguousarray(
        _transfers.upload(call.xp, priors, "priors", "pass them on the input's device", np.float32))


@_arrays.on_input_device
def encode_boxes(boxes, priors, variances=(0.1, 0.2)):
    """The inverse of :func:`decode_boxes`: xyxy boxes (..., P, 4) in the priors' units ->
    offsets (..., P, 4) float32, as the kind of ``boxes`` (NumPy, CuPy or torch; host
    priors beside device boxes are copied there). For making targets and synthetic head
    outputs."""
    views, xp, back = _arrays.inputs_of(boxes=boxes, priors=priors)
    b = _validate.as_numbers("boxes", views["boxes"], None, xp)
    p = _validate.as_numbers("priors", views["priors"], None, xp)
    if b.ndim < 2 or b.shape[-1] != 4:
        raise ValueError(f"boxes: expected shape (..., P, 4), got {_arrays.describe(b)}")
    if p.shape != (b.shape[-2], 4):
        raise ValueError(f"priors: expected shape ({b.shape[-2]}, 4) (one per row of boxes), got "
                         f"{_arrays.describe(p)}")
    return back(cpu.encode_anchors(b, p, _variances(variances), xp))


def decode_yolo(pred, *, objectness=True, layout="auto"):
    """YOLO-style head output -> xyxy boxes and per-class scores, ready for
    :func:`multiclass_nms`.

    ``pred`` (..., N, 5 + C) rows ``(cx, cy, w, h, obj, cls_0 ... cls_C-1)`` (YOLOv5), or
    with ``objectness=False`` (..., N, 4 + C) rows ``(cx, cy, w, h, cls...)``; or the same
    channels first, (..., 4 + C, N), as YOLOv8 / YOLO11 export it (``(1, 84, 8400)``).
    Returns ``(boxes (..., N, 4), scores (..., N, C))`` float32, candidates in rows.

    layout : {"auto", "rows", "channels"}
        ``"rows"``: the last axis holds a candidate's values; ``"channels"``: the
        second-to-last does (read through a transposed view, no copy). ``"auto"`` (the
        default) takes ``(..., A, B)`` as channels first when ``A < B`` and ``A`` is a valid
        channel count (more than 4, or 5 with ``objectness``), else as rows: a detector
        head has more candidates than channels (8400 against 84), which tells the two
        apart. A head with fewer candidates than channels needs ``layout="rows"``.

    Convention
    ----------
    ``x1 = cx - w * 0.5``, ``x2 = cx + w * 0.5``; scores ``cls * obj`` (YOLOv5's
    ``conf = obj_conf * cls_conf``), in float32.

    Example
    -------
    >>> out = model(batch)                      # YOLOv8: (B, 84, 8400)  # doctest: +SKIP
    >>> boxes, scores = cupyprep.decode_yolo(out, objectness=False)      # doctest: +SKIP
    >>> det = cupyprep.multiclass_nms(boxes, scores, score_threshold=0.25)   # doctest: +SKIP
    """
    layout = _validate.choice("layout", layout, ("auto", "rows", "channels"))
    objectness = _validate.flag("objectness", objectness)
    extra = 5 if objectness else 4
    call = _arrays.prepare(pred, "pred")
    arr = call.array
    if arr.ndim >= 2:
        a, b = arr.shape[-2:]
        if layout == "channels" or (layout == "auto" and extra < a < b):
            arr = arr.swapaxes(-1, -2)
    expected = f"(..., {extra} + C, N)" if layout == "channels" else f"(..., N, {extra} + C)"
    call, arr = _head_arg("pred", call, lambda k: k > extra, f"{expected} with C >= 1", arr)
    if not call.device:
        bx, sc = cpu.decode_yolo(arr, objectness)
        return call.result(bx), call.result(sc)
    K = arr.shape[-1]
    C = K - extra
    with call.launch():
        boxes_native, boxes_out = call.output(None, arr.shape[:-1] + (4,), np.float32)
        scores_native, scores_out = call.output(None, arr.shape[:-1] + (C,), np.float32)
        view, A, N, st = rows_view(arr, "pred")
        tuning = spec.SPEC
        if abs(st[1]) < abs(st[2]):  # rows transposed (YOLOv8): tiles through shared memory
            if A * N:
                _boxes_fn(tuning.yolo_expr("tiles", arr.dtype, objectness))(
                    (-(-N // tuning.yolo_rows), -(-K // tuning.yolo_cols), min(A, 65535)),
                    (tuning.yolo_threads,),
                    (view, _i64(A), _i64(N), _i64(C), *st, boxes_out, scores_out))
        else:  # a warp per row
            launch_1d(_boxes_fn(tuning.yolo_expr("rows", arr.dtype, objectness)), 32 * A * N,
                      (view, _i64(N), _i64(C), *st, boxes_out, scores_out, _i64(A * N)))
    return boxes_native, scores_native
