"""Color conversions: BGR <-> RGB and to gray, with cv2.cvtColor semantics."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _validate, cpu
from ._launch import launch_1d
from ._specs import color as spec

__all__ = ["swap_rb", "to_gray"]

COLOR_DTYPES = spec.DTYPES
ORDERS = spec.ORDERS


def _color_input(img):
    call = _arrays.prepare(img, "img")
    arr = call.array
    dtype = _validate.dtype_in("img", arr, COLOR_DTYPES)
    if arr.ndim not in (3, 4) or arr.shape[-1] not in (3, 4):
        raise ValueError(
            f"img: expected an HWC or NHWC array with 3 or 4 channels, got {_arrays.describe(arr)}"
        )
    geo = _validate.image_layout("img", arr, "NHWC" if arr.ndim == 4 else "HWC")
    return call, arr, dtype, geo


def swap_rb(img, *, out=None):
    """BGR <-> RGB (BGRA <-> RGBA, alpha stays last) of an ``HWC`` / ``NHWC`` image.

    Same as ``cv2.cvtColor(img, cv2.COLOR_BGR2RGB)``; any dtype of resize's.
    """
    call, arr, dtype, geo = _color_input(img)
    if not call.device:
        return call.result(cpu.swap_rb(arr), out)
    with call.launch(), call.writing(out, arr.shape, dtype, [arr]) as (native, dst):
        _launch(spec.SPEC.swap_rb_expr(dtype, geo.c), arr, dst, geo, True)
    return native


def to_gray(img, *, order="bgr", out=None):
    """``HWC`` / ``NHWC`` color (3 or 4 channels, in ``order``) to ``HW`` / ``NHW`` gray.

    ``cv2.cvtColor`` with ``COLOR_BGR2GRAY`` / ``COLOR_RGB2GRAY`` (or the BGRA/RGBA
    codes): ``Y = 0.299 R + 0.587 G + 0.114 B``; uint8 and uint16 use OpenCV's 15-bit fixed
    point and are equal to it.
    """
    call, arr, dtype, geo = _color_input(img)
    order = _validate.choice("order", order, ORDERS)
    if not call.device:
        return call.result(cpu.to_gray(arr, order), out)
    bidx = 0 if order == "bgr" else 2
    with call.launch(), call.writing(out, arr.shape[:-1], dtype, [arr]) as (native, dst):
        _launch(spec.SPEC.to_gray_expr(dtype, geo.c, bidx), arr, dst, geo, False)
    return native


def _launch(expr, src, dst, geo, dst_has_channels):
    s_n, s_c, s_y, s_x = geo.strides
    dst_st = _arrays.element_strides(dst, "out")
    if not geo.batched:
        dst_st = [0] + dst_st
    i64, i32 = np.int64, np.int32
    d = [i64(v) for v in dst_st[:3]]
    args = [src, dst, i32(geo.h), i32(geo.w), i64(s_n), i64(s_y), i64(s_x), i64(s_c), *d]
    if dst_has_channels:
        args.append(i64(dst_st[3]))
    total = geo.n * geo.h * geo.w
    args.append(i64(total))
    launch_1d(_kernels.get_function(spec.FILE, expr), total, tuple(args))
