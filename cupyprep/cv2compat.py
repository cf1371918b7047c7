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
from .color import swap_rb as _swap_rb
from .color import to_gray as _to_gray
from .cpu import cv2_module, without_ipp
from ._resizing import resize_images
from ._specs.warp import BORDER_MODES as _BORDER_MODES
from ._warping import warp_images

__all__ = [
    "resize", "cvtColor", "warpAffine", "warpPerspective",
    "WARP_INVERSE_MAP", "BORDER_CONSTANT", "BORDER_REPLICATE", "BORDER_REFLECT",
    "BORDER_REFLECT_101", "BORDER_REFLECT101", "BORDER_DEFAULT", "BORDER_WRAP",
    "INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC", "INTER_AREA",
    "COLOR_BGR2RGB", "COLOR_RGB2BGR", "COLOR_BGRA2RGBA", "COLOR_RGBA2BGRA",
    "COLOR_BGR2GRAY", "COLOR_RGB2GRAY", "COLOR_BGRA2GRAY", "COLOR_RGBA2GRAY",
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

COLOR_BGR2RGB = 4
COLOR_RGB2BGR = 4
COLOR_BGRA2RGBA = 5
COLOR_RGBA2BGRA = 5
COLOR_BGR2GRAY = 6
COLOR_RGB2GRAY = 7
COLOR_BGRA2GRAY = 10
COLOR_RGBA2GRAY = 11

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
    """``cv2.cvtColor`` for BGR <-> RGB (and the 4-channel variants) and to gray."""
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
        f"code: expected COLOR_BGR2RGB, COLOR_RGB2BGR, COLOR_BGRA2RGBA, COLOR_RGBA2BGRA or a "
        f"*2GRAY code, got {code!r}"
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
