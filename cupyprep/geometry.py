"""Geometric ops: resize (warps follow)."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _validate, cpu

__all__ = ["resize", "INTERPOLATIONS"]

INTERPOLATIONS = ("nearest", "linear", "area", "cubic")
RESIZE_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)

# numpy dtype -> C type used in name expressions (kernels/common.cuh)
C_TYPES = {
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.float16): "cp_half",
    np.dtype(np.float32): "float",
}

_BLOCK = 256
_MAX_BLOCKS = 1 << 20


def launch_1d(fn, total, args):
    """Launch a grid-stride kernel over ``total`` items (nothing for zero items)."""
    if total <= 0:
        return
    blocks = min((total + _BLOCK - 1) // _BLOCK, _MAX_BLOCKS)
    fn((blocks,), (_BLOCK,), args)


def launch_3d(fn, n, h, w, args, block_x=128):
    """Launch a kernel over an (n, h, w) grid: x across blocks and threads, a row per
    blockIdx.y, an image per blockIdx.z (the kernel loops past the grid's limits)."""
    if n <= 0 or h <= 0 or w <= 0:
        return
    grid = (min((w + block_x - 1) // block_x, 65535), min(h, 65535), min(n, 65535))
    fn(grid, (block_x, 1, 1), args)


def _resize_expr(interpolation, dtype, cn):
    return f"cupyprep_resize_{interpolation}<{C_TYPES[np.dtype(dtype)]}, {cn}>"


def _resize_variants():
    return [
        _resize_expr(k, d, cn)
        for i in _KERNEL_INTERPOLATIONS
        for k in _KERNELS.get(i, (i,))
        for d in RESIZE_DTYPES
        for cn in (1, 2, 3, 4)
    ]


_KERNEL_INTERPOLATIONS = ("nearest", "linear", "cubic", "area")
# Interpolations that are several algorithms in OpenCV get one kernel per algorithm.
_KERNELS = {"area": ("area_fast", "area_weighted", "area_up")}
_kernels.register_variants("resize", "resize.cu", _resize_variants)


def _scale(src, dst):
    # OpenCV's: inv_scale = dst / src in double, scale = 1 / inv_scale
    return 1.0 / (dst / src)


def _area_kernel(scale_y, scale_x):
    """Which of OpenCV's three INTER_AREA algorithms a resize runs, chosen as OpenCV does:
    ``("area_fast", isy, isx)``, ``("area_weighted",)`` or ``("area_up",)``."""
    if scale_x >= 1 and scale_y >= 1:
        isy, isx = round(scale_y), round(scale_x)  # saturate_cast<int>: half to even
        eps = np.finfo(np.float64).eps
        if abs(scale_x - isx) < eps and abs(scale_y - isy) < eps:
            return ("area_fast", isy, isx)
        return ("area_weighted",)
    return ("area_up",)


def _area_table(src, dst, scale):
    """OpenCV's computeResizeAreaTab for one axis, for ``cupyprep_resize_area_weighted``.

    Every destination index covers consecutive sources: a partial one where the cell
    starts inside a pixel, the whole ones, a partial one where it ends inside a pixel.
    Returns int32 ``(first source, count, offset into weights)`` per destination index and
    the float32 weights, computed in double and rounded once, as OpenCV does.
    """
    d = np.arange(dst, dtype=np.float64)
    fs1 = d * scale
    fs2 = fs1 + scale
    cell = np.minimum(scale, src - fs1)
    s2 = np.minimum(np.floor(fs2), src - 1)
    s1 = np.minimum(np.ceil(fs1), s2)
    head = s1 - fs1 > 1e-3
    tail = fs2 - s2 > 1e-3
    count = head + (s2 - s1).astype(np.int64) + tail
    offset = np.cumsum(count) - count
    weights = np.repeat((1.0 / cell).astype(np.float32), count)
    weights[offset[head]] = ((s1 - fs1) / cell)[head].astype(np.float32)
    last = np.minimum(np.minimum(fs2 - s2, 1.0), cell) / cell
    weights[(offset + count - 1)[tail]] = last[tail].astype(np.float32)
    tab = np.stack([s1.astype(np.int64) - head, count, offset], axis=1)
    return tab.astype(np.int32).ravel(), weights


def resize(img, size, *, interpolation="linear", layout="HWC", out=None):
    """Resize an image or a batch, with ``cv2.resize`` semantics.

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor
        ``HW``, ``HWC`` or a batch ``NHWC`` (``CHW`` / ``NCHW`` with ``layout="CHW"``);
        uint8, uint16, float16 or float32; any number of channels. Views with any strides
        are read in place.
    size : (int, int)
        Output ``(height, width)`` (array order; ``cv2compat.resize`` keeps OpenCV's
        ``(width, height)``).
    interpolation : {"nearest", "linear", "area", "cubic"}
    layout : {"HWC", "CHW", "NHWC", "NCHW"}
        Axis order of ``img``; the output has the same.
    out : array, optional
        Written in place; same kind, shape and dtype as the result.

    Returns
    -------
    The resized image(s), same kind (numpy / cupy / torch), dtype and layout as ``img``.

    Convention
    ----------
    As OpenCV: pixel centers at +0.5, ``src = (dst + 0.5) * scale - 0.5`` with
    ``scale = 1 / (dst_size / src_size)`` in double precision; edges clamp (replicate).
    ``nearest`` takes ``floor(dst * scale)``; ``cubic`` is Keys' kernel with A = -0.75;
    ``area`` is OpenCV's three algorithms (integer factors: cell means; other downscales:
    weighted cells; upscales: linear with area weights), and ``linear`` at an exact factor
    of 2 on both axes is area's cell mean, as in OpenCV.

    Every mode and dtype follows OpenCV's own arithmetic step by step (its fixed point for
    uint8, its float32 operation order otherwise; float16 is OpenCV's float32 resize
    rounded once), and equals ``cv2.resize`` bit for bit where OpenCV runs that code. Two
    things make OpenCV differ from itself across machines, and so from the kernels: its
    x86 build hands float32 / uint16 linear and most cubic resizes to Intel IPP (see
    ``cv2.ipp.setUseIPP``), and its float vector code is chosen for the CPU at run time
    (FMA or not). uint8 linear and nearest involve neither and are equal everywhere.

    Example
    -------
    >>> small = cupyprep.resize(frame, (224, 224))           # doctest: +SKIP
    """
    return _resize(img, size, interpolation, layout, out)


def _resize(img, size, interpolation, layout, out, scale=None):
    """``resize`` with an optional ``(scale_y, scale_x)`` source-per-destination step, for
    ``cv2compat.resize(fx=, fy=)``, where OpenCV takes the step from fx/fy, not the sizes."""
    call = _arrays.prepare(img, "img")
    interpolation = _validate.choice("interpolation", interpolation, INTERPOLATIONS)
    dh, dw = _validate.size_hw("size", size)
    arr = call.array
    dtype = _validate.dtype_in("img", arr, RESIZE_DTYPES)
    geo = _validate.image_layout("img", arr, layout)
    if not call.device:
        return call.result(cpu.resize(arr, (dh, dw), interpolation, geo), out)
    if interpolation not in _KERNEL_INTERPOLATIONS:
        raise NotImplementedError(
            f"interpolation: {interpolation!r} has no GPU kernel yet; "
            f"use one of {list(_KERNEL_INTERPOLATIONS)}"
        )
    with call.launch():
        native, dst = call.output(out, geo.shape(dh, dw), dtype)
        dgeo = _validate.image_layout("out", dst, layout)
        if geo.channels_last and geo.c <= 4:
            cn, groups = geo.c, 1
        else:
            cn, groups = 1, geo.c  # one group per plane
        s_n, s_c, s_y, s_x = geo.strides
        d_n, d_c, d_y, d_x = dgeo.strides
        total = geo.n * groups * dh * dw
        scale_y = scale[0] if scale else _scale(geo.h, dh)
        scale_x = scale[1] if scale else _scale(geo.w, dw)
        i64, i32 = np.int64, np.int32
        kernel, extra = interpolation, ()
        if interpolation == "area":
            kernel, *params = _area_kernel(scale_y, scale_x)
            if kernel == "area_fast":
                extra = tuple(i32(p) for p in params)
            elif kernel == "area_weighted":
                xtab, xw = _area_table(geo.w, dw, scale_x)
                ytab, yw = _area_table(geo.h, dh, scale_y)
                extra = tuple(call.xp.asarray(a) for a in (xtab, xw, ytab, yw))
            else:
                # OpenCV's inv_scale: dst / src, or cv2compat's fx / fy (as 1 / step)
                extra = (np.float64(1.0 / scale[0] if scale else dh / geo.h),
                         np.float64(1.0 / scale[1] if scale else dw / geo.w))
        fn = _kernels.get_function("resize.cu", _resize_expr(kernel, dtype, cn))
        launch_1d(fn, total, (
            arr, dst, i32(groups), i32(geo.h), i32(geo.w), i32(dh), i32(dw),
            i64(s_n), i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
            i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
            np.float64(scale_y), np.float64(scale_x), i64(total),
        ) + extra)
    return native
