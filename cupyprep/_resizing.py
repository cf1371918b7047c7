"""Resizing as ``cv2.resize`` computes it: the scale, OpenCV's choice among its three area
algorithms and their tables, and the launch of resize.cu. Shared by :mod:`cupyprep.resize`,
:mod:`cupyprep.preprocess` (its area factors) and :mod:`cupyprep.cv2compat`; also the
antialiased resize of torchvision (resize_aa.cu)."""
from __future__ import annotations

import numpy as np

from . import _arrays, _kernels, _plans, _transfers, _validate, cpu
from ._launch import launch_3d
from ._specs import resize as spec
from ._specs import resize_aa as aa_spec
from ._torch import TensorView
from .cpu import antialias as cpu_antialias

# Launch plans (see _plans): a repeated resize with the same geometry and options launches
# the stored plan. Not the antialiased resize (a launch per axis, through a temporary)
_PLANS = _plans.PlanCache()


def resize_scale(src, dst):
    # OpenCV's: inv_scale = dst / src in double, scale = 1 / inv_scale
    return 1.0 / (dst / src)


def area_kernel(scale_y, scale_x):
    """Which of OpenCV's three INTER_AREA algorithms a resize runs, chosen as OpenCV does:
    ``("area_fast", isy, isx)``, ``("area_weighted",)`` or ``("area_up",)``."""
    if scale_x >= 1 and scale_y >= 1:
        isy, isx = round(scale_y), round(scale_x)  # saturate_cast<int>: half to even
        eps = np.finfo(np.float64).eps
        if abs(scale_x - isx) < eps and abs(scale_y - isy) < eps:
            return ("area_fast", isy, isx)
        return ("area_weighted",)
    return ("area_up",)


def area_table(src, dst, scale):
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


def _area_tables(xp, x_axis, y_axis):
    """The weighted area resize's (first source, count, offset) and weights of the x and
    y axes (each ``(src, dst, scale)``), kept on the device."""
    (xtab, xw), (ytab, yw) = (_transfers.device_constant(
        xp, ("area", n, d, s), lambda n=n, d=d, s=s: area_table(n, d, s),
        "the area resize's tables", "make one call of the same sizes before the "
        "capture (its tables then stay on the device)")
        for n, d, s in (x_axis, y_axis))
    return xtab, xw, ytab, yw


def _tables_kept(img, kind, axes, tables):
    """Whether the area tables a plan holds are still the kept ones, fetched again in the
    call's launch context as a call without a plan fetches them (a stream that did not
    upload them waits for the upload; a capture marks them as read by a graph). Under the
    emulator a plan's tables are the arrays themselves."""
    if kind == "numpy":
        return True
    import cupy

    with _arrays.Prepared(TensorView(img) if kind == "torch" else img, kind, True, img).launch():
        return all(a is b for a, b in zip(_area_tables(cupy, *axes), tables))


def resize_images(img, size, interpolation, layout, out, inv_scale=None):
    """:func:`cupyprep.resize`, with an optional ``(fy, fx)`` destination-per-source factor,
    for ``cv2compat.resize(fx=, fy=)``, where OpenCV takes the step (``1 / fx``) from the
    factors, not the sizes."""
    kind, key, found = _PLANS.find(img, out, (size, interpolation, layout, inv_scale))
    if found is not None and (found.extra is None or _tables_kept(img, kind, *found.extra)):
        native = found.run(img, kind, out)
        if native is not None:
            return native
    call = _arrays.prepare(img, "img")
    interpolation = _validate.choice("interpolation", interpolation, spec.INTERPOLATIONS)
    dh, dw = _validate.size_hw("size", size)
    arr = call.array
    dtype = _validate.dtype_in("img", arr, spec.DTYPES)
    geo = _validate.image_layout("img", arr, layout)
    if not call.device:
        return call.result(cpu.resize(arr, (dh, dw), interpolation, geo, inv_scale), out)
    with call.launch(), call.writing(out, geo.shape(dh, dw), dtype, [arr]) as (native, dst):
        dgeo = _validate.image_layout("out", dst, layout)
        pixel_cn = None
        if geo.channels_last and geo.c <= 4:
            cn, groups = geo.c, 1
        else:
            cn, groups = 1, geo.c  # one group per plane
            if geo.channels_last:
                pixel_cn = spec.WIDE_PIXEL_CN  # OpenCV sees the whole pixel (its 2x2 cells)
        s_n, s_c, s_y, s_x = geo.strides
        d_n, d_c, d_y, d_x = dgeo.strides
        planes = geo.n * groups
        scale_y = 1.0 / inv_scale[0] if inv_scale else resize_scale(geo.h, dh)
        scale_x = 1.0 / inv_scale[1] if inv_scale else resize_scale(geo.w, dw)
        i64, i32 = np.int64, np.int32
        kernel, extra, kept = interpolation, (), None
        if interpolation == "area":
            kernel, *params = area_kernel(scale_y, scale_x)
            if kernel == "area_fast":
                extra = tuple(i32(p) for p in params)
            elif kernel == "area_weighted":
                # (first source, count, offset) and weights per axis, kept on the device
                axes = ((geo.w, dw, scale_x), (geo.h, dh, scale_y))
                extra = _area_tables(call.xp, *axes)
                kept = (axes, extra)
            else:
                # OpenCV's inv_scale: dst / src, or cv2compat's fy / fx
                extra = (np.float64(inv_scale[0] if inv_scale else dh / geo.h),
                         np.float64(inv_scale[1] if inv_scale else dw / geo.w))
        if kernel not in spec.WIDE_PIXEL_KERNELS:
            pixel_cn = None
        fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(kernel, dtype, cn, pixel_cn))
        args = (
            arr, dst, i32(groups), i32(geo.h), i32(geo.w), i32(dh), i32(dw),
            i64(s_n), i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
            i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
            np.float64(scale_y), np.float64(scale_x), i32(planes),
        ) + extra
        shape = launch_3d(fn, planes, dh, dw, args)
        if shape is not None and key is not None and _plans.unstaged((img,), out):
            _PLANS.put(key, _plans.LaunchPlan(fn, *shape, args, (0, 1), geo.shape(dh, dw), dtype, kept))
    return native


def resize_antialias(img, size, interpolation, layout, out):
    """:func:`cupyprep.resize` with ``antialias=True``: torchvision's antialiased resize
    (cupyprep/cpu/antialias.py), one launch of resize_aa.cu per axis whose size changes.

    A repeated call launches the plans of the first (one per pass, stored together: the
    first pass's plan allocates the intermediate array as its output, the second reads
    it; each fetches its axis's tables again)."""
    kind, key, passes = _PLANS.find(img, out, ("antialias", size, interpolation, layout))
    if passes is not None:
        if len(passes) == 1:
            native = passes[0].run(img, kind, out)
        else:  # both in one launch context (out may be img: the first pass reads it whole)
            native = _plans.run_chain(passes, img, kind, out)
        if native is not None:
            return native
    call = _arrays.prepare(img, "img")
    if not isinstance(interpolation, str) or interpolation not in aa_spec.INTERPOLATIONS:
        raise ValueError(f"interpolation: antialias=True takes one of {list(aa_spec.INTERPOLATIONS)} "
                         f"(torchvision's bilinear and bicubic), got {interpolation!r}")
    dh, dw = _validate.size_hw("size", size)
    arr = call.array
    dtype = _validate.dtype_in("img", arr, aa_spec.DTYPES)
    geo = _validate.image_layout("img", arr, layout)
    if not call.device:
        return call.result(cpu.resize_antialias(arr, (dh, dw), interpolation, geo), out)
    with call.launch(), call.writing(out, geo.shape(dh, dw), dtype, [arr]) as (native, dst):
        dgeo = _validate.image_layout("out", dst, layout)
        if geo.channels_last and geo.c <= 4:
            cn, groups = geo.c, 1
        else:
            cn, groups = 1, geo.c  # one group per plane
        planes = geo.n * groups
        passes = [axis for axis, n, d in (("x", geo.w, dw), ("y", geo.h, dh)) if n != d]
        if not passes:  # torchvision returns the image as it is: a copy here
            dst[...] = arr
            return native
        i64, i32 = np.int64, np.int32
        s_n, s_c, s_y, s_x = geo.strides
        src, src_st = arr, (s_n, s_c if groups > 1 else 0, s_y, s_x, s_c)
        h, w = geo.h, geo.w
        fixed = dtype == np.uint8
        planned = []
        for k, axis in enumerate(passes):
            first, last = k == 0, k == len(passes) - 1
            t_in, t_out = aa_spec.pass_types(dtype, first, last)
            n, d = (w, dw) if axis == "x" else (h, dh)
            h, w = (h, dw) if axis == "x" else (dh, w)
            if last:
                d_n, d_c, d_y, d_x = dgeo.strides
                target, dst_st = dst, (d_n, d_c if groups > 1 else 0, d_y, d_x, d_c)
            else:  # (plane, y, x, channel), contiguous
                target = call.xp.empty((planes, h, w, cn), t_out)
                dst_st = (groups * h * w * cn, h * w * cn, w * cn, cn, 1)
            table = (("resize_aa", interpolation, fixed, n, d),
                     lambda n=n, d=d: cpu_antialias.axis_table(n, d, interpolation, fixed)[:3],
                     "the antialiased resize's tables", "make one call of the same sizes before "
                     "the capture (its tables then stay on the device)")
            start, count, weights = _transfers.device_constant(call.xp, *table)
            precision = cpu_antialias.axis_table(n, d, interpolation, fixed)[3]
            fn = _kernels.get_function(aa_spec.FILE, aa_spec.SPEC.expr(t_in, t_out, cn, axis == "x"))
            args = (src, target, i32(groups), i32(h), i32(w), *(i64(v) for v in src_st),
                    *(i64(v) for v in dst_st), start, count, weights if fixed else None,
                    None if fixed else weights, i32(weights.shape[1]), i32(precision), i32(planes))
            shape = launch_3d(fn, planes, h, w, args)
            if shape is not None:  # (start, count, weights: the tables' arguments, _AA_TABLES)
                at = (_AA_TABLES, _AA_TABLES + 1, _AA_TABLES + (2 if fixed else 3))
                planned.append(_plans.LaunchPlan(fn, *shape, args, (0, 1), target.shape, target.dtype,
                                                 constants=((at, *table),)))
            src, src_st = target, dst_st
        if key is not None and len(planned) == len(passes) and _plans.unstaged((arr,), out):
            _PLANS.put(key, tuple(planned))
    return native


_AA_TABLES = 15  # the first of the tables' arguments of a resize_aa.cu launch
