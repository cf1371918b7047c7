"""Photometric augmentation of batches with per-image parameters drawn on the batch's device
(like ``random_affine``): :func:`color_jitter` (torchvision's ColorJitter) and
:func:`hsv_gain` (YOLO's HSV gain augmentation). Each returns the parameters it drew."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from . import _arrays, _kernels, _plans, _validate, cpu
from ._draw_plan import DrawPlan, launch_step
from ._launch import grid_1d
from ._random import check_seed, uniforms
from ._specs import color as color_spec
from ._specs import photometric as spec

__all__ = ["JitterParams", "color_jitter", "hsv_gain"]

# Launch plans (see _draw_plan) of both ops, keyed by the batch's and out's geometry and
# the op's arguments as given (the generator and seed are not part of a key: each call draws)
_PLANS = _plans.PlanCache()


class JitterParams(NamedTuple):
    """What :func:`color_jitter` drew for each image: ``factors`` (N, 4) float64 brightness,
    contrast, saturation and hue factors (1, 1, 1, 0 for an operation that is off) and
    ``order`` (N, 4) int64, the operations' indices (0 brightness, 1 contrast, 2 saturation,
    3 hue) in the order they ran."""

    factors: object
    order: object


def _batch(batch, name, dtypes, layout="NHWC"):
    if isinstance(batch, (list, tuple)):
        raise TypeError(f"{name}: expected an NHWC array or tensor, got a {type(batch).__name__}")
    call = _arrays.prepare(batch, name)
    arr = call.array
    dtype = _validate.dtype_in(name, arr, dtypes)
    if arr.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D {layout} batch, got {_arrays.describe(arr)}")
    c = arr.shape[-1] if layout == "NHWC" else arr.shape[1]
    if c != 3:
        raise ValueError(f"{name}: expected 3 channels in layout {layout!r}, got {c} "
                         f"({_arrays.describe(arr)})")
    if 0 in arr.shape[1:]:
        raise ValueError(f"{name}: expected non-empty images, got {_arrays.describe(arr)}")
    return call, arr, dtype


def hsv_gain(batch, hgain=0.015, sgain=0.7, vgain=0.4, *, order="bgr", seed=None,
             generator=None, out=None):
    """YOLO's HSV augmentation (Ultralytics' ``augment_hsv`` / ``RandomHSV``) with gains drawn
    per image on the batch's device.

    Parameters
    ----------
    batch : NHWC uint8 array (numpy, cupy or torch), 3 channels in ``order``
    hgain, sgain, vgain : float
        Gain ranges (Ultralytics' ``hsv_h``, ``hsv_s``, ``hsv_v`` defaults).
    order : {"bgr", "rgb"}
    seed, generator :
        As :func:`random_affine`'s (a generator on the batch's device; under
        ``torch.cuda.graph`` one the graph knows of).
    out : array, optional
        Written in place; may be ``batch`` itself.

    Returns
    -------
    (augmented, gains): the batch (same kind, shape, dtype) and the (N, 3) float64 gains
    ``r`` drawn (numpy / cupy, or torch for torch input).

    Convention
    ----------
    Ultralytics' formula: ``r = uniform(-1, 1, 3) * [hgain, sgain, vgain] + 1``; the image
    goes to OpenCV's uint8 HSV (H in [0, 180)), through the tables ``(x * r0) % 180``,
    ``clip(x * r1, 0, 255)``, ``clip(x * r2, 0, 255)`` (float64, truncated to uint8) and
    back with ``cv2.COLOR_HSV2BGR``. Given the gains, the result equals that NumPy + OpenCV
    recipe bit for bit (with :func:`cvt_color`'s HSV -> BGR vector block; Ultralytics 8.3.79
    and later shift the hue additively instead, not reproduced here).

    Example
    -------
    >>> aug, gains = cupyprep.hsv_gain(batch, seed=0)  # doctest: +SKIP
    """
    kind, key, plan = _PLANS.find(batch, out, ("hsv_gain", hgain, sgain, vgain, order))
    if plan is not None:
        done = plan.replay(batch, kind, out, generator, seed)
        if done is not None:
            return done[0], done[1][0]
    call, arr, _ = _batch(batch, "batch", (np.uint8,))
    order = _validate.choice("order", order, color_spec.ORDERS)
    terms = [_validate.number(k, v) for k, v in (("hgain", hgain), ("sgain", sgain), ("vgain", vgain))]
    for k, v in zip(("hgain", "sgain", "vgain"), terms):
        if not v >= 0:
            raise ValueError(f"{k}: expected a non-negative number, got {v}")
    check_seed(seed)
    n = arr.shape[0]
    with call.launch():
        if not call.device:
            gains = cpu.hsv_gains(uniforms(call, (n, 3), generator, seed), terms)
            return call.result(cpu.hsv_gain(arr, gains, order), out), call.back(gains)
        with call.writing(out, arr.shape, np.uint8, [arr]) as (native, dst):
            plan = _hsv_plan(arr, dst, terms, order)
            gains, = plan.launch(call, arr, dst, generator, seed)
    if key is not None and n and _plans.unstaged((arr,), out):
        _PLANS.put(key, plan)
    return native, gains


def _hsv_plan(arr, dst, terms, order):
    """hsv_gain's launches: the gains and tables from the uniforms, then every pixel."""
    geo = _validate.image_layout("batch", arr, "NHWC")
    dgeo = _validate.image_layout("out", dst, "NHWC")
    n = geo.n
    steps = []
    if n:
        f64, i32, i64 = np.float64, np.int32, np.int64
        luts = _kernels.get_function(spec.FILE, spec.HSV_GAIN_LUTS_KERNEL)
        steps.append(launch_step(luts, *grid_1d(n * 768), (
            None, i32(n), *[f64(t) for t in terms], None, None), {0: "u", 5: 0, 6: 1}))
        expr = spec.SPEC.hsv_gain_expr(0 if order == "bgr" else 2)
        total = n * geo.h * geo.w
        steps.append(launch_step(_kernels.get_function(spec.FILE, expr), *grid_1d(total), (
            None, None, i32(geo.h), i32(geo.w), *[i64(s) for s in _nyxc(geo)],
            *[i64(s) for s in _nyxc(dgeo)], None, i32(color_spec.SPEC.hsv_vector_block), i64(total)),
            {0: "src", 1: "dst", 12: 1}))
    return DrawPlan(3, [((n, 3), np.float64), ((n, 3, 256), np.uint8)], steps, 1, arr.shape, np.uint8)


def _nyxc(geo):
    s_n, s_c, s_y, s_x = geo.strides
    return s_n, s_y, s_x, s_c


def color_jitter(batch, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0, *, order="rgb",
                 layout="NHWC", seed=None, generator=None, out=None):
    """torchvision's ``ColorJitter`` with factors and an order of the four operations drawn
    per image on the batch's device.

    Parameters
    ----------
    batch : uint8 or float32 array (numpy, cupy or torch), 3 channels
        ``NHWC`` (or ``NCHW`` with ``layout="NCHW"``); float images in [0, 1].
    brightness, contrast, saturation : float or (float, float)
        A number b means factors in ``[max(0, 1 - b), 1 + b]``; a pair is the range. 0 (or
        the range (1, 1)) leaves the operation out, as torchvision does.
    hue : float or (float, float)
        A number h in [0, 0.5] means ``[-h, h]``; a pair is the range, inside [-0.5, 0.5].
    order : {"rgb", "bgr"}
        Channel order (torchvision's operations take RGB).
    layout : {"NHWC", "NCHW"}
    seed, generator, out :
        As :func:`hsv_gain`'s.

    Returns
    -------
    (jittered, params): the batch (same kind, shape, dtype) and :class:`JitterParams`
    (factors and order, numpy / cupy, or torch for torch input).

    Convention
    ----------
    Each image runs the four operations in its own random order (a permutation drawn per
    image; torchvision draws one per call), each with torchvision.transforms.v2.functional's
    formula: brightness ``clamp(x f)``, contrast and saturation blend with the grayscale mean
    or the grayscale (``0.2989 R + 0.587 G + 0.114 B``, floored for uint8) as
    ``clamp(x f + other (1 - f))``, hue through torchvision's HSV; uint8 images are stored
    (truncated) between operations as torchvision's are. Float32 throughout, each operation
    rounded on its own; contrast's mean is summed in float64 (torchvision sums in float32).
    Given the parameters, the kernels equal the CPU backend (NumPy) bit for bit, and that
    follows torchvision's functional ops within their own CPU/GPU tolerance (uint8: 1).

    Example
    -------
    >>> out, params = cupyprep.color_jitter(batch, 0.4, 0.4, 0.4, 0.1, seed=0)  # doctest: +SKIP
    """
    kind, key, plan = _PLANS.find(batch, out, ("color_jitter", brightness, contrast, saturation, hue,
                                              order, layout))
    if plan is not None:
        done = plan.replay(batch, kind, out, generator, seed)
        if done is not None:
            return done[0], JitterParams(*done[1])
    layout = _validate.choice("layout", layout, ("NHWC", "NCHW"))
    call, arr, dtype = _batch(batch, "batch", spec.JITTER_DTYPES, layout)
    order = _validate.choice("order", order, color_spec.ORDERS)
    ranges = [_factor_range("brightness", brightness), _factor_range("contrast", contrast),
              _factor_range("saturation", saturation), _hue_range(hue)]
    enabled = sum(1 << k for k, r in enumerate(ranges) if r is not None)
    check_seed(seed)
    n = arr.shape[0]
    if n >= 65536:
        raise ValueError(f"batch: expected fewer than 65536 images, got {_arrays.describe(arr)}")
    lows, spans = _lows_spans(ranges)
    with call.launch():
        if not call.device:
            factors, ops = cpu.jitter_params(uniforms(call, (n, 8), generator, seed), lows, spans)
            params = JitterParams(call.back(factors), call.back(ops))
            res = cpu.color_jitter(arr, factors, ops, enabled, order, layout == "NHWC")
            return call.result(res, out), params
        with call.writing(out, arr.shape, dtype, [arr]) as (native, dst):
            plan = _jitter_plan(arr, dst, dtype, layout, order, lows, spans, enabled)
            params = JitterParams(*plan.launch(call, arr, dst, generator, seed))
    if key is not None and n and _plans.unstaged((arr,), out):
        _PLANS.put(key, plan)
    return native, params


_NEUTRAL = (1.0, 1.0, 1.0, 0.0)  # the factors of operations that are off


def _lows_spans(ranges):
    """Each operation's factor ``u * span + low`` from a uniform u: (low, high - low), or
    (neutral, 0) for one that is off."""
    lows = tuple(_NEUTRAL[k] if r is None else r[0] for k, r in enumerate(ranges))
    spans = tuple(0.0 if r is None else r[1] - r[0] for r in ranges)
    return lows, spans


def _jitter_plan(arr, dst, dtype, layout, order, lows, spans, enabled):
    """color_jitter's launches: the parameters from the uniforms, contrast's grayscale sums
    (where contrast is on), then every pixel's four operations. Buffers: factors, order,
    sums."""
    geo = _validate.image_layout("batch", arr, layout)
    dgeo = _validate.image_layout("out", dst, layout)
    tuning = spec.SPEC
    bidx = 0 if order == "bgr" else 2
    f64, i32, i64 = np.float64, np.int32, np.int64
    n, h, w = geo.n, geo.h, geo.w
    steps = []
    if n:
        params = _kernels.get_function(spec.FILE, spec.JITTER_PARAMS_KERNEL)
        steps.append(launch_step(params, *grid_1d(n), (
            None, i32(n), *[f64(v) for v in lows], *[f64(v) for v in spans], None, None, None),
            {0: "u", 10: 0, 11: 1, 12: 2}))
        strides = [i64(s) for s in _nyxc(geo)]
        if enabled & 2:
            blocks = min(-(-(h * w) // tuning.sums_block), tuning.sums_blocks_per_image)
            sums = _kernels.get_function(spec.FILE, tuning.gray_sums_expr(dtype, bidx))
            steps.append(launch_step(sums, (blocks, n), (tuning.sums_block,), (
                None, i32(h), i32(w), *strides, None, None, i32(enabled), None),
                {0: "src", 7: 0, 8: 1, 10: 2}))
        total = n * h * w
        apply = _kernels.get_function(spec.FILE, tuning.apply_expr(dtype, bidx))
        steps.append(launch_step(apply, *grid_1d(total), (
            None, None, i32(h), i32(w), *strides, *[i64(s) for s in _nyxc(dgeo)],
            None, None, None, i32(enabled), i64(total)), {0: "src", 1: "dst", 12: 0, 13: 1, 14: 2}))
    buffers = [((n, 4), np.float64), ((n, 4), np.int64), ((n,), np.float64)]
    return DrawPlan(8, buffers, steps, 2, arr.shape, dtype)


def _factor_range(name, value):
    """torchvision's _check_input for brightness / contrast / saturation: None when off."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if not v >= 0:
            raise ValueError(f"{name}: expected a non-negative number or a (low, high) pair, got {value!r}")
        lo, hi = max(0.0, 1.0 - v), 1.0 + v
    else:
        lo, hi = _pair(name, value)
        if not 0 <= lo <= hi:
            raise ValueError(f"{name}: expected 0 <= low <= high, got {value!r}")
    return None if lo == hi == 1.0 else (lo, hi)


def _hue_range(value):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if not 0 <= v <= 0.5:
            raise ValueError(f"hue: expected a number in [0, 0.5] or a (low, high) pair, got {value!r}")
        lo, hi = -v, v
    else:
        lo, hi = _pair("hue", value)
        if not -0.5 <= lo <= hi <= 0.5:
            raise ValueError(f"hue: expected -0.5 <= low <= high <= 0.5, got {value!r}")
    return None if lo == hi == 0.0 else (lo, hi)


def _pair(name, v):
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise TypeError(f"{name}: expected a number or a (low, high) pair, got {v!r}")
    return _validate.number(name, v[0]), _validate.number(name, v[1])
