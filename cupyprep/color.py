"""Color conversions with cv2.cvtColor semantics: BGR <-> RGB, to gray, and between BGR / RGB
and HSV or YCrCb (:func:`cvt_color`)."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _plans, _validate, cpu
from ._launch import launch_1d
from ._specs import color as spec

__all__ = ["CVT_CODES", "cvt_color", "swap_rb", "to_gray"]

COLOR_DTYPES = spec.DTYPES
ORDERS = spec.ORDERS

# cvt_color's codes: (conversion, channel order, full-range hue)
CVT_CODES = {
    f"{a}2{b}{suffix}".replace("bgr", order): (f"{a}2{b}", order, bool(suffix))
    for a, b in (("bgr", "hsv"), ("hsv", "bgr"), ("bgr", "ycrcb"), ("ycrcb", "bgr"))
    for order in ORDERS
    for suffix in (("", "_full") if "hsv" in (a, b) else ("",))
}
# the codes swap_rb and to_gray serve
_OTHER_CODES = ("bgr2rgb", "rgb2bgr", "bgr2gray", "rgb2gray")

# Launch plans (see _plans) of the three ops: one launch each, keyed by the image's and
# out's geometry and the op's options
_PLANS = _plans.PlanCache()


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
    key, native = _PLANS.replay(img, out, ("swap_rb",))
    if native is not None:
        return native
    call, arr, dtype, geo = _color_input(img)
    if not call.device:
        return call.result(cpu.swap_rb(arr), out)
    with call.launch(), call.writing(out, arr.shape, dtype, [arr]) as (native, dst):
        _launch(spec.SPEC.swap_rb_expr(dtype, geo.c), arr, dst, geo, True, key=key, out=out)
    return native


def to_gray(img, *, order="bgr", out=None):
    """``HWC`` / ``NHWC`` color (3 or 4 channels, in ``order``) to ``HW`` / ``NHW`` gray.

    ``cv2.cvtColor`` with ``COLOR_BGR2GRAY`` / ``COLOR_RGB2GRAY`` (or the BGRA/RGBA
    codes): ``Y = 0.299 R + 0.587 G + 0.114 B``; uint8 and uint16 use OpenCV's 15-bit fixed
    point and are equal to it.
    """
    key, native = _PLANS.replay(img, out, ("to_gray", order))
    if native is not None:
        return native
    call, arr, dtype, geo = _color_input(img)
    order = _validate.choice("order", order, ORDERS)
    if not call.device:
        return call.result(cpu.to_gray(arr, order), out)
    bidx = 0 if order == "bgr" else 2
    with call.launch(), call.writing(out, arr.shape[:-1], dtype, [arr]) as (native, dst):
        _launch(spec.SPEC.to_gray_expr(dtype, geo.c, bidx), arr, dst, geo, False, key=key, out=out)
    return native


def cvt_color(img, code, *, out=None):
    """``cv2.cvtColor`` between BGR / RGB and HSV or YCrCb, named by ``code``.

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor
        ``HWC`` or ``NHWC``, uint8 or float32 (uint16 and float16 for the ``bgr2rgb`` /
        ``*2gray`` codes, which :func:`swap_rb` / :func:`to_gray` serve). Any strides.
        3 channels, or 4 (alpha ignored) for the conversions from BGR / RGB.
    code : str
        ``"bgr2hsv"``, ``"rgb2hsv"``, ``"bgr2hsv_full"``, ``"rgb2hsv_full"``, ``"hsv2bgr"``,
        ``"hsv2rgb"``, ``"hsv2bgr_full"``, ``"hsv2rgb_full"``, ``"bgr2ycrcb"``,
        ``"rgb2ycrcb"``, ``"ycrcb2bgr"``, ``"ycrcb2rgb"`` (OpenCV's ``COLOR_BGR2HSV`` ...
        lower-cased), or ``"bgr2rgb"``, ``"rgb2bgr"``, ``"bgr2gray"``, ``"rgb2gray"``.
    out : array, optional
        Written in place; same kind, shape and dtype as the result.

    Convention
    ----------
    OpenCV's: uint8 HSV has H in [0, 180) (the ``_full`` codes: [0, 256) from BGR, and
    H / 255 of the circle back to BGR, as OpenCV does), S and V in [0, 255]; float32 HSV
    has H in degrees [0, 360) (``_full`` makes no difference), S in [0, 1] and V = max(B, G,
    R). YCrCb is BT.601 with Cr, Cb offset by 128 (uint8) or 0.5 (float32). uint8 results
    equal OpenCV's own code (IPP off) bit for bit, with one machine dependence: OpenCV
    converts HSV -> BGR in vector blocks of its CPU's width and the rest of each row with
    scalar code, up to 1 apart (``_specs.color.SPEC.hsv_vector_block``, 64: AVX-512; see
    docs/exactness.md). float32: within 1e-5 of the value range.

    Example
    -------
    >>> hsv = cupyprep.cvt_color(bgr, "bgr2hsv")  # doctest: +SKIP
    """
    if not isinstance(code, str):
        raise TypeError(f"code: expected a conversion name (a str), got {code!r}")
    if code in _OTHER_CODES:
        if code.endswith("gray"):
            return to_gray(img, order=code[:3], out=out)
        return swap_rb(img, out=out)
    if code not in CVT_CODES:
        raise ValueError(f"code: expected one of {sorted(CVT_CODES) + list(_OTHER_CODES)}, got {code!r}")
    conversion, order, full = CVT_CODES[code]
    key, native = _PLANS.replay(img, out, ("cvt_color", code))
    if native is not None:
        return native
    call = _arrays.prepare(img, "img")
    arr = call.array
    dtype = _validate.dtype_in("img", arr, spec.CVT_DTYPES)
    channels = (3, 4) if conversion.startswith("bgr") else (3,)
    if arr.ndim not in (3, 4) or arr.shape[-1] not in channels:
        want = "3 or 4 channels" if len(channels) == 2 else "3 channels"
        raise ValueError(f"img: code {code!r} expects an HWC or NHWC array with {want}, "
                         f"got {_arrays.describe(arr)}")
    geo = _validate.image_layout("img", arr, "NHWC" if arr.ndim == 4 else "HWC")
    if not call.device:
        return call.result(cpu.cvt_color(arr, code), out)
    if dtype == np.float32:
        hrange = 360
    elif conversion == "bgr2hsv":
        hrange = 256 if full else 180
    else:
        hrange = 255 if full else 180
    tuning = spec.SPEC
    expr = tuning.cvt_color_expr(dtype, conversion, geo.c, 0 if order == "bgr" else 2)
    with call.launch(), call.writing(out, arr.shape[:-1] + (3,), dtype, [arr]) as (native, dst):
        _launch(expr, arr, dst, geo, True, (np.int32(hrange), np.int32(tuning.hsv_vector_block)), key, out)
    return native


def _launch(expr, src, dst, geo, dst_has_channels, extra=(), key=None, out=None):
    """Launch ``expr`` from ``src`` into ``dst``; with a plan ``key``, store the launch as
    the plan of the next such call (``out``: the caller's, None for a new output)."""
    s_n, s_c, s_y, s_x = geo.strides
    dst_st = _arrays.element_strides(dst, "out")
    if not geo.batched:
        dst_st = [0] + dst_st
    i64, i32 = np.int64, np.int32
    d = [i64(v) for v in dst_st[:3]]
    args = [src, dst, i32(geo.h), i32(geo.w), i64(s_n), i64(s_y), i64(s_x), i64(s_c), *d]
    if dst_has_channels:
        args.append(i64(dst_st[3]))
    args += extra
    total = geo.n * geo.h * geo.w
    args.append(i64(total))
    fn = _kernels.get_function(spec.FILE, expr)
    shape = launch_1d(fn, total, tuple(args))
    if shape is not None and key is not None and _plans.unstaged((src,), out):
        _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, 1), dst.shape, dst.dtype))
