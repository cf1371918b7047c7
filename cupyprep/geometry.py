"""Geometric ops: resize, the warps and their matrix helpers, face alignment and random
affine augmentation."""
from __future__ import annotations

import functools

import numpy as np

from . import _arrays, _kernels, _validate, cpu
from ._kernels import BLOCK_3D, C_TYPES, launch_1d, launch_3d

__all__ = ["resize", "INTERPOLATIONS"]

INTERPOLATIONS = ("nearest", "linear", "area", "cubic")
RESIZE_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)

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
        Written in place; same kind, shape and dtype as the result. May be the input itself
        or overlap it (as OpenCV's ``dst=src``).

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
    with call.launch(), call.writing(out, geo.shape(dh, dw), dtype, [arr]) as (native, dst):
        dgeo = _validate.image_layout("out", dst, layout)
        if geo.channels_last and geo.c <= 4:
            cn, groups = geo.c, 1
        else:
            cn, groups = 1, geo.c  # one group per plane
        s_n, s_c, s_y, s_x = geo.strides
        d_n, d_c, d_y, d_x = dgeo.strides
        planes = geo.n * groups
        scale_y = scale[0] if scale else _scale(geo.h, dh)
        scale_x = scale[1] if scale else _scale(geo.w, dw)
        i64, i32 = np.int64, np.int32
        kernel, extra = interpolation, ()
        if interpolation == "area":
            kernel, *params = _area_kernel(scale_y, scale_x)
            if kernel == "area_fast":
                extra = tuple(i32(p) for p in params)
            elif kernel == "area_weighted":
                # (first source, count, offset) and weights per axis, kept on the device
                (xtab, xw), (ytab, yw) = (_arrays.device_constant(
                    call.xp, ("area", n, d, s), lambda n=n, d=d, s=s: _area_table(n, d, s),
                    "the area resize's tables", "make one call of the same sizes before the "
                    "capture (its tables then stay on the device)")
                    for n, d, s in ((geo.w, dw, scale_x), (geo.h, dh, scale_y)))
                extra = (xtab, xw, ytab, yw)
            else:
                # OpenCV's inv_scale: dst / src, or cv2compat's fx / fy (as 1 / step)
                extra = (np.float64(1.0 / scale[0] if scale else dh / geo.h),
                         np.float64(1.0 / scale[1] if scale else dw / geo.w))
        fn = _kernels.get_function("resize.cu", _resize_expr(kernel, dtype, cn))
        launch_3d(fn, planes, dh, dw, (
            arr, dst, i32(groups), i32(geo.h), i32(geo.w), i32(dh), i32(dw),
            i64(s_n), i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
            i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
            np.float64(scale_y), np.float64(scale_x), i32(planes),
        ) + extra)
    return native


# =========================================================================================
# Warps: warp_affine, warp_perspective, align_faces, random_affine, and matrix helpers
# =========================================================================================
import math  # noqa: E402
import numbers  # noqa: E402
import sys  # noqa: E402

from .cpu.geometry import warp as _cpu_warp  # noqa: E402

__all__ += [
    "warp_affine", "warp_perspective", "align_faces", "random_affine",
    "get_rotation_matrix_2d", "get_affine_transform", "get_perspective_transform",
    "invert_affine_transform", "estimate_similarity", "transform_points",
    "WARP_INTERPOLATIONS", "BORDER_MODES", "ARCFACE_112",
]

WARP_INTERPOLATIONS = ("nearest", "linear", "cubic")
BORDER_MODES = ("constant", "replicate", "reflect", "reflect101", "wrap")
WARP_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)

# The standard 5-point face template (eyes, nose tip, mouth corners) for 112x112 crops.
ARCFACE_112 = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float64)

# OpenCV's SIMD step for its float warp kernels on AVX2 (2 x 8 float lanes): pixels below
# the destination width rounded down to it take the vector arithmetic, the rest the scalar.
# (Its cubic warp has no scalar tail: kernels/warp.cu.)
_OPENCV_WARP_STEP = 16


# --- array-kind helpers ----------------------------------------------------------------
def _is_dense(strides, channels):
    """Pixels contiguous: channel stride 1 and pixel stride = channels (in elements)."""
    s_x, s_c = strides
    return (s_c == 1 or channels == 1) and s_x == channels


def _xp_of(*arrays):
    """numpy or cupy, whichever the arrays are (cupy if any is)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and any(isinstance(a, cupy.ndarray) for a in arrays):
        return cupy
    return np


def _unwrap(x):
    """``(array, back)``: a numpy / cupy view of ``x`` and a function that returns results
    as the caller's kind (torch tensors through DLPack / from_numpy, zero-copy)."""
    if _arrays._is_torch(x):
        call = _arrays.prepare(x, "argument")
        return call.array, call.back
    return x, _same


def _same(a):
    return a


def _as_float_array(name, x, shape_tail, batched_ok=True):
    """``x`` as a float64 numpy / cupy array whose trailing dims are ``shape_tail``."""
    xp = _xp_of(x)
    try:
        a = xp.asarray(x, dtype=xp.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array of numbers of shape {shape_tail}, got {x!r}") from None
    nd = len(shape_tail)
    ok = a.shape[-nd:] == tuple(shape_tail) if a.ndim >= nd else False
    if not ok or a.ndim > nd + (1 if batched_ok else 0):
        want = f"{shape_tail} or (N, {', '.join(map(str, shape_tail))})" if batched_ok else f"{shape_tail}"
        raise ValueError(f"{name}: expected shape {want}, got {_arrays.describe(a)}")
    return a


# --- matrix helpers ----------------------------------------------------------------------
@_arrays.on_input_device
def get_rotation_matrix_2d(center, angle, scale=1.0):
    """``cv2.getRotationMatrix2D``: rotation by ``angle`` degrees (counter-clockwise on the
    screen, y pointing down) and uniform ``scale`` about ``center`` (x, y).

    Scalars give a (2, 3) float64 matrix; arrays ``center`` (N, 2), ``angle`` (N,),
    ``scale`` (N,) give (N, 2, 3), as numpy or cupy like the inputs.

    Convention: ``alpha = scale * cos(angle)``, ``beta = scale * sin(angle)``,
    ``M = [[alpha, beta, (1 - alpha) cx - beta cy], [-beta, alpha, beta cx + (1 - alpha) cy]]``
    (the matrix maps source to destination pixel coordinates, pixel centers at integers).

    Example
    -------
    >>> M = cupyprep.get_rotation_matrix_2d((255.5, 255.5), 30.0)      # doctest: +SKIP
    """
    xp = _xp_of(center, angle, scale)
    c = xp.asarray(center, dtype=xp.float64)
    a = xp.asarray(angle, dtype=xp.float64) * (math.pi / 180)
    s = xp.asarray(scale, dtype=xp.float64)
    if c.shape[-1:] != (2,):
        raise ValueError(f"center: expected (x, y) or shape (N, 2), got shape {c.shape}")
    alpha, beta = xp.cos(a) * s, xp.sin(a) * s
    cx, cy = c[..., 0], c[..., 1]
    alpha, beta, cx, cy = xp.broadcast_arrays(alpha, beta, cx, cy)
    rows = [xp.stack([alpha, beta, (1 - alpha) * cx - beta * cy], axis=-1),
            xp.stack([-beta, alpha, beta * cx + (1 - alpha) * cy], axis=-1)]
    return xp.stack(rows, axis=-2)


@_arrays.on_input_device
def invert_affine_transform(matrix):
    """``cv2.invertAffineTransform`` for (2, 3) or (N, 2, 3) matrices (numpy or cupy), in
    float64 with OpenCV's formula; a ValueError for singular matrices.

    Example
    -------
    >>> back = cupyprep.invert_affine_transform(M)                       # doctest: +SKIP
    """
    m = _as_float_array("matrix", matrix, (2, 3))
    return _invert_affine(m, _xp_of(m), lambda k: ValueError(
        f"{_item('matrix', k)}: singular affine matrix (determinant 0), got {_arrays.describe(m)}"))


def _invert_affine(m, xp, singular=None):
    """``cv2.invertAffineTransform``'s formula on (2, 3) / (N, 2, 3) float64 matrices
    (``1 / det``, then each product rounded once). ``singular(k)`` makes the error raised
    where a determinant is 0, k the first such matrix of a batch (None for one matrix; for
    device matrices the test reads one number back); without it (matrices known to be
    regular) a zero determinant gives zeros."""
    if xp is np and m.shape == (2, 3):
        # one host matrix (the usual cv2-style call): the same formula on Python floats
        # (IEEE doubles, each operation rounded once, as NumPy's), a tenth of the host
        # time of NumPy's array operations on six numbers
        (a, b, c), (d, e, f) = m.tolist()
        det = a * e - b * d
        if det == 0 and singular is not None:
            raise singular(None)
        det = 1.0 / det if det != 0 else 0.0
        i00, i11, i01, i10 = e * det, a * det, b * -det, d * -det
        return np.array([[i00, i01, -i00 * c - i01 * f], [i10, i11, -i10 * c - i11 * f]])
    d = m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    if singular is not None:
        k = _first_zero(d, xp)
        if k is not None:
            raise singular(k if m.ndim == 3 else None)
    d = xp.where(d != 0, 1.0 / xp.where(d != 0, d, 1.0), 0.0)
    a11, a22 = m[..., 1, 1] * d, m[..., 0, 0] * d
    a12, a21 = m[..., 0, 1] * -d, m[..., 1, 0] * -d
    b1 = -a11 * m[..., 0, 2] - a12 * m[..., 1, 2]
    b2 = -a21 * m[..., 0, 2] - a22 * m[..., 1, 2]
    return xp.stack([xp.stack([a11, a12, b1], axis=-1), xp.stack([a21, a22, b2], axis=-1)], axis=-2)


def _points(name, pts, count=None):
    xp = _xp_of(pts)
    a = xp.asarray(pts, dtype=xp.float64)
    if a.ndim not in (2, 3) or a.shape[-1] != 2 or (count is not None and a.shape[-2] != count):
        k = count if count is not None else "K"
        raise ValueError(f"{name}: expected shape ({k}, 2) or (N, {k}, 2), got {_arrays.describe(a)}")
    return a


def _point_pairs(src, dst, count):
    """``(src, dst, xp)`` for the exact-fit transforms: ``count`` points each, same shape."""
    s, d = _points("src", src, count), _points("dst", dst, count)
    if s.shape != d.shape:
        raise ValueError(f"dst: expected the shape of src {s.shape}, got {d.shape}")
    return s, d, _xp_of(s, d)


@_arrays.on_input_device
def get_affine_transform(src, dst):
    """``cv2.getAffineTransform``: the (2, 3) matrix mapping 3 points ``src`` to ``dst``
    (each (3, 2) as x, y; or (N, 3, 2) for N matrices), float64, numpy or cupy.

    Example
    -------
    >>> M = cupyprep.get_affine_transform(tri_src, tri_dst)              # doctest: +SKIP
    """
    s, d, xp = _point_pairs(src, dst, 3)
    a = xp.concatenate([s, xp.ones(s.shape[:-1] + (1,))], axis=-1)  # rows [x, y, 1]
    det = xp.linalg.det(a)
    if bool(xp.any(xp.abs(det) < 1e-12)):
        raise ValueError("src: the three points are collinear (no affine transform maps them)")
    return xp.swapaxes(xp.linalg.solve(a, d), -1, -2)


@_arrays.on_input_device
def get_perspective_transform(src, dst):
    """``cv2.getPerspectiveTransform``: the (3, 3) homography mapping 4 points ``src`` to
    ``dst`` ((4, 2) or (N, 4, 2)), normalized so ``M[2, 2] = 1``, float64, numpy or cupy.

    Example
    -------
    >>> H = cupyprep.get_perspective_transform(quad, corners)            # doctest: +SKIP
    """
    s, d, xp = _point_pairs(src, dst, 4)
    x, y, u, v = s[..., 0], s[..., 1], d[..., 0], d[..., 1]
    one, zero = xp.ones_like(x), xp.zeros_like(x)
    rows_u = xp.stack([x, y, one, zero, zero, zero, -x * u, -y * u], axis=-1)
    rows_v = xp.stack([zero, zero, zero, x, y, one, -x * v, -y * v], axis=-1)
    a = xp.concatenate([rows_u, rows_v], axis=-2)
    b = xp.concatenate([u, v], axis=-1)[..., None]
    det = xp.linalg.det(a)
    if bool(xp.any(xp.abs(det) < 1e-12)):
        raise ValueError("src: degenerate points (three of them collinear); no homography maps them")
    h = xp.linalg.solve(a, b)[..., 0]
    h = xp.concatenate([h, xp.ones(h.shape[:-1] + (1,))], axis=-1)
    return h.reshape(h.shape[:-1] + (3, 3))


@_arrays.on_input_device
def estimate_similarity(src, dst):
    """Least-squares similarity (rotation, uniform scale, translation; no reflection) mapping
    points ``src`` to ``dst``: Umeyama's estimate, which in 2-D is closed form.

    ``src``, ``dst``: (K, 2) or (N, K, 2) with K >= 2 (numpy or cupy). Returns (2, 3) or
    (N, 2, 3) float64 matrices ``[[a, -b, tx], [b, a, ty]]``.

    Convention: with centered points p, q, ``a = sum(p . q) / sum |p|^2`` and
    ``b = sum(p_x q_y - p_y q_x) / sum |p|^2``; the translation maps the centroid of
    ``src`` to that of ``dst``. CuPy points are fitted by one kernel, which sums in point
    order (NumPy's pairwise sums may differ in the last bits).

    Example
    -------
    >>> M = cupyprep.estimate_similarity(landmarks, cupyprep.ARCFACE_112)   # doctest: +SKIP
    """
    s, d = _points("src", src), _points("dst", dst)
    xp = _xp_of(s, d)
    if s.shape[-2] < 2:
        raise ValueError(f"src: expected at least 2 points, got {s.shape[-2]}")
    if xp is not np:  # on_input_device made the points' device and stream current
        return _similarity_on_device(xp, xp.asarray(s), xp.asarray(d))
    return _similarity_numpy(s, d, "src")


def _similarity_numpy(s, d, name):
    """:func:`estimate_similarity` of float64 NumPy point sets (K >= 2)."""
    s, d = np.broadcast_arrays(s, d)
    ms, md = s.mean(axis=-2, keepdims=True), d.mean(axis=-2, keepdims=True)
    p, q = s - ms, d - md
    var = (p * p).sum(axis=(-1, -2))
    if bool(np.any(var == 0)):
        raise ValueError(f"{name}: all points coincide; no similarity is defined")
    a = (p * q).sum(axis=(-1, -2)) / var
    b = (p[..., 0] * q[..., 1] - p[..., 1] * q[..., 0]).sum(axis=-1) / var
    mx, my = ms[..., 0, 0], ms[..., 0, 1]
    tx = md[..., 0, 0] - (a * mx - b * my)
    ty = md[..., 0, 1] - (b * mx + a * my)
    return np.stack([np.stack([a, -b, tx], axis=-1), np.stack([b, a, ty], axis=-1)], axis=-2)


def _first_zero(d, xp):
    """The flat index of the first zero among the determinants ``d`` (one number read back
    for device arrays), or None."""
    zero = (d == 0).reshape(-1)
    if zero.size == 0:
        return None
    k = int(_arrays.read_back(xp.where(zero.any(), xp.argmax(zero), -1), *_SINGULARITY_READ))
    return k if k >= 0 else None


def _item(name, k):
    """``name``, or ``name[k]`` for the k-th of a batch (k None: one value)."""
    return name if k is None else f"{name}[{k}]"


def _singular_fit(name):
    return ValueError(f"{name}: a fitted similarity is singular (determinant 0; do the "
                      "destination points coincide?)")


def _similarity_on_device(xp, src, dst, name="src", inverse=False):
    """:func:`estimate_similarity` of float64 (K, 2) / (N, K, 2) point sets (arrays of
    ``xp``: CuPy, or NumPy under the kernel emulator) on the current device and stream
    (K >= 2 checked by the caller), in one launch; with ``inverse``, ``(matrices,
    inverses)`` (a singular fit is an error). The tests for coinciding points and singular
    fits read one flag back."""
    shape = np.broadcast_shapes(src.shape, dst.shape)
    k = shape[-2]
    n = shape[0] if len(shape) == 3 else 1
    src, dst = xp.ascontiguousarray(src), xp.ascontiguousarray(dst)
    steps = [np.int64(2 * k if a.ndim == 3 and a.shape[0] > 1 else 0) for a in (src, dst)]
    mats = xp.empty((n, 2, 3), np.float64)
    inv = xp.empty((n, 2, 3), np.float64) if inverse else None
    flags = xp.zeros(1, np.int32)
    fn = _kernels.get_function("warp_matrices.cu", _SIMILARITY_KERNEL)
    launch_1d(fn, n, (src, steps[0], dst, steps[1], np.int32(n), np.int32(k), mats, inv, flags))
    found = int(_arrays.read_back(flags, f"{name}: the fit's check (coinciding points, a singular fit)",
                                  "make this call outside the capture")[0]) if n else 0
    if found & 1:
        raise ValueError(f"{name}: all points coincide; no similarity is defined")
    if found & 2:
        raise _singular_fit(name)
    if len(shape) == 2:
        mats, inv = mats[0], (inv[0] if inverse else None)
    return (mats, inv) if inverse else mats


_SIMILARITY_KERNEL = "cupyprep_similarity"


@_arrays.on_input_device
def transform_points(points, matrix):
    """Map points (x, y) through affine (2, 3) or perspective (3, 3) matrices.

    ``points``: (..., 2); with batched matrices (N, 2|3, 3) the points are (N, K, 2) (or
    (N, 2)). Boxes as xyxy (..., 4) go through their two corners (use 4 corners for
    rotations). numpy, cupy or torch (same kind out; float64 for numpy / cupy matrices).

    Example
    -------
    >>> moved = cupyprep.transform_points(keypoints, matrices)         # doctest: +SKIP
    """
    pts, back = _unwrap(points)
    m, _ = _unwrap(matrix)
    xp = _xp_of(pts, m)
    hint = "pass it on the other argument's device"
    pts = _arrays.upload(xp, pts, "points", hint, np.float64)
    m = _arrays.upload(xp, m, "matrix", hint, np.float64)
    if m.shape[-1] != 3 or m.shape[-2] not in (2, 3) or m.ndim not in (2, 3):
        raise ValueError(f"matrix: expected shape (2, 3), (3, 3) or (N, 2|3, 3), got {_arrays.describe(m)}")
    if pts.shape[-1:] != (2,):
        raise ValueError(f"points: expected a last axis of 2 (x, y), got {_arrays.describe(pts)}")
    if m.ndim == 3:
        if pts.shape[0] != m.shape[0]:
            raise ValueError(f"points: expected {m.shape[0]} rows of points (one per matrix), got {pts.shape}")
        mm = m.reshape((m.shape[0],) + (1,) * (pts.ndim - 2) + m.shape[1:])
    else:
        mm = m
    x, y = pts[..., 0], pts[..., 1]
    X = mm[..., 0, 0] * x + mm[..., 0, 1] * y + mm[..., 0, 2]
    Y = mm[..., 1, 0] * x + mm[..., 1, 1] * y + mm[..., 1, 2]
    if m.shape[-2] == 3:
        W = mm[..., 2, 0] * x + mm[..., 2, 1] * y + mm[..., 2, 2]
        X, Y = X / W, Y / W
    return back(xp.stack([X, Y], axis=-1))


# --- the warp op -------------------------------------------------------------------------
# The warp kernels that follow OpenCV's float coordinates (nearest and linear on 1, 3 and 4
# channels, cubic on any: _warp_kernel), which also come as dense and several pixels per
# thread variants, for one strided batch or a list of sources: <type, channels, dense,
# pixels per thread, list> (the generic variants take either).
_FLOAT_WARP_KERNELS = ("nearest", "linear", "cubic")


@functools.lru_cache(maxsize=None)
def _warp_expr(op, kernel, dtype, cn, dense=False, pixels=1, listed=False):
    if kernel in _FLOAT_WARP_KERNELS:
        dense_flag, list_flag = ("true" if f else "false" for f in (dense, listed))
        return (f"cupyprep_warp_{op}_{kernel}<{C_TYPES[np.dtype(dtype)]}, {cn}, {dense_flag}, "
                f"{pixels}, {list_flag}>")
    return f"cupyprep_warp_{op}_{kernel}<{C_TYPES[np.dtype(dtype)]}, {cn}>"


def _staged_expr(cn, listed):
    return (f"cupyprep_warp_affine_linear_staged<unsigned char, {cn}, "
            f"{'true' if listed else 'false'}, {_STAGED_BLOCKS}>")


def _warp_kernel(interpolation, cn):
    """Which of OpenCV's implementations a warp takes: its float kernels for nearest and
    linear on 1, 3 and 4 channels and for cubic; its fixed-point remap for 2 channels."""
    if interpolation == "cubic":
        return "cubic"
    return interpolation if cn != 2 else interpolation + "_fixed"


def _warp_variants():
    generic = [_warp_expr(op, _warp_kernel(i, cn), d, cn)
               for op in ("affine", "perspective")
               for i in WARP_INTERPOLATIONS
               for d in WARP_DTYPES
               for cn in (1, 2, 3, 4)]
    dense = [_warp_expr(op, i, d, cn, True, px, listed)
             for op in ("affine", "perspective")
             for i in _FLOAT_WARP_KERNELS
             for d in WARP_DTYPES
             for cn in (1, 2, 3, 4) if _warp_kernel(i, cn) == i
             for px in sorted({_warp_pixels(i, d, cn, b) for b in BORDER_MODES})
             for listed in (False, True)]
    return generic + dense


def _staged_variants():
    return [_staged_expr(cn, listed) for cn in _STAGED_CHANNELS for listed in (False, True)]


# warmup("warp") compiles all three files' kernels
_kernels.register_variants("warp", "warp.cu", _warp_variants)
_kernels.register_variants("warp", "warp_staged.cu", _staged_variants)
_kernels.register_variants("warp", "warp_matrices.cu", lambda: [_RANDOM_AFFINE_KERNEL, _SIMILARITY_KERNEL])


@functools.lru_cache(maxsize=None)
def _inter_tables():
    """OpenCV's initInterTab2D for INTER_LINEAR at 32x32 sub-pixel positions (the fixed-point
    remap's tables): float32 weights (vy * vx of the 1-D kernels at i / 32) and int16
    weights (rounded * 2^15, corrected so each set sums to exactly 2^15 at its largest /
    smallest central weight)."""
    f32 = np.float32
    t = np.arange(32, dtype=f32) * f32(1.0 / 32)
    k = 2
    one_d = np.stack([f32(1) - t, t], axis=1).astype(f32)
    kk = k * k
    ftab = np.empty((32, 32, k, k), f32)
    itab = np.zeros(32 * 32 * kk, np.int64)  # flat, as OpenCV's static table
    for i in range(32):
        for j in range(32):
            w = (one_d[i][:, None] * one_d[j][None, :]).astype(f32)
            ftab[i, j] = w
            base = (i * 32 + j) * kk
            itab[base:base + kk] = np.clip(np.rint(w.astype(np.float64) * 32768), -32768, 32767).ravel()
            diff = int(itab[base:base + kk].sum()) - 32768
            if diff:
                # OpenCV corrects the sum at the largest / smallest of the central 2x2
                # weights; for the 2x2 kernel its search window runs into the next
                # (still zero) entry, which is reproduced here by indexing the flat table
                h = k // 2
                mk = Mk = base + h * k + h
                for k1 in range(h, h + 2):
                    for k2 in range(h, h + 2):
                        o = base + k1 * k + k2
                        if itab[o] < itab[mk]:
                            mk = o
                        elif itab[o] > itab[Mk]:
                            Mk = o
                if diff < 0:
                    itab[Mk] -= diff
                else:
                    itab[mk] -= diff
    itab = itab.astype(np.int16)
    return itab, ftab.reshape(-1)


def _gather_images(images, name):
    """``(prepared_first, arrays or batch, uniform, geometry tuple)`` for an image argument:
    HW, HWC, NHWC or a list of HW / HWC images."""
    if isinstance(images, (list, tuple)):
        first, arrays = _arrays.prepare_list(images, name)
        _validate.dtype_in(f"{name}[0]", arrays[0], WARP_DTYPES)
        # the output has a channel axis or not as the images do: one form for the list
        c = _validate.list_images(name, arrays)
        return first, arrays, False, (len(arrays), c, arrays[0].ndim == 3)
    first = _arrays.prepare(images, name)
    arr = first.array
    _validate.dtype_in(name, arr, WARP_DTYPES)
    if arr.ndim == 4 and arr.shape[0] == 0:
        if arr.shape[1] <= 0 or arr.shape[2] <= 0 or arr.shape[3] <= 0:
            raise ValueError(f"{name}: expected non-empty images, got {_arrays.describe(arr)}")
        return first, arr, True, (0, arr.shape[3], True)
    geo = _validate.image_layout(name, arr, "NHWC" if arr.ndim == 4 else "HWC")
    return first, arr, True, (geo.n, geo.c, geo.has_channels)


def _matrices(name, matrix, rows, count, call):
    """Validate ``matrix`` ((rows, 3) or (count, rows, 3)); numpy or the image's kind.
    Returns a float64 array (numpy, or cupy on the image's device)."""
    if _arrays._is_torch(matrix) or _arrays._is_cupy(matrix):
        m = call.convert(matrix, name) if call.device else _unwrap(matrix)[0]
    else:
        try:
            m = np.asarray(matrix, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: expected a ({rows}, 3) array of numbers, got {matrix!r}") from None
    xp = _xp_of(m)
    if m.dtype != np.float64:
        m = xp.asarray(m, dtype=xp.float64)
    if m.shape == (rows, 3):
        pass
    elif m.ndim == 3 and m.shape[1:] == (rows, 3):
        if m.shape[0] != count:
            raise ValueError(f"{name}: expected one matrix or {count} (one per image), got "
                             f"{m.shape[0]} ({_arrays.describe(m)})")
    else:
        raise ValueError(f"{name}: expected shape ({rows}, 3) or ({count}, {rows}, 3), "
                         f"got {_arrays.describe(m)}")
    # host matrices are checked for finite values here; device ones are not read for it
    # (a non-finite coordinate samples the border). Their singularity test in _inverse
    # does read one flag back.
    if xp is np and m.size and not np.all(np.isfinite(m)):
        raise ValueError(f"{name}: expected finite values, got NaN or infinity")
    return m


def _inverse(m, perspective, inverse_map, name):
    """Destination-to-source matrices in float64, inverted as OpenCV inverts them."""
    xp = _xp_of(m)
    if inverse_map:
        return m
    if not perspective:
        return _invert_affine(m, xp, lambda k: _singular_affine(_item(name, k)))
    if xp is not np:  # before CuPy's det: it calls cuBLAS, which a capture refuses too
        _arrays.refuse_under_capture(*_SINGULARITY_READ)
    k = _first_zero(xp.linalg.det(m), xp)
    if k is not None:
        raise ValueError(f"{_item(name, k if m.ndim == 3 else None)}: singular perspective matrix "
                         "(determinant 0) cannot be inverted")
    if xp is np:
        # cv2.warpPerspective inverts with cv::invert (LU); use it where it is at hand
        from .cpu import cv2_module

        cv2 = cv2_module()
        flat = m.reshape(-1, 3, 3)
        return np.stack([cv2.invert(k, flags=cv2.DECOMP_LU)[1] for k in flat]).reshape(m.shape)
    return xp.linalg.inv(m)


def _mat_value(m):
    """One host (2, 3) or (3, 3) float64 matrix as warp.cu's ``ByValue<double, 9>`` (by value)."""
    return _kernels.by_value(m, np.float64, 9)


_NO_MAT = _mat_value(np.zeros(0))


# what a singularity test of device matrices says under CUDA graph capture
_SINGULARITY_READ = ("the device matrices' singularity test",
                     "for a warp, pass destination-to-source matrices with inverse_map=True")


def _singular_affine(name):
    return ValueError(f"{name}: singular affine matrix (determinant 0) cannot be inverted; "
                      "pass inverse_map=True if it maps destination to source")


def _warp(images, matrix, size, interpolation, border_mode, border_value, inverse_map, out,
          perspective, src_index=None, name="img", matrix_name="M", checked=False,
          gathered=None):
    """The warp ops' common path; ``gathered``: what _gather_images(images, name) returned,
    when the caller has it already. Everything after reading the images runs on their
    device and stream (the matrices' conversion and inversion too)."""
    call, arrays, uniform, (n_src, c, has_channels) = gathered or _gather_images(images, name)
    dh, dw = _validate.size_hw("size", size)
    interpolation = _validate.choice("interpolation", interpolation, WARP_INTERPOLATIONS)
    border_mode = _validate.choice("border_mode", border_mode, BORDER_MODES)
    dtype = np.dtype(arrays.dtype if uniform else arrays[0].dtype)
    if c > 4:
        raise ValueError(f"{name}: expected 1 to 4 channels, got {c}")
    batched = not uniform or arrays.ndim == 4 or src_index is not None
    n_out = n_src if src_index is None else len(src_index)
    rows = 3 if perspective else 2
    with call.launch():
        m = matrix if checked else _matrices(matrix_name, matrix, rows, n_out, call)
        # OpenCV's border value is stored as the image type; float16 images are warped in
        # float32 and rounded once, so theirs stays float32
        bval = _validate.fill_values("border_value", border_value, c, dtype, np.float32)
        out_shape = (dh, dw) + ((c,) if has_channels else ())
        if batched:
            out_shape = (n_out,) + out_shape
        if n_out == 0:
            native, _ = call.output(out, out_shape, dtype)
            return native
        inv = _inverse(m, perspective, inverse_map, matrix_name)
        if not call.device:
            mats = np.broadcast_to(_arrays.to_host(inv), (n_out, rows, 3))
            imgs = (list(arrays) if uniform and arrays.ndim == 4 else
                    [arrays] if uniform else arrays)
            idx = range(n_out) if src_index is None else _arrays.to_host(src_index)
            res = np.empty(out_shape if batched else (1,) + out_shape, dtype)
            _cpu_warp([imgs[int(k)] for k in idx], mats, (dh, dw), interpolation, border_mode, bval,
                      perspective, res)
            return call.result(res if batched else res[0], out)
        xp = call.xp
        kernel = _warp_kernel(interpolation, c)
        i64, i32, f32 = np.int64, np.int32, np.float32
        if uniform:
            st = _arrays.element_strides(arrays, name)
            if arrays.ndim == 4:
                s_n, s_y, s_x, s_c = st
                sh, sw = arrays.shape[1:3]
            else:
                s_n = 0
                s_y, s_x = st[:2]
                s_c = st[2] if arrays.ndim == 3 else 0
                sh, sw = arrays.shape[:2]
            tables = (arrays, None, _kernels.no_ragged(), i32(sh), i32(sw), i64(s_n), i64(s_y), i64(s_x), i64(s_c))
            src_dense = _is_dense((s_x, s_c), c)
            src_steps = (s_n, s_y)  # image and row strides, in bytes for uint8
        else:
            strides = []
            for a in arrays:
                st = _arrays.element_strides(a, name)
                strides.append(st[:2] + ([st[2]] if a.ndim == 3 else [0]))
            src_dense = all(_is_dense(st[1:], c) for st in strides)
            src_steps = [st[0] for st in strides]
            # per-image records by value, or (a long list) one uploaded table
            table, records, _ = _kernels.ragged(arrays, name, [a.shape[:2] for a in arrays], strides, xp)
            tables = (None, table, records, i32(0), i32(0), i64(0), i64(0), i64(0), i64(0))
        index = None if src_index is None else _arrays.upload(
            xp, src_index, "image_index", "pass it on the images' device", np.int32)
        if inv.ndim == 2 and _xp_of(inv) is np:
            # one host matrix goes by value: no upload (a CUDA graph keeps its values)
            mats, mat_step, mat_value = None, 0, _mat_value(inv)
        else:
            mats = xp.ascontiguousarray(_arrays.upload(
                xp, inv, f"{matrix_name} (a batch of host matrices)", "pass them on the images' "
                "device, or one matrix (which goes by value)", np.float64))
            mat_step, mat_value = (rows * 3 if mats.ndim == 3 else 0), _NO_MAT
        itab = ftab = None
        if kernel == "linear_fixed":  # nearest_fixed reads no weights
            table = _arrays.device_constant(
                xp, ("inter", dtype == np.uint8), lambda: _inter_tables()[0 if dtype == np.uint8 else 1],
                "the warp's interpolation table", "make one such call before the capture (the "
                "table then stays on the device)")
            itab, ftab = (table, None) if dtype == np.uint8 else (None, table)
        body_end = dw // _OPENCV_WARP_STEP * _OPENCV_WARP_STEP
        bv = [f32(v) for v in bval + (0.0,) * (4 - c)]
        with call.writing(out, out_shape, dtype, [arrays] if uniform else arrays) as (native, dst):
            d = _arrays.element_strides(dst, "out")
            if has_channels:
                d_n, d_y, d_x, d_c = d if batched else [0] + d
            else:
                (d_n, d_y, d_x), d_c = (d if batched else [0] + d), 0
            # dense: every pixel's channels adjacent, in every source and in the output (the
            # kernel then knows those strides at compile time and moves words)
            dense = (_WARP_DENSE and kernel in _FLOAT_WARP_KERNELS and src_dense
                     and _is_dense((d_x, d_c), c))
            pixels = _warp_pixels(kernel, dtype, c, border_mode) if dense else 1
            thread_rows = _warp_rows(kernel, pixels) if dense else _WARP_ROWS_PER_THREAD
            args = tables + (
                index, mats, i64(mat_step), mat_value, dst, i32(dh), i32(dw), i64(d_n), i64(d_y), i64(d_x),
                i64(d_c), i32(BORDER_MODES.index(border_mode)), *bv, i32(body_end), itab, ftab,
                i32(n_out), i32(thread_rows))
            if (_WARP_STAGED and dense and not perspective and kernel == "linear"
                    and dtype == np.uint8 and c in _STAGED_CHANNELS and border_mode == "constant"
                    and _staged_aligned([arrays] if uniform else arrays, src_steps)
                    and _staged_tiles(dh, dw, n_out) < 2 ** 31):
                # the same arguments, then its work's split: it reads no tables and no rows
                # a block
                fn = _kernels.get_function("warp_staged.cu", _staged_expr(c, not uniform))
                grid, split = _staged_launch(dh, dw, n_out)
                if grid:
                    fn((grid, 1, 1), (_STAGED_THREADS, 1, 1), args + split)
                return native
            fn = _kernels.get_function("warp.cu", _warp_expr(
                "perspective" if perspective else "affine", kernel, dtype, c, dense, pixels,
                dense and not uniform))
            block_x = _WARP_BLOCK_X if dense else BLOCK_3D
            launch_3d(fn, n_out, (dh + thread_rows - 1) // thread_rows, (dw + pixels - 1) // pixels, args,
                      block_x=block_x, block_y=BLOCK_3D // block_x)
        return native


# uint8 linear affine warps of 3 or 4 channels with a constant border (W5's kind) take
# warp_staged.cu's kernel where every source's first byte and row stride are multiples of 4
# (its copy of a tile's source box reads aligned words): a block of _STAGED_THREADS makes a
# _STAGED_TILE-square output tile from the tile's source pixels, copied once into shared
# memory. Same results as the dense kernel, bit for bit (benchmarks/NOTES.md, "The tile's
# source box in shared memory, as a kernel" and "The staged kernel, second pass"). False:
# the dense kernels take them.
_WARP_STAGED = True
_STAGED_CHANNELS = (3, 4)
_STAGED_TILE = 64
_STAGED_THREADS = 256
# the kernel's launch bound, blocks an SM: 4 (64 registers, a box of up to 47.5 KB) ran W5 at
# 0.0687 ms, 5 (48 registers, 44 KB) at 0.0767
_STAGED_BLOCKS = 4


# Tiles a block of the staged kernel makes in turn, one after another: the tiles after a
# block's first wait for no plan (its threads work out all of them before the first), and
# a block's tiles are neighbours in a row of tiles (4 ran W5 fastest of 1, 2, 3, 4, 5, 6
# and 8, and of 4 as a 2 x 2 square). The launch's last _STAGED_SINGLE_WAVES waves of
# blocks (the blocks the GPU holds at once) make one tile each, which keeps its end short
# (benchmarks/NOTES.md, "Tiles a block, single tiles last"). At most _STAGED_MOST_TILES,
# the kernel's kStagedMostTiles.
_STAGED_GROUP = 4
_STAGED_SINGLE_WAVES = 1.5
_STAGED_MOST_TILES = 8


def _staged_tiles(dh, dw, n_out):
    tile = _STAGED_TILE
    return -(-dh // tile) * -(-dw // tile) * n_out


def _staged_launch(dh, dw, n_out):
    """The staged kernel's grid (blocks along x; 0: nothing to make) and its split of the
    work, ``(group, grouped)`` as int32: the tiles in order, image by image and row by row,
    `group` a block for the first `grouped` blocks, then one a block. Past 2^31 - 1 blocks
    the kernel's blocks loop over more."""
    tiles = _staged_tiles(dh, dw, n_out)
    group = _STAGED_GROUP
    if not 1 <= group <= _STAGED_MOST_TILES:
        raise ValueError(f"_STAGED_GROUP must be 1 to {_STAGED_MOST_TILES}, got {group}")
    singles = min(tiles, math.ceil(_STAGED_SINGLE_WAVES * _kernels.multiprocessors() * _STAGED_BLOCKS))
    grouped = (tiles - singles) // group
    blocks = tiles - (group - 1) * grouped
    return min(blocks, 2 ** 31 - 1), (np.int32(group), np.int32(grouped))


def _staged_aligned(sources, steps):
    """Whether the staged kernel's word reads are aligned: every source's first byte and
    the image and row strides (bytes) ``steps`` multiples of 4."""
    def address(a):  # NumPy under the emulator
        return a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr

    return all(address(a) % 4 == 0 for a in sources) and all(v % 4 == 0 for v in steps)


# Output rows one warp thread makes (its image's setup is done once for them).
_WARP_ROWS_PER_THREAD = 4
# Nearest / linear on dense pixels: output pixels one thread makes side by side in a row
# where _WARP_PIXELS_BY_SIZE has no other count (for uint8, 4 pixels of 1, 3 or 4 channels
# are whole 32-bit words), and whether the dense variants are used at all (False: always
# the generic strided kernel).
_WARP_PIXELS_PER_THREAD = 4
_WARP_DENSE = True
# Where a pixel is wide, fewer pixels a thread ran faster on W5's rotations (the sweep is
# in benchmarks/NOTES.md): nearest / linear by (kernel, bytes a pixel), the others taking
# _WARP_PIXELS_PER_THREAD; cubic, whose 16 taps a pixel are 4 times linear's work, one
# pixel a thread for uint8, two for float32 (one of 3 or 4 channels with a border other
# than constant), and for 2-byte elements one of 3 or 4 channels and two of 1 or 2 (uint8 3
# channels 0.50 ms at 4 pixels, 0.31 at 1; float32 3 channels 0.57 at 4, 0.47 at 2).
_WARP_PIXELS_BY_SIZE = {("nearest", 8): 2, ("nearest", 12): 1, ("nearest", 16): 1,
                        ("linear", 8): 2, ("linear", 16): 2}
# With a border other than constant every pixel outside the image goes through the border
# pass after its group's store, and some kinds then run faster at fewer pixels a thread
# (the same sweep under every border): (kernel, element type, channels) -> (pixels for
# replicate, pixels for reflect / reflect101 / wrap); kinds not listed keep the count above.
# float32 cubic of 3 or 4 channels makes one pixel there (3 channels at two ran 6% slower
# with a replicated border, 7% faster with the constant one).
_WARP_PIXELS_BY_BORDER = {
    ("nearest", "uint8", 4): (2, 2), ("linear", "uint8", 3): (2, 4),
    ("linear", "uint8", 4): (2, 2),
    ("nearest", "uint16", 1): (2, 2), ("linear", "uint16", 1): (2, 2),
    ("linear", "uint16", 3): (1, 4),
    ("nearest", "float16", 1): (2, 2), ("linear", "float16", 1): (2, 2),
    ("nearest", "float16", 3): (1, 1), ("linear", "float16", 3): (1, 4),
    ("linear", "float32", 1): (2, 2), ("linear", "float32", 3): (2, 2),
    ("cubic", "float32", 3): (1, 1), ("cubic", "float32", 4): (1, 1),
}


def _warp_pixels(kernel, dtype, channels, border_mode="constant"):
    """Output pixels a thread of a dense warp kernel makes side by side (the host picks
    the kernel's variant per call, so the count may follow the border mode)."""
    dtype = np.dtype(dtype)
    if border_mode != "constant":
        picks = _WARP_PIXELS_BY_BORDER.get((kernel, dtype.name, channels))
        if picks is not None:
            return picks[border_mode != "replicate"]
    if kernel == "cubic":
        return {1: 1, 4: 2}.get(dtype.itemsize, 1 if channels >= 3 else 2)
    return _WARP_PIXELS_BY_SIZE.get((kernel, dtype.itemsize * channels),
                                    _WARP_PIXELS_PER_THREAD)


def _warp_rows(kernel, pixels):
    """Output rows a thread of a dense warp kernel makes: cubic at one pixel a row shares its
    image's setup over twice as many (benchmarks/NOTES.md: uint8 3 channels 0.308 -> 0.288
    ms; no other kind gained)."""
    return 2 * _WARP_ROWS_PER_THREAD if kernel == "cubic" and pixels == 1 else _WARP_ROWS_PER_THREAD


# Dense variants: threads of a block along x, the rest of its BLOCK_3D along y. A warp is
# then a tile of _WARP_BLOCK_X pixel groups by 32 / _WARP_BLOCK_X rows (8: 32 x 4 pixels
# at 4 per thread). For a rotation a squarer tile's taps lie in fewer source rows than a
# one-row strip's (fewer cache sectors per load instruction); for a translation a wider
# one's do (benchmarks/NOTES.md has the sweep). The generic kernel keeps one-row warps.
_WARP_BLOCK_X = 8


def warp_affine(img, M, size, *, interpolation="linear", border_mode="constant", border_value=0,
                inverse_map=False, out=None):
    """Warp an image or a batch by affine matrices, with ``cv2.warpAffine`` semantics.

    Parameters
    ----------
    img : array (numpy, cupy or torch) or list of arrays
        ``HW``, ``HWC`` or a batch ``NHWC``; or a list of ``HW`` / ``HWC`` images of
        different sizes (one launch over the whole list; the output is one ``NHWC``
        batch; up to 64 images go to the kernel by value, a longer list's table is copied
        per call, into a CUDA graph as kernel parameters under capture). uint8, uint16,
        float16 or float32; 1 to 4 channels.
    M : array
        (2, 3), one matrix for every image, or (N, 2, 3), one per image; numpy, or on
        the images' device.
    size : (int, int)
        Output ``(height, width)`` (``cv2compat.warpAffine`` keeps OpenCV's ``(width,
        height)``).
    interpolation : {"nearest", "linear", "cubic"}
    border_mode : {"constant", "replicate", "reflect", "reflect101", "wrap"}
    border_value : float or sequence
        Per channel, for ``constant`` (in pixel units; saturated to the image type).
    inverse_map : bool
        ``M`` maps destination to source (OpenCV's ``WARP_INVERSE_MAP``).
    out : array, optional
        Written in place; same kind, shape and dtype as the result. May be the input itself
        or overlap it (as OpenCV's ``dst=src``).

    Returns
    -------
    The warped image(s): ``size`` + channels, with the batch axis for a batch or list.

    Convention
    ----------
    As OpenCV: ``dst(x, y) = src(M^-1 (x, y))`` with pixel centers at integer coordinates
    (a pixel's center is ``(x, y)``, not ``(x + 0.5, y + 0.5)``); M is inverted in double
    (``invertAffineTransform``'s formula), a singular M is an error. Border taps follow
    ``border_mode``; with ``constant`` a pixel whose taps all fall outside takes
    ``border_value``, and partial neighbourhoods blend it in.

    The kernels follow OpenCV 5's arithmetic step by step: for nearest and linear on 1, 3
    and 4 channels its float32 warp kernels (matrix in float32, fused multiply-adds where
    its AVX2 code has them, results rounded half to even); for 2 channels its fixed-point
    remap (coordinates quantized to 1/32 pixel, 32x32 weight tables, int16 weights for
    uint8); cubic takes Keys' weights at the float32 coordinates. uint8 results equal
    ``cv2.warpAffine`` bit for bit on a CPU where OpenCV runs its AVX2 code (every x86 CPU
    since 2013). float16 is the float32 warp rounded once. OpenCV 5.1's x86 build hands
    some warps with constant or replicate borders to Intel IPP, which rounds otherwise (a
    nearest sample at a half-pixel coordinate can take the other pixel): the CPU backend
    runs ``cv2`` with IPP off for the call (``cv2.ipp.setUseIPP`` is per thread; the
    caller's setting is put back), so both backends agree on every OpenCV version.

    Example
    -------
    >>> M = cupyprep.get_rotation_matrix_2d((255.5, 255.5), 30.0)       # doctest: +SKIP
    >>> rotated = cupyprep.warp_affine(batch_gpu, M, (512, 512))         # doctest: +SKIP
    """
    return _warp(img, M, size, interpolation, border_mode, border_value, inverse_map, out,
                 perspective=False)


def warp_perspective(img, M, size, *, interpolation="linear", border_mode="constant",
                     border_value=0, inverse_map=False, out=None):
    """Warp by homographies, with ``cv2.warpPerspective`` semantics: as :func:`warp_affine`
    with ``M`` (3, 3) or (N, 3, 3).

    Convention
    ----------
    ``dst(x, y) = src((M^-1 [x, y, 1])_xy / (M^-1 [x, y, 1])_w)``, pixel centers at
    integers. Numpy matrices are inverted with OpenCV's own ``cv::invert`` (LU), device
    matrices with the device's LU; a singular M is an error. Arithmetic as
    :func:`warp_affine` (the perspective division in float32; for 2 channels in double,
    with coordinates quantized to 1/32 pixel).

    Example
    -------
    >>> H = cupyprep.get_perspective_transform(quad, corners)           # doctest: +SKIP
    >>> flat = cupyprep.warp_perspective(page_gpu, H, (800, 600))       # doctest: +SKIP
    """
    return _warp(img, M, size, interpolation, border_mode, border_value, inverse_map, out,
                 perspective=True)


def align_faces(images, landmarks, image_index, size=(112, 112), template=ARCFACE_112, *,
                interpolation="linear", out=None):
    """Aligned face crops for many faces across a batch, in one launch.

    Parameters
    ----------
    images : NHWC array or list of HWC images (numpy, cupy or torch)
    landmarks : (F, K, 2) array
        Per face, K >= 2 points (x, y) in its source image, in the template's order (5 for
        ``ARCFACE_112``: eyes, nose tip, mouth corners).
    image_index : (F,) ints
        The image each face is in.
    size : (int, int)
        Crop (height, width); the template (given for 112 x 112) is scaled to it.
    template : (K, 2) array
    interpolation : {"nearest", "linear", "cubic"}

    Returns
    -------
    (crops, matrices): (F, H, W, C) crops of the images' kind and dtype, and the (F, 2, 3)
    float64 source-to-crop matrices, also of the images' kind (numpy, cupy, or torch on the
    images' device).

    Convention
    ----------
    Each face's matrix is :func:`estimate_similarity` from its landmarks to the template
    (Umeyama, as insightface's ``norm_crop``), then :func:`warp_affine` with a constant 0
    border.

    Example
    -------
    >>> crops, M = cupyprep.align_faces(frames_gpu, kps, idx)            # doctest: +SKIP
    """
    gathered = _gather_images(images, "images")
    call, arrays, uniform, (n_src, c, has_channels) = gathered
    dh, dw = _validate.size_hw("size", size)
    tmpl = np.asarray(template, np.float64)
    if tmpl.ndim != 2 or tmpl.shape[1] != 2 or tmpl.shape[0] < 2:
        raise ValueError(f"template: expected shape (K, 2) with K >= 2, got {tmpl.shape}")
    tmpl = tmpl * np.array([dw / 112.0, dh / 112.0])
    # the landmarks' conversion and the similarity fit run on the images' device and stream
    with call.launch():
        lm = _unwrap(landmarks)[0]
        lm = call.convert(landmarks, "landmarks") if (call.device and not isinstance(lm, np.ndarray)) else lm
        xp = call.xp if call.device else np
        lm = xp.asarray(lm, dtype=xp.float64)
        if lm.ndim != 3 or lm.shape[1:] != tmpl.shape:
            raise ValueError(f"landmarks: expected shape (F, {tmpl.shape[0]}, 2), got {_arrays.describe(lm)}")
        idx = _arrays.read_back(_unwrap(image_index)[0], "image_index", "align_faces reads it (and its fits' "
                                "check) back: call it outside the capture") \
            if not isinstance(image_index, (list, tuple)) else np.asarray(image_index)
        idx = np.asarray(idx)
        if idx.shape != (lm.shape[0],) or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"image_index: expected ({lm.shape[0]},) integers, got shape {idx.shape} "
                             f"dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= n_src):
            raise ValueError(f"image_index: expected values in [0, {n_src}), got {idx.min()}..{idx.max()}")
        if uniform and arrays.ndim != 4:
            raise ValueError(f"images: expected an NHWC batch or a list of images, got {_arrays.describe(arrays)}")
        if lm.shape[0] == 0:
            mats = inv = xp.zeros((0, 2, 3))
        elif call.device:  # the fit and its inverse in one launch
            tmpl = _arrays.upload(xp, tmpl, "template", "align_faces also reads its fits' check "
                                  "back: call it outside the capture")
            mats, inv = _similarity_on_device(xp, lm, tmpl, "landmarks", inverse=True)
        else:
            mats = _similarity_numpy(lm, tmpl, "landmarks")
            # the same words as the device path's check, which does not say which fit
            inv = _invert_affine(mats, np, lambda k: _singular_fit("landmarks"))
        crops = _warp(images, inv, (dh, dw), interpolation, "constant", 0, True, out, False,
                      src_index=idx.astype(np.int32), name="images", matrix_name="landmarks",
                      checked=True, gathered=gathered)
        return crops, call.back(mats)


def random_affine(batch, degrees=0.0, translate=(0.0, 0.0), scale=(1.0, 1.0), shear=0.0,
                  flip_p=0.0, *, seed=None, generator=None, interpolation="linear",
                  border_mode="constant", border_value=0, out=None):
    """Random affine augmentation of a batch: one matrix per image, drawn on the batch's
    device, and one warp launch.

    Parameters
    ----------
    batch : NHWC array (numpy, cupy or torch)
    degrees : float or (float, float)
        Rotation range in degrees (a number d means (-d, d)); counter-clockwise on screen.
    translate : (float, float)
        Largest shift as a fraction of (width, height).
    scale : (float, float)
        Scale range.
    shear : float or (float, float)
        x-shear angle range in degrees (a number s means (-s, s)).
    flip_p : float
        Probability of a horizontal flip.
    seed : int, optional / generator : optional
        A numpy ``Generator``, ``cupy.random.Generator`` / ``RandomState``, or
        ``torch.Generator`` on the batch's device; else a new one from ``seed``. Under
        ``torch.cuda.graph`` pass a generator the graph knows of
        (``graph.register_generator_state(generator)``; torch cannot make a new one during
        a capture): each replay then draws new matrices.

    Returns
    -------
    (warped, matrices): the warped batch (same kind, shape and dtype) and the (N, 2, 3)
    source-to-destination matrices (float64; numpy / cupy, or torch for torch input) so
    boxes and keypoints follow through :func:`transform_points`.

    Convention
    ----------
    About the image center c = ((W - 1) / 2, (H - 1) / 2), each image's matrix is
    ``p' = s R(angle) Sh(shear) F (p - c) + c + t`` with F the optional flip
    ``x -> -x``, then :func:`warp_affine` (pixel centers at integers).

    Example
    -------
    >>> aug, M = cupyprep.random_affine(batch, 15, (0.1, 0.1), (0.8, 1.2), flip_p=0.5, seed=0)  # doctest: +SKIP
    """
    if isinstance(batch, (list, tuple)):
        raise TypeError(f"batch: expected an NHWC array or tensor, got a {type(batch).__name__}")
    gathered = _gather_images(batch, "batch")
    call = gathered[0]
    arr = call.array
    if arr.ndim != 4:
        raise ValueError(f"batch: expected an NHWC batch, got {_arrays.describe(arr)}")
    n, h, w = arr.shape[:3]
    deg = _range("degrees", degrees)
    shr = _range("shear", shear)
    tr = _pair("translate", translate)
    sc = _pair("scale", scale)
    if sc[0] <= 0 or sc[1] < sc[0]:
        raise ValueError(f"scale: expected 0 < low <= high, got {scale!r}")
    flip_p = _validate.number("flip_p", flip_p)
    if not 0 <= flip_p <= 1:
        raise ValueError(f"flip_p: expected a probability in [0, 1], got {flip_p}")
    # drawn and assembled on the batch's device and stream, where the warp reads them
    with call.launch():
        u = _uniforms(call, n, generator, seed)  # (n, 6) in [0, 1), on the batch's side
        terms = _affine_terms(deg, sc, shr, tr, w, h, flip_p)
        if call.device:
            mats, inv = _affine_on_device(call.xp, u, terms)
        else:
            mats = _affine_from_uniforms(u, terms)
            # det = s^2 f (the shear's determinant is 1): never singular, so the inverse
            # skips _inverse's singularity test
            inv = _invert_affine(mats, np)
        warped = _warp(batch, inv, (h, w), interpolation, border_mode, border_value, True, out,
                       False, name="batch", checked=True, gathered=gathered)
        return warped, call.back(mats)


def _affine_terms(deg, sc, shr, tr, w, h, flip_p):
    """random_affine's ranges as the terms its matrix formula takes (Python floats):
    (deg0, deg_span, sc0, sc_span, sh0, sh_span, rad, tx_span, ty_span, flip_p, cx, cy)."""
    return (deg[0], deg[1] - deg[0], sc[0], sc[1] - sc[0], shr[0], shr[1] - shr[0],
            math.pi / 180, tr[0] * w, tr[1] * h, flip_p, (w - 1) / 2.0, (h - 1) / 2.0)


def _affine_from_uniforms(u, terms):
    """(n, 2, 3) float64 NumPy matrices ``s R(angle) Sh(shear) F (p - c) + c + t`` from (n, 6)
    uniforms (the formula of random_affine's CPU path; its kernel,
    ``cupyprep_random_affine_matrices``, rounds the same operations in the same order)."""
    deg0, deg_span, sc0, sc_span, sh0, sh_span, rad, tx_span, ty_span, flip_p, cx, cy = terms
    a = (deg0 + deg_span * u[:, 0]) * rad
    s = sc0 + sc_span * u[:, 1]
    k = np.tan((sh0 + sh_span * u[:, 2]) * rad)
    tx = (2 * u[:, 3] - 1) * tx_span
    ty = (2 * u[:, 4] - 1) * ty_span
    f = np.where(u[:, 5] < flip_p, -1.0, 1.0)
    cos, sin = np.cos(a), np.sin(a)
    a00, a01 = s * cos * f, s * (cos * k + sin)
    a10, a11 = -s * sin * f, s * (cos - sin * k)
    b0 = cx + tx - (a00 * cx + a01 * cy)
    b1 = cy + ty - (a10 * cx + a11 * cy)
    return np.stack([np.stack([a00, a01, b0], axis=-1), np.stack([a10, a11, b1], axis=-1)], axis=-2)


def _affine_on_device(xp, u, terms):
    """random_affine's matrices and their inverses from ``xp`` uniforms (CuPy, or NumPy
    under the kernel emulator) on the current device and stream, in one launch."""
    n = u.shape[0]
    u = xp.ascontiguousarray(u, dtype=np.float64)
    mats = xp.empty((n, 2, 3), np.float64)
    inv = xp.empty((n, 2, 3), np.float64)
    f64 = np.float64
    fn = _kernels.get_function("warp_matrices.cu", _RANDOM_AFFINE_KERNEL)
    launch_1d(fn, n, (u, np.int32(n), *[f64(t) for t in terms], mats, inv))
    return mats, inv


_RANDOM_AFFINE_KERNEL = "cupyprep_random_affine_matrices"


def _range(name, v):
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        v = float(v)
        if v < 0:
            raise ValueError(f"{name}: expected a non-negative number or a (low, high) pair, got {v}")
        return (-v, v)
    lo, hi = _pair(name, v)
    if hi < lo:
        raise ValueError(f"{name}: expected low <= high, got {v!r}")
    return lo, hi


def _pair(name, v):
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise TypeError(f"{name}: expected a pair of numbers, got {v!r}")
    return _validate.number(name, v[0]), _validate.number(name, v[1])


def _uniforms(call, n, generator, seed):
    """(n, 6) float64 uniforms in [0, 1) drawn where the batch lives (no host round trip)."""
    if call.kind == "torch":
        import torch

        dev = call.tensor.device
        if generator is None:
            generator = torch.Generator(device=dev)
            if seed is not None:
                generator.manual_seed(int(seed))
            else:
                generator.seed()
        u = torch.rand((n, 6), generator=generator, device=dev, dtype=torch.float64)
        return _arrays._from_torch(u) if call.device else u.numpy()
    if call.device and call.kind != "numpy":
        import cupy

        gen = generator if generator is not None else cupy.random.default_rng(seed)
        if hasattr(gen, "random"):
            return gen.random((n, 6), dtype=np.float64)
        return gen.random_sample((n, 6), dtype=np.float64)
    gen = generator if generator is not None else np.random.default_rng(seed)
    return gen.random((n, 6))
