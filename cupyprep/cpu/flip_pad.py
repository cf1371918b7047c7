"""flip, rotate90 and pad on the CPU: cv2.flip, cv2.rotate and cv2.copyMakeBorder
themselves, image by image (and plane by plane for channel-first layouts)."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module

_FLIP_CODE = {"horizontal": 1, "vertical": 0, "both": -1}
# k quarter turns counter-clockwise (np.rot90's direction) -> cv2.rotate's code
_ROTATE_CODE = {1: "ROTATE_90_COUNTERCLOCKWISE", 2: "ROTATE_180", 3: "ROTATE_90_CLOCKWISE"}
_CV2_BORDER = {"constant": "BORDER_CONSTANT", "replicate": "BORDER_REPLICATE",
               "reflect": "BORDER_REFLECT", "reflect101": "BORDER_REFLECT_101",
               "wrap": "BORDER_WRAP"}


def _planes(img, geometry, shape, fn, max_channels=None):
    """``fn`` on every HW / HWC image of ``img`` (and every plane of a channel-first one, or
    of an HWC one with more than ``max_channels``), into a new array of ``shape``;
    ``fn(image, channel)`` gets the plane's channel index (None for an HWC image)."""
    out = np.empty(shape, img.dtype)
    if not geometry.has_channels:
        out[...] = fn(img, None)
        return out
    images = img if geometry.batched else img[None]
    dst = out if geometry.batched else out[None]
    whole = geometry.channels_last and (max_channels is None or geometry.c <= max_channels)
    for n in range(images.shape[0]):
        if whole:
            res = fn(images[n], None)
            dst[n] = res.reshape(dst[n].shape)  # OpenCV returns one channel as HW
        elif geometry.channels_last:
            for c in range(geometry.c):
                dst[n, ..., c] = fn(images[n, ..., c], c)
        else:
            for c in range(geometry.c):
                dst[n, c] = fn(images[n, c], c)
    return out


def flip(img, direction, geometry):
    """``cv2.flip``: "horizontal" (flipCode 1), "vertical" (0) or "both" (-1)."""
    cv2 = cv2_module()
    code = _FLIP_CODE[direction]
    return _planes(img, geometry, img.shape, lambda a, _: cv2.flip(np.ascontiguousarray(a), code))


def rotate90(img, k, geometry):
    """``k`` (0 to 3) quarter turns counter-clockwise, as ``np.rot90``: ``cv2.rotate``."""
    cv2 = cv2_module()
    if k == 0:
        return img.copy()
    h, w = (geometry.h, geometry.w) if k == 2 else (geometry.w, geometry.h)
    code = getattr(cv2, _ROTATE_CODE[k])
    # cv2.rotate transposes pixels of 1, 2, 3, 4, 6, 8, 12, 16, 24 or 32 bytes only: more
    # than 4 channels go plane by plane
    return _planes(img, geometry, geometry.shape(h, w),
                   lambda a, _: cv2.rotate(np.ascontiguousarray(a), code), max_channels=4)


def pad(img, sides, border_mode, value, geometry):
    """``cv2.copyMakeBorder`` with ``sides`` (top, bottom, left, right); ``value`` one
    float per channel (used by "constant")."""
    cv2 = cv2_module()
    top, bottom, left, right = sides
    border = getattr(cv2, _CV2_BORDER[border_mode])

    def one(a, channel):
        if channel is not None:
            v = (value[channel],) * 4
        elif len(value) > 4:
            v = (value[0],) * 4  # OpenCV takes more than 4 channels only with one value
        else:
            v = tuple(value) + (0.0,) * (4 - len(value))
        return cv2.copyMakeBorder(np.ascontiguousarray(a), top, bottom, left, right, border, value=v)

    shape = geometry.shape(geometry.h + top + bottom, geometry.w + left + right)
    return _planes(img, geometry, shape, one)
