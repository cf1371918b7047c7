"""OpenCV-signature wrappers, so existing code runs on CuPy arrays unchanged::

    from cupyprep import cv2compat as cv2
    small = cv2.resize(frame_gpu, (640, 360), interpolation=cv2.INTER_AREA)
    rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)

Sizes are OpenCV's ``(width, height)`` here. NumPy inputs go to OpenCV itself (its own code,
Intel IPP off for the call, as the whole CPU backend: docs/exactness.md); CuPy and
torch CUDA inputs run the kernels, with OpenCV's semantics.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _arrays, _validate
from ._resizing import resize_images
from ._specs.resize import DTYPES as _RESIZE_DTYPES
from ._specs.warp import BORDER_MODES as _BORDER_MODES
from ._warping import warp_images
from .color import cvt_color as _cvt_color
from .color import swap_rb as _swap_rb
from .color import to_gray as _to_gray
from .filter import box_filter as _box_filter
from .filter import gaussian_blur as _gaussian_blur
from .flip_pad import flip as _flip
from .flip_pad import pad as _pad
from .flip_pad import rotate90 as _rotate90

__all__ = [
    "resize", "cvtColor", "warpAffine", "warpPerspective", "flip", "rotate", "copyMakeBorder",
    "ROTATE_90_CLOCKWISE", "ROTATE_180", "ROTATE_90_COUNTERCLOCKWISE", "BORDER_ISOLATED",
    "GaussianBlur", "blur", "boxFilter",
    "WARP_INVERSE_MAP", "BORDER_CONSTANT", "BORDER_REPLICATE", "BORDER_REFLECT",
    "BORDER_REFLECT_101", "BORDER_REFLECT101", "BORDER_DEFAULT", "BORDER_WRAP",
    "INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC", "INTER_AREA",
    "COLOR_BGR2RGB", "COLOR_RGB2BGR", "COLOR_BGRA2RGBA", "COLOR_RGBA2BGRA",
    "COLOR_BGR2GRAY", "COLOR_RGB2GRAY", "COLOR_BGRA2GRAY", "COLOR_RGBA2GRAY",
    "COLOR_BGR2HSV", "COLOR_RGB2HSV", "COLOR_BGR2HSV_FULL", "COLOR_RGB2HSV_FULL",
    "COLOR_HSV2BGR", "COLOR_HSV2RGB", "COLOR_HSV2BGR_FULL", "COLOR_HSV2RGB_FULL",
    "COLOR_BGR2YCrCb", "COLOR_RGB2YCrCb", "COLOR_YCrCb2BGR", "COLOR_YCrCb2RGB",
]

# OpenCV's values, so flags computed elsewhere (or taken from cv2 itself) work here.
INTER_NEAREST = 0
INTER_LINEAR = 1
INTER_CUBIC = 2
INTER_AREA = 3

WARP_INVERSE_MAP = 16
BORDER_CONSTANT = 0
BORDER_REPLICATE = 1
BORDER_REFLECT = 2
BORDER_WRAP = 3
BORDER_REFLECT_101 = 4
BORDER_REFLECT101 = 4
BORDER_DEFAULT = 4
BORDER_ISOLATED = 16

ROTATE_90_CLOCKWISE = 0
ROTATE_180 = 1
ROTATE_90_COUNTERCLOCKWISE = 2

COLOR_BGR2RGB = 4
COLOR_RGB2BGR = 4
COLOR_BGRA2RGBA = 5
COLOR_RGBA2BGRA = 5
COLOR_BGR2GRAY = 6
COLOR_RGB2GRAY = 7
COLOR_BGRA2GRAY = 10
COLOR_RGBA2GRAY = 11
COLOR_BGR2YCrCb = 36
COLOR_RGB2YCrCb = 37
COLOR_YCrCb2BGR = 38
COLOR_YCrCb2RGB = 39
COLOR_BGR2HSV = 40
COLOR_RGB2HSV = 41
COLOR_HSV2BGR = 54
COLOR_HSV2RGB = 55
COLOR_BGR2HSV_FULL = 66
COLOR_RGB2HSV_FULL = 67
COLOR_HSV2BGR_FULL = 70
COLOR_HSV2RGB_FULL = 71

# cupyprep.cvt_color's code of each OpenCV code it serves
_CVT_CODES = {
    COLOR_BGR2YCrCb: "bgr2ycrcb", COLOR_RGB2YCrCb: "rgb2ycrcb", COLOR_YCrCb2BGR: "ycrcb2bgr",
    COLOR_YCrCb2RGB: "ycrcb2rgb", COLOR_BGR2HSV: "bgr2hsv", COLOR_RGB2HSV: "rgb2hsv",
    COLOR_HSV2BGR: "hsv2bgr", COLOR_HSV2RGB: "hsv2rgb", COLOR_BGR2HSV_FULL: "bgr2hsv_full",
    COLOR_RGB2HSV_FULL: "rgb2hsv_full", COLOR_HSV2BGR_FULL: "hsv2bgr_full",
    COLOR_HSV2RGB_FULL: "hsv2rgb_full",
}

_INTERPOLATION = {INTER_NEAREST: "nearest", INTER_LINEAR: "linear", INTER_CUBIC: "cubic",
                  INTER_AREA: "area"}


def resize(src, dsize, dst=None, fx=0, fy=0, interpolation=INTER_LINEAR):
    """``cv2.resize``: ``dsize`` is ``(width, height)``; or ``dsize=None`` / ``(0, 0)``
    with scale factors ``fx``, ``fy`` (then, as in OpenCV, the output size is
    ``round(width * fx)`` by ``round(height * fy)`` and the sampling step is ``1 / fx``).
    The dtypes and results are :func:`cupyprep.resize`'s on both sides (OpenCV's own code,
    IPP off, for NumPy input), and an ``HxWx1`` image gives ``h x w x 1`` (``cv2.resize``
    drops that axis)."""
    interpolation = _flag("interpolation", interpolation, _INTERPOLATION,
                          "one of INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA")
    size = _dsize(dsize, allow_empty=True)
    fx, fy = _number("fx", fx), _number("fy", fy)
    call = _arrays.prepare(src, "src")
    arr = call.array
    if arr.ndim not in (2, 3):
        raise ValueError(f"src: expected a 2-D or 3-D image, got {_arrays.describe(arr)}")
    _validate.dtype_in("src", arr, _RESIZE_DTYPES)
    inv_scale = None
    if size is None:
        if not (0 < fx < math.inf and 0 < fy < math.inf):
            raise ValueError(f"fx, fy: expected positive finite scale factors with no dsize, got {fx}, {fy}")
        h, w = arr.shape[:2]
        size = (_round_half_even(h * fy), _round_half_even(w * fx))
        if not all(0 < v < 2**31 for v in size):
            raise ValueError(f"fx, fy: the output size of a {h} x {w} image would be {size[0]} x "
                             f"{size[1]}, expected sides from 1 to 2**31 - 1")
        inv_scale = (fy, fx)
    return resize_images(src, size, _INTERPOLATION[interpolation], "HWC", dst, inv_scale=inv_scale)


def _round_half_even(v):
    # saturate_cast<int>(double) rounds half to even, like Python's round
    return int(round(v))


# --- OpenCV's argument forms --------------------------------------------------------------------
def _flag(name, value, allowed, what):
    """An OpenCV flag: an int among ``allowed``; a TypeError / ValueError naming ``name`` and
    ``what`` else."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name}: expected {what} (an int), got {value!r}")
    if int(value) not in allowed:
        raise ValueError(f"{name}: expected {what}, got {value!r}")
    return int(value)


def _number(name, value):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    return float(value)


def _dsize(dsize, allow_empty=False):
    """OpenCV's ``(width, height)`` as ``(height, width)``; None for an empty one (None or
    (0, 0)) where ``allow_empty``."""
    if dsize is None and allow_empty:
        return None
    if (not isinstance(dsize, (tuple, list)) or len(dsize) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in dsize)):
        raise TypeError(f"dsize: expected (width, height) ints, got {dsize!r}")
    w, h = int(dsize[0]), int(dsize[1])
    if allow_empty and w == 0 and h == 0:
        return None
    if not (0 < w < 2**31 and 0 < h < 2**31):
        raise ValueError(f"dsize: expected a positive width and height below 2**31, got {dsize!r}")
    return h, w


def _scalar(name, value):
    """OpenCV's Scalar: a number v is ``(v, 0, 0, 0)``, a sequence of up to 4 numbers is
    padded with zeros; None is zeros."""
    if value is None:
        return (0.0,) * 4
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        values = [float(value)]
    else:
        a = _validate.as_numbers(name, value)
        if a.dtype == np.bool_ or a.ndim != 1 or not 1 <= a.size <= 4:
            raise ValueError(f"{name}: expected a number or up to 4 numbers (OpenCV's Scalar), got "
                             f"{value!r}")
        values = [float(v) for v in a]
    return tuple(values + [0.0] * (4 - len(values)))


def cvtColor(src, code, dst=None):
    """``cv2.cvtColor`` for BGR <-> RGB (and the 4-channel variants), to gray, and BGR / RGB
    <-> HSV (``_FULL`` too) and YCrCb (:func:`cupyprep.cvt_color`; a 3-channel result).
    NumPy inputs of the HSV and YCrCb codes run OpenCV's own code with IPP off (IPP's
    ``HSV2BGR_FULL`` differs from it by 1)."""
    if not isinstance(code, numbers.Integral) or isinstance(code, bool):
        raise TypeError(f"code: expected an OpenCV color code (an int such as COLOR_BGR2RGB), got {code!r}")
    if code in _CVT_CODES:
        return _cvt_color(src, _CVT_CODES[code], out=dst)
    if code in (COLOR_BGR2RGB, COLOR_BGRA2RGBA):
        return _swap_rb(src, out=dst)
    if code in (COLOR_BGR2GRAY, COLOR_RGB2GRAY, COLOR_BGRA2GRAY, COLOR_RGBA2GRAY):
        channels = 4 if code in (COLOR_BGRA2GRAY, COLOR_RGBA2GRAY) else 3
        shape = getattr(src, "shape", ())
        if len(shape) != 3 or shape[-1] != channels:
            raise ValueError(
                f"src: color code {code} expects an HWC image with {channels} channels, "
                f"got {_arrays.describe(src)}"
            )
        order = "bgr" if code in (COLOR_BGR2GRAY, COLOR_BGRA2GRAY) else "rgb"
        return _to_gray(src, order=order, out=dst)
    raise ValueError(
        f"code: expected COLOR_BGR2RGB, COLOR_RGB2BGR, COLOR_BGRA2RGBA, COLOR_RGBA2BGRA, a "
        f"*2GRAY code, or a BGR / RGB <-> HSV (_FULL) or YCrCb code, got {code!r}"
    )


_BORDER = {BORDER_CONSTANT: "constant", BORDER_REPLICATE: "replicate",
           BORDER_REFLECT: "reflect", BORDER_REFLECT_101: "reflect101", BORDER_WRAP: "wrap"}
_WARP_INTERPOLATION = {INTER_NEAREST: "nearest", INTER_LINEAR: "linear", INTER_CUBIC: "cubic"}
assert set(_BORDER.values()) == set(_BORDER_MODES)


def _warp_call(src, M, dsize, dst, flags, borderMode, borderValue, perspective):
    if not isinstance(flags, numbers.Integral) or isinstance(flags, bool):
        raise TypeError(f"flags: expected an int (INTER_NEAREST, INTER_LINEAR or INTER_CUBIC, "
                        f"optionally | WARP_INVERSE_MAP), got {flags!r}")
    if (flags & ~WARP_INVERSE_MAP) not in _WARP_INTERPOLATION:
        raise ValueError(f"flags: expected INTER_NEAREST, INTER_LINEAR or INTER_CUBIC, optionally "
                         f"| WARP_INVERSE_MAP, got {flags!r}")
    interp = flags & ~WARP_INVERSE_MAP
    borderMode = _flag("borderMode", borderMode, _BORDER, "BORDER_CONSTANT, BORDER_REPLICATE, "
                       "BORDER_REFLECT, BORDER_REFLECT_101 or BORDER_WRAP")
    size = _dsize(dsize)
    shape = getattr(src, "shape", ())
    if len(shape) not in (2, 3):
        raise ValueError(f"src: expected a 2-D or 3-D image, got {_arrays.describe(src)}")
    c = shape[2] if len(shape) == 3 else 1
    value = _scalar("borderValue", borderValue)[:c]
    return warp_images(src, M, size, _WARP_INTERPOLATION[interp], _BORDER[borderMode], value,
                       bool(flags & WARP_INVERSE_MAP), dst, perspective)


def warpAffine(src, M, dsize, dst=None, flags=INTER_LINEAR, borderMode=BORDER_CONSTANT,
               borderValue=0):
    """``cv2.warpAffine``: ``dsize`` is ``(width, height)``; ``flags`` an interpolation,
    optionally ``| WARP_INVERSE_MAP``; ``borderValue`` a number or OpenCV's 4-tuple."""
    return _warp_call(src, M, dsize, dst, flags, borderMode, borderValue, False)


def warpPerspective(src, M, dsize, dst=None, flags=INTER_LINEAR, borderMode=BORDER_CONSTANT,
                    borderValue=0):
    """``cv2.warpPerspective``, as :func:`warpAffine` with a (3, 3) matrix."""
    return _warp_call(src, M, dsize, dst, flags, borderMode, borderValue, True)


def flip(src, flipCode, dst=None):
    """``cv2.flip``: ``flipCode`` > 0 mirrors left and right, 0 top and bottom, < 0 both."""
    if not isinstance(flipCode, numbers.Integral) or isinstance(flipCode, bool):
        raise TypeError(f"flipCode: expected an int (> 0, 0 or < 0), got {flipCode!r}")
    direction = "horizontal" if flipCode > 0 else ("vertical" if flipCode == 0 else "both")
    return _flip(src, direction, out=dst)


# cv2.rotate's codes -> quarter turns counter-clockwise
_ROTATE_TURNS = {ROTATE_90_CLOCKWISE: 3, ROTATE_180: 2, ROTATE_90_COUNTERCLOCKWISE: 1}


def rotate(src, rotateCode, dst=None):
    """``cv2.rotate`` with ``ROTATE_90_CLOCKWISE``, ``ROTATE_180`` or
    ``ROTATE_90_COUNTERCLOCKWISE``."""
    rotateCode = _flag("rotateCode", rotateCode, _ROTATE_TURNS,
                       "ROTATE_90_CLOCKWISE, ROTATE_180 or ROTATE_90_COUNTERCLOCKWISE")
    return _rotate90(src, _ROTATE_TURNS[rotateCode], out=dst)


def copyMakeBorder(src, top, bottom, left, right, borderType, dst=None, value=None):
    """``cv2.copyMakeBorder``; ``value`` a number or OpenCV's 4-tuple (a number v is
    ``(v, 0, 0, 0)``, as OpenCV's Scalar). ``BORDER_ISOLATED`` may be or-ed in: arrays here
    have no parent image to read past their edge."""
    mode = borderType & ~BORDER_ISOLATED if isinstance(borderType, numbers.Integral) else None
    if mode not in _BORDER or isinstance(borderType, bool):
        raise ValueError(f"borderType: expected BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, "
                         f"BORDER_REFLECT_101 or BORDER_WRAP, got {borderType!r}")
    shape = getattr(src, "shape", ())
    if len(shape) not in (2, 3):
        raise ValueError(f"src: expected a 2-D or 3-D image, got {_arrays.describe(src)}")
    c = shape[2] if len(shape) == 3 else 1
    scalar = _scalar("value", value)
    if c > 4:  # OpenCV: all four of the Scalar's values equal, then used for every channel
        if len(set(scalar)) > 1:
            raise ValueError(f"value: expected one value for an image of {c} channels, got {value!r}")
        fill = scalar[0]
    else:
        fill = scalar[:c]
    return _pad(src, (top, bottom, left, right), border_mode=_BORDER[mode], value=fill, out=dst)


# --- smoothing filters -------------------------------------------------------------------------
_FILTER_BORDER = {BORDER_CONSTANT: "constant", BORDER_REPLICATE: "replicate",
                  BORDER_REFLECT: "reflect", BORDER_REFLECT_101: "reflect101"}


def _filter_border(borderType):
    borderType = _flag("borderType", borderType, _FILTER_BORDER, "BORDER_CONSTANT, BORDER_REPLICATE, "
                       "BORDER_REFLECT or BORDER_REFLECT_101 (OpenCV's filters take no BORDER_WRAP)")
    return _FILTER_BORDER[borderType]


def _filter_ksize(ksize):
    if not isinstance(ksize, (tuple, list)) or len(ksize) != 2:
        raise TypeError(f"ksize: expected (width, height), got {ksize!r}")
    return (ksize[1], ksize[0])


def GaussianBlur(src, ksize, sigmaX, dst=None, sigmaY=0, borderType=BORDER_DEFAULT):
    """``cv2.GaussianBlur``: ``ksize`` is ``(width, height)``."""
    return _gaussian_blur(src, _filter_ksize(ksize), sigmaX, sigmaY,
                          border=_filter_border(borderType), out=dst)


def boxFilter(src, ddepth, ksize, dst=None, anchor=(-1, -1), normalize=True,
              borderType=BORDER_DEFAULT):
    """``cv2.boxFilter`` with ``ddepth=-1`` (the source's depth): ``ksize`` is ``(width,
    height)`` and ``anchor`` ``(x, y)``."""
    if not isinstance(ddepth, numbers.Integral) or isinstance(ddepth, bool):
        raise TypeError(f"ddepth: expected -1 (an int), got {ddepth!r}")
    if ddepth != -1:
        raise ValueError(f"ddepth: expected -1 (the source's depth; other output depths are not "
                         f"supported), got {ddepth!r}")
    if not isinstance(anchor, (tuple, list)) or len(anchor) != 2:
        raise TypeError(f"anchor: expected (x, y), got {anchor!r}")
    return _box_filter(src, _filter_ksize(ksize), normalize=_validate.flag("normalize", normalize),
                       anchor=(anchor[1], anchor[0]), border=_filter_border(borderType), out=dst)


def blur(src, ksize, dst=None, anchor=(-1, -1), borderType=BORDER_DEFAULT):
    """``cv2.blur``: the normalized :func:`boxFilter`."""
    return boxFilter(src, -1, ksize, dst, anchor, True, borderType)
