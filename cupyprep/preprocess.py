"""Fused batch preprocessing: decoded frames to a model's input tensor in one launch."""
from __future__ import annotations

import functools

import numpy as np

from . import _arrays, _kernels, _plans, _resizing, _transfers, _validate, cpu
from ._arrays import dense_pixels
from ._launch import by_value, launch_3d, no_ragged
from ._preprocess_meta import PreprocessMeta
from ._specs import preprocess as spec
from ._specs._common import IMAGES_BY_VALUE
from ._specs.preprocess import MODES

__all__ = ["preprocess", "PreprocessMeta", "MODES"]

# Launch plans (see _plans): a repeated call with the same geometry and options (a batch,
# one image, or a list of up to IMAGES_BY_VALUE images) launches the stored plan
_PLANS = _plans.PlanCache()

# A uniform launch's by-value list arguments (ByValue<RaggedImage, 1>, ByValue<int, 1>: unread)
_NO_LIST = (no_ragged(1), by_value((), np.int32, 1))


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


# --- the op ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _area_fast(h, w, nh, nw):
    """Whether cv2.resize's area from h x w to nh x nw is its fast regime (integer factors),
    which the fused kernel computes per pixel."""
    return _resizing.area_kernel(_resizing.resize_scale(h, nh), _resizing.resize_scale(w, nw))[0] == "area_fast"


def _all_area_fast(sizes, plans, uniform):
    """Whether every image's area resize is OpenCV's fast regime (a batch: its one
    geometry)."""
    rows = plans[:1, :2] if uniform else plans[:, :2]
    return all(_area_fast(h, w, nh, nw) for (h, w), (nh, nw) in zip(sizes, rows.tolist()))


def _resized(image, plan_row, interpolation, antialias):
    """``image`` (NHWC or HW / HWC; None plan: an empty batch, as it is) resized to its
    plan's (nh, nw) on the device, as the same kind: by OpenCV's area interpolation, or
    with ``antialias`` by torchvision's antialiased one."""
    if plan_row is None:
        return image
    layout = "NHWC" if image.ndim == 4 else "HWC"
    size = (int(plan_row[0]), int(plan_row[1]))
    if antialias:
        return _resizing.resize_antialias(image, size, interpolation, layout, None)
    return _resizing.resize_images(image, size, "area", layout, None)


def _copy(meta):
    """A meta of the same values that shares no array with ``meta``."""
    return PreprocessMeta(meta.orig_size.copy(), meta.resized_size.copy(), meta.offset.copy(), meta.size)


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
        if first.device:  # one image: a batch of one, the uniform launch (which a plan keeps)
            return first, (arr[None] if arr.ndim == 3 else arr[None, :, :, None]), True
        return first, [arr], False
    raise ValueError(f"images: expected an NHWC batch, an HWC image or a list of HWC images, "
                     f"got {_arrays.describe(arr)}")


def preprocess(images, size, *, mode="letterbox", resize_size=None, interpolation="linear",
               antialias=False, pad_value=114, mean=None, std=None, scale=1 / 255, swap_rb=True, layout="NCHW",
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
    antialias : bool
        ``True``: the resize is torchvision's antialiased one (:func:`cupyprep.resize` with
        ``antialias=True``; ``interpolation`` "linear" or "cubic"), run into a temporary of
        the planned size (one launch per axis for a batch, per image of a list), then
        placed and normalized by the fused kernel. With ``mode="center_crop"`` this is
        torchvision's ``Resize(resize_size, antialias=True)`` + ``CenterCrop(size)``: the
        same pixels, bit for bit for uint8 (torchvision on the CPU).
    pad_value : float or sequence
        In input pixel units and input channel order (114 is YOLO's gray); normalized like a
        pixel.
    mean, std, scale, swap_rb :
        As :func:`cupyprep.normalize` (mean/std in output channel order), but with other
        defaults: ``scale=1/255`` and ``swap_rb=True`` (BGR frames to an RGB [0, 1] batch,
        the YOLO input). mean / std are in the units of ``pixel * scale``: torchvision's
        ``IMAGENET_MEAN`` / ``IMAGENET_STD`` ([0, 1] units) go with the default scale;
        0..255 statistics (mmdetection's ``[123.675, 116.28, 103.53]`` /
        ``[58.395, 57.12, 57.375]``) need ``scale=1.0``. A clear mismatch (any ``|mean|`` or
        ``|std|`` above 1.5 with pixels scaled into [0, 1], or [0, 1] statistics with integer
        pixels at ``scale=1``) gives a :class:`cupyprep.UnitsWarning` naming the fix.
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
    kind, key, found = _PLANS.find(images, out, (size, mode, resize_size, interpolation, antialias, pad_value,
                                                 mean, std, scale, swap_rb, layout, dtype), IMAGES_BY_VALUE)
    if found is not None:
        units, meta = found.extra
        if units is not None:
            _validate.units(*units)
        batch = found.run(images, kind, out)
        if batch is not None:
            return batch, _copy(meta)
    first, arrays, uniform = _gather(images)
    H, W = _validate.size_hw("size", size)
    mode = _validate.choice("mode", mode, MODES)
    interpolation = _validate.choice("interpolation", interpolation, ("nearest", "linear", "area", "cubic"))
    if resize_size is not None:
        if mode != "center_crop":
            raise ValueError(f"resize_size: only used with mode='center_crop', got mode={mode!r}")
        resize_size = _validate.positive_int("resize_size", resize_size)
    if antialias is not False and antialias is not True:
        raise TypeError(f"antialias: expected True or False, got {antialias!r}")
    if antialias and interpolation not in ("linear", "cubic"):
        raise ValueError(f"interpolation: antialias=True takes 'linear' or 'cubic' (torchvision's "
                         f"bilinear and bicubic), got {interpolation!r}")
    out_dtype = _validate.out_dtype("dtype", dtype, spec.OUT_DTYPES)
    layout = _validate.choice("layout", layout, ("NCHW", "NHWC"))
    if uniform:
        arr = arrays
        in_dtype = _validate.dtype_in("images", arr, spec.IN_DTYPES)
        geo = _validate.image_layout("images", arr, "NHWC")
        c, n = geo.c, geo.n
        sizes = [(geo.h, geo.w)] * n
    else:
        given_list = isinstance(images, (list, tuple))
        in_dtype = _validate.dtype_in("images[0]" if given_list else "images", arrays[0], spec.IN_DTYPES)
        # an HW image and an HxWx1 one may share a batch: the output has channels anyway
        c = _validate.list_images("images", arrays, same_ndim=False)
        n = len(arrays)
        sizes = [a.shape[:2] for a in arrays]
    if c not in (1, 3, 4):
        what = (f"images[0] is {_arrays.describe(images[0])}" if isinstance(images, (list, tuple))
                else _arrays.describe(images))
        raise ValueError(f"images: expected 1, 3 or 4 channels, got {c} ({what})")
    given = mean is not None or std is not None
    mean = _validate.per_channel("mean", mean, c, 0.0, "images")
    std = _validate.per_channel("std", std, c, 1.0, "images")
    if any(s == 0 for s in std):
        raise ValueError(f"std: expected non-zero values, got {std}")
    scale = _validate.number("scale", scale)
    units = None
    if given:
        units = ("preprocess", mean, std, given, scale, in_dtype, 1 / 255)
        _validate.units(*units)
    swap_rb = _validate.flag("swap_rb", swap_rb) and c >= 3
    pad = _validate.fill_values("pad_value", pad_value, c, in_dtype, in_dtype, "images")
    if uniform:  # one geometry for the whole batch
        plans = np.tile(np.array(plan(geo.h, geo.w, (H, W), mode, resize_size), np.int64), (n, 1))
    else:
        plans = np.array([_plan(h, w, (H, W), mode, resize_size) for h, w in sizes], np.int64)
    if n and plans[:, :2].max() >= 2**31:  # the kernels' int32 sizes
        k = int(np.argmax(plans[:, :2].max(axis=1)))
        raise ValueError(f"{'resize_size' if resize_size is not None else 'size'}: image {k} "
                         f"({sizes[k][0]} x {sizes[k][1]}) would be resized to {plans[k, 0]} x "
                         f"{plans[k, 1]}, expected sides below 2**31")
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
                             layout == "NHWC", out_dtype, c, antialias)
        return first.result(res, out), meta
    xp = first.xp
    inputs = [arr] if uniform else arrays
    with first.launch(), first.writing(out, out_shape, out_dtype, inputs) as (native, dst):
        two_steps = antialias or (interpolation == "area" and not _all_area_fast(sizes, plans, uniform))
        if two_steps:
            # OpenCV's weighted / upscaling area is resize()'s kernel, and the antialiased
            # resize resize_aa.cu's (their tables kept per geometry); the fused kernel then
            # places, pads and normalizes the resized pixels at scale 1, where nearest is a copy
            resized = functools.partial(_resized, interpolation=interpolation, antialias=antialias)
            if uniform:
                arr = resized(arr, plans[0] if n else None)
                geo = _validate.image_layout("images", arr, "NHWC", max_channels=4)
            else:
                # each image of the list as the caller gave it (a torch list's first array is
                # a CuPy view), resized as the same kind, then read as a list's images are (on
                # the device only a list is not uniform: one image is a batch of one)
                arrays = [first.convert_image(resized(im, p), "images") for im, p in zip(images, plans)]
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
            dense = dense_pixels((s_x, s_c), c)
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
            dense = all(dense_pixels((st[1], st[2]), c) for st in strides)
            # per-image records and plans by value, or (a long list) one uploaded table
            tables = (None, *_transfers.ragged(arrays, "images", sizes, strides, xp, plans),
                      i64(0), i32(0), i32(0), i32(0), i32(0), i32(0), i32(0), i64(0), i64(0), i64(0),
                      f64(0), f64(0))
        m = [f32(v) for v in mean + (0.0,) * (4 - c)]
        sd = [f32(1.0 / v) for v in std + (1.0,) * (4 - c)]
        p = [f32(v) for v in pad + (0.0,) * (4 - c)]
        tuning = spec.SPEC
        fn = _kernels.get_function(spec.FILE, tuning.expr(interpolation, in_dtype, out_dtype, c,
                                                          dense, not uniform, layout == "NHWC"))
        rows, xpt = tuning.rows_per_block, tuning.x_per_thread
        args = tables + (dst, i32(H), i32(W), i64(d_n), i64(d_y), i64(d_x), i64(d_c),
                         i32(swap_rb), f32(scale), *m, *sd, *p, i32(n), i32(rows))
        shape = launch_3d(fn, n, (H + rows - 1) // rows, (W + xpt - 1) // xpt, args, block_x=tuning.block_x)
        # (a list with a key goes by value: its records are in the arguments)
        if (shape is not None and key is not None and not two_steps
                and _plans.unstaged(inputs, out)):
            _PLANS.put(key, _plans.LaunchPlan(
                fn, *shape, args, (0 if uniform else None, len(tables)), out_shape, out_dtype, (units, _copy(meta)),
                None if uniform else (2, sizes, strides)))
    return native, meta
