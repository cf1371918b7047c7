"""Gaussian and box filters on the CPU: ``cv2.GaussianBlur`` / ``cv2.boxFilter`` themselves,
image by image; also OpenCV's kernel sizes and Gaussian weights (float and fixed point), which
the kernels of filter.cu read.

OpenCV's Gaussian weights (getGaussianKernelBitExact, in its software double arithmetic):
ksize 1, 3, 5, 7, 9 with sigma <= 0 are fixed binomial tables; otherwise ``sigma`` (or
``0.15 * ksize + 0.35`` for sigma <= 0, one fused multiply-add) gives
``exp(-x^2 / (8 sigma^2) * 4)`` at the half-kernel's offsets, normalized by 1 / their sum.
uint8 / uint16 use them in fixed point with 8 / 16 fractional bits, rounded with the error
carried from tap to tap and the center taking what makes them sum to exactly 1.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ._cv2 import cv2_module, without_ipp

BORDERS = ("reflect101", "replicate", "reflect", "constant")
_CV2_BORDER = {"constant": "BORDER_CONSTANT", "replicate": "BORDER_REPLICATE",
               "reflect": "BORDER_REFLECT", "reflect101": "BORDER_REFLECT_101"}

# OpenCV's fixed tables for sigma <= 0 (7 and 9 are its own, not binomials)
_SMALL = {1: (1,), 3: (1, 2, 1), 5: (1, 4, 6, 4, 1), 7: (2, 7, 14, 18, 14, 7, 2),
          9: (4, 13, 30, 51, 60, 51, 30, 13, 4)}


def gaussian_ksize(ksize, sigma, dtype):
    """OpenCV's automatic size where ``ksize`` <= 0: ``round(sigma * (3 if uint8 else 4) * 2
    + 1) | 1`` (cvRound: half to even)."""
    if ksize <= 0 and sigma > 0:
        return round(sigma * (3 if np.dtype(dtype) == np.uint8 else 4) * 2 + 1) | 1
    return ksize


def _fma(a, b, c):
    """a * b + c rounded once (softdouble's mulAdd)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


@functools.lru_cache(maxsize=256)
def gaussian_kernel(n, sigma):
    """OpenCV's Gaussian kernel of odd size ``n``, as float64: cv2.getGaussianKernel's (CV_64F)
    where OpenCV imports; else the same computation with the platform's ``exp``, which can
    differ from OpenCV's software ``exp`` in the last bit."""
    try:
        cv2 = cv2_module()
    except ImportError:
        cv2 = None
    if cv2 is not None:
        return cv2.getGaussianKernel(n, sigma, cv2.CV_64F)[:, 0].copy()
    if sigma <= 0 and n in _SMALL:
        t = np.array(_SMALL[n], np.float64)
        return t / t.sum()
    sigma_x = float(sigma) if sigma > 0 else _fma(float(n), 0.15, 0.35)
    scale2x = -0.125 / (sigma_x * sigma_x)
    half = (n - 1) // 2
    values, total = [], 0.0
    for i in range(half):
        x = 1 - n + 2 * i  # twice the offset from the center
        t = math.exp(float(x * x) * scale2x)
        values.append(t)
        total += t
    total = total * 2.0 + 1.0
    mul = 1.0 / total
    out = np.empty(n, np.float64)
    for i, v in enumerate(values):
        out[i] = out[n - 1 - i] = v * mul
    out[half] = 1.0 * mul
    return out


@functools.lru_cache(maxsize=256)
def gaussian_fixed(n, sigma, bits):
    """The kernel in fixed point with ``bits`` fractional bits (OpenCV's
    getGaussianKernelFixedPoint_ED), as int64."""
    k = gaussian_kernel(n, sigma)
    one = 1 << bits
    out = np.empty(n, np.int64)
    err, total = 0.0, 0
    for i in range(n // 2):
        adj = k[i] * float(one) + err
        v = int(np.rint(adj))  # cvRound: half to even
        err = adj - float(v)
        out[i] = out[n - 1 - i] = v
        total += v
    out[n // 2] = one - 2 * total
    return out


def _hwc_planes(img, fn):
    """``fn`` over an HW / HWC image, more than 4 channels in groups OpenCV takes."""
    if img.ndim == 3 and img.shape[2] > 4:
        return np.concatenate([_hwc_planes(img[:, :, c:c + 4], fn)
                               for c in range(0, img.shape[2], 4)], axis=2)
    src = np.ascontiguousarray(img.astype(np.float32) if img.dtype == np.float16 else img)
    res = fn(src)
    if img.ndim == 3 and res.ndim == 2:
        res = res[:, :, None]
    return res.astype(img.dtype, copy=False)


def _each(images, batched, fn):
    if not batched:
        return _hwc_planes(images, fn)
    out = np.empty_like(images)
    for n in range(images.shape[0]):
        out[n] = _hwc_planes(images[n], fn)
    return out


def gaussian_blur(img, ksize, sigma, border, batched):
    """``cv2.GaussianBlur`` of an HW / HWC image or an NHWC batch; ``ksize`` (kh, kw) and
    ``sigma`` (sy, sx) as OpenCV takes them."""
    cv2 = cv2_module()
    flag = getattr(cv2, _CV2_BORDER[border])
    (kh, kw), (sy, sx) = ksize, sigma

    def blur(src):
        with without_ipp(cv2):
            return cv2.GaussianBlur(src, (kw, kh), sigmaX=sx, sigmaY=sy, borderType=flag)

    return _each(img, batched, blur)


def box_filter(img, ksize, normalize, border, batched, anchor=(-1, -1)):
    """``cv2.boxFilter`` (ddepth -1) of an HW / HWC image or an NHWC batch; ``ksize`` (kh, kw),
    ``anchor`` (ay, ax)."""
    cv2 = cv2_module()
    flag = getattr(cv2, _CV2_BORDER[border])
    (kh, kw), (ay, ax) = ksize, anchor

    def box(src):
        with without_ipp(cv2):
            return cv2.boxFilter(src, -1, (kw, kh), anchor=(ax, ay), normalize=normalize,
                                 borderType=flag)

    return _each(img, batched, box)
