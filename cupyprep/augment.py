"""GPU augmentation of batches: ``random_affine`` (one matrix per image, drawn on the
batch's device, and one warp launch)."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _arrays, _kernels, _matrix_math, _validate
from ._launch import launch_1d
from ._random import check_seed, uniforms
from ._specs import warp as warp_spec
from ._warping import gather_images, warp_images

__all__ = ["random_affine"]


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
    gathered = gather_images(batch, "batch")
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
    check_seed(seed)
    # drawn and assembled on the batch's device and stream, where the warp reads them
    with call.launch():
        u = uniforms(call, (n, 6), generator, seed)  # in [0, 1), on the batch's side
        terms = _affine_terms(deg, sc, shr, tr, w, h, flip_p)
        if call.device:
            mats, inv = _affine_on_device(call.xp, u, terms)
        else:
            mats = _affine_from_uniforms(u, terms)
            # det = s^2 f (the shear's determinant is 1): never singular, so the inverse
            # skips _inverse's singularity test
            inv = _matrix_math.invert_affine(mats, np)
        warped = warp_images(batch, inv, (h, w), interpolation, border_mode, border_value, True, out,
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
    fn = _kernels.get_function(warp_spec.MATRICES_FILE, warp_spec.RANDOM_AFFINE_KERNEL)
    launch_1d(fn, n, (u, np.int32(n), *[f64(t) for t in terms], mats, inv))
    return mats, inv


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
