"""Normalization: channel order, scale, mean/std, layout and dtype in one pass."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _validate, cpu
from ._launch import launch_1d, launch_3d
from ._specs import normalize as spec

__all__ = ["normalize", "IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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
        Per channel, in the channel order of the *output* (after ``swap_rb``); default 0
        and 1.
    scale : float
        Multiplies the input first; ``1/255`` maps uint8 to [0, 1].
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
    mean = _validate.per_channel("mean", mean, geo.c, 0.0, "img")
    std = _validate.per_channel("std", std, geo.c, 1.0, "img")
    if any(s == 0 for s in std):
        raise ValueError(f"std: expected non-zero values, got {std}")
    scale = _validate.number("scale", scale)
    swap_rb = _validate.flag("swap_rb", swap_rb)
    if not call.device:
        res = cpu.normalize(arr, mean, std, scale, swap_rb, channels_last_out, out_dtype)
        return call.result(res, out)
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
            launch_3d(fn, geo.n, 1, -(-hw // tuning.dense_items), (
                arr, dst, i32(hw), i32(geo.n), i64(s_n), i64(d_n), i64(d_c), f32(scale), *m, *sd,
            ), block_x=tuning.dense_block)
        else:
            total = geo.n * geo.h * geo.w
            fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(in_dtype, out_dtype, geo.c, swap))
            launch_1d(fn, total, (
                arr, dst, i32(geo.h), i32(geo.w), i64(s_n), i64(s_y), i64(s_x), i64(s_c),
                i64(d_n), i64(d_y), i64(d_x), i64(d_c), f32(scale), *m, *sd, i64(total),
            ))
    return native
