"""Color conversions on the CPU: cv2.cvtColor itself."""
from __future__ import annotations

import functools

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


# cvt_color's codes -> OpenCV's names
_CVT_NAMES = {
    "bgr2hsv": "BGR2HSV", "rgb2hsv": "RGB2HSV", "bgr2hsv_full": "BGR2HSV_FULL",
    "rgb2hsv_full": "RGB2HSV_FULL", "hsv2bgr": "HSV2BGR", "hsv2rgb": "HSV2RGB",
    "hsv2bgr_full": "HSV2BGR_FULL", "hsv2rgb_full": "HSV2RGB_FULL", "bgr2ycrcb": "BGR2YCrCb",
    "rgb2ycrcb": "RGB2YCrCb", "ycrcb2bgr": "YCrCb2BGR", "ycrcb2rgb": "YCrCb2RGB",
}


def cvt_color(img, code):
    """``cv2.cvtColor`` (OpenCV's own code, IPP off: IPP's HSV -> BGR _FULL differs by 1)
    of an HWC image or each image of an NHWC batch; ``code`` as cupyprep.cvt_color's."""
    cv2 = cv2_module()
    flag = getattr(cv2, "COLOR_" + _CVT_NAMES[code])
    with without_ipp(cv2):
        if img.ndim == 3:
            return cv2.cvtColor(np.ascontiguousarray(img), flag)
        out = np.empty(img.shape[:3] + (3,), img.dtype)
        for i, one in enumerate(img):
            out[i] = cv2.cvtColor(np.ascontiguousarray(one), flag)
        return out


@functools.cache
def opencv_hsv_block():
    """The block of pixels OpenCV's uint8 HSV -> BGR converts with vector code on this CPU
    (the rest of a row takes scalar code, which rounds where the vector code truncates):
    found by converting rows of a pixel on which the two differ (0: no vector code)."""
    cv2 = cv2_module()
    px = np.array([0, 1, 1], np.uint8)  # vector code: (0, 0, 1); scalar code: (1, 1, 1)
    with without_ipp(cv2):
        for block in (4, 8, 16, 32, 64, 128):  # a row of one block: vector code
            row = cv2.cvtColor(np.tile(px, (1, block, 1)), cv2.COLOR_HSV2BGR)
            if row[0, 0, 0] == 0:
                return block
    return 0
