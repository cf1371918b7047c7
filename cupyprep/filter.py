"""Smoothing filters with OpenCV's semantics: ``gaussian_blur`` (``cv2.GaussianBlur``) and
``box_filter`` (``cv2.boxFilter`` / ``cv2.blur``)."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _arrays, _kernels, _plans, _transfers, _validate, cpu
from ._launch import launch_3d
from ._specs import filter as spec
from .cpu import filter as cpu_filter

__all__ = ["FILTER_BORDERS", "box_filter", "gaussian_blur"]

FILTER_BORDERS = tuple(spec.BORDERS)

# Launch plans (see _plans) of the two filters on one array (each image of a list plans as
# one): one launch each, keyed by the image's and out's geometry and the arguments as given
_PLANS = _plans.PlanCache()


def gaussian_blur(img, ksize, sigma_x, sigma_y=0.0, *, border="reflect101", layout="HWC", out=None):
    """Gaussian smoothing, as ``cv2.GaussianBlur(img, (kw, kh), sigma_x, sigma_y, border)``.

    Parameters
    ----------
    img : array or list of arrays (numpy, cupy or torch)
        ``HW``, ``HWC`` or ``NHWC`` (``CHW`` / ``NCHW`` with ``layout``); uint8, uint16,
        float16 or float32; any number of channels; views with any strides. A list of
        images of different sizes gives a list (one launch per image).
    ksize : int or (int, int)
        Kernel ``(height, width)`` (array order; ``cv2compat.GaussianBlur`` keeps OpenCV's
        ``(width, height)``), odd, or 0 to size it from the sigma: ``round(sigma * 3 * 2 +
        1) | 1`` for uint8, ``* 4`` for the other dtypes (OpenCV's rule).
    sigma_x, sigma_y : float
        Standard deviations along x and y; ``sigma_y <= 0`` takes ``sigma_x``; a sigma
        <= 0 is computed from the size, ``0.3 * ((k - 1) / 2 - 1) + 0.8`` (sizes 3, 5, 7, 9
        use OpenCV's fixed tables).
    border : {"reflect101", "replicate", "reflect", "constant"}
        OpenCV's default is reflect101 (``BORDER_DEFAULT``); constant pads with 0. OpenCV's
        filters take no wrap border.
    out : array, optional
        Written in place (same kind, shape and dtype); may be the input itself.

    Returns
    -------
    The smoothed image(s), same kind, shape and dtype as ``img``.

    Convention
    ----------
    OpenCV's separable filter: the weights of ``cv2.getGaussianKernel`` along x, then along
    y. uint8 and uint16 follow OpenCV's fixed point (weights with 8 / 16 fractional bits,
    exact integer sums, one rounding at the end) and equal ``cv2.GaussianBlur`` bit for
    bit; float32 (float16 through float32) is within 1e-5 of it (OpenCV's float code and
    the kernels' sum the same products in different orders). As OpenCV, an image one
    pixel high (wide) is not smoothed along y (x) unless the border is constant.

    Example
    -------
    >>> soft = cupyprep.gaussian_blur(frames, 5, 1.2)               # doctest: +SKIP
    """
    if isinstance(img, (list, tuple)):
        return _each(img, out, lambda im, o: gaussian_blur(im, ksize, sigma_x, sigma_y,
                                                           border=border, layout=layout, out=o))
    key, native = _PLANS.replay(img, out, ("gaussian_blur", ksize, sigma_x, sigma_y, border, layout))
    if native is not None:
        return native
    call, arr, dtype, geo, border = _image(img, layout, border)
    kh, kw = _ksize("ksize", ksize, allow_zero=True)
    sx, sy = _sigma("sigma_x", sigma_x), _sigma("sigma_y", sigma_y)
    if sy <= 0:
        sy = sx
    kw = cpu_filter.gaussian_ksize(kw, sx, dtype)
    kh = cpu_filter.gaussian_ksize(kh, sy, dtype)
    if kw <= 0 or kh <= 0 or kw % 2 == 0 or kh % 2 == 0:
        raise ValueError(f"ksize: expected odd positive sizes (or 0 with a positive sigma), got "
                         f"{ksize!r} with sigma_x={sigma_x!r}, sigma_y={sigma_y!r}")
    if max(kh, kw) >= 2**31:
        raise ValueError(f"ksize: the size made from sigma_x={sigma_x!r}, sigma_y={sigma_y!r} is "
                         f"{kh} x {kw}, expected sizes below 2**31 (a smaller sigma)")
    if not call.device:
        return call.result(_on_cpu(arr, geo, lambda a, batched: cpu.gaussian_blur(
            a, (kh, kw), (sy, sx), border, batched)), out)
    if border != "constant":  # as OpenCV: no smoothing across a one-pixel axis
        kh, kw = (1 if geo.h == 1 else kh), (1 if geo.w == 1 else kw)
    sx, sy = max(sx, 0.0), max(sy, 0.0)
    bits = spec.FIXED_BITS.get(dtype)
    table = (("gaussian", bits, kh, kw, sy, sx), lambda: _gaussian_weights(kh, kw, sy, sx, bits),
             "the Gaussian kernel's weights", "make one call with the same ksize and sigmas "
             "before the capture (its weights then stay on the device)")
    weights = _transfers.device_constant(call.xp, *table) if kh > 1 or kw > 1 else None
    extra = (weights if bits else None, None if bits else weights, np.int32(bits or 0))
    # (the plan fetches the weights at every call, at their position in the arguments)
    constants = ((_ARGS + (0 if bits else 1), *table),)
    return _launch(call, arr, geo, dtype, out, "gaussian", border, (kh, kw), (kh // 2, kw // 2),
                   extra, key, constants, copy=kh == 1 and kw == 1)


def box_filter(img, ksize, *, normalize=True, anchor=None, border="reflect101", layout="HWC",
               out=None):
    """The mean (``normalize``) or the sum of each pixel's ``ksize`` window, as
    ``cv2.boxFilter(img, -1, (kw, kh), anchor, normalize, border)``; ``cv2.blur`` is the
    normalized one.

    Parameters
    ----------
    img : as :func:`gaussian_blur`.
    ksize : int or (int, int)
        Window ``(height, width)``, any positive sizes.
    normalize : bool
        The mean (True) or the sum, saturated to the dtype (False).
    anchor : (int, int), optional
        ``(y, x)`` of the output pixel within its window; default (or -1) the center,
        ``k // 2``.
    border, layout, out : as :func:`gaussian_blur`.

    Convention
    ----------
    OpenCV's sums and rounding: uint8 means of windows of at most 256 pixels use its
    fixed point (``((sum + dd) * ds) >> 23``) and equal ``cv2.blur`` bit for bit; larger
    uint8 windows and uint16 divide as OpenCV's vector code does (``float32(sum) *
    float32(1 / area)``, rounded half to even), where OpenCV's scalar code for the last
    few elements of a row rounds in double and can differ by 1 when the quotient is within
    float32 rounding of a half; floats sum in double and equal ``cv2.boxFilter``.
    """
    if isinstance(img, (list, tuple)):
        return _each(img, out, lambda im, o: box_filter(im, ksize, normalize=normalize,
                                                        anchor=anchor, border=border,
                                                        layout=layout, out=o))
    key, native = _PLANS.replay(img, out, ("box_filter", ksize, normalize, anchor, border, layout))
    if native is not None:
        return native
    call, arr, dtype, geo, border = _image(img, layout, border)
    kh, kw = _ksize("ksize", ksize, allow_zero=False)
    if normalize is not True and normalize is not False:
        raise TypeError(f"normalize: expected True or False, got {normalize!r}")
    ay, ax = _anchor(anchor, kh, kw)
    if not call.device:
        return call.result(_on_cpu(arr, geo, lambda a, batched: cpu.box_filter(
            a, (kh, kw), normalize, border, batched, (ay, ax))), out)
    area = kh * kw
    scaled = normalize and area > 1
    ds = dd = 0
    if scaled and dtype == np.uint8 and area <= 256:  # OpenCV's ColumnSum<ushort, uchar>
        step = (1 << 23) / area
        ds, dd = math.floor(step), area // 2
        if step - ds < 0.5:
            dd += 1
        else:
            ds += 1
    extra = (np.int32(scaled), np.int32(ds), np.int32(dd), np.float32(1.0 / area),
             np.float64(1.0 / area))
    return _launch(call, arr, geo, dtype, out, "box", border, (kh, kw), (ay, ax), extra, key, ())


# --- helpers ----------------------------------------------------------------------------------
def _each(images, out, fn):
    """A list of images, one call each (``out`` None or a list of the same length)."""
    if len(images) == 0:
        raise ValueError("img: expected at least one image (pass an empty NHWC array for an "
                         "empty batch)")
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(images)):
        raise ValueError(f"out: expected a list of {len(images)} arrays for a list of images, "
                         f"got {_arrays.describe(out)}")
    return [fn(im, None if out is None else out[i]) for i, im in enumerate(images)]


def _image(img, layout, border):
    """``(call, array, dtype, layout geometry, border)`` of a filter's one image or batch."""
    call = _arrays.prepare(img, "img")
    arr = call.array
    return (call, arr, _validate.dtype_in("img", arr, spec.DTYPES), _validate.image_layout("img", arr, layout),
            _border(border))


def _border(border):
    if isinstance(border, str) and border == "wrap":
        raise ValueError("border: OpenCV's filters take no 'wrap' border; expected one of "
                         f"{list(FILTER_BORDERS)}, got 'wrap'")
    return _validate.choice("border", border, FILTER_BORDERS)


def _ksize(name, ksize, allow_zero):
    if isinstance(ksize, numbers.Integral) and not isinstance(ksize, bool):
        pair = (int(ksize), int(ksize))
    elif (isinstance(ksize, (tuple, list)) and len(ksize) == 2
          and all(isinstance(k, numbers.Integral) and not isinstance(k, bool) for k in ksize)):
        pair = (int(ksize[0]), int(ksize[1]))
    else:
        raise TypeError(f"{name}: expected an int or a (height, width) pair of ints, got {ksize!r}")
    if any(k < 0 or (k == 0 and not allow_zero) for k in pair):
        what = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name}: expected {what} sizes, got {ksize!r}")
    if max(pair) >= 2**31:  # OpenCV's Size and the kernels' sizes are int32
        raise ValueError(f"{name}: expected sizes below 2**31, got {ksize!r}")
    return pair


def _sigma(name, value):
    v = _validate.number(name, value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return v


def _anchor(anchor, kh, kw):
    if anchor is None:
        return kh // 2, kw // 2
    if (not isinstance(anchor, (tuple, list)) or len(anchor) != 2
            or not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in anchor)):
        raise TypeError(f"anchor: expected a (y, x) pair of ints, got {anchor!r}")
    ay, ax = (kh // 2 if anchor[0] == -1 else int(anchor[0])), (kw // 2 if anchor[1] == -1 else int(anchor[1]))
    if not (0 <= ay < kh and 0 <= ax < kw):
        raise ValueError(f"anchor: expected a point inside the {kh}x{kw} window of ksize (or -1), got "
                         f"{anchor!r}")
    return ay, ax


def _gaussian_weights(kh, kw, sy, sx, bits):
    """The row weights then the column weights: int32 fixed point, or float32."""
    if bits:
        return np.concatenate([cpu_filter.gaussian_fixed(kw, sx, bits),
                               cpu_filter.gaussian_fixed(kh, sy, bits)]).astype(np.int32)
    return np.concatenate([cpu_filter.gaussian_kernel(kw, sx),
                           cpu_filter.gaussian_kernel(kh, sy)]).astype(np.float32)


def _on_cpu(arr, geo, fn):
    """``fn(hwc_array, batched)`` on an image of any layout, the result in that layout."""
    if geo.channels_last or not geo.has_channels:
        return fn(arr, geo.batched)
    moved = np.moveaxis(arr, -3, -1)
    return np.ascontiguousarray(np.moveaxis(fn(moved, geo.batched), -1, -3))


_ARGS = 20  # the kernels' arguments before the filter's own (``extra``; see _launch)


def _launch(call, arr, geo, dtype, out, kind, border, ksize, anchor, extra, key, constants,
            copy=False):
    """The filter's launch into a new array or ``out``; with a plan ``key``, stored as the
    plan of the next such call (``constants``: the kept tables among ``extra``, see
    :class:`_plans.LaunchPlan`)."""
    with call.launch(), call.writing(out, arr.shape, dtype, [arr]) as (native, dst):
        if copy:  # a 1 x 1 kernel: OpenCV copies
            dst[...] = arr
            return native
        dgeo = _validate.image_layout("out", dst, "NHWC" if geo.batched and geo.channels_last else
                                      ("NCHW" if geo.batched else ("HWC" if geo.channels_last
                                                                   else "CHW")))
        if geo.channels_last and geo.c <= 4:
            cn, groups = geo.c, 1
        else:
            cn, groups = 1, geo.c  # one group per plane
        s_n, s_c, s_y, s_x = geo.strides
        d_n, d_c, d_y, d_x = dgeo.strides
        planes = geo.n * groups
        i64, i32 = np.int64, np.int32
        fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(kind, dtype, cn, border))
        (kh, kw), (ay, ax) = ksize, anchor
        args = (arr, dst, i32(groups), i32(geo.h), i32(geo.w),
                i64(s_n), i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
                i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
                i32(kh), i32(kw), i32(ay), i32(ax), i32(planes)) + tuple(extra)
        shape = launch_3d(fn, planes, geo.h, geo.w, args)
        if shape is not None and key is not None and _plans.unstaged((arr,), out):
            _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, 1), dst.shape, dst.dtype,
                                              constants=constants))
    return native
