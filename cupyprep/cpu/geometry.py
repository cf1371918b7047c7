"""Resize on the CPU: cv2.resize itself, image by image and plane by plane."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module, without_ipp

_CV2_INTERPOLATION = {"nearest": "INTER_NEAREST", "linear": "INTER_LINEAR",
                      "area": "INTER_AREA", "cubic": "INTER_CUBIC"}


def _two_by_two_cells(src_hw, dst_hw, flag, inv_scale=None):
    """Whether cv2.resize averages 2x2 cells: INTER_AREA or INTER_LINEAR with a step of
    exactly 2 on both axes (OpenCV's step: 1 / (dst / src) in double, or 1 / (fy, fx))."""
    cv2 = cv2_module()
    if inv_scale is None:
        inv_scale = [d / s for s, d in zip(src_hw, dst_hw)]
    steps = [1.0 / v for v in inv_scale]
    return flag in (cv2.INTER_AREA, cv2.INTER_LINEAR) and steps == [2.0, 2.0]


def _resize_hwc(img, size, flag, inv_scale=None):
    cv2 = cv2_module()
    h, w = size
    src = img
    if img.dtype == np.float16:
        # OpenCV has no float16 resize: compute in float32 and round once, as the kernels do
        src = img.astype(np.float32)
    if src.ndim == 3 and src.shape[2] > 4 and not _two_by_two_cells(src.shape[:2], size, flag, inv_scale):
        # keep every call within the channel counts all OpenCV interpolations take (its
        # weighted area asserts more than 4); 2x2 cell means round by the pixel's channel
        # count (ties to even above 4, up for one plane), so those take the whole image
        planes = [_resize_hwc(src[:, :, c], size, flag, inv_scale) for c in range(src.shape[2])]
        res = np.stack(planes, axis=2)
    else:
        # IPP off: see without_ipp (stock cv2 differs by up to 1 for uint8 cubic)
        with without_ipp(cv2):
            if inv_scale is None:
                res = cv2.resize(np.ascontiguousarray(src), (w, h), interpolation=flag)
            else:  # OpenCV's step from the factors (its size from them is ``size``)
                fy, fx = inv_scale
                res = cv2.resize(np.ascontiguousarray(src), None, fx=fx, fy=fy, interpolation=flag)
        if src.ndim == 3 and res.ndim == 2:
            res = res[:, :, None]
    return res.astype(img.dtype, copy=False)


def resize(img, size, interpolation, geometry, inv_scale=None):
    """``img`` as read by ``cupyprep._validate.image_layout`` into ``geometry``; with
    ``inv_scale`` ``(fy, fx)`` OpenCV's step is ``1 / fx`` (``cv2.resize(img, None, fx=fx,
    fy=fy)``, whose size is ``size``)."""
    flag = getattr(cv2_module(), _CV2_INTERPOLATION[interpolation])
    h, w = size
    out = np.empty(geometry.shape(h, w), img.dtype)
    if not geometry.has_channels:
        out[...] = _resize_hwc(img, size, flag, inv_scale)
        return out
    images = img if geometry.batched else img[None]
    dst = out if geometry.batched else out[None]
    for n in range(images.shape[0]):
        if geometry.channels_last:
            dst[n] = _resize_hwc(images[n], size, flag, inv_scale)
        else:
            for c in range(geometry.c):
                dst[n, c] = _resize_hwc(images[n, c], size, flag, inv_scale)
    return out


# --- warps ---------------------------------------------------------------------------------
_CV2_BORDER = {"constant": "BORDER_CONSTANT", "replicate": "BORDER_REPLICATE",
               "reflect": "BORDER_REFLECT", "reflect101": "BORDER_REFLECT_101",
               "wrap": "BORDER_WRAP"}


def _warp_hwc(img, matrix, size, flag, border, border_value, perspective):
    cv2 = cv2_module()
    h, w = size
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    fn = cv2.warpPerspective if perspective else cv2.warpAffine
    if flag == cv2.INTER_CUBIC and border == "reflect101" and min(src.shape[:2]) == 1:
        # OpenCV 5's cubic warp never returns for BORDER_REFLECT_101 on an image with a
        # one-pixel side. A one-pixel axis replicates (as the kernels and OpenCV's other
        # warps make it), and so does a two-pixel axis of two equal pixels under reflect101:
        # warp that instead (the clamp of cubic coordinates, max(side, 16), is the same).
        src = np.pad(src, [(0, int(n == 1)) for n in src.shape[:2]] + [(0, 0)] * (src.ndim - 2),
                     mode="edge")
    value = tuple(border_value[:4]) + (0.0,) * (4 - min(4, len(border_value)))
    # OpenCV 5.1 hands x86 warps with constant / replicate borders (linear; nearest for
    # int16) to Intel IPP, whose coordinates round differently (nearest at a half-pixel
    # coordinate takes the other pixel; linear differs by 1 or ~1e-5). The kernels follow
    # OpenCV's own code, so the CPU backend runs that code too, on every OpenCV version.
    with without_ipp(cv2):
        res = fn(np.ascontiguousarray(src), np.asarray(matrix, np.float64), (w, h),
                 flags=flag | cv2.WARP_INVERSE_MAP, borderMode=getattr(cv2, _CV2_BORDER[border]),
                 borderValue=value)
    if src.ndim == 3 and res.ndim == 2:
        res = res[:, :, None]
    return res.astype(img.dtype, copy=False)


def warp(images, matrices, size, interpolation, border, border_value, perspective, out):
    """``cv2.warpAffine`` / ``cv2.warpPerspective`` per image, with destination-to-source
    ``matrices`` (WARP_INVERSE_MAP): ``images`` a sequence of HW / HWC arrays (one per
    output), ``matrices`` (N, 2, 3) or (N, 3, 3) float64, written into ``out[n]``."""
    flag = getattr(cv2_module(), _CV2_INTERPOLATION[interpolation])
    for n, img in enumerate(images):
        out[n] = _warp_hwc(img, matrices[n], size, flag, border, border_value, perspective)
    return out
