"""Normalization on the CPU, in NumPy float32 with the kernel's operation order."""
from __future__ import annotations

import numpy as np


def normalize(img, mean, std, scale, swap_rb, channels_last_out, dtype):
    """``img``: HW, HWC or NHWC; ``mean``/``std``: per output channel."""
    x = img if img.ndim >= 3 else img[:, :, None]
    if swap_rb and x.shape[-1] >= 3:
        order = [2, 1, 0] + list(range(3, x.shape[-1]))
        x = x[..., order]
    x = x.astype(np.float32)
    mean = np.asarray(mean, np.float32)
    inv_std = (1.0 / np.asarray(std, np.float64)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = (x * np.float32(scale) - mean) * inv_std
    y = cast(y, dtype)
    if img.ndim == 2:
        return y[:, :, 0]
    if not channels_last_out:
        y = np.moveaxis(y, -1, -3)
    return np.ascontiguousarray(y)


def cast(y, dtype):
    """float32 to the output dtype as the kernels store it: round half to even, saturate."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return y
    if dtype == np.float16:
        with np.errstate(over="ignore"):
            return y.astype(np.float16)
    info = np.iinfo(dtype)
    return np.clip(np.rint(np.nan_to_num(y)), info.min, info.max).astype(dtype)
