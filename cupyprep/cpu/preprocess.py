"""Fused preprocessing on the CPU: the cv2 recipe, image by image."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module, without_ipp
from .antialias import resize_plane_stack
from .geometry import _CV2_INTERPOLATION, _resize_hwc
from .normalize import normalize


def place(img, size, plan, interpolation, pad, antialias=False):
    """One HWC image resized to the plan's size and placed on a padded (H, W) canvas.

    Letterboxing is cv2.resize followed by cv2.copyMakeBorder with the split padding; a
    crop slices the resized image. ``antialias``: torchvision's antialiased resize instead
    of cv2.resize.
    """
    cv2 = cv2_module()
    H, W = size
    nh, nw, oy, ox = (int(v) for v in plan)
    src = img if img.ndim == 3 else img[:, :, None]
    flag = getattr(cv2, _CV2_INTERPOLATION[interpolation])
    if antialias:
        resized = resize_plane_stack(src, (nh, nw), interpolation)
    else:
        resized = _resize_hwc(src, (nh, nw), flag)
    # the part of the resized image that lands on the canvas
    y0, x0 = max(0, -oy), max(0, -ox)
    y1, x1 = min(nh, H - oy), min(nw, W - ox)
    part = np.ascontiguousarray(resized[y0:y1, x0:x1])
    top, left = max(oy, 0), max(ox, 0)
    bottom, right = H - top - part.shape[0], W - left - part.shape[1]
    work = part.astype(np.float32) if part.dtype == np.float16 else part
    with without_ipp(cv2):
        canvas = cv2.copyMakeBorder(work, top, bottom, left, right, cv2.BORDER_CONSTANT,
                                    value=tuple(pad) + (0.0,) * (4 - len(pad)))
    if canvas.ndim == 2:
        canvas = canvas[:, :, None]
    return canvas.astype(img.dtype, copy=False)


def preprocess(images, size, plans, interpolation, pad, mean, std, scale, swap_rb,
               channels_last, dtype, channels, antialias=False):
    H, W = size
    if len(images) == 0:
        batch = np.empty((0, H, W, channels), np.uint8)
    else:
        batch = np.stack([place(img, size, p, interpolation, pad, antialias) for img, p in zip(images, plans)])
    return normalize(batch, mean, std, scale, swap_rb, channels_last, dtype)
