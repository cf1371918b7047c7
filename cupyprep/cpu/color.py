"""Color conversions on the CPU: cv2.cvtColor itself."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module, without_ipp


def swap_rb(img):
    """BGR <-> RGB (and BGRA <-> RGBA) on HWC or NHWC arrays."""
    order = [2, 1, 0] + list(range(3, img.shape[-1]))
    return np.ascontiguousarray(img[..., order])


def to_gray(img, order):
    """HWC or NHWC with 3 or 4 channels in ``order`` ("bgr"/"rgb") to HW or NHW."""
    cv2 = cv2_module()
    code = {("bgr", 3): cv2.COLOR_BGR2GRAY, ("rgb", 3): cv2.COLOR_RGB2GRAY,
            ("bgr", 4): cv2.COLOR_BGRA2GRAY, ("rgb", 4): cv2.COLOR_RGBA2GRAY}[(order, img.shape[-1])]
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    with without_ipp(cv2):  # IPP's float32 gray differs by an ulp
        if src.ndim == 4:
            res = np.stack([cv2.cvtColor(np.ascontiguousarray(i), code) for i in src]) if len(src) else \
                np.empty(src.shape[:3], src.dtype)
        else:
            res = cv2.cvtColor(np.ascontiguousarray(src), code)
    return res.astype(img.dtype, copy=False)
