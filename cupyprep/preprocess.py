"""Fused batch preprocessing: decoded frames to a model's input tensor in one launch."""
from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

import numpy as np

from . import _arrays, _kernels, _validate, cpu
from .detection import _rows as _coord_rows
from ._kernels import C_TYPES, launch_1d, launch_3d
from .geometry import _area_kernel, _is_dense, _scale

__all__ = ["preprocess", "PreprocessMeta", "MODES"]

MODES = ("letterbox", "stretch", "center_crop", "letterbox_top_left")
PREPROCESS_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
OUT_DTYPES = ("float32", "float16", "uint8")
# the fused kernel's own; "area" for integer factors only (OpenCV's fast area regime): other
# area factors resize first, then take nearest at scale 1
_FUSED_INTERPOLATIONS = ("nearest", "linear", "cubic", "area")


def _expr(interpolation, in_dtype, out_dtype, cn, dense, ragged, nhwc):
    d, r, h = ("true" if flag else "false" for flag in (dense, ragged, nhwc))
    return (f"cupyprep_preprocess_{interpolation}<{C_TYPES[np.dtype(in_dtype)]}, "
            f"{C_TYPES[np.dtype(out_dtype)]}, {cn}, {d}, {r}, {h}, {_X_PER_THREAD}>")


def _variants():
    return [
        _expr(i, d, o, cn, dense, ragged, nhwc)
        for i in _FUSED_INTERPOLATIONS
        for d in PREPROCESS_DTYPES
        for o in OUT_DTYPES
        for cn in (1, 3, 4)
        for dense in (True, False)
        for ragged in (False, True)
        for nhwc in (False, True)
    ]


# Launch shape, measured on an H200 with benchmarks/profile.py --sweep: threads per block
# along x, output rows one thread makes in its columns (their taps computed once for all of
# them), and adjacent columns per thread (2: stores of two elements at a time, and the
# uint8 word path's loads of two pixels in flight together; 1 took W1 / W2 / W1r 0.075 /
# 0.105 / 0.095 ms against 0.068 / 0.093 / 0.090, 128 threads 0.071 / 0.092 / 0.095).
_BLOCK_X = 64
_ROWS_PER_BLOCK = 8
_X_PER_THREAD = 2


_kernels.register_variants("preprocess", "preprocess.cu", _variants)

# A uniform launch's by-value list arguments (ByValue<RaggedImage, 1>, ByValue<int, 1>: unread)
_NO_LIST = (_kernels.no_ragged(1), _kernels.by_value((), np.int32, 1))


# --- geometry --------------------------------------------------------------------------------
def plan(h0, w0, size, mode, resize_size=None):
    """Where one ``h0 x w0`` image lands on the ``size`` canvas.

    Returns ``(nh, nw, off_y, off_x)``: the image is resized to ``nh x nw`` and its top-left
    corner placed at ``(off_y, off_x)`` (negative: cropped).

    - ``stretch``: ``nh, nw = size``.
    - ``letterbox``: ``r = min(H / h0, W / w0)``, ``nh = round(h0 * r)``,
      ``nw = round(w0 * r)`` (Python's round, half to even, at least 1), centered:
      ``off_y = (H - nh) // 2`` (the extra pixel of odd padding goes to the bottom / right,
      as ``round(d/2 - 0.1)`` / ``round(d/2 + 0.1)`` split it in the YOLO recipe).
    - ``letterbox_top_left``: the same size, padded at the right and bottom only.
    - ``center_crop``: the shorter side to ``resize_size`` (default ``min(size)``), the
      longer to ``int(resize_size * long / short)`` (torchvision's ``Resize(int)``), then a
      centered crop: ``off = -round((n - S) / 2)``; a side shorter than the crop is padded
      ``(S - n) // 2`` before (torchvision's ``CenterCrop``).
    """
    H, W = size
    if mode == "stretch":
        return H, W, 0, 0
    if mode in ("letterbox", "letterbox_top_left"):
        r = min(H / h0, W / w0)
        nh = min(H, max(1, int(round(h0 * r))))
        nw = min(W, max(1, int(round(w0 * r))))
        if mode == "letterbox_top_left":
            return nh, nw, 0, 0
        return nh, nw, (H - nh) // 2, (W - nw) // 2
    s = min(H, W) if resize_size is None else resize_size
    if w0 <= h0:
        nw, nh = s, max(1, int(s * h0 / w0))
    else:
        nh, nw = s, max(1, int(s * w0 / h0))

    def offset(n, S):
        return (S - n) // 2 if n < S else -int(round((n - S) / 2.0))

    return nh, nw, offset(nh, H), offset(nw, W)


# plan() of a list's images: frames of a few sizes recur from call to call
_plan = functools.lru_cache(maxsize=1024)(plan)


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
        parameters: README's CUDA graphs section).
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
        idx = np.asarray(_arrays.to_host(image_index))
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
        view, A, P, st = _coord_rows(arr, "coords")
        index = None
        if image_index is not None:
            k = arr.shape[0]
            index = call.sibling(image_index, "image_index")
            if index is not None:
                self._check_index(index, k, lambda: _arrays.describe(image_index))
                index = xp.ascontiguousarray(index, dtype=np.int64)
            else:
                index = _arrays.upload(xp, self._host_index(image_index, k), "image_index",
                                       "pass it on the coordinates' device")
        n, limit = len(self), _kernels.IMAGES_BY_VALUE
        values = table.astype(dtype)
        if n <= limit:  # by value
            tab, small = None, values
        else:
            tab = _arrays.upload(xp, values, "meta: its per-image geometry",
                                 f"above {limit} images it is copied per call; map the "
                                 "coordinates outside the capture")
            small = ()
        small = _kernels.by_value(small, dtype, limit * 6)  # boxes.cu's ByValue<T, limit * 6>
        native, out = call.output(None, arr.shape, dtype)
        expr = (f"cupyprep_map_coords<{_MAP_TYPES[np.dtype(dtype)]}, {arr.shape[-1]}, "
                f"{'true' if inverse else 'false'}, {'true' if clip else 'false'}>")
        launch_1d(_kernels.get_function("boxes.cu", expr), A * P, (
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


_MAP_TYPES = {**{np.dtype(t): C_TYPES[np.dtype(t)] for t in (np.float16, np.float32)},
              np.dtype(np.float64): "double"}


def _map_variants():
    return [f"cupyprep_map_coords<{t}, {w}, {i}, {c}>" for t in _MAP_TYPES.values() for w in (2, 4)
            for i in ("false", "true") for c in ("false", "true")]


_kernels.register_variants("meta", "boxes.cu", _map_variants)


def _map_dtype(coords):
    """The mapping's float dtype for ``coords`` (its own float dtype, float64 for integers),
    or None where the kernel has none (bfloat16)."""
    if _arrays._is_torch(coords):
        if coords.is_floating_point():
            dt = _arrays._NUMPY_DTYPES().get(coords.dtype)
            return dt if dt is not None and np.dtype(dt) in _MAP_TYPES else None
        return np.dtype(np.float64)
    dt = np.dtype(coords.dtype)
    return dt if dt.kind == "f" and dt in _MAP_TYPES else (np.dtype(np.float64) if dt.kind in "iub" else None)


def _like(ref, a):
    """``a`` (numpy) as the array kind, device and float dtype of ``ref``."""
    if _arrays._is_torch(ref):
        import torch

        dtype = ref.dtype if ref.is_floating_point() else torch.float64
        np_dtype = _arrays._NUMPY_DTYPES().get(dtype)
        if np_dtype is None:  # bfloat16: no NumPy dtype to stage it through
            return torch.as_tensor(a, dtype=dtype, device=ref.device)
    else:
        np_dtype = ref.dtype if ref.dtype.kind == "f" else np.float64
    return _arrays.upload_like(ref, a, np_dtype, "meta: its per-image geometry",
                               "map the coordinates outside the capture")


def _clip(out, hi):
    if _arrays._is_torch(out):
        import torch

        return torch.minimum(torch.clamp(out, min=0), hi)
    xp = np if isinstance(out, np.ndarray) else __import__("cupy")
    return xp.minimum(xp.maximum(out, 0), hi)


# --- the op ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _area_fast(h, w, nh, nw):
    """Whether cv2.resize's area from h x w to nh x nw is its fast regime (integer factors),
    which the fused kernel computes per pixel."""
    return _area_kernel(_scale(h, nh), _scale(w, nw))[0] == "area_fast"


def _all_area_fast(sizes, plans, uniform):
    """Whether every image's area resize is OpenCV's fast regime (a batch: its one
    geometry)."""
    rows = plans[:1, :2] if uniform else plans[:, :2]
    return all(_area_fast(h, w, nh, nw) for (h, w), (nh, nw) in zip(sizes, rows.tolist()))


def _area_resized(image, plan_row):
    """``image`` (NHWC or HW / HWC; None plan: an empty batch, as it is) resized to its
    plan's (nh, nw) by OpenCV's area interpolation, on the device, as the same kind."""
    from .geometry import _resize

    if plan_row is None:
        return image
    layout = "NHWC" if image.ndim == 4 else "HWC"
    return _resize(image, (int(plan_row[0]), int(plan_row[1])), "area", layout, None)


def _gather(images):
    """Read the images argument: ``(prepared_first, arrays, uniform)``."""
    if isinstance(images, (list, tuple)):
        first, arrays = _arrays.prepare_list(images, "images")
        return first, arrays, False
    first = _arrays.prepare(images, "images")
    arr = first.array
    if arr.ndim == 4:
        return first, arr, True
    if arr.ndim in (2, 3):
        return first, [arr], False
    raise ValueError(f"images: expected an NHWC batch, an HWC image or a list of HWC images, "
                     f"got {_arrays.describe(arr)}")


def preprocess(images, size, *, mode="letterbox", resize_size=None, interpolation="linear",
               pad_value=114, mean=None, std=None, scale=1 / 255, swap_rb=True, layout="NCHW",
               dtype="float32", out=None):
    """Decoded frames to a model's input batch: resize, pad or crop, channel order,
    ``(x * scale - mean) / std``, layout and dtype, in one kernel launch (with ``area`` at
    other than whole factors, two: see ``interpolation``).

    Parameters
    ----------
    images : NHWC array, HWC array, or list of HWC arrays (numpy, cupy or torch)
        Same-size images as one NHWC array, or images of different sizes as a list (one
        launch over the whole ragged batch; up to 64 images go to the kernel by value, a
        longer list's table is copied per call, into a CUDA graph as kernel parameters
        under capture). uint8, uint16, float16 or float32; 1, 3 or 4
        channels; every image of a list has the same dtype and channel count.
    size : (int, int)
        Output (height, width).
    mode : {"letterbox", "stretch", "center_crop", "letterbox_top_left"}
        How each image is placed on the output canvas; see :func:`plan` for the rounding.
        ``letterbox``: keep the aspect ratio, center, pad (the YOLO convention);
        ``stretch``: a plain resize; ``center_crop``: shorter side to ``resize_size``, then a
        centered crop (the torchvision classification convention); ``letterbox_top_left``:
        pad at the right and bottom only.
    resize_size : int, optional
        ``center_crop`` only: the resized shorter side (default ``min(size)``).
    interpolation : {"nearest", "linear", "area", "cubic"}
        As :func:`cupyprep.resize` (``cv2.resize`` semantics). ``area`` (YOLOv5's choice
        for shrinking) is fused where every image shrinks by whole factors (OpenCV's fast
        area regime, a cell mean per pixel: 1080 x 1920 to 360 x 640, say); other factors
        run on the GPU as :func:`cupyprep.resize`'s area kernel into a temporary of the
        planned size (one launch for a batch, one per image of a list), then the fused
        kernel at scale 1.
    pad_value : float or sequence
        In input pixel units and input channel order (114 is YOLO's gray); normalized like a
        pixel.
    mean, std, scale, swap_rb :
        As :func:`cupyprep.normalize`; mean/std in output channel order.
    layout : {"NCHW", "NHWC"}
    dtype : {"float32", "float16", "uint8"}
    out : array, optional
        Written in place (same kind as the images, right shape and dtype); may overlap the
        images.

    Returns
    -------
    (batch, meta) : the (N, C, H, W) or (N, H, W, C) batch, same kind as the input (torch
    CUDA in, torch CUDA out, zero-copy), and a :class:`PreprocessMeta` mapping boxes and
    points back to each original image.

    Convention
    ----------
    Equal to the CPU recipe, image by image: ``cv2.resize`` to the planned size (a stored
    pixel of the input dtype), ``cv2.copyMakeBorder`` with the split padding (or a crop),
    then the normalization of :func:`cupyprep.normalize`.

    Example
    -------
    >>> batch, meta = cupyprep.preprocess(frames, (640, 640))            # doctest: +SKIP
    >>> boxes_in_frames = meta.to_original(boxes_in_network)            # doctest: +SKIP
    """
    first, arrays, uniform = _gather(images)
    H, W = _validate.size_hw("size", size)
    mode = _validate.choice("mode", mode, MODES)
    interpolation = _validate.choice("interpolation", interpolation, ("nearest", "linear", "area", "cubic"))
    if resize_size is not None:
        if mode != "center_crop":
            raise ValueError(f"resize_size: only used with mode='center_crop', got mode={mode!r}")
        if not isinstance(resize_size, numbers.Integral) or isinstance(resize_size, bool) \
                or resize_size <= 0:
            raise ValueError(f"resize_size: expected a positive int, got {resize_size!r}")
    out_dtype = _validate.out_dtype("dtype", dtype, OUT_DTYPES)
    layout = _validate.choice("layout", layout, ("NCHW", "NHWC"))
    if uniform:
        arr = arrays
        in_dtype = _validate.dtype_in("images", arr, PREPROCESS_DTYPES)
        geo = _validate.image_layout("images", arr, "NHWC")
        c, n = geo.c, geo.n
        sizes = [(geo.h, geo.w)] * n
    else:
        in_dtype = _validate.dtype_in("images[0]", arrays[0], PREPROCESS_DTYPES)
        # an HW image and an HxWx1 one may share a batch: the output has channels anyway
        c = _validate.list_images("images", arrays, same_ndim=False)
        n = len(arrays)
        sizes = [a.shape[:2] for a in arrays]
    if c not in (1, 3, 4):
        what = (f"images[0] is {_arrays.describe(images[0])}" if isinstance(images, (list, tuple))
                else _arrays.describe(images))
        raise ValueError(f"images: expected 1, 3 or 4 channels, got {c} ({what})")
    mean = _validate.per_channel("mean", mean, c, 0.0)
    std = _validate.per_channel("std", std, c, 1.0)
    if any(s == 0 for s in std):
        raise ValueError(f"std: expected non-zero values, got {std}")
    scale = _validate.number("scale", scale)
    swap_rb = bool(swap_rb) and c >= 3
    pad = _validate.fill_values("pad_value", pad_value, c, in_dtype, in_dtype)
    if uniform:  # one geometry for the whole batch
        plans = np.tile(np.array(plan(geo.h, geo.w, (H, W), mode, resize_size), np.int64), (n, 1))
    else:
        plans = np.array([_plan(h, w, (H, W), mode, resize_size) for h, w in sizes], np.int64)
    meta = PreprocessMeta(
        orig_size=np.array(sizes, np.int64).reshape(n, 2),
        resized_size=plans[:, :2].copy(),
        offset=plans[:, 2:].copy(),
        size=(H, W),
    )
    out_shape = (n, c, H, W) if layout == "NCHW" else (n, H, W, c)
    if not first.device:
        imgs = [arrays[i] for i in range(n)] if uniform else arrays
        res = cpu.preprocess(imgs, (H, W), plans, interpolation, pad, mean, std, scale, swap_rb,
                             layout == "NHWC", out_dtype, c)
        return first.result(res, out), meta
    xp = first.xp
    inputs = [arr] if uniform else arrays
    with first.launch(), first.writing(out, out_shape, out_dtype, inputs) as (native, dst):
        if interpolation == "area" and not _all_area_fast(sizes, plans, uniform):
            # OpenCV's weighted / upscaling area is resize()'s kernel (its tables kept per
            # geometry); the fused kernel then places, pads and normalizes the resized pixels
            # at scale 1, where nearest is a copy
            if uniform:
                arr = _area_resized(arr, plans[0] if n else None)
                geo = _validate.image_layout("images", arr, "NHWC", max_channels=4)
            else:
                # each image as the caller gave it (a torch list's first array is a CuPy
                # view), resized as the same kind, then read as a list's images are
                given = images if isinstance(images, (list, tuple)) else [images]
                arrays = [first.convert_image(_area_resized(im, p), "images")
                          for im, p in zip(given, plans)]
                sizes = [a.shape[:2] for a in arrays]
            interpolation = "nearest"
        d = _arrays.element_strides(dst, "out")
        if layout == "NCHW":
            d_n, d_c, d_y, d_x = d
        else:
            d_n, d_y, d_x, d_c = d
        i64, i32, f32, f64 = np.int64, np.int32, np.float32, np.float64
        if uniform:
            s_n, s_c, s_y, s_x = geo.strides
            dense = _is_dense((s_x, s_c), c)
            nh, nw, oy, ox = (int(v) for v in plans[0]) if n else (H, W, 0, 0)
            # OpenCV's step: 1 / (new / old) in double, not old / new
            tables = (arr, None, *_NO_LIST, i64(s_n), i32(geo.h), i32(geo.w), i32(nh),
                      i32(nw), i32(oy), i32(ox), i64(s_y), i64(s_x), i64(s_c),
                      f64(1.0 / (nh / geo.h)), f64(1.0 / (nw / geo.w)))
        else:
            strides = []
            for a in arrays:
                st = _arrays.element_strides(a, "images")
                strides.append(st[:2] + ([st[2]] if a.ndim == 3 else [1]))
            dense = all(_is_dense((st[1], st[2]), c) for st in strides)
            # per-image records and plans by value, or (a long list) one uploaded table
            tables = (None, *_kernels.ragged(arrays, "images", sizes, strides, xp, plans),
                      i64(0), i32(0), i32(0), i32(0), i32(0), i32(0), i32(0), i64(0), i64(0), i64(0),
                      f64(0), f64(0))
        m = [f32(v) for v in mean + (0.0,) * (4 - c)]
        sd = [f32(1.0 / v) for v in std + (1.0,) * (4 - c)]
        p = [f32(v) for v in pad + (0.0,) * (4 - c)]
        fn = _kernels.get_function("preprocess.cu", _expr(interpolation, in_dtype, out_dtype, c,
                                                          dense, not uniform, layout == "NHWC"))
        rows = _ROWS_PER_BLOCK
        launch_3d(fn, n, (H + rows - 1) // rows, (W + _X_PER_THREAD - 1) // _X_PER_THREAD,
                  tables + (dst, i32(H), i32(W), i64(d_n), i64(d_y), i64(d_x), i64(d_c),
                            i32(swap_rb), f32(scale), *m, *sd, *p, i32(n), i32(rows)),
                  block_x=_BLOCK_X)
    return native, meta
