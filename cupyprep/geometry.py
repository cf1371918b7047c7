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


def _resize_expr(interpolation, dtype, cn):
    return f"cupyprep_resize_{interpolation}<{C_TYPES[np.dtype(dtype)]}, {cn}>"


def _resize_variants():
    return [
        _resize_expr(i, d, cn)
        for i in _KERNEL_INTERPOLATIONS
        for d in RESIZE_DTYPES
        for cn in (1, 2, 3, 4)
    ]


_KERNEL_INTERPOLATIONS = ("nearest", "linear")
_kernels.register_variants("resize", "resize.cu", _resize_variants)


def _scale(src, dst):
    # OpenCV's: inv_scale = dst / src in double, scale = 1 / inv_scale
    return 1.0 / (dst / src)


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
    ``nearest`` takes ``floor(dst * scale)``. uint8 ``linear`` and ``nearest`` equal
    ``cv2.resize`` bit for bit; other dtypes compute in float32 and round to nearest on
    store (OpenCV's x86 build hands float32 / uint16 linear resizes to Intel IPP, whose
    summation order differs: up to a few float32 ulp, or 1 for uint16).

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
        fn = _kernels.get_function("resize.cu", _resize_expr(interpolation, dtype, cn))
        i64, i32 = np.int64, np.int32
        launch_1d(fn, total, (
            arr, dst, i32(groups), i32(geo.h), i32(geo.w), i32(dh), i32(dw),
            i64(s_n), i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
            i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
            np.float64(scale[0] if scale else _scale(geo.h, dh)),
            np.float64(scale[1] if scale else _scale(geo.w, dw)), i64(total),
        ))
    return native
