"""The CPU backend: the same ops with the same semantics, on NumPy arrays.

OpenCV computes every op it has (so CPU results are OpenCV's by construction), with Intel
IPP off for the call (``without_ipp``): the kernels reproduce OpenCV's own code; NumPy
computes the rest (normalization, NMS, ...). The kernels are tested against this backend.
"""
from __future__ import annotations

from ._cv2 import cv2_module, without_ipp
from .color import swap_rb, to_gray
from .geometry import resize
from .normalize import normalize
from .preprocess import preprocess

__all__ = ["cv2_module", "without_ipp", "resize", "normalize", "preprocess", "swap_rb", "to_gray"]
