"""crop on the CPU: each box's integer bounds, then cv2.resize of that slice."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module, without_ipp

_CV2_INTERPOLATION = {"nearest": "INTER_NEAREST", "linear": "INTER_LINEAR", "cubic": "INTER_CUBIC"}
_FAR = np.float32(2.0 ** 30)


def box_bounds(coords, h, w):
    """Integer pixel bounds ``(x1, y1, x2, y2)`` of float32 box coordinates in an ``h`` x
    ``w`` image: ``x1 = clamp(rint(x1), 0, w - 1)``, ``x2 = clamp(rint(x2), x1 + 1, w)`` (y
    alike), rint rounding half to even, NaN counting as -infinity."""
    v = np.asarray(coords, np.float32)
    v = np.where(np.isnan(v), -_FAR, np.clip(v, -_FAR, _FAR))
    x1, y1, x2, y2 = (int(t) for t in np.rint(v))
    x1 = min(max(x1, 0), w - 1)
    y1 = min(max(y1, 0), h - 1)
    x2 = min(max(x2, x1 + 1), w)
    y2 = min(max(y2, y1 + 1), h)
    return x1, y1, x2, y2


def image_index(value, count):
    """A box's image index as the kernel reads it (a float32): the int, or None where it is
    not an integer in [0, count)."""
    f = np.float32(value)
    if not (f >= 0 and f < count and f == np.floor(f)):
        return None
    return int(f)


def crop(images, boxes, interpolation, with_index, out):
    """``images`` a sequence of HW / HWC arrays; ``boxes`` (K, 5) float32 rows (image, x1,
    y1, x2, y2) with ``with_index``, else (K, 4) of image 0; crop k written into ``out[k]``
    ((K, H, W[, C])), zeros where the image index is not one of ``images``."""
    cv2 = cv2_module()
    flag = getattr(cv2, _CV2_INTERPOLATION[interpolation])
    dh, dw = out.shape[1:3]
    with without_ipp(cv2):  # OpenCV's own arithmetic, which the kernels reproduce
        for k, row in enumerate(np.asarray(boxes, np.float32)):
            n = image_index(row[0], len(images)) if with_index else 0
            if n is None:
                out[k] = 0
                continue
            img = images[n]
            x1, y1, x2, y2 = box_bounds(row[1:] if with_index else row, *img.shape[:2])
            part = np.ascontiguousarray(img[y1:y2, x1:x2])
            if part.dtype == np.float16:  # no float16 resize in OpenCV: float32, rounded once
                part = part.astype(np.float32)
            res = cv2.resize(part, (dw, dh), interpolation=flag)
            out[k] = res.reshape(out.shape[1:]).astype(out.dtype, copy=False)
    return out
