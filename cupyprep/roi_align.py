"""``roi_align``: ``torchvision.ops.roi_align`` on the GPU."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _arrays, _kernels, _plans, _validate
from ._specs import roi_align as spec
from .cpu import detection as cpu

__all__ = ["roi_align"]

# the largest sampling_ratio taken: up to its square of samples per output bin
MAX_SAMPLING_RATIO = 1024

# Launch plans (see _plans) of NCHW calls with (K, 5) float32 rois of the features' kind,
# keyed by the features' and the rois' geometry and the options; the rois go in at every
# call (NHWC output is a copy after the launch: no plan)
_PLANS = _plans.PlanCache()
_ROIS_AT, _OUT_AT = 9, 21  # the rois' and the output's positions in the kernel's arguments


def _plan_key(features, rois, options):
    """``(kind, key)`` of a call that can have a plan, else ``(None, None)``."""
    kind, key, _ = _PLANS.find(features, None, options)
    if key is None:
        return None, None
    r = _plans.array_key(rois)
    if (r is None or r[0] != kind or len(r[2]) != 2 or r[2][1] != 5
            or str(r[1]) not in ("float32", "torch.float32")):
        return None, None
    return kind, (key, r)


# --- roi_align -------------------------------------------------------------------------------------
def _rois_table(call, rois):
    """rois as (K, 5) float32 rows (image, x1, y1, x2, y2) on the features' side."""
    if isinstance(rois, (list, tuple)):
        parts = []
        for i, r in enumerate(rois):
            a = call.convert(r, f"rois[{i}]")
            if a.ndim != 2 or a.shape[1] != 4:
                raise ValueError(f"rois[{i}]: expected shape (K, 4), got {_arrays.describe(a)}")
            _validate.dtype_in(f"rois[{i}]", a, spec.DTYPES)
            parts.append((i, a))
        xp = call.xp if call.device else np
        cols = [xp.concatenate([xp.full((a.shape[0], 1), i, np.float32), a.astype(np.float32)], axis=1)
                for i, a in parts]
        return xp.concatenate(cols, axis=0) if cols else xp.zeros((0, 5), np.float32)
    a = call.convert(rois, "rois")
    if a.ndim != 2 or a.shape[1] != 5:
        raise ValueError(f"rois: expected shape (K, 5) or a list of (K_i, 4), got {_arrays.describe(a)}")
    _validate.dtype_in("rois", a, spec.DTYPES)
    return a


def _divide_magic(d, n_max):
    """m with n * m >> 32 == n // d for every 0 <= n < n_max (the kernel's ``divide``), or 0
    where that does not hold (or d < 2) and the kernel divides plainly."""
    return -(-(2**32) // d) if d >= 2 and n_max * d < 2**32 else 0


def roi_align(features, rois, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False, *,
              layout="NCHW"):
    """RoI Align forward, as ``torchvision.ops.roi_align``.

    Parameters
    ----------
    features : (N, C, H, W) float32 or float16 (any strides); (N, H, W, C) with
        ``layout="NHWC"``
    rois : (K, 5) rows ``(image index, x1, y1, x2, y2)``, or a list of N arrays (K_i, 4)
        of xyxy boxes per image; float32 or float16, same kind as ``features``
    output_size : int or (height, width)
    spatial_scale : float
        Multiplies the roi coordinates (e.g. 0.25 for a stride-4 feature map).
    sampling_ratio : int
        Samples per bin side; <= 0: ``ceil(roi_size / output_size)`` (adaptive).
    aligned : bool
        ``True``: shift the roi by -0.5 pixel (pixel centers at +0.5; the correct
        alignment); ``False``: torchvision's legacy convention (and rois at least 1x1).
    layout : {"NCHW", "NHWC"}
        Axis order of ``features`` and of the result. An array's shape cannot tell the two
        apart (feature maps have any number of channels), so NHWC features (TensorFlow's,
        channels-last torch models') must say so: read as NCHW they would give a result of
        the wrong shape, the channels taken for a spatial axis. (A torch tensor in the
        ``channels_last`` memory format is NCHW by shape: ``layout="NCHW"``.)

    Returns
    -------
    (K, C, PH, PW) in the features' dtype, same kind; (K, PH, PW, C) with
    ``layout="NHWC"`` (as TensorFlow's ``crop_and_resize`` lays out its crops; on the GPU
    one more copy, from the kernel's (K, C, PH, PW)).

    Convention
    ----------
    torchvision's CUDA kernel, step by step in float32 (every operation rounded separately:
    torchvision's compiled kernel may fuse some into FMAs, so results agree within float32
    rounding): bins of ``roi_size / output_size``, samples at ``(i + 0.5) / grid`` of a
    bin, bilinear with torchvision's edge rules (samples beyond one pixel outside are 0),
    the mean of the samples. float16 features are read exactly and computed in float32,
    rounded once at the end (torchvision's half kernel rounds every step to float16).
    A roi whose image index is outside ``[0, N)`` gives zeros (torchvision reads out of
    bounds); an adaptive grid that is not finite counts as empty.

    Example
    -------
    >>> pooled = cupyprep.roi_align(fmap, rois, 7, 0.25, 2, aligned=True)   # doctest: +SKIP
    """
    layout = _validate.choice("layout", layout, ("NCHW", "NHWC"))
    options = ("roi_align", output_size, spatial_scale, sampling_ratio, aligned, layout)
    kind, key = _plan_key(features, rois, options) if layout == "NCHW" else (None, None)
    if key is not None:
        found = _PLANS.get(key)
        if found is not None:
            return found.run(features, kind, None, (_plans.argument(rois, kind),))
    call = _arrays.prepare(features, "features")
    f = call.array
    if f.ndim != 4:
        want = "(N, C, H, W)" if layout == "NCHW" else "(N, H, W, C)"
        raise ValueError(f"features: expected an {want} array (layout={layout!r}), got {_arrays.describe(f)}")
    if layout == "NHWC":
        f = f.transpose(0, 3, 1, 2)  # a view: the kernel reads any strides
    dtype = _validate.dtype_in("features", f, spec.DTYPES)
    if isinstance(output_size, numbers.Integral) and not isinstance(output_size, bool):
        output_size = (int(output_size), int(output_size))
    PH, PW = _validate.size_hw("output_size", output_size)
    scale = _validate.number("spatial_scale", spatial_scale)
    if not math.isfinite(scale):
        raise ValueError(f"spatial_scale: expected a finite number, got {spatial_scale!r}")
    if not isinstance(sampling_ratio, numbers.Integral) or isinstance(sampling_ratio, bool):
        raise TypeError(f"sampling_ratio: expected an int, got {sampling_ratio!r}")
    if sampling_ratio > MAX_SAMPLING_RATIO:  # its square is the samples per bin: bounded work
        raise ValueError(f"sampling_ratio: expected at most {MAX_SAMPLING_RATIO} (or <= 0 for the "
                         f"adaptive grid), got {sampling_ratio}")
    sampling_ratio = max(int(sampling_ratio), 0)  # any value <= 0: the adaptive grid (int32 for the kernel)
    aligned = _validate.flag("aligned", aligned)
    # list rois are assembled on the features' device and stream
    with call.launch():
        table = _rois_table(call, rois)
        N, C, H, W = f.shape
        K = table.shape[0]
        if PH * PW >= 2**31:
            raise ValueError(f"output_size: expected fewer than 2**31 bins, got {PH} x {PW}")
        if K >= 2**31:
            raise ValueError(f"rois: expected fewer than 2**31 rois, got {K}")
        if not call.device:
            res = cpu.roi_align(np.asarray(f), np.asarray(table, np.float32), (PH, PW), scale,
                                int(sampling_ratio), aligned)
            if layout == "NHWC":
                res = np.ascontiguousarray(res.transpose(0, 2, 3, 1))
            return call.result(res.astype(dtype))
        if layout == "NHWC":
            native, nhwc = call.output(None, (K, PH, PW, C), dtype)
            out = call.xp.empty((K, C, PH, PW), dtype)  # the kernel writes (K, C, PH, PW)
        else:
            native, out = call.output(None, (K, C, PH, PW), dtype)
        if K * C * PH * PW == 0:
            return native
        if table.dtype != np.float32:
            table = table.astype(np.float32)
        rs = _arrays.element_strides(table, "rois")
        fs = _arrays.element_strides(f, "features")
        i32, i64 = np.int32, np.int64
        tuning = spec.SPEC
        fn = _kernels.get_function(spec.FILE, tuning.expr(dtype, aligned))
        # a block per roi and chunk of channels, rois fastest (see kernels/roi_align.cu)
        c_chunk = max(1, min(C, tuning.items_per_block // (PH * PW)))
        grid = (K, min(-(-C // c_chunk), 65535))
        narrow = (H - 1) * abs(fs[2]) + (W - 1) * abs(fs[3]) < tuning.narrow_limit
        m_bins = _divide_magic(PH * PW, c_chunk * PH * PW)
        m_pw = _divide_magic(PW, PH * PW)
        args = (f, i64(fs[0]), i64(fs[1]), i64(fs[2]), i64(fs[3]), i32(N), i32(C), i32(H), i32(W),
                table, i64(rs[0]), i64(rs[1]), np.float32(scale), i32(PH), i32(PW), i32(sampling_ratio),
                i32(K), i32(c_chunk), i32(narrow), np.uint32(m_bins), np.uint32(m_pw), out)
        fn(grid, (tuning.block,), args)
        if key is not None:
            _PLANS.put(key, _plans.LaunchPlan(fn, grid, (tuning.block,), args, (0, _OUT_AT), out.shape,
                                              dtype, per_call=(_ROIS_AT,)))
        if layout == "NHWC":
            nhwc[...] = out.transpose(0, 2, 3, 1)
        return native
