"""Argument checks shared by every op: each error names the argument, what was expected
and what came, before anything reaches a kernel."""
from __future__ import annotations

import functools
import math
import numbers
import warnings

import numpy as np

from ._arrays import describe

__all__ = [
    "choice",
    "size_hw",
    "dtype_in",
    "image_layout",
    "list_images",
    "per_channel",
    "number",
    "flag",
    "as_numbers",
    "positive_int",
    "iou_threshold",
    "units",
    "UnitsWarning",
    "ImageGeometry",
]


def choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
    return value


_INT32_LIMIT = 2**31


def size_hw(name, size):
    """A ``(height, width)`` pair of positive ints."""
    if type(size) is tuple and len(size) == 2 and type(size[0]) is int and type(size[1]) is int:
        h, w = size  # the common form, checked the quick way
        if 0 < h < _INT32_LIMIT and 0 < w < _INT32_LIMIT:
            return h, w
    if (
        not isinstance(size, (tuple, list))
        or len(size) != 2
        or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in size)
    ):
        raise TypeError(f"{name}: expected a (height, width) pair of ints, got {size!r}")
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        raise ValueError(f"{name}: expected positive height and width, got {(h, w)}")
    if h >= _INT32_LIMIT or w >= _INT32_LIMIT:  # the kernels index rows and columns with int32
        raise ValueError(f"{name}: expected a height and width below 2**31, got {(h, w)}")
    return h, w


@functools.lru_cache(maxsize=64)
def _dtypes(allowed):
    return frozenset(np.dtype(a) for a in allowed)


def dtype_in(name, array, allowed):
    if np.dtype(array.dtype) not in _dtypes(tuple(allowed)):
        raise TypeError(
            f"{name}: expected dtype {' / '.join(str(np.dtype(a)) for a in allowed)}, "
            f"got {describe(array)}"
        )
    return np.dtype(array.dtype)


def out_dtype(name, dtype, allowed):
    if type(dtype) is str and dtype in allowed:
        return np.dtype(dtype)  # the common form (allowed holds dtype names)
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):  # NumPy parses some strings as a record format
        raise TypeError(f"{name}: expected one of {list(allowed)}, got {dtype!r}") from None
    if dt.name not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {dt.name!r}")
    return dt


def flag(name, value):
    """A bool (Python's or NumPy's; the ints 0 and 1 too)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{name}: expected True or False, got {value!r}")


def as_numbers(name, value, dtype=np.float64, xp=np):
    """``value`` (an array or nested sequences of numbers) as an ``xp`` array of ``dtype``
    (of its own numeric dtype when ``dtype`` is None); a TypeError naming ``name`` for
    anything else (strings, None, mappings, objects)."""
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{name}: expected an array of numbers, got {value!r}")
    try:
        a = xp.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array of numbers, got {describe(value)}") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected an array of numbers, got {describe(a)}")
    return a


def number(name, value):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    return float(value)


def iou_threshold(name, value):
    """An NMS IoU threshold as a float: any number but NaN (under which ``IoU > threshold``
    would never hold, silently keeping every box). Values outside [0, 1] are accepted, as
    torchvision accepts them: >= 1 suppresses nothing, < 0 every box after the first
    (their IoU, 0 or more, is above it)."""
    thr = number(name, value)
    if math.isnan(thr):
        raise ValueError(f"{name}: expected a number (IoU, usually in [0, 1]), got NaN")
    return thr


class UnitsWarning(UserWarning):
    """``mean`` / ``std`` in other units than the pixels they are applied to: statistics of
    0..255 pixels (mmdetection's ``[123.675, 116.28, 103.53]``) with the pixels scaled to
    [0, 1] (``scale=1/255``, :func:`cupyprep.preprocess`'s default), or statistics of [0, 1]
    pixels (torchvision's ``[0.485, 0.456, 0.406]``) with integer pixels left in 0..255
    (``scale=1``, :func:`cupyprep.normalize`'s default). Make it an error with
    ``warnings.simplefilter("error", cupyprep.UnitsWarning)``."""


# |mean| or std above this: statistics of 0..255 pixels; pixels whose scaled range (scale
# times the dtype's largest value; 255 for floats) stays at or below it are in [0, 1] units
UNIT_LIMIT = 1.5
# integer pixels whose scaled range reaches this are still in pixel units
PIXEL_UNITS = 100.0


def units(op, mean, std, given, scale, dtype, default_scale=None):
    """Warn with :class:`UnitsWarning` where ``mean`` / ``std`` (tuples, ``given`` by the
    caller) and the pixels after ``scale`` are clearly in different units (see the class).
    The rule: any ``|mean| > 1.5`` or ``|std| > 1.5`` with ``scale * top <= 1.5``, or every
    ``|mean|`` and ``|std| <= 1.5`` (other than mean 0, std 1) with integer pixels and
    ``scale * top >= 100``, ``top`` being the dtype's largest value (255 for floats)."""
    if given:
        message = _units_message(op, mean, std, scale, dtype, default_scale)
        if message is not None:
            warnings.warn(message, UnitsWarning, stacklevel=3)


@functools.lru_cache(maxsize=256)
def _units_message(op, mean, std, scale, dtype, default_scale):
    # the same statistics recur call after call: judged once each
    dtype = np.dtype(dtype)
    top_value = float(np.iinfo(dtype).max) if dtype.kind in "ui" else 255.0
    top = scale * top_value
    big = any(abs(v) > UNIT_LIMIT for v in mean) or any(abs(v) > UNIT_LIMIT for v in std)
    said = f"scale={scale:.6g}" + (f" ({op}'s default)" if scale == default_scale else "")
    if big and top <= UNIT_LIMIT:
        return (f"{op}: mean={list(mean)} / std={list(std)} look like statistics of 0..255 pixels "
                f"(mmdetection's), but {said} maps the pixels to [0, 1] first: pass scale=1.0 for "
                "statistics in pixel units, or divide mean and std by 255")
    if (not big and dtype.kind in "ui" and top >= PIXEL_UNITS
            and not (all(v == 0 for v in mean) and all(v == 1 for v in std))):
        return (f"{op}: mean={list(mean)} / std={list(std)} look like statistics of [0, 1] pixels "
                f"(torchvision's), but {said} leaves {dtype} pixels in 0..{top:g}: pass "
                f"scale={1 / top_value:.6g} (1/{top_value:g}) to scale them to [0, 1] first")
    return None


def list_images(name, arrays, same_ndim=True):
    """The images of the list ``name``, each checked against the first (which is checked
    itself): HW or HWC, non-empty, with the first's dtype and channel count (an HW image
    counts one channel) and, with ``same_ndim``, its form (all HW or all HWC). Returns the
    channel count."""
    first = arrays[0]
    c0 = first.shape[2] if first.ndim == 3 else 1
    for i, a in enumerate(arrays):
        _list_image(name, i, a, first, c0, same_ndim)
    return c0


def _list_image(name, i, array, first, c0, same_ndim):
    where = f"{name}[{i}]"
    if array.ndim not in (2, 3) or (same_ndim and array.ndim != first.ndim):
        like = f" like {name}[0]" if i else ""
        raise ValueError(f"{where}: expected an HWC (or HW) image{like}, got {describe(array)}")
    c = array.shape[2] if array.ndim == 3 else 1
    if array.dtype != first.dtype:
        raise TypeError(f"{where}: expected dtype {first.dtype} like {name}[0], got {describe(array)}")
    if c != c0:
        raise ValueError(f"{where}: expected {c0} channels like {name}[0], got {describe(array)}")
    if array.shape[0] <= 0 or array.shape[1] <= 0:
        raise ValueError(f"{where}: expected a non-empty image, got {describe(array)}")


def per_channel(name, value, channels, default, image="the image"):
    """A scalar or a length-``channels`` sequence, as a tuple of floats (``image`` names
    the argument whose channels these are, for the error)."""
    if value is None:
        return (float(default),) * channels
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (float(value),) * channels
    if (type(value) is tuple or type(value) is list) and len(value) == channels and all(
            type(v) is float or type(v) is int for v in value):
        return tuple([float(v) for v in value])  # the common form, without NumPy
    try:
        values = [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a number or a sequence of numbers, got {value!r}") from None
    if np.ndim(value) != 1 or len(values) != channels:
        raise ValueError(
            f"{name}: expected {channels} values (one per channel of {image}), got {len(values)}: {value!r}"
        )
    return tuple(values)


def fill_values(name, value, channels, dtype, rounded_to, image="the image"):
    """A fill value (a pad or border value: one number, or one per channel) as float32s:
    for an unsigned integer image type rounded and saturated as a stored pixel is (OpenCV's
    saturate_cast), then rounded to the dtype ``rounded_to``; ``image`` as
    :func:`per_channel`'s."""
    values = per_channel(name, value, channels, 0.0, image)
    return _fill_values(values, np.dtype(dtype), np.dtype(rounded_to))


@functools.lru_cache(maxsize=256)
def _fill_values(values, dtype, rounded_to):
    # the same few fills recur call after call: worked out once each
    arr = np.asarray(values, np.float64)
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        arr = np.clip(np.rint(arr), info.min, info.max)
    return tuple(float(v) for v in arr.astype(rounded_to).astype(np.float32))


class ImageGeometry:
    """How an image or batch is laid out: batch size, channels, height, width, whether
    the input had a batch / channel axis, and element strides for (n, c, y, x)."""

    def __init__(self, n, c, h, w, strides, batched, has_channels, channels_last):
        self.n, self.c, self.h, self.w = n, c, h, w
        self.strides = strides  # (s_n, s_c, s_y, s_x) in elements
        self.batched = batched
        self.has_channels = has_channels
        self.channels_last = channels_last

    def shape(self, h, w, c=None, channels_last=None):
        """The array shape of an image of this kind with a new size (and channel count /
        layout when given)."""
        c = self.c if c is None else c
        last = self.channels_last if channels_last is None else channels_last
        if not self.has_channels:
            core = (h, w)
        elif last:
            core = (h, w, c)
        else:
            core = (c, h, w)
        return ((self.n,) if self.batched else ()) + core


LAYOUTS = ("HWC", "CHW", "NHWC", "NCHW")


def image_layout(name, array, layout, max_channels=None):
    """Read the geometry of an image argument given its ``layout``.

    2-D arrays are single-channel ``HW`` images; 3-D arrays are ``HWC`` (or ``CHW``);
    4-D arrays are batches ``NHWC`` (or ``NCHW``).
    """
    from ._arrays import element_strides

    choice("layout", layout, LAYOUTS)
    channels_last = layout in ("HWC", "NHWC")
    ndim = array.ndim
    if layout.startswith("N") and ndim != 4:
        raise ValueError(f"{name}: layout {layout!r} expects a 4-D batch, got {describe(array)}")
    if ndim not in (2, 3, 4):
        raise ValueError(
            f"{name}: expected a 2-D (HW), 3-D ({layout[-3:]}) or 4-D "
            f"(N{layout[-3:]}) array, got {describe(array)}"
        )
    st = element_strides(array, name)
    if ndim == 2:
        h, w = array.shape
        geo = ImageGeometry(1, 1, h, w, (0, 0, st[0], st[1]), False, False, True)
    else:
        batched = ndim == 4
        s_n = st[0] if batched else 0
        n = array.shape[0] if batched else 1
        core, cst = array.shape[-3:], st[-3:]
        if channels_last:
            (h, w, c), (s_y, s_x, s_c) = core, cst
        else:
            (c, h, w), (s_c, s_y, s_x) = core, cst
        geo = ImageGeometry(n, c, h, w, (s_n, s_c, s_y, s_x), batched, True, channels_last)
    if geo.h <= 0 or geo.w <= 0 or geo.c <= 0:
        raise ValueError(f"{name}: expected a non-empty image, got {describe(array)}")
    if max_channels is not None and geo.c > max_channels:
        raise ValueError(
            f"{name}: expected 1 to {max_channels} channels, got {geo.c} ({describe(array)})"
        )
    return geo


def positive_int(name, value, allow_none=False):
    """``value`` as a positive int below 2**31 (a kernel's int32 count; or None where
    allowed); a ValueError naming ``name``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 < value < _INT32_LIMIT:
        raise ValueError(f"{name}: expected a positive int{' or None' if allow_none else ''} (below "
                         f"2**31), got {value!r}")
    return int(value)
