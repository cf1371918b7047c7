"""Image decoding on the CPU: ``cv2.imdecode`` itself, with ``cv2.imread``'s defaults.

``color="bgr"`` is ``IMREAD_COLOR`` (3 channels; gray images replicated, alpha dropped,
16-bit samples reduced to their high byte, CMYK converted, EXIF orientation applied);
``"rgb"`` the same with the channels swapped; ``"gray"`` is ``IMREAD_GRAYSCALE`` (HW).
"""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module

COLORS = ("bgr", "rgb", "gray")


def imdecode(buffer, color="bgr"):
    """Decode one encoded image (a 1-D uint8 NumPy buffer): an HWC (HW for ``"gray"``)
    uint8 array, or None where OpenCV cannot decode it."""
    cv2 = cv2_module()
    if buffer.size == 0:  # cv2.imdecode asserts on an empty buffer
        return None
    flags = cv2.IMREAD_GRAYSCALE if color == "gray" else cv2.IMREAD_COLOR
    image = cv2.imdecode(buffer, flags)
    if image is None:
        return None
    if color == "rgb":
        image = np.ascontiguousarray(image[:, :, ::-1])
    return image
