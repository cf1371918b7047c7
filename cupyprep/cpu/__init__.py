"""The CPU backend: the same ops with the same semantics, on NumPy arrays.

OpenCV computes every op it has (so CPU results are OpenCV's by construction); NumPy
computes the rest (normalization, NMS, ...). The kernels are tested against this backend.
"""
from __future__ import annotations

from ._cv2 import cv2_module
from .antialias import resize_antialias
from .color import swap_rb, to_gray
from .filter import box_filter, gaussian_blur
from .geometry import resize
from .normalize import normalize
from .preprocess import preprocess

__all__ = ["cv2_module", "resize", "resize_antialias", "normalize", "preprocess", "swap_rb", "to_gray",
           "gaussian_blur", "box_filter"]
