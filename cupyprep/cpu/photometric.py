"""Photometric augmentation on the CPU, with given per-image parameters: Ultralytics'
augment_hsv (OpenCV's HSV conversions, NumPy's tables) and torchvision's ColorJitter
operations in NumPy float32, each operation rounded in the order the kernels round it."""
from __future__ import annotations

import numpy as np

from ._cv2 import cv2_module, without_ipp


def hsv_gains(u, gains):
    """Ultralytics' gains from uniforms ``u`` (N, 3) in [0, 1): ``(u * 2 - 1) * gains + 1``
    (float64, each step rounded)."""
    return (np.asarray(u, np.float64) * 2.0 - 1.0) * np.asarray(gains, np.float64) + 1.0


def jitter_params(u, lows, spans):
    """color_jitter's parameters from uniforms ``u`` (N, 8) in [0, 1): the (N, 4) float64
    factors ``u[:, k] * spans[k] + lows[k]`` and the (N, 4) int64 order, the operations'
    indices sorted by their keys ``u[:, 4:]`` (ties by index)."""
    u = np.asarray(u, np.float64)
    factors = u[:, :4] * np.asarray(spans, np.float64) + np.asarray(lows, np.float64)
    order = np.argsort(u[:, 4:], axis=1, kind="stable").astype(np.int64)
    return factors, order


def hsv_gain(batch, gains, order):
    """Ultralytics' augment_hsv on each image of an NHWC uint8 batch (BGR, or RGB with
    ``order="rgb"``) with its gains ``gains[i]`` (float64 r of ``r = uniform(-1, 1) *
    [hgain, sgain, vgain] + 1``)."""
    cv2 = cv2_module()
    to_hsv, back = ((cv2.COLOR_BGR2HSV, cv2.COLOR_HSV2BGR) if order == "bgr"
                    else (cv2.COLOR_RGB2HSV, cv2.COLOR_HSV2RGB))
    x = np.arange(256, dtype=np.float64)
    out = np.empty(batch.shape, np.uint8)
    with without_ipp(cv2):
        for i, img in enumerate(batch):
            r = gains[i]
            lut_hue = ((x * r[0]) % 180).astype(np.uint8)
            lut_sat = np.clip(x * r[1], 0, 255).astype(np.uint8)
            lut_val = np.clip(x * r[2], 0, 255).astype(np.uint8)
            hsv = cv2.cvtColor(np.ascontiguousarray(img), to_hsv)
            hsv = np.stack([lut_hue[hsv[..., 0]], lut_sat[hsv[..., 1]], lut_val[hsv[..., 2]]], -1)
            out[i] = cv2.cvtColor(hsv, back)
    return out


_ONE = np.float32(1.0)


def color_jitter(batch, factors, order, enabled, channel_order, channels_last):
    """torchvision's adjust_brightness (0), adjust_contrast (1), adjust_saturation (2) and
    adjust_hue (3) on each image of an NHWC (or NCHW) uint8 / float32 batch, image i in the
    order ``order[i]`` with the factors ``factors[i]`` (float64, rounded to float32 as
    torchvision's scalar arguments are), skipping operations whose bit in ``enabled`` is
    clear. Integer images are stored as integers between operations (truncated)."""
    x = batch if channels_last else np.moveaxis(batch, 1, -1)
    integer = x.dtype == np.uint8
    bound = np.float32(255.0 if integer else 1.0)
    ri, bi = (2, 0) if channel_order == "bgr" else (0, 2)
    out = np.empty(x.shape, x.dtype)
    for i in range(len(x)):
        img = x[i].astype(np.float32)
        rgb = [img[..., ri], img[..., 1], img[..., bi]]
        for op in order[i]:
            if not enabled & (1 << int(op)):
                continue
            fd = float(factors[i, op])
            f, rest = np.float32(fd), np.float32(1.0 - fd)
            if op == 0:
                rgb = [np.clip(c * f, 0, bound) for c in rgb]
            elif op in (1, 2):
                gray = _gray(rgb, integer)
                other = np.float32(gray.sum(dtype=np.float64) / gray.size) if op == 1 else gray
                rgb = [np.clip(c * f + other * rest, 0, bound) for c in rgb]
            else:
                rgb = _hue(rgb, f, integer)
            if integer:
                rgb = [np.trunc(c) for c in rgb]
        res = out[i]
        res[..., ri], res[..., 1], res[..., bi] = rgb
    return out if channels_last else np.ascontiguousarray(np.moveaxis(out, -1, 1))


def _gray(rgb, integer):
    """torchvision's grayscale, 0.2989 R + 0.587 G + 0.114 B, floored for integer images."""
    r, g, b = rgb
    y = (r * np.float32(0.2989) + g * np.float32(0.587)) + b * np.float32(0.114)
    return np.floor(y) if integer else y


def _hue(rgb, hue, integer):
    """adjust_hue: torchvision's _rgb_to_hsv, h + hue modulo 1, _hsv_to_rgb (integer images
    scaled to [0, 1] by 1 / 255 and back by 255.999, as its to_dtype does)."""
    r, g, b = [c * np.float32(1 / 255) for c in rgb] if integer else rgb
    maxc = np.maximum(np.maximum(r, g), b)
    minc = np.minimum(np.minimum(r, g), b)
    eqc = maxc == minc
    span = maxc - minc
    s = span / np.where(eqc, _ONE, maxc)
    div = np.where(eqc, _ONE, span)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    hr = np.where(maxc == r, bc - gc, np.float32(0))
    hg = np.where((maxc == g) & (maxc != r), (rc + np.float32(2)) - bc, np.float32(0))
    hb = np.where((maxc != g) & (maxc != r), (gc + np.float32(4)) - rc, np.float32(0))
    h = np.fmod((hr + hg + hb) * np.float32(1 / 6) + _ONE, _ONE)
    h = np.fmod(h + hue, _ONE)
    h = np.where((h != 0) & (h < 0), h + _ONE, h)
    v = maxc
    h6 = h * np.float32(6)
    fi = np.floor(h6)
    f = h6 - fi
    i = fi.astype(np.int64) % 6
    sxf = s * f
    one_minus_s = _ONE - s
    q = np.clip((_ONE - sxf) * v, 0, _ONE)
    t = np.clip((sxf + one_minus_s) * v, 0, _ONE)
    p = np.clip(one_minus_s * v, 0, _ONE)
    out = [np.choose(i, [v, q, p, p, t, v]), np.choose(i, [t, v, v, q, p, p]),
           np.choose(i, [p, p, t, v, v, q])]
    if integer:
        out = [c * np.float32(255.999) for c in out]
    return out
