"""``crop``: crop-and-resize of boxes over an image, a batch or a list of images (TensorFlow's
``crop_and_resize``, a "roi resize"), each crop ``cv2.resize`` of the box's pixels."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _plans, _transfers, _validate, cpu
from ._launch import launch_3d, no_ragged
from ._specs import crop as spec

__all__ = ["CROP_INTERPOLATIONS", "crop"]

CROP_INTERPOLATIONS = tuple(spec.INTERPOLATIONS)

# Launch plans (see _plans) of crops from one image or a batch with float32 boxes of the
# images' kind, keyed by the images', the boxes' and out's geometry and the options; the
# boxes go in at every call. (Host boxes, and NumPy boxes with image indexes under the
# emulator, are checked value by value at every call: no plan.)
_PLANS = _plans.PlanCache()
_BOXES_AT, _OUT_AT = 10, 14  # the boxes' and the output's positions in the kernel's arguments


def _plan_key(img, boxes, out, size, interpolation):
    """``(kind, key)`` of a crop that can have a plan, else ``(None, None)``."""
    kind, key, _ = _PLANS.find(img, out, ("crop", size, interpolation))
    if key is None:
        return None, None
    b = _plans.array_key(boxes)
    if (b is None or b[0] != kind or len(b[2]) != 2 or b[2][1] not in (4, 5)
            or str(b[1]) not in ("float32", "torch.float32") or (kind == "numpy" and b[2][1] == 5)):
        return None, None
    return kind, (key, b)


def crop(img, boxes, size, *, interpolation="linear", out=None):
    """Crop boxes out of images and resize each crop to one size.

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor, or a list of them
        One ``HW`` / ``HWC`` image, a batch ``NHWC``, or a list of ``HW`` / ``HWC`` images
        of different sizes (all with the same dtype and channels); uint8, uint16, float16
        or float32; 1 to 4 channels; any strides.
    boxes : array (K, 4), (K, 5) or a list of N arrays (K_i, 4)
        ``(x1, y1, x2, y2)`` in pixels (pixel i spans [i, i + 1)) of the one image; rows
        ``(image index, x1, y1, x2, y2)`` for a batch or a list; or per image, a list of
        xyxy arrays (boxes of image 0 first). NumPy, a list, or the images' kind and
        device. Read as float32.
    size : (int, int)
        Output ``(height, width)`` of every crop.
    interpolation : {"nearest", "linear", "cubic"}
    out : array, optional
        ``(K, height, width[, C])``, written in place.

    Returns
    -------
    ``(K, height, width[, C])`` in the images' dtype and kind; crop k from box k.

    Convention
    ----------
    A box's pixels are ``img[y1:y2, x1:x2]`` with integer bounds
    ``x1 = clamp(rint(x1), 0, W - 1)`` and ``x2 = clamp(rint(x2), x1 + 1, W)`` (y alike;
    rint rounds half to even, NaN counts as -infinity), so every box keeps at least one
    pixel of its image. The crop is ``cv2.resize(img[y1:y2, x1:x2], (width, height),
    interpolation=...)`` computed as :func:`cupyprep.resize` computes it: bit for bit equal
    to OpenCV's own code where resize is (nearest and uint8 linear everywhere; see
    docs/exactness.md). This differs from TensorFlow's ``crop_and_resize`` (which samples
    the box's corners at the output's corners) and from ``torchvision.ops.roi_align``
    (bin averages): the crop of a box is exactly the resize of that slice. An image
    index that is not an integer in ``[0, N)`` raises for boxes given on the host, and
    gives a crop of zeros for boxes on the device (they are not read back).

    Example
    -------
    >>> patches = cupyprep.crop(frames, rois, (64, 64))            # doctest: +SKIP
    """
    interpolation = _validate.choice("interpolation", interpolation, CROP_INTERPOLATIONS)
    dh, dw = _validate.size_hw("size", size)
    kind, key = _plan_key(img, boxes, out, size, interpolation)
    if key is not None:
        found = _PLANS.get(key)
        if found is not None:
            # (under the emulator NumPy boxes are host boxes: copied to float32 rows, as
            # the general path copies them)
            table = (np.ascontiguousarray(boxes, np.float32) if kind == "numpy"
                     else _plans.argument(boxes, kind))
            native = found.run(img, kind, out, (table,))
            if native is not None:
                return native
    if isinstance(img, (list, tuple)):
        call, arrays = _arrays.prepare_list(img, "img")
        dtype = _validate.dtype_in("img[0]", arrays[0], spec.DTYPES)
        c = _validate.list_images("img", arrays)
        n_src, has_channels, uniform, single = len(arrays), arrays[0].ndim == 3, False, False
    else:
        call = _arrays.prepare(img, "img")
        arrays = call.array
        dtype = _validate.dtype_in("img", arrays, spec.DTYPES)
        geo = _validate.image_layout("img", arrays, "NHWC" if arrays.ndim == 4 else "HWC")
        c, n_src, has_channels, uniform = geo.c, geo.n, geo.has_channels, True
        single = arrays.ndim != 4
    if c > 4:
        raise ValueError(f"img: expected 1 to 4 channels, got {c}")
    with call.launch():
        table, with_index = _boxes(call, boxes, uniform and single, n_src)
        K = table.shape[0]
        out_shape = (K, dh, dw) + ((c,) if has_channels else ())
        if not call.device:
            if uniform:
                images = list(arrays) if not single else [arrays]
            else:
                images = arrays
            res = cpu.crop(images, table, interpolation, with_index, np.empty(out_shape, dtype))
            return call.result(res, out)
        if K >= 2**31:
            raise ValueError(f"boxes: expected fewer than 2**31 boxes, got {K}")
        i64, i32 = np.int64, np.int32
        if uniform:
            s_n, _, s_y, s_x = geo.strides
            s_c = geo.strides[1]
            sources = (arrays, None, no_ragged(), i32(n_src), i32(geo.h), i32(geo.w), i64(s_n),
                       i64(s_y), i64(s_x), i64(s_c))
        else:
            strides = []
            for a in arrays:
                st = _arrays.element_strides(a, "img")
                strides.append(st[:2] + ([st[2]] if a.ndim == 3 else [0]))
            tab, records, _ = _transfers.ragged(arrays, "img", [a.shape[:2] for a in arrays],
                                                strides, call.xp)
            sources = (None, tab, records, i32(n_src), i32(0), i32(0), i64(0), i64(0), i64(0),
                       i64(0))
        b_k, b_c = _arrays.element_strides(table, "boxes")
        with call.writing(out, out_shape, dtype, [arrays] if uniform else arrays) as (native, dst):
            if K == 0:
                return native
            d = _arrays.element_strides(dst, "out")
            d_n, d_y, d_x = d[:3]
            d_c = d[3] if has_channels else 0
            fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(interpolation, dtype, c))
            args = sources + (table, i64(b_k), i64(b_c), i32(with_index), dst, i32(dh), i32(dw),
                              i64(d_n), i64(d_y), i64(d_x), i64(d_c), i32(K))
            shape = launch_3d(fn, K, dh, dw, args)
            if shape is not None and key is not None and _plans.unstaged((arrays,), out):
                _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, _OUT_AT), out_shape, dtype,
                                                  per_call=(_BOXES_AT,)))
        return native


def _boxes(call, boxes, single, count):
    """``(table, with_index)``: the boxes as float32 rows on the images' side, (K, 5) with
    the image index first, or (K, 4) of image 0 (``with_index`` False)."""
    xp = call.xp
    if isinstance(boxes, (list, tuple)) and len(boxes) and all(_per_image(b) for b in boxes):
        if len(boxes) != count:
            raise ValueError(f"boxes: expected a list of {count} arrays (one per image), got "
                             f"{len(boxes)}")
        parts = []
        for i, b in enumerate(boxes):
            a = _box_array(call, b, f"boxes[{i}]", count)
            if a.ndim != 2 or a.shape[1] != 4:
                raise ValueError(f"boxes[{i}]: expected shape (K, 4), got {_arrays.describe(a)}")
            parts.append(xp.concatenate([xp.full((a.shape[0], 1), i, np.float32), a], axis=1))
        return xp.concatenate(parts, axis=0), True
    a = _box_array(call, boxes, "boxes", count)
    if a.ndim == 2 and a.shape[1] == 4 and single:
        return a, False
    if a.ndim != 2 or a.shape[1] != 5:
        expected = "(K, 4) or (K, 5)" if single else "(K, 5) rows (image, x1, y1, x2, y2)"
        raise ValueError(f"boxes: expected shape {expected} or a list of (K_i, 4), got "
                         f"{_arrays.describe(a)}")
    return a, True


def _per_image(b):
    """Whether an element of a boxes list is one image's (K_i, 4) array (not a box row)."""
    ndim = getattr(b, "ndim", None)
    if ndim is None and isinstance(b, (list, tuple)):
        ndim = np.ndim(b)
    return ndim == 2


def _box_array(call, boxes, name, count):
    """One box argument as float32 on the images' side; image indexes given on the host
    are checked (device ones are not read back)."""
    if _arrays.is_cupy(boxes) or (_arrays.is_torch(boxes) and boxes.is_cuda):
        a = call.convert(boxes, name)
        _validate.dtype_in(name, a, spec.BOX_DTYPES)
        return a if a.dtype == np.float32 else a.astype(np.float32)
    if _arrays.is_torch(boxes):
        boxes = boxes.detach().numpy()
    try:
        host = np.asarray(boxes)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array of box coordinates, got {boxes!r}") from None
    if host.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected an array of numbers, got {_arrays.describe(host)}")
    host = host.astype(np.float32)
    if host.ndim == 2 and host.shape[1] == 5:
        column = host[:, 0]
        ok = (column >= 0) & (column < count) & (column == np.floor(column))
        if not ok.all():
            k = int(np.argmin(ok))
            raise ValueError(f"{name}: row {k}'s image index {float(column[k])!r} is not an "
                             f"integer in [0, {count}) (img has {count} image{'s' * (count != 1)})")
    if not call.device:
        return host
    return _transfers.upload(call.xp, host, name, "pass the boxes on the images' device")
