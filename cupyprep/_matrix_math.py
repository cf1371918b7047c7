"""Matrix arithmetic shared by the warps, the matrix helpers, face alignment and random
affine augmentation: OpenCV's affine inversion, the similarity fit (on the host, or one
launch of warp_matrices.cu), and the errors they raise."""
from __future__ import annotations

import numpy as np

from . import _kernels, _transfers
from ._launch import launch_1d
from ._specs import warp as warp_spec


def invert_affine(m, xp, singular=None):
    """``cv2.invertAffineTransform``'s formula on (2, 3) / (N, 2, 3) float64 matrices
    (``1 / det``, then each product rounded once). ``singular(k)`` makes the error raised
    where a determinant is 0, k the first such matrix of a batch (None for one matrix; for
    device matrices the test reads one number back); without it (matrices known to be
    regular) a zero determinant gives zeros."""
    if xp is np and m.shape == (2, 3):
        return np.array(invert_affine_values(m.ravel().tolist(), singular)).reshape(2, 3)
    d = m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    if singular is not None:
        k = first_zero(d, xp)
        if k is not None:
            raise singular(k if m.ndim == 3 else None)
    d = xp.where(d != 0, 1.0 / xp.where(d != 0, d, 1.0), 0.0)
    inv = xp.empty(m.shape, np.float64)
    a11 = inv[..., 0, 0] = m[..., 1, 1] * d
    a22 = inv[..., 1, 1] = m[..., 0, 0] * d
    a12 = inv[..., 0, 1] = m[..., 0, 1] * -d
    a21 = inv[..., 1, 0] = m[..., 1, 0] * -d
    inv[..., 0, 2] = -a11 * m[..., 0, 2] - a12 * m[..., 1, 2]
    inv[..., 1, 2] = -a21 * m[..., 0, 2] - a22 * m[..., 1, 2]
    return inv


def invert_affine_values(m, singular=None):
    """:func:`invert_affine` of one matrix given as its six values (row by row, Python
    floats), returned alike: the same formula on Python floats (IEEE doubles, each
    operation rounded once, as NumPy's), a tenth of the host time of NumPy's array
    operations on six numbers (one host matrix is the usual cv2-style call)."""
    a, b, c, d, e, f = m
    det = a * e - b * d
    if det == 0 and singular is not None:
        raise singular(None)
    det = 1.0 / det if det != 0 else 0.0
    i00, i11, i01, i10 = e * det, a * det, b * -det, d * -det
    return [i00, i01, -i00 * c - i01 * f, i10, i11, -i10 * c - i11 * f]


def first_zero(d, xp):
    """The flat index of the first zero among the determinants ``d`` (one number read back
    for device arrays), or None."""
    zero = (d == 0).reshape(-1)
    if zero.size == 0:
        return None
    k = int(_transfers.read_back(xp.where(zero.any(), xp.argmax(zero), -1), *SINGULARITY_READ))
    return k if k >= 0 else None


def item(name, k):
    """``name``, or ``name[k]`` for the k-th of a batch (k None: one value)."""
    return name if k is None else f"{name}[{k}]"


def singular_fit(name):
    return ValueError(f"{name}: a fitted similarity is singular (determinant 0; do the "
                      "destination points coincide?)")


def similarity_numpy(s, d, name):
    """:func:`cupyprep.estimate_similarity` of float64 NumPy point sets (K >= 2)."""
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


def similarity_on_device(xp, src, dst, name="src", inverse=False):
    """:func:`cupyprep.estimate_similarity` of float64 (K, 2) / (N, K, 2) point sets (arrays of
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
    fn = _kernels.get_function(warp_spec.MATRICES_FILE, warp_spec.SIMILARITY_KERNEL)
    launch_1d(fn, n, (src, steps[0], dst, steps[1], np.int32(n), np.int32(k), mats, inv, flags))
    found = int(_transfers.read_back(flags, f"{name}: the fit's check (coinciding points, a singular fit)",
                                  "make this call outside the capture")[0]) if n else 0
    if found & 1:
        raise ValueError(f"{name}: all points coincide; no similarity is defined")
    if found & 2:
        raise singular_fit(name)
    if len(shape) == 2:
        mats, inv = mats[0], (inv[0] if inverse else None)
    return (mats, inv) if inverse else mats


# what a singularity test of device matrices says under CUDA graph capture
SINGULARITY_READ = ("the device matrices' singularity test",
                     "for a warp, pass destination-to-source matrices with inverse_map=True")


def singular_affine(name):
    return ValueError(f"{name}: singular affine matrix (determinant 0) cannot be inverted; "
                      "pass inverse_map=True if it maps destination to source")
