"""Matrix helpers with OpenCV's semantics, for NumPy and CuPy (torch for
``transform_points``): rotation, affine and perspective transforms from points,
inversion, the similarity fit and mapping points through matrices."""
from __future__ import annotations

import math

import numpy as np

from . import _arrays, _matrix_math, _transfers, _validate
from ._arrays import unwrap, xp_of

__all__ = ["get_rotation_matrix_2d", "get_affine_transform", "get_perspective_transform",
           "invert_affine_transform", "estimate_similarity", "transform_points"]


def _as_float_array(name, x, shape_tail, batched_ok=True):
    """``x`` as a float64 numpy / cupy array whose trailing dims are ``shape_tail``."""
    xp = xp_of(x)
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
    xp = xp_of(center, angle, scale)
    c = _validate.as_numbers("center", center, xp.float64, xp)
    a = _validate.as_numbers("angle", angle, xp.float64, xp) * (math.pi / 180)
    s = _validate.as_numbers("scale", scale, xp.float64, xp)
    if c.shape[-1:] != (2,) or c.ndim > 2:
        raise ValueError(f"center: expected (x, y) or shape (N, 2), got shape {c.shape}")
    for name, v in (("angle", a), ("scale", s)):
        if v.ndim > 1 or (v.ndim == 1 and c.ndim == 2 and v.shape[0] not in (1, c.shape[0])) or \
                (v.ndim == 1 and c.ndim == 1 and v.shape[0] < 1):
            raise ValueError(f"{name}: expected a number or one per center (N,), got shape {v.shape} "
                             f"for centers of shape {c.shape}")
    try:
        alpha, beta = xp.cos(a) * s, xp.sin(a) * s
        cx, cy = c[..., 0], c[..., 1]
        alpha, beta, cx, cy = xp.broadcast_arrays(alpha, beta, cx, cy)
    except ValueError:
        raise ValueError(f"angle, scale: expected numbers or one per center, got shapes {a.shape} and "
                         f"{s.shape} for centers of shape {c.shape}") from None
    rows = [xp.stack([alpha, beta, (1 - alpha) * cx - beta * cy], axis=-1),
            xp.stack([-beta, alpha, beta * cx + (1 - alpha) * cy], axis=-1)]
    return xp.stack(rows, axis=-2)


@_arrays.on_input_device
def invert_affine_transform(matrix):
    """``cv2.invertAffineTransform`` for (2, 3) or (N, 2, 3) matrices (numpy, cupy or torch), in
    float64 with OpenCV's formula; a ValueError for singular matrices.

    Example
    -------
    >>> back = cupyprep.invert_affine_transform(M)                       # doctest: +SKIP
    """
    view, back = unwrap(matrix)
    m = _as_float_array("matrix", view, (2, 3))
    return back(_matrix_math.invert_affine(m, xp_of(m), lambda k: ValueError(
        f"{_matrix_math.item('matrix', k)}: singular affine matrix (determinant 0), got {_arrays.describe(m)}")))


def _points(name, pts, count=None, xp=None):
    xp = xp_of(pts) if xp is None else xp
    a = _validate.as_numbers(name, pts, xp.float64, xp)
    if a.ndim not in (2, 3) or a.shape[-1] != 2 or (count is not None and a.shape[-2] != count):
        k = count if count is not None else "K"
        raise ValueError(f"{name}: expected shape ({k}, 2) or (N, {k}, 2), got {_arrays.describe(a)}")
    return a


def _point_pairs(src, dst, count):
    """``(src, dst, xp, back)`` for the exact-fit transforms: ``count`` points each, same
    shape (see :func:`_inputs`)."""
    views, xp, back = _arrays.inputs_of(src=src, dst=dst)
    s, d = _points("src", views["src"], count, xp), _points("dst", views["dst"], count, xp)
    if s.shape != d.shape:
        raise ValueError(f"dst: expected the shape of src {s.shape}, got {d.shape}")
    return s, d, xp, back


@_arrays.on_input_device
def get_affine_transform(src, dst):
    """``cv2.getAffineTransform``: the (2, 3) matrix mapping 3 points ``src`` to ``dst``
    (each (3, 2) as x, y; or (N, 3, 2) for N matrices), float64, numpy, cupy or torch
    (as ``src``; host points beside device points are copied to the device).

    Example
    -------
    >>> M = cupyprep.get_affine_transform(tri_src, tri_dst)              # doctest: +SKIP
    """
    s, d, xp, back = _point_pairs(src, dst, 3)
    a = xp.concatenate([s, xp.ones(s.shape[:-1] + (1,))], axis=-1)  # rows [x, y, 1]
    det = xp.linalg.det(a)
    if bool(xp.any(xp.abs(det) < 1e-12)):
        raise ValueError("src: the three points are collinear (no affine transform maps them)")
    return back(xp.swapaxes(xp.linalg.solve(a, d), -1, -2))


@_arrays.on_input_device
def get_perspective_transform(src, dst):
    """``cv2.getPerspectiveTransform``: the (3, 3) homography mapping 4 points ``src`` to
    ``dst`` ((4, 2) or (N, 4, 2)), normalized so ``M[2, 2] = 1``, float64, numpy, cupy or torch (as ``src``).

    Example
    -------
    >>> H = cupyprep.get_perspective_transform(quad, corners)            # doctest: +SKIP
    """
    s, d, xp, back = _point_pairs(src, dst, 4)
    x, y, u, v = s[..., 0], s[..., 1], d[..., 0], d[..., 1]
    one, zero = xp.ones_like(x), xp.zeros_like(x)
    rows_u = xp.stack([x, y, one, zero, zero, zero, -x * u, -y * u], axis=-1)
    rows_v = xp.stack([zero, zero, zero, x, y, one, -x * v, -y * v], axis=-1)
    a = xp.concatenate([rows_u, rows_v], axis=-2)
    b = xp.concatenate([u, v], axis=-1)[..., None]
    det = xp.linalg.det(a)
    if bool(xp.any(xp.abs(det) < 1e-12)):
        raise ValueError("src, dst: degenerate points (three of src or of dst collinear); no homography "
                         "maps them")
    h = xp.linalg.solve(a, b)[..., 0]
    h = xp.concatenate([h, xp.ones(h.shape[:-1] + (1,))], axis=-1)
    return back(h.reshape(h.shape[:-1] + (3, 3)))


@_arrays.on_input_device
def estimate_similarity(src, dst):
    """Least-squares similarity (rotation, uniform scale, translation; no reflection) mapping
    points ``src`` to ``dst``: Umeyama's estimate, which in 2-D is closed form.

    ``src``, ``dst``: (K, 2) or (N, K, 2) with K >= 2 (numpy, cupy or torch; a set of one
    broadcasts against a batch). Returns, as ``src``'s kind, (2, 3) or
    (N, 2, 3) float64 matrices ``[[a, -b, tx], [b, a, ty]]``.

    Convention: with centered points p, q, ``a = sum(p . q) / sum |p|^2`` and
    ``b = sum(p_x q_y - p_y q_x) / sum |p|^2``; the translation maps the centroid of
    ``src`` to that of ``dst``. CuPy points are fitted by one kernel, which sums in point
    order (NumPy's pairwise sums may differ in the last bits).

    Example
    -------
    >>> M = cupyprep.estimate_similarity(landmarks, cupyprep.ARCFACE_112)   # doctest: +SKIP
    """
    views, xp, back = _arrays.inputs_of(src=src, dst=dst)
    s, d = _points("src", views["src"], None, xp), _points("dst", views["dst"], None, xp)
    batches = {a.shape[0] for a in (s, d) if a.ndim == 3} - {1}  # a batch of one broadcasts
    if s.shape[-2] != d.shape[-2] or len(batches) > 1:
        raise ValueError(f"dst: expected {s.shape[-2]} points like src (one set, or one per set of "
                         f"src), got shape {d.shape} for src of shape {s.shape}")
    if s.shape[-2] < 2:
        raise ValueError(f"src: expected at least 2 points, got {s.shape[-2]}")
    if xp is not np:  # on_input_device made the points' device and stream current
        return back(_matrix_math.similarity_on_device(xp, s, d))
    return back(_matrix_math.similarity_numpy(s, d, "src"))


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
    views, xp, back = _arrays.inputs_of(points=points, matrix=matrix)
    pts, m = views["points"], views["matrix"]
    hint = "pass it on the other argument's device"
    if not hasattr(pts, "shape"):
        pts = _validate.as_numbers("points", pts)
    if not hasattr(m, "shape"):
        m = _validate.as_numbers("matrix", m)
    pts = _transfers.upload(xp, pts, "points", hint, np.float64)
    m = _transfers.upload(xp, m, "matrix", hint, np.float64)
    if m.ndim not in (2, 3) or m.shape[-1] != 3 or m.shape[-2] not in (2, 3):
        raise ValueError(f"matrix: expected shape (2, 3), (3, 3) or (N, 2|3, 3), got {_arrays.describe(m)}")
    if pts.ndim == 0 or pts.shape[-1:] != (2,):
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
