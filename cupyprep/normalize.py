"""Normalization: channel order, scale, mean/std, layout and dtype in one pass."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _plans, _validate, cpu
from ._launch import launch_1d, launch_3d
from ._specs import normalize as spec

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "denormalize", "normalize"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# Launch plans (see _plans): a repeated call with the same geometry and options launches the
# stored plan
_PLANS = _plans.PlanCache()
# denormalize's plans: normalize's plan of the channels-last view the first call made, under
# denormalize's key (the image's geometry and denormalize's arguments)
_DENORMALIZE = _plans.PlanCache()


def _dense(geo, dgeo, channels_last_out):
    """Whether cupyprep_normalize_dense makes the call (normalize.cu says when it can):
    every image's pixels contiguous, and the output's, fewer than 2^30 elements an image (so
    that its int32 pixel index plus the grid's stride stays below 2^31)."""
    c, w = geo.c, geo.w
    _, s_c, s_y, s_x = geo.strides
    _, d_c, d_y, d_x = dgeo.strides
    if geo.h * w * c >= 2**30 or s_x != c or s_y != w * c or (c > 1 and s_c != 1):
        return False
    if channels_last_out:
        return d_x == c and d_y == w * c and (c == 1 or d_c == 1)
    return d_x == 1 and d_y == w


def normalize(img, mean=None, std=None, *, scale=1.0, swap_rb=False, layout="CHW",
              dtype="float32", out=None):
    """``out[c] = (img[c'] * scale - mean[c]) / std[c]``, with a layout and dtype change.

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor
        ``HW``, ``HWC`` or a batch ``NHWC``; uint8, uint16, float16 or float32; 1 to 4
        channels. Any strides.
    mean, std : float or sequence of float, optional
        Per channel, in the channel order of the *output* (after ``swap_rb``), in the units
        of ``img * scale``; default 0 and 1.
    scale : float
        Multiplies the input first; ``1/255`` maps uint8 to [0, 1]. The default, 1, keeps
        pixel units (0..255 for uint8): right for 0..255 statistics (mmdetection's
        ``[123.675, 116.28, 103.53]``); torchvision's ``IMAGENET_MEAN`` / ``IMAGENET_STD``
        need ``scale=1/255`` (:func:`cupyprep.preprocess` defaults to that).

    Units
    -----
    Where mean / std and the scaled pixels are clearly in different units, a
    :class:`cupyprep.UnitsWarning` says so and names the fix: any ``|mean|`` or ``|std|``
    above 1.5 while ``scale`` maps the pixels into [0, 1] (``scale * 255 <= 1.5``), or all of
    them at most 1.5 (other than mean 0 and std 1) while integer pixels stay in pixel units
    (``scale * max >= 100``). The result is computed as asked either way.
    swap_rb : bool
        Reverse the first three channels (BGR -> RGB, BGRA -> RGBA).
    layout : {"CHW", "HWC"} (or "NCHW" / "NHWC")
        Output axis order: ``CHW`` gives ``CHW`` for an image and ``NCHW`` for a batch. A 2-D
        ``HW`` input gives a 2-D output.
    dtype : {"float32", "float16", "uint8"}
        Output dtype; uint8 rounds half to even and saturates.
    out : array, optional
        Written in place; same kind, shape and dtype as the result. May be the input itself
        or overlap it.

    Convention
    ----------
    float32 arithmetic in this order: ``x * scale``, ``- mean``, ``* (1 / std)``, each
    rounded (no fused multiply-add), with ``1 / std`` computed in double and rounded to
    float32 once; the kernels and the CPU backend give the same bits, within 1.5 float32
    ulp of the exact ``(x * scale - mean) / std``.

    Example
    -------
    >>> x = cupyprep.normalize(rgb, IMAGENET_MEAN, IMAGENET_STD, scale=1 / 255)  # doctest: +SKIP
    """
    return _normalize(img, mean, std, scale, swap_rb, layout, dtype, out)[0]


def _normalize(img, mean, std, scale, swap_rb, layout, dtype, out):
    """:func:`normalize`'s work: its result and the launch plan the call replayed or stored
    (None where it has none)."""
    # (mean / std as arrays or tensors get no key: they could change in place)
    kind, key, found = _PLANS.find(img, out, (mean, std, scale, swap_rb, layout, dtype))
    if found is not None:
        native = _replay(found, img, kind, out)
        if native is not None:
            return native, found
    call = _arrays.prepare(img, "img")
    arr = call.array
    in_dtype = _validate.dtype_in("img", arr, spec.IN_DTYPES)
    out_dtype = _validate.out_dtype("dtype", dtype, spec.OUT_DTYPES)
    _validate.choice("layout", layout, _validate.LAYOUTS)
    channels_last_out = layout in ("HWC", "NHWC")
    in_layout = "NHWC" if arr.ndim == 4 else "HWC"
    geo = _validate.image_layout("img", arr, in_layout, max_channels=4)
    if layout.startswith("N") and not geo.batched:
        raise ValueError(f"layout: {layout!r} expects a 4-D NHWC batch, got {_arrays.describe(arr)}")
    given = mean is not None or std is not None
    mean = _validate.per_channel("mean", mean, geo.c, 0.0, "img")
    std = _validate.per_channel("std", std, geo.c, 1.0, "img")
    if any(s == 0 for s in std):
        raise ValueError(f"std: expected non-zero values, got {std}")
    scale = _validate.number("scale", scale)
    units = ("normalize", mean, std, given, scale, in_dtype, 1.0)  # (..., default_scale)
    _validate.units(*units)
    swap_rb = _validate.flag("swap_rb", swap_rb)
    if not call.device:
        res = cpu.normalize(arr, mean, std, scale, swap_rb, channels_last_out, out_dtype)
        return call.result(res, out), None
    plan = None
    out_shape = geo.shape(geo.h, geo.w, channels_last=channels_last_out)
    with call.launch(), call.writing(out, out_shape, out_dtype, [arr]) as (native, dst):
        dgeo = _validate.image_layout(
            "out", dst, ("NHWC" if channels_last_out else "NCHW") if geo.batched else
            ("HWC" if channels_last_out or not geo.has_channels else "CHW"))
        s_n, s_c, s_y, s_x = geo.strides
        d_n, d_c, d_y, d_x = dgeo.strides
        swap = swap_rb and geo.c >= 3
        f32, i64, i32 = np.float32, np.int64, np.int32
        m = [f32(v) for v in mean + (0.0,) * (4 - geo.c)]
        sd = [f32(1.0 / v) for v in std + (1.0,) * (4 - geo.c)]
        if _dense(geo, dgeo, channels_last_out):
            tuning = spec.SPEC
            fn = _kernels.get_function(
                spec.FILE, tuning.expr(in_dtype, out_dtype, geo.c, swap, channels_last_out))
            hw = geo.h * geo.w
            args = (arr, dst, i32(hw), i32(geo.n), i64(s_n), i64(d_n), i64(d_c), f32(scale), *m, *sd)
            shape = launch_3d(fn, geo.n, 1, -(-hw // tuning.dense_items), args, block_x=tuning.dense_block)
        else:
            total = geo.n * geo.h * geo.w
            fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(in_dtype, out_dtype, geo.c, swap))
            args = (arr, dst, i32(geo.h), i32(geo.w), i64(s_n), i64(s_y), i64(s_x), i64(s_c),
                    i64(d_n), i64(d_y), i64(d_x), i64(d_c), f32(scale), *m, *sd, i64(total))
            shape = launch_1d(fn, total, args)
        if shape is not None and key is not None and _plans.unstaged((img,), out):
            plan = _plans.LaunchPlan(fn, *shape, args, (0, 1), out_shape, out_dtype, units if given else None)
            _PLANS.put(key, plan)
    return native, plan


def denormalize(img, mean=None, std=None, *, scale=1.0, swap_rb=False, layout="CHW",
                dtype="uint8", out=None):
    """The inverse of :func:`normalize` given the same arguments: back to the original units,
    channel order and ``HWC`` layout, for display and test-time augmentation.

    ``out[c'] = (img[c] * std[c] + mean[c]) / scale``, where ``c'`` is ``c`` or, with
    ``swap_rb``, the first three channels reversed back (RGB -> BGR).

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor
        What :func:`normalize` made: ``CHW`` / ``NCHW`` (``layout="CHW"`` / ``"NCHW"``) or
        ``HWC`` / ``NHWC``, or a 2-D ``HW``; float32, float16, uint8 or uint16; 1 to 4
        channels; any strides (a channel-first array is read in place).
    mean, std, scale, swap_rb, layout :
        As given to :func:`normalize` (``mean`` / ``std`` in the normalized channel order,
        ``layout`` the normalized array's).
    dtype : {"uint8", "float32", "float16"}
        Output dtype; uint8 (the default: an image to show or save) rounds half to even and
        saturates.
    out : array, optional
        Written in place: ``HWC`` / ``NHWC`` (``HW`` for a 2-D input), ``dtype``.

    Convention
    ----------
    Computed as ``(img - m) * k`` in float32 with ``m = -mean / std`` and ``k = std / scale``
    worked out in double and rounded once, each operation rounded (the kernels and the CPU
    backend give the same bits). A uint8 image normalized and denormalized with the same
    arguments comes back unchanged: the float32 error is far below the 0.5 a pixel rounds by.

    Example
    -------
    >>> x = cupyprep.normalize(bgr, IMAGENET_MEAN, IMAGENET_STD, scale=1 / 255, swap_rb=True)  # doctest: +SKIP
    >>> bgr_again = cupyprep.denormalize(x, IMAGENET_MEAN, IMAGENET_STD, scale=1 / 255, swap_rb=True)  # doctest: +SKIP
    """
    key = _plans.call_key(img, out, (mean, std, scale, swap_rb, layout, dtype, "denormalize"), 0)
    found = None if key is None else _DENORMALIZE.get(key[1])
    if found is not None:  # normalize's launch on the channels-last view: the same pointer
        native = _replay(found, img, key[0], out)
        if native is not None:
            return native
    _validate.choice("layout", layout, _validate.LAYOUTS)
    out_dtype = _validate.out_dtype("dtype", dtype, spec.OUT_DTYPES)
    call = _arrays.prepare(img, "img")
    arr = call.array
    _validate.dtype_in("img", arr, spec.IN_DTYPES)
    if arr.ndim == 2:
        view = img
        c, transpose, batched = 1, False, False
    else:
        batched = layout.startswith("N") or arr.ndim == 4
        if arr.ndim != (4 if batched else 3):
            raise ValueError(f"img: layout {layout!r} expects a {4 if batched else 3}-D array, "
                             f"got {_arrays.describe(arr)}")
        channels_last = layout in ("HWC", "NHWC")
        c = arr.shape[-1] if channels_last else arr.shape[-3]
        transpose = not channels_last
        view = _channels_last(img, batched) if transpose else img
    if not 1 <= c <= 4:
        raise ValueError(f"img: expected 1 to 4 channels in layout {layout!r}, got {c} "
                         f"({_arrays.describe(arr)})")
    mean = _validate.per_channel("mean", mean, c, 0.0, "img")
    std = _validate.per_channel("std", std, c, 1.0, "img")
    if any(s == 0 for s in std):
        raise ValueError(f"std: expected non-zero values, got {std}")
    scale = _validate.number("scale", scale)
    if scale == 0:
        raise ValueError("scale: expected a non-zero number, got 0.0")
    swap_rb = _validate.flag("swap_rb", swap_rb)
    if swap_rb and c >= 3:  # per output channel: the output's channel c came from 2 - c
        mean = mean[2::-1] + mean[3:]
        std = std[2::-1] + std[3:]
    # (y - m) * k with m = -mean / std, k = std / scale; normalize takes k as 1 / its std
    inv_mean = tuple(-m / s for m, s in zip(mean, std))
    inv_std = tuple(scale / s for s in std)
    native, plan = _normalize(view, inv_mean, inv_std, 1.0, swap_rb, "NHWC" if arr.ndim == 4 else "HWC",
                              out_dtype.name, out)
    if key is not None and plan is not None:
        # normalize's plan of the view is this call's: a view's first element is the
        # image's, so the plan runs on the image itself
        _DENORMALIZE.put(key[1], plan)
    return native


def _replay(plan, img, kind, out):
    """A stored plan of :func:`normalize` run on ``img`` with the one check a repeat still
    makes (the units warning, where mean / std were given); None where ``out`` overlaps."""
    if plan.extra is not None:
        _validate.units(*plan.extra)
    return plan.run(img, kind, out)


def _channels_last(img, batched):
    """A channel-first array or tensor as a channels-last view (no copy)."""
    order = (0, 2, 3, 1) if batched else (1, 2, 0)
    if _arrays.is_torch(img):
        return img.permute(*order)
    return img.transpose(order)
