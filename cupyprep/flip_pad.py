"""``flip``, ``rotate90`` and ``pad`` / ``copy_make_border``: ``cv2.flip``, ``np.rot90`` /
``cv2.rotate`` and ``cv2.copyMakeBorder`` for images, batches and lists of images.

Each output pixel copies one source pixel (or takes the border value), so results equal
OpenCV's and NumPy's bit for bit. On the GPU (kernels/flip_pad.cu) ``copy_plan`` picks the
kernel: byte kernels that move whole rows (in order, with borders; or mirrored) or tiles
(quarter turns) where pixels lie side by side, a general one pixel-a-thread kernel for the
rest (docs/ops.md, "On the GPU").
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import NamedTuple

import numpy as np

from . import _arrays, _kernels, _plans, _validate, cpu
from ._launch import launch_3d
from ._specs import flip_pad as spec

__all__ = ["BORDER_MODES", "FLIP_DIRECTIONS", "copy_make_border", "flip", "pad", "rotate90"]

FLIP_DIRECTIONS = spec.DIRECTIONS
BORDER_MODES = spec.BORDER_MODES

# Launch plans (see _plans) of the three ops on one array (not a list): one launch each,
# keyed by the image's and out's geometry and the op's arguments as given
_PLANS = _plans.PlanCache()


def flip(img, direction="horizontal", *, layout="HWC", out=None):
    """Mirror an image, a batch or a list of images: ``cv2.flip``.

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor, or a list of them
        ``HW``, ``HWC`` or a batch ``NHWC`` (``CHW`` / ``NCHW`` with ``layout``); uint8,
        uint16, float16 or float32; any number of channels; any strides. A list of ``HW``
        / ``HWC`` images of different sizes gives a list.
    direction : {"horizontal", "vertical", "both"}
        "horizontal" mirrors left and right (``cv2.flip`` flipCode 1, ``torch.flip`` of
        the width axis), "vertical" top and bottom (flipCode 0), "both" is a half turn
        (flipCode -1).
    layout : {"HWC", "CHW", "NHWC", "NCHW"}
    out : array (or, for a list, a list of arrays), optional
        Written in place; same kind, shape and dtype as the result. May be ``img`` itself.

    Returns
    -------
    The flipped image(s), same kind, dtype, shape and layout as ``img``; bit-exact.

    Example
    -------
    >>> mirrored = cupyprep.flip(batch, "horizontal", layout="NHWC")   # doctest: +SKIP
    """
    key, native = _PLANS.replay(img, out, ("flip", direction, layout))
    if native is not None:
        return native
    direction = _validate.choice("direction", direction, FLIP_DIRECTIONS)
    return _each(img, out, lambda a, o: _flip(a, direction, layout, o, key))


def rotate90(img, k=1, *, layout="HWC", out=None):
    """Rotate by ``k`` quarter turns counter-clockwise, as ``np.rot90(img, k)`` on the
    image axes (``cv2.rotate``: k = 1 is ``ROTATE_90_COUNTERCLOCKWISE``, 2 ``ROTATE_180``,
    3 or -1 ``ROTATE_90_CLOCKWISE``; ``torch.rot90(x, k, dims)`` turns the same way).

    Parameters
    ----------
    img : as :func:`flip`
    k : int
        Any integer; taken modulo 4. An odd ``k`` swaps height and width.
    layout, out : as :func:`flip`

    Returns
    -------
    The rotated image(s), same kind, dtype and layout as ``img``; bit-exact.
    """
    key, native = _PLANS.replay(img, out, ("rotate90", k, layout))
    if native is not None:
        return native
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"k: expected an int (quarter turns counter-clockwise), got {k!r}")
    turns = int(k) % 4
    return _each(img, out, lambda a, o: _rotate(a, turns, layout, o, key))


def pad(img, padding, *, border_mode="constant", value=0, layout="HWC", out=None):
    """Add a border around an image, a batch or a list of images: ``cv2.copyMakeBorder``.

    Parameters
    ----------
    img : as :func:`flip`
    padding : int or (top, bottom, left, right)
        Pixels added on each side (copyMakeBorder's order); one int for all four; each
        >= 0 and any size (periodic borders repeat as often as needed).
    border_mode : {"constant", "replicate", "reflect", "reflect101", "wrap"}
        OpenCV's ``BORDER_CONSTANT`` (``value``), ``BORDER_REPLICATE`` (aaa|abcd|ddd),
        ``BORDER_REFLECT`` (cba|abcd|dcb), ``BORDER_REFLECT_101`` (dcb|abcd|cba: torch's
        "reflect") and ``BORDER_WRAP`` (bcd|abcd|abc). A one-pixel side repeats its pixel.
    value : number or sequence of numbers (one per channel)
        The constant border, stored as the image type is (rounded half to even and
        saturated for integers, as OpenCV's Scalar; float16 through float32). More than 4
        channels take a single number, as OpenCV.
    layout, out : as :func:`flip`

    Returns
    -------
    The padded image(s), ``(H + top + bottom, W + left + right)``; bit-exact against
    ``cv2.copyMakeBorder``.

    Example
    -------
    >>> framed = cupyprep.pad(frame, (0, 8, 0, 8), border_mode="reflect101")  # doctest: +SKIP
    """
    key, native = _PLANS.replay(img, out, ("pad", padding, border_mode, value, layout))
    if native is not None:
        return native
    sides = _sides(padding)
    border_mode = _validate.choice("border_mode", border_mode, BORDER_MODES)
    return _each(img, out, lambda a, o: _pad(a, sides, border_mode, value, layout, o, key))


def copy_make_border(img, top, bottom, left, right, border_mode="constant", value=0, *,
                     layout="HWC", out=None):
    """:func:`pad` with ``cv2.copyMakeBorder``'s argument order: ``(top, bottom, left,
    right)`` and then the border."""
    return pad(img, (top, bottom, left, right), border_mode=border_mode, value=value,
               layout=layout, out=out)


# --- the common path --------------------------------------------------------------------------
def _each(img, out, one):
    """``one(image, out)`` for an array, or for each image of a list (a list back). (A
    list's images get no plans: ``one`` has the key of the call, None for a list.)"""
    if not isinstance(img, (list, tuple)):
        if isinstance(out, (list, tuple)):
            raise TypeError(f"out: expected an array like img, got {type(out).__name__}")
        return one(img, out)
    if len(img) == 0:
        raise ValueError("img: expected at least one image (pass an empty NHWC array for an "
                         "empty batch)")
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(img)):
        raise ValueError(f"out: expected a list of {len(img)} arrays (one per image), got "
                         f"{_arrays.describe(out) if not isinstance(out, (list, tuple)) else len(out)}")
    _, arrays = _arrays.prepare_list(img, "img")
    _validate.dtype_in("img[0]", arrays[0], spec.DTYPES)
    _validate.list_images("img", arrays)
    return [one(im, None if out is None else out[i]) for i, im in enumerate(img)]


def _sides(padding):
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        sides = (int(padding),) * 4
    elif isinstance(padding, (tuple, list)) and len(padding) == 4 and all(
            isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in padding):
        sides = tuple(int(p) for p in padding)
    else:
        raise TypeError(f"padding: expected an int or (top, bottom, left, right) ints, got {padding!r}")
    if min(sides) < 0:
        raise ValueError(f"padding: expected sizes >= 0, got {sides} (top, bottom, left, right)")
    return sides


def _input(img, layout):
    call = _arrays.prepare(img, "img")
    arr = call.array
    dtype = _validate.dtype_in("img", arr, spec.DTYPES)
    geo = _validate.image_layout("img", arr, layout)  # a 4-D array is a batch
    return call, arr, dtype, geo, layout


def _flip(img, direction, layout, out, key):
    call, arr, dtype, geo, layout = _input(img, layout)
    if not call.device:
        return call.result(cpu.flip(arr, direction, geo), out)
    s_y, s_x = geo.strides[2:]
    off = 0
    if direction in ("horizontal", "both"):
        off, s_x = off + (geo.w - 1) * s_x, -s_x
    if direction in ("vertical", "both"):
        off, s_y = off + (geo.h - 1) * s_y, -s_y
    return _launch(call, arr, dtype, geo, layout, out, geo.h, geo.w, off, s_y, s_x,
                   (0, 0, 0, 0), "constant", (0.0,) * 4, key)


def _rotate(img, turns, layout, out, key):
    call, arr, dtype, geo, layout = _input(img, layout)
    if not call.device:
        return call.result(cpu.rotate90(arr, turns, geo), out)
    s_y, s_x = geo.strides[2:]
    h, w = geo.h, geo.w
    # np.rot90: one turn is out[i, j] = img[j, w - 1 - i]; three, out[i, j] = img[h - 1 - j, i]
    if turns == 0:
        view = (h, w, 0, s_y, s_x)
    elif turns == 1:
        view = (w, h, (w - 1) * s_x, -s_x, s_y)
    elif turns == 2:
        view = (h, w, (h - 1) * s_y + (w - 1) * s_x, -s_y, -s_x)
    else:
        view = (w, h, (h - 1) * s_y, s_x, -s_y)
    vh, vw, off, vs_y, vs_x = view
    return _launch(call, arr, dtype, geo, layout, out, vh, vw, off, vs_y, vs_x,
                   (0, 0, 0, 0), "constant", (0.0,) * 4, key)


def _pad(img, sides, border_mode, value, layout, out, key):
    call, arr, dtype, geo, layout = _input(img, layout)
    top, bottom, left, right = sides
    dh, dw = geo.h + top + bottom, geo.w + left + right
    if dh >= 2**31 or dw >= 2**31:
        raise ValueError(f"padding: expected an output smaller than 2**31 on each side, got "
                         f"{dh} x {dw}")
    fill = _fill(value, geo.c, dtype)
    if not call.device:
        return call.result(cpu.pad(arr, sides, border_mode, fill, geo), out)
    s_y, s_x = geo.strides[2:]
    return _launch(call, arr, dtype, geo, layout, out, geo.h, geo.w, 0, s_y, s_x, sides,
                   border_mode, fill, key)


def _fill(value, channels, dtype):
    """The constant border's values, one per channel, as float32s of stored pixels."""
    if channels > 4 and not isinstance(value, numbers.Real):
        values = _validate.per_channel("value", value, channels, 0.0, "img")
        if len(set(values)) > 1:
            raise ValueError(f"value: expected one number for an image of {channels} channels "
                             f"(OpenCV takes per-channel values for at most 4), got {value!r}")
    # float16 images take OpenCV's route, double -> float -> half (the kernel rounds last)
    return _validate.fill_values("value", value, channels, dtype, np.float32, "img")


def _launch(call, arr, dtype, geo, layout, out, sh, sw, off, s_y, s_x, sides, border_mode, fill,
            key):
    """The copy of the source view (``sh`` x ``sw`` at element offset ``off``, strides
    ``s_y`` / ``s_x``) with ``sides`` of border, into a new array or ``out``; with a plan
    ``key``, the launch is stored as the plan of the next such call."""
    top, bottom, left, right = sides
    dh, dw = sh + top + bottom, sw + left + right
    with call.launch(), call.writing(out, geo.shape(dh, dw), dtype, [arr]) as (native, dst):
        if geo.n == 0:
            return native
        dgeo = _validate.image_layout("out", dst, layout)
        plan = copy_plan(geo, dgeo, dst, dtype, sh, sw, s_y, s_x, sides, border_mode, fill)
        if plan.kernel == "general":
            launched = _launch_general(arr, dst, dtype, geo, dgeo, sh, sw, off, s_y, s_x, sides,
                                       border_mode, fill)
        else:
            launched = _launch_bytes(plan, arr, dst, dtype, geo, dgeo, sh, sw, off, s_y, s_x,
                                     sides, border_mode, fill)
        # (the mirror kernel was chosen for out's alignment: another out may have another)
        if (launched is not None and key is not None and _plans.unstaged((arr,), out)
                and not (plan.kernel == "mirror" and out is not None)):
            _PLANS.put(key, _plans.LaunchPlan(*launched, (0, 1), dst.shape, dst.dtype))
    return native


class CopyPlan(NamedTuple):
    """Which kernel makes a copy (``"rows"``, ``"mirror"``, ``"turn"`` or ``"general"``),
    why, and how the byte kernels see a pixel: ``channels`` adjacent channels of
    ``pixel_bytes`` bytes, ``groups`` planes an image (channel planes, or 1)."""

    kernel: str
    reason: str
    channels: int = 1
    pixel_bytes: int = 0
    groups: int = 1


def copy_plan(geo, dgeo, dst, dtype, sh, sw, s_y, s_x, sides, border_mode, fill):
    """The kernel for a copy of the source view (``sh`` x ``sw``, element strides ``s_y``,
    ``s_x``) with ``sides`` of border into ``dst`` (laid out as ``dgeo``): the one place that
    decides it.

    The byte kernels need a pixel's channels adjacent (or one channel, or channel planes)
    in the source and the output, the output's pixels adjacent along its rows, and the
    view's pixels adjacent (in order or mirrored) along its rows, or (quarter turns) along
    its columns. Borders go with rows in order only."""
    es = np.dtype(dtype).itemsize
    s_c, d_c = geo.strides[1], dgeo.strides[1]
    if geo.c == 1:
        cpx, groups = 1, 1
    elif geo.channels_last and s_c == 1 and d_c == 1:
        cpx, groups = geo.c, 1
    else:
        cpx, groups = 1, geo.c  # one plane a channel
    px = cpx * es
    dh, dw = sh + sides[0] + sides[1], sw + sides[2] + sides[3]
    bordered = any(sides)
    if not spec.SPEC.byte_kernels:
        return CopyPlan("general", "the byte kernels are off (FlipPadSpec.byte_kernels)")
    if max(sh, sw, dh, dw) * px >= 2**31:
        return CopyPlan("general", "a row or column of 2**31 bytes or more")
    if dgeo.strides[3] != cpx and dw > 1:
        return CopyPlan("general", "the output's pixels are not adjacent along its rows")
    if bordered and border_mode == "constant" and groups > 1 and len(set(fill[:geo.c])) > 1:
        return CopyPlan("general", "channel planes with different border values")
    found = {"channels": cpx, "pixel_bytes": px, "groups": groups}
    if s_x == cpx or sw == 1:
        return CopyPlan("rows", "rows in order: 32-byte pieces of each row", **found)
    if bordered:
        return CopyPlan("general", "a border around a view whose rows are not in order")
    if px not in spec.PIXEL_BYTES:
        return CopyPlan("general", f"{px}-byte pixels (the mirror and turn kernels take "
                                   f"{spec.PIXEL_BYTES})")
    if s_x == -cpx:
        # runs start where a 16-byte boundary meets a pixel's: at none where rows start off
        # the pixel's alignment (a view at an odd byte)
        step = math.gcd(px, 16)
        d_n, d_c, d_y = dgeo.strides[:3]
        if any(v % step for v in (_address(dst), d_n * es, d_y * es, d_c * es * (groups > 1))):
            return CopyPlan("general", f"mirrored rows into rows not {step}-byte aligned")
        return CopyPlan("mirror", "mirrored rows: runs of whole pixels reversed in registers",
                        **found)
    if abs(s_y) == cpx or sh == 1:
        return CopyPlan("turn", "pixels adjacent down the view's columns: tiles through shared "
                                "memory", **found)
    return CopyPlan("general", "the view's pixels are not adjacent along its rows or columns")


def _address(a):
    """The address of an array's first element (NumPy under the emulator)."""
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0]
    return a.data.ptr


def _launch_bytes(plan, arr, dst, dtype, geo, dgeo, sh, sw, off, s_y, s_x, sides, border_mode,
                  fill):
    es = np.dtype(dtype).itemsize
    px, cpx, groups = plan.pixel_bytes, plan.channels, plan.groups
    top, bottom, left, right = sides
    dh, dw = sh + top + bottom, sw + left + right
    s_n, s_c = geo.strides[:2]
    d_n, d_c, d_y = dgeo.strides[:3]
    planes = geo.n * groups
    i64, i32 = np.int64, np.int32
    s_g, d_g = (s_c * es, d_c * es) if groups > 1 else (0, 0)
    common = (arr, dst, i32(groups))
    if plan.kernel == "rows":
        words = _fill_pattern(tuple(fill), cpx, np.dtype(dtype))
        fn = _kernels.get_function(spec.FILE, spec.SPEC.rows_expr())
        args = common + (
            i32(sh), i32(sw), i32(dh), i32(dw), i32(px), i64(off * es), i64(s_n * es),
            i64(s_g), i64(s_y * es), i64(d_n * es), i64(d_g), i64(d_y * es), i32(top),
            i32(left), i32(BORDER_MODES.index(border_mode)), *words, i32(planes))
        shape = launch_3d(fn, planes, dh, (dw * px + 31) // 32, args, block_x=spec.ROWS_BLOCK)
    elif plan.kernel == "mirror":
        run = max(px // math.gcd(px, 16) * 16, 32)  # kernels/flip_pad.cu RUN
        fn = _kernels.get_function(spec.FILE, spec.SPEC.mirror_expr(px))
        first = off - (sw - 1) * cpx  # the row's lowest pixel
        args = common + (
            i32(sh), i32(sw), i64(first * es), i64(s_n * es), i64(s_g), i64(s_y * es),
            i64(d_n * es), i64(d_g), i64(d_y * es), i32(planes))
        shape = launch_3d(fn, planes, sh, (sw * px + run - 1) // run, args, block_x=spec.ROWS_BLOCK)
    else:
        tile = spec.SPEC.turn_tile(px)
        fn = _kernels.get_function(spec.FILE, spec.SPEC.turn_expr(px))
        grid = (min(-(-sw // tile), 65535), min(-(-sh // tile), 65535), min(planes, 65535))
        args = common + (
            i32(sh), i32(sw), i64(off * es), i64(s_n * es), i64(s_g), i32(1 if s_y > 0 else -1),
            i64(s_x * es), i64(d_n * es), i64(d_g), i64(d_y * es), i32(planes))
        shape = grid, spec.TURN_BLOCK + (1,)
        fn(*shape, args)
    return None if shape is None else (fn, *shape, args)


@functools.lru_cache(maxsize=256)
def _fill_pattern(fill, channels, dtype):
    """The constant border's pixel as stored (``channels`` values of ``fill``, the float32
    values cupyprep_copy_border converts with from_float), repeated to 16 bytes, as four
    little-endian words (worked out once for each fill: the same few recur)."""
    dtype = np.dtype(dtype)
    values = np.resize(np.asarray(fill, np.float32), channels)
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        values = np.clip(np.rint(np.nan_to_num(values, nan=0.0)), info.min, info.max)
    with np.errstate(over="ignore"):  # float16 overflows to inf, as the kernel's conversion
        pixel = np.frombuffer(values.astype(dtype).tobytes(), np.uint8)
    return tuple(np.uint32(w) for w in np.frombuffer(np.resize(pixel, 16).tobytes(), "<u4"))


def _launch_general(arr, dst, dtype, geo, dgeo, sh, sw, off, s_y, s_x, sides, border_mode, fill):
    top, bottom, left, right = sides
    dh, dw = sh + top + bottom, sw + left + right
    if geo.channels_last and geo.c <= 4:
        cn, groups = geo.c, 1
    else:
        cn, groups = 1, geo.c  # one group per plane
    s_n, s_c = geo.strides[:2]
    d_n, d_c, d_y, d_x = dgeo.strides
    planes = geo.n * groups
    bv = (fill + (0.0,) * 4)[:4]  # one a channel (more than 4: all the same)
    i64, i32, f32 = np.int64, np.int32, np.float32
    fn = _kernels.get_function(spec.FILE, spec.SPEC.expr(dtype, cn))
    args = (
        arr, dst, i32(groups), i32(sh), i32(sw), i32(dh), i32(dw), i64(off), i64(s_n),
        i64(s_c if groups > 1 else 0), i64(s_y), i64(s_x), i64(s_c),
        i64(d_n), i64(d_c if groups > 1 else 0), i64(d_y), i64(d_x), i64(d_c),
        i32(top), i32(left), i32(BORDER_MODES.index(border_mode)), *(f32(v) for v in bv),
        i32(planes))
    shape = launch_3d(fn, planes, dh, dw, args)
    return None if shape is None else (fn, *shape, args)
