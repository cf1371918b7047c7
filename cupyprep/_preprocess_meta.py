"""``PreprocessMeta``: where each image of a preprocessed batch landed, and the mapping of
boxes and points between original images and the network input (on the GPU, one launch
of boxes.cu's ``cupyprep_map_coords``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _arrays, _kernels, _transfers
from ._arrays import rows_view
from ._launch import by_value, launch_1d
from ._specs import meta as meta_spec
from ._specs._common import IMAGES_BY_VALUE
from ._torch import is_torch, numpy_dtypes

__all__ = ["PreprocessMeta"]


@dataclass(frozen=True)
class PreprocessMeta:
    """Per-image geometry of a preprocessed batch, to map coordinates both ways.

    Attributes (NumPy arrays, one row per image):
      ``orig_size`` (N, 2) original (height, width);
      ``resized_size`` (N, 2) size the image was resized to;
      ``offset`` (N, 2) (y, x) of the resized image's top-left corner on the output canvas
      (negative where cropped);
      ``size`` the canvas (height, width).
    Derived: ``scale`` (N, 2) resized / original per axis; ``pad`` (N, 4) top, bottom,
    left, right padding; ``crop`` (N, 2) top and left rows / columns cut from the resized
    image.

    Coordinates are continuous pixel coordinates (a pixel's edges at integers), so an image
    corner maps to a canvas corner: ``network = original * scale + offset``.
    """

    orig_size: np.ndarray
    resized_size: np.ndarray
    offset: np.ndarray
    size: tuple

    def __len__(self):
        return len(self.orig_size)

    @property
    def scale(self):
        return self.resized_size / self.orig_size

    @property
    def pad(self):
        H, W = self.size
        top, left = np.maximum(self.offset[:, 0], 0), np.maximum(self.offset[:, 1], 0)
        bottom = np.maximum(H - (self.offset[:, 0] + self.resized_size[:, 0]), 0)
        right = np.maximum(W - (self.offset[:, 1] + self.resized_size[:, 1]), 0)
        return np.stack([top, bottom, left, right], axis=1)

    @property
    def crop(self):
        return np.maximum(-self.offset, 0)

    def to_original(self, coords, image_index=None, clip=True):
        """Network (canvas) coordinates to original-image coordinates.

        ``coords``: boxes ``(..., 4)`` as xyxy or points ``(..., 2)`` as xy; numpy, cupy or
        torch. Shaped ``(N, K, 4|2)`` (one row of K per image), or a list of N arrays
        ``(K_i, 4|2)``, or ``(K, 4|2)`` with ``image_index`` (K,) naming each row's image.
        ``clip`` limits results to the original image. The result is the coordinates' float
        dtype (float64 for integers).

        On the GPU this is one kernel launch that waits for nothing: a device
        ``image_index`` is read where it is (a row whose index is outside [0, N) comes out
        NaN; a host one is checked and refused), and the geometry of up to 64 images goes
        to the kernel by value; beyond 64 images, or with a host ``image_index``, a table
        is copied per call (under CUDA graph capture, into the graph as kernel
        parameters: docs/streams-and-graphs.md).
        """
        return self._map(coords, image_index, inverse=True, clip=clip)

    def to_network(self, coords, image_index=None, clip=False):
        """Original-image coordinates to network (canvas) coordinates; as ``to_original``."""
        return self._map(coords, image_index, inverse=False, clip=clip)

    # device coords: computed on their device and stream, as the ops run (a list's arrays
    # each by the recursive call)
    @_arrays.on_input_device
    def _map(self, coords, image_index, inverse, clip, image0=None, table=None):
        if isinstance(coords, (list, tuple)):
            if len(coords) != len(self):
                raise ValueError(f"coords: expected a list of {len(self)} arrays, got {len(coords)}")
            table = self._table(inverse)  # once for the list
            return [self._map(c, None, inverse, clip, image0=i, table=table) for i, c in enumerate(coords)]
        width = coords.shape[-1]
        if width not in (2, 4):
            raise ValueError(f"coords: expected a last axis of 4 (xyxy) or 2 (xy), got {_arrays.describe(coords)}")
        if image_index is not None or image0 is not None:
            if coords.ndim != 2:
                raise ValueError(f"coords: expected shape (K, {width}) with image_index, got "
                                 f"{tuple(coords.shape)}")
        elif coords.ndim != 3 or coords.shape[0] != len(self):
            raise ValueError(f"coords: expected shape ({len(self)}, K, {width}) or image_index, "
                             f"got {tuple(coords.shape)}")
        if table is None:
            table = self._table(inverse)
        call = _arrays.prepare(coords, "coords")
        dtype = _map_dtype(coords)
        if call.device and dtype is not None:
            return self._map_kernel(call, table, image_index, image0, dtype, inverse, clip)
        # the CPU backend (and bfloat16 tensors)
        idx = None
        if image0 is not None:
            idx = np.full(coords.shape[0], image0)
        elif image_index is not None:
            idx = self._host_index(image_index, coords.shape[0])
        return _map_expression(coords, table, idx, inverse, clip)

    def _table(self, inverse):
        """Per image, float64 (mul x, mul y, add x, add y, hi x, hi y) of the mapping."""
        limits = self.orig_size if inverse else np.array([self.size] * len(self))
        return np.stack([self.scale[:, 1], self.scale[:, 0], self.offset[:, 1], self.offset[:, 0],
                         limits[:, 1], limits[:, 0]], axis=1).astype(np.float64)

    @staticmethod
    def _check_index(idx, k, got):
        """A ValueError unless ``idx`` (host or device) is (k,) integers; ``got()`` describes
        it."""
        if tuple(idx.shape) != (k,) or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"image_index: expected ({k},) integers (one per row of coords), "
                             f"got {got()}")

    def _host_index(self, image_index, k):
        """A host ``image_index``: (k,) integers in [0, N), else a ValueError naming it."""
        idx = np.asarray(_transfers.to_host(image_index))
        self._check_index(idx, k, lambda: f"shape {idx.shape} dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise ValueError(f"image_index: expected values in [0, {len(self)}), got "
                             f"{idx.min()}..{idx.max()}")
        return idx.astype(np.int64)

    def _map_kernel(self, call, table, image_index, image0, dtype, inverse, clip):
        """One launch of boxes.cu's cupyprep_map_coords; a device ``image_index`` is read
        where it is (not back on the host: a row whose index is outside [0, N) is NaN)."""
        arr = call.array
        xp = call.xp
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
        view, A, P, st = rows_view(arr, "coords")
        index = None
        if image_index is not None:
            k = arr.shape[0]
            index = call.sibling(image_index, "image_index")
            if index is not None:
                self._check_index(index, k, lambda: _arrays.describe(image_index))
                index = xp.ascontiguousarray(index, dtype=np.int64)
            else:
                index = _transfers.upload(xp, self._host_index(image_index, k), "image_index",
                                       "pass it on the coordinates' device")
        n, limit = len(self), IMAGES_BY_VALUE
        values = table.astype(dtype)
        if n <= limit:  # by value
            tab, small = None, values
        else:
            tab = _transfers.upload(xp, values, "meta: its per-image geometry",
                                 f"above {limit} images it is copied per call; map the "
                                 "coordinates outside the capture")
            small = ()
        small = by_value(small, dtype, limit * 6)  # boxes.cu's ByValue<T, limit * 6>
        native, out = call.output(None, arr.shape, dtype)
        expr = meta_spec.SPEC.expr(dtype, arr.shape[-1], inverse, clip)
        launch_1d(_kernels.get_function(meta_spec.FILE, expr), A * P, (
            view, np.int64(P), *st, index, np.int64(0 if image0 is None else image0),
            np.int64(n), tab, small, out, np.int64(A * P)))
        return native


def _map_expression(coords, table, idx, inverse, clip):
    """The mapping as array expressions on ``coords`` (numpy, cupy or torch; the CPU
    backend's form and the kernel's specification): ``table`` from ``_table``; ``idx`` the
    (K,) host image of each row of (K, W) coords, or None for (N, K, W) coords. The table
    is rounded to the coordinates' float dtype, each operation then rounded on its own."""
    reps = coords.shape[-1] // 2
    mul, add, hi = (np.tile(table[:, 2 * j:2 * j + 2], reps) for j in range(3))
    if idx is not None:
        mul, add, hi = mul[idx], add[idx], hi[idx]
    else:
        mul, add, hi = mul[:, None], add[:, None], hi[:, None]
    mul, add, hi = (_like(coords, a) for a in (mul, add, hi))
    out = (coords - add) / mul if inverse else coords * mul + add
    return _clip(out, hi) if clip else out


def _map_dtype(coords):
    """The mapping's float dtype for ``coords`` (its own float dtype, float64 for integers),
    or None where the kernel has none (bfloat16)."""
    if is_torch(coords):
        if coords.is_floating_point():
            dt = numpy_dtypes().get(coords.dtype)
            return dt if dt is not None and np.dtype(dt) in meta_spec.MAP_TYPES else None
        return np.dtype(np.float64)
    dt = np.dtype(coords.dtype)
    return dt if dt.kind == "f" and dt in meta_spec.MAP_TYPES else (np.dtype(np.float64) if dt.kind in "iub" else None)


def _like(ref, a):
    """``a`` (numpy) as the array kind, device and float dtype of ``ref``."""
    if is_torch(ref):
        import torch

        dtype = ref.dtype if ref.is_floating_point() else torch.float64
        np_dtype = numpy_dtypes().get(dtype)
        if np_dtype is None:  # bfloat16: no NumPy dtype to stage it through
            return torch.as_tensor(a, dtype=dtype, device=ref.device)
    else:
        np_dtype = ref.dtype if ref.dtype.kind == "f" else np.float64
    return _transfers.upload_like(ref, a, np_dtype, "meta: its per-image geometry",
                               "map the coordinates outside the capture")


def _clip(out, hi):
    if is_torch(out):
        import torch

        return torch.minimum(torch.clamp(out, min=0), hi)
    xp = np if isinstance(out, np.ndarray) else __import__("cupy")
    return xp.minimum(xp.maximum(out, 0), hi)
