"""Antialiased resize on the CPU: ``torchvision.transforms.v2.functional.resize(antialias=True)``
as PyTorch's CPU kernels compute it (``_upsample_bilinear2d_aa`` / ``_upsample_bicubic2d_aa``),
in NumPy; also the per-axis tables the kernels of resize_aa.cu read.

Per axis, with ``scale = src / dst``, an output index ``i`` covers the sources
``[xmin, xmin + count)`` around ``center = scale * (i + 0.5)``, within ``support`` (1 for
the triangle, 2 for Keys' cubic with a = -0.5, both widened by ``scale`` when shrinking),
each weighted by the filter at ``(j - center + 0.5) / max(scale, 1)`` and normalized to sum
to 1. The resize is separable: along x first, then along y; an axis whose size does not
change is not resampled.

uint8 follows PyTorch's fixed point: the weights, computed in double, are scaled by
``2**precision`` (the largest precision that keeps them in int16) and rounded; a pass sums
``pixel * weight`` in integers from ``2**(precision - 1)``, shifts right and clamps to
[0, 255], so the intermediate between the passes is uint8. Other dtypes follow the float
path in float32 (weights computed with PyTorch's float32 / double mix, a float32
intermediate, the sum in tap order, unfused), then round once to the output dtype: uint16
rounds half to even and saturates (torchvision truncates uint16), float16 rounds to
nearest.
"""
from __future__ import annotations

import functools
import math

import numpy as np

F32 = np.float32

INTERP_SIZE = {"linear": 2, "cubic": 4}


def _filter(x, interpolation, dtype):
    """PyTorch's aa_filter on an array of ``dtype`` (float32 or float64), in that dtype."""
    x = np.abs(x)
    one = dtype.type(1)
    if interpolation == "linear":
        return np.where(x < one, one - x, dtype.type(0)).astype(dtype)
    a = dtype.type(-0.5)
    two, three, four, five, eight = (dtype.type(v) for v in (2, 3, 4, 5, 8))
    near = ((a + two) * x - (a + three)) * x * x + one
    far = ((a * x - five * a) * x + eight * a) * x - four * a
    return np.where(x < one, near, np.where(x < two, far, dtype.type(0))).astype(dtype)


@functools.lru_cache(maxsize=256)
def axis_table(src, dst, interpolation, fixed):
    """One axis's table: ``(start, count, weights, precision)``.

    ``start`` / ``count`` int32 (dst,): the first source index of each output index and how
    many it reads; ``weights`` (dst, K), zero past ``count``: int32 fixed-point values
    (``fixed``, uint8's path, with ``precision`` fractional bits) or float32 (``precision``
    0). Cached: the arrays are shared and must not be written."""
    interp = INTERP_SIZE[interpolation]
    ft = np.dtype(np.float64) if fixed else np.dtype(np.float32)
    i = np.arange(dst, dtype=np.float64)
    if fixed:
        scale = src / dst
        support = interp * 0.5 * scale if scale >= 1.0 else interp * 0.5
        center = scale * (i + 0.5)
        invscale = 1.0 / scale if scale >= 1.0 else 1.0
        lo, hi = center - support + 0.5, center + support + 0.5
    else:
        # float32 as PyTorch's float kernel: the scale a float32 division, the products with
        # (i + 0.5) and 0.5 in double, each stored result rounded to float32
        scale = F32(src) / F32(dst)
        support = F32(interp * 0.5 * float(scale)) if scale >= 1.0 else F32(interp * 0.5)
        center = (float(scale) * (i + 0.5)).astype(F32)
        invscale = F32(1.0 / float(scale)) if scale >= 1.0 else F32(1.0)
        lo = (center - support).astype(np.float64) + 0.5
        hi = (center + support).astype(np.float64) + 0.5
    k = math.ceil(support) * 2 + 1
    xmin = np.maximum(np.trunc(lo), 0).astype(np.int64)
    count = np.clip(np.minimum(np.trunc(hi).astype(np.int64), src) - xmin, 0, k)
    weights = np.zeros((dst, k), ft)
    total = np.zeros(dst, ft)
    for j in range(k):
        if fixed:
            x = ((j + xmin) - center + 0.5) * invscale
        else:
            x = (((j + xmin).astype(F32) - center).astype(np.float64) + 0.5) * float(invscale)
        w = _filter(x.astype(ft), interpolation, ft)
        inside = j < count
        weights[:, j] = np.where(inside, w, ft.type(0))
        total = np.where(inside, (total + w).astype(ft), total)  # in tap order
    safe = np.where(total != 0, total, ft.type(1))
    weights = np.where(total[:, None] != 0, (weights / safe[:, None]).astype(ft), weights)
    precision = 0
    if fixed:
        wt_max = float(weights.max()) if weights.size else 0.0
        while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
            precision += 1
        v = weights * (1 << precision)
        weights = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int32)
    table = (xmin.astype(np.int32), count.astype(np.int32), weights)
    for a in table:
        a.flags.writeable = False
    return table + (precision,)


def _pass(img, axis, table, fixed):
    """Resample ``img`` (uint8 for ``fixed``, else float32) along ``axis``."""
    start, count, weights, precision = table
    src = np.moveaxis(img, axis, 0)
    n, k = src.shape[0], weights.shape[1]
    idx = np.minimum(start[:, None].astype(np.int64) + np.arange(k), n - 1)
    bshape = (-1,) + (1,) * (src.ndim - 1)
    if fixed:
        acc = np.full((len(start),) + src.shape[1:], 1 << (precision - 1), np.int64)
        for j in range(k):  # weights are zero past each count
            acc += src[idx[:, j]].astype(np.int64) * weights[:, j].reshape(bshape)
        out = np.clip(acc >> precision, 0, 255).astype(np.uint8)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            acc = src[idx[:, 0]] * weights[:, 0].reshape(bshape)
            for j in range(1, k):
                more = (j < count).reshape(bshape)
                acc = np.where(more, acc + src[idx[:, j]] * weights[:, j].reshape(bshape), acc)
        out = acc.astype(F32, copy=False)
    return np.moveaxis(out, 0, axis)


def resize_plane_stack(img, size, interpolation):
    """An ``(H, W, ...)`` array resized to ``size`` over its first two axes."""
    (h, w), (dh, dw) = img.shape[:2], size
    fixed = img.dtype == np.uint8
    x = img if fixed else img.astype(F32)
    if dw != w:
        x = _pass(x, 1, axis_table(w, dw, interpolation, fixed), fixed)
    if dh != h:
        x = _pass(x, 0, axis_table(h, dh, interpolation, fixed), fixed)
    return cast(x, img.dtype)


def cast(x, dtype):
    """float32 (or uint8) results to the output dtype: integers round half to even and
    saturate, float16 rounds to nearest."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return np.array(x, copy=True)
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            return np.clip(np.rint(np.nan_to_num(x)), info.min, info.max).astype(dtype)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def resize_antialias(img, size, interpolation, geometry):
    """``img`` as read by ``cupyprep._validate.image_layout`` into ``geometry``."""
    h, w = size
    if not geometry.has_channels:
        return resize_plane_stack(img, size, interpolation)
    images = img if geometry.batched else img[None]
    out = np.empty((images.shape[0],) + geometry.shape(h, w)[-3:], img.dtype)
    for n in range(images.shape[0]):
        if geometry.channels_last:
            out[n] = resize_plane_stack(images[n], size, interpolation)
        else:
            out[n] = np.moveaxis(resize_plane_stack(np.moveaxis(images[n], 0, 2), size,
                                                    interpolation), 2, 0)
    return out if geometry.batched else out[0]
