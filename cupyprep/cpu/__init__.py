"""The CPU backend: the same ops with the same semantics, on NumPy arrays.

OpenCV computes every op it has (so CPU results are OpenCV's by construction), with Intel
IPP off for the call (``without_ipp``): the kernels reproduce OpenCV's own code; NumPy
computes the rest (normalization, NMS, ...). The kernels are tested against this backend.
"""
from __future__ import annotations

from ._cv2 import cv2_module, without_ipp
from .antialias import resize_antialias
from .color import cvt_color, opencv_hsv_block, swap_rb, to_gray
from .crop import crop
from .filter import box_filter, gaussian_blur
from .flip_pad import flip, pad, rotate90
from .geometry import resize
from .normalize import normalize
from .photometric import color_jitter, hsv_gain, hsv_gains, jitter_params
from .preprocess import preprocess

__all__ = ["cv2_module", "without_ipp", "resize", "resize_antialias", "normalize", "preprocess", "swap_rb",
           "to_gray", "cvt_color", "opencv_hsv_block", "hsv_gain", "hsv_gains", "color_jitter", "jitter_params", "flip", "rotate90",
           "pad", "crop", "gaussian_blur", "box_filter"]
