"""OpenCV-signature wrappers, so existing code runs on CuPy arrays unchanged::

    from cupyprep import cv2compat as cv2
    small = cv2.resize(frame_gpu, (640, 360), interpolation=cv2.INTER_AREA)
    rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)

Sizes are OpenCV's ``(width, height)`` here. NumPy inputs go to OpenCV itself (its own code,
Intel IPP off for the call, as the whole CPU backend: docs/exactness.md); CuPy and
torch CUDA inputs run the kernels, with OpenCV's semantics.
"""
from __future__ import annotations

import numbers

from . import _arrays
from ._resizing import resize_images
from ._specs.warp import BORDER_MODES as _BORDER_MODES
from ._warping import warp_images
from .color import cvt_color as _cvt_color
from .color import swap_rb as _swap_rb
from .color import to_gray as _to_gray
from .cpu import cv2_module, without_ipp
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
    ``round(width * fx)`` by ``round(height * fy)`` and the sampling step is ``1 / fx``)."""
    if interpolation not in _INTERPOLATION:
        raise ValueError(
            f"interpolation: expected one of INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, "
            f"INTER_AREA, got {interpolation!r}"
        )
    call = _arrays.prepare(src, "src")
    arr = call.array
    if arr.ndim not in (2, 3):
        raise ValueError(f"src: expected a 2-D or 3-D image, got {_arrays.describe(arr)}")
    if not call.device:
        cv2 = cv2_module()
        with without_ipp(cv2):  # OpenCV's own code, as the kernels (docs/exactness.md)
            res = cv2.resize(arr, dsize, fx=fx, fy=fy, interpolation=interpolation)
        return call.result(res, dst)
    h, w = arr.shape[:2]
    scale = None
    if dsize is None or tuple(dsize) == (0, 0):
        if not (fx > 0 and fy > 0):
            raise ValueError(f"fx, fy: expected positive scale factors with no dsize, got {fx}, {fy}")
        size = (_round_half_even(h * fy), _round_half_even(w * fx))
        scale = (1.0 / fy, 1.0 / fx)
    else:
        if len(dsize) != 2:
            raise TypeError(f"dsize: expected (width, height), got {dsize!r}")
        size = (dsize[1], dsize[0])
    return resize_images(src, size, _INTERPOLATION[interpolation], "HWC", dst, scale=scale)


def _round_half_even(v):
    # saturate_cast<int>(double) rounds half to even, like Python's round
    return int(round(v))


def cvtColor(src, code, dst=None):
    """``cv2.cvtColor`` for BGR <-> RGB (and the 4-channel variants), to gray, and BGR / RGB
    <-> HSV (``_FULL`` too) and YCrCb (:func:`cupyprep.cvt_color`; a 3-channel result).
    NumPy inputs of the HSV and YCrCb codes run OpenCV's own code with IPP off (IPP's
    ``HSV2BGR_FULL`` differs from it by 1)."""
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
    interp = flags & ~WARP_INVERSE_MAP
    if interp not in _WARP_INTERPOLATION:
        raise ValueError(f"flags: expected INTER_NEAREST, INTER_LINEAR or INTER_CUBIC, optionally "
                         f"| WARP_INVERSE_MAP, got {flags!r}")
    if borderMode not in _BORDER:
        raise ValueError(f"borderMode: expected BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, "
                         f"BORDER_REFLECT_101 or BORDER_WRAP, got {borderMode!r}")
    if dsize is None or len(dsize) != 2:
        raise TypeError(f"dsize: expected (width, height), got {dsize!r}")
    shape = getattr(src, "shape", ())
    if len(shape) not in (2, 3):
        raise ValueError(f"src: expected a 2-D or 3-D image, got {_arrays.describe(src)}")
    c = shape[2] if len(shape) == 3 else 1
    # OpenCV's Scalar: a number v is (v, 0, 0, 0), a sequence is padded with zeros
    if borderValue is None:
        borderValue = 0.0
    values = (borderValue,) if isinstance(borderValue, numbers.Real) else list(borderValue)[:4]
    value = (tuple(float(v) for v in values) + (0.0,) * 4)[:c]
    return warp_images(src, M, (dsize[1], dsize[0]), _WARP_INTERPOLATION[interp],
                       _BORDER[borderMode], value, bool(flags & WARP_INVERSE_MAP), dst, perspective)


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
    if rotateCode not in _ROTATE_TURNS or isinstance(rotateCode, bool):
        raise ValueError(f"rotateCode: expected ROTATE_90_CLOCKWISE, ROTATE_180 or "
                         f"ROTATE_90_COUNTERCLOCKWISE, got {rotateCode!r}")
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
    if value is None:
        value = 0.0
    values = (value,) if isinstance(value, numbers.Real) else list(value)[:4]
    scalar = (tuple(float(v) for v in values) + (0.0,) * 4)[:4]
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
    if borderType not in _FILTER_BORDER:
        raise ValueError(f"borderType: expected BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT "
                         f"or BORDER_REFLECT_101 (OpenCV's filters take no BORDER_WRAP), got "
                         f"{borderType!r}")
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
    if ddepth != -1:
        raise ValueError(f"ddepth: expected -1 (the source's depth; other output depths are not "
                         f"supported), got {ddepth!r}")
    if not isinstance(anchor, (tuple, list)) or len(anchor) != 2:
        raise TypeError(f"anchor: expected (x, y), got {anchor!r}")
    return _box_filter(src, _filter_ksize(ksize), normalize=bool(normalize),
                       anchor=(anchor[1], anchor[0]), border=_filter_border(borderType), out=dst)


def blur(src, ksize, dst=None, anchor=(-1, -1), borderType=BORDER_DEFAULT):
    """``cv2.blur``: the normalized :func:`boxFilter`."""
    return boxFilter(src, -1, ksize, dst, anchor, True, borderType)
