"""The geometric ops under their earlier module path: ``cupyprep.geometry`` re-exports
:mod:`cupyprep.resize`, :mod:`cupyprep.warp`, :mod:`cupyprep.matrices`,
:mod:`cupyprep.faces` and :mod:`cupyprep.augment`."""
from __future__ import annotations

from .augment import random_affine
from .faces import ARCFACE_112, align_faces
from .matrices import (
    estimate_similarity,
    get_affine_transform,
    get_perspective_transform,
    get_rotation_matrix_2d,
    invert_affine_transform,
    transform_points,
)
from .resize import INTERPOLATIONS, resize
from .warp import BORDER_MODES, WARP_INTERPOLATIONS, warp_affine, warp_perspective

__all__ = [
    "resize", "warp_affine", "warp_perspective", "align_faces", "random_affine",
    "get_rotation_matrix_2d", "get_affine_transform", "get_perspective_transform",
    "invert_affine_transform", "estimate_similarity", "transform_points",
    "INTERPOLATIONS", "WARP_INTERPOLATIONS", "BORDER_MODES", "ARCFACE_112",
]
