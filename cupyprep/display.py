"""Looking at a batch: a grid picture of preprocessed images, for matplotlib or a notebook."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _arrays, _transfers, _validate

__all__ = ["show", "Picture"]


class Picture:
    """An RGB uint8 picture ``(H, W, 3)``: ``plt.imshow(picture)`` draws it, a notebook cell
    ending in it shows it (PNG), ``numpy.asarray(picture)`` is the pixels."""

    def __init__(self, array):
        self.array = array

    @property
    def shape(self):
        return self.array.shape

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)

    def _repr_png_(self):
        try:
            import cv2

            ok, png = cv2.imencode(".png", self.array[:, :, ::-1])
            return png.tobytes() if ok else None
        except ImportError:
            pass
        try:
            import io

            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(self.array).save(buf, format="PNG")
            return buf.getvalue()
        except ImportError:
            return None

    def __repr__(self):
        return f"Picture({self.shape[1]}x{self.shape[0]} RGB)"


def _draw_box(img, box, color, width=2):
    h, w = img.shape[:2]
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    x0, x1 = sorted((min(max(x0, 0), w - 1), min(max(x1, 0), w - 1)))
    y0, y1 = sorted((min(max(y0, 0), h - 1), min(max(y1, 0), h - 1)))
    img[y0:y0 + width, x0:x1 + 1] = color
    img[max(y1 - width + 1, 0):y1 + 1, x0:x1 + 1] = color
    img[y0:y1 + 1, x0:x0 + width] = color
    img[y0:y1 + 1, max(x1 - width + 1, 0):x1 + 1] = color


def show(batch, boxes=None, *, mean=None, std=None, scale=1 / 255, layout="NCHW", channels="rgb",
         columns=None, max_images=16, gap=4):
    """A grid picture of a preprocessed batch, normalization undone.

    Parameters
    ----------
    batch : (N, C, H, W) or (N, H, W, C) array (numpy, cupy or torch), or one image
        A batch as :func:`cupyprep.preprocess` returns it; 1, 3 or 4 channels.
    boxes : (N, K, 4) array or list of N (K_i, 4) arrays, optional
        xyxy boxes in the batch's (network) coordinates, drawn in green; finite (a NaN or
        infinite coordinate is refused, naming the image's boxes).
    mean, std, scale :
        The normalization the batch went through (``(x * scale - mean) / std``); undone as
        ``(y * std + mean) / scale``, then clipped to 0..255. The defaults are
        :func:`cupyprep.preprocess`'s; 0..255 statistics with ``scale=1/255`` give a
        :class:`cupyprep.UnitsWarning`, as there.
    layout : {"NCHW", "NHWC"}
    channels : {"rgb", "bgr"}
        The batch's channel order (``swap_rb=True``, the default, gives RGB from BGR frames).
    columns : int, optional
        Images per row (default: about a square grid).
    max_images : int
        Images shown at most (the first ones), at least 1.
    gap : int
        White pixels between the images, 0 or more.

    Returns
    -------
    Picture : RGB uint8 ``(rows * (H + gap) - gap, columns * (W + gap) - gap, 3)``.

    Example
    -------
    >>> batch, meta = cupyprep.preprocess(frames, (640, 640))          # doctest: +SKIP
    >>> plt.imshow(cupyprep.show(batch))                                # doctest: +SKIP
    """
    layout = _validate.choice("layout", layout, ("NCHW", "NHWC"))
    channels = _validate.choice("channels", channels, ("rgb", "bgr"))
    max_images = _validate.positive_int("max_images", max_images)
    columns = _validate.positive_int("columns", columns, allow_none=True)
    if not isinstance(gap, numbers.Integral) or isinstance(gap, bool) or not 0 <= gap < 2**31:
        raise ValueError(f"gap: expected an int >= 0 (below 2**31), got {gap!r}")
    scale = _validate.number("scale", scale)
    if scale == 0 or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite non-zero number, got {scale!r}")
    arr = _arrays.prepare(batch, "batch").array
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"batch: expected an array of real numbers, got {_arrays.describe(batch)}")
    if arr.ndim == 4:
        batch = batch[:max_images]  # only those shown are copied to the host
    x = _transfers.to_host(batch).astype(np.float64)
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4:
        raise ValueError(f"batch: expected a 4-d batch or a 3-d image, got {_arrays.describe(batch)}")
    axis, other, other_axis = (1, "NHWC", 3) if layout == "NCHW" else (3, "NCHW", 1)
    if x.shape[axis] not in (1, 3, 4):
        hint = ""
        if x.shape[other_axis] in (1, 3, 4):  # the axis order of the other layout
            hint = f": a batch laid out {other}? pass layout={other!r}"
        raise ValueError(f"batch: expected 1, 3 or 4 channels on axis {axis} (layout={layout!r}), "
                         f"got {x.shape[axis]} ({_arrays.describe(batch)}){hint}")
    if layout == "NCHW":
        x = x.transpose(0, 2, 3, 1)
    c = x.shape[3]
    n = min(len(x), max_images)
    drawn = None if boxes is None else _boxes(boxes, n)
    m = _per_channel("mean", mean, c, 0.0)
    s = _per_channel("std", std, c, 1.0)
    if mean is not None or std is not None:  # 0..255 statistics at scale 1/255: a UnitsWarning
        _validate.units("show", m, s, True, scale, np.float32, default_scale=1 / 255)
    x = x * np.asarray(s) + np.asarray(m)
    x = np.clip(np.rint(x / scale), 0, 255).astype(np.uint8)
    if c == 1:
        x = np.repeat(x, 3, axis=3)
    x = x[..., :3]
    if channels == "bgr":
        x = x[..., ::-1]
    cols = columns or max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    h, w = x.shape[1:3]
    grid = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap, 3), 255, np.uint8)
    for i in range(n):
        tile = np.ascontiguousarray(x[i])
        if drawn is not None:
            for box in drawn[i]:
                _draw_box(tile, box, (0, 200, 0))
        r, q = divmod(i, cols)
        grid[r * (h + gap):r * (h + gap) + h, q * (w + gap):q * (w + gap) + w] = tile
    return Picture(grid)


def _per_channel(name, value, channels, default):
    """mean / std: one number, or one per channel of the batch (a length-1 sequence counts
    as one number), as a tuple of floats."""
    if value is None:
        return (float(default),) * channels
    v = _validate.as_numbers(name, _transfers.to_host(value) if _arrays.is_cupy(value) or
                             _arrays.is_torch(value) else value)
    if v.ndim > 1 or v.size not in (1, channels):
        raise ValueError(f"{name}: expected a number or {channels} values (one per channel of "
                         f"batch), got {_arrays.describe(value)}")
    return tuple(float(t) for t in np.broadcast_to(v.reshape(-1), (channels,)))


def _boxes(boxes, n):
    """Each shown image's boxes as a (K, 4) float64 host array of finite coordinates."""
    if isinstance(boxes, (list, tuple)):
        if len(boxes) < n:
            raise ValueError(f"boxes: expected one (K, 4) array per image shown ({n}), got a list "
                             f"of {len(boxes)}")
        parts = [boxes[i] for i in range(n)]
    else:
        arr = _arrays.prepare(boxes, "boxes").array
        if arr.ndim != 3 or arr.shape[0] < n or arr.shape[2] != 4:
            raise ValueError(f"boxes: expected an (N, K, 4) array with N >= {n} (the images "
                             f"shown), got {_arrays.describe(boxes)}")
        parts = list(_transfers.to_host(boxes)[:n])
    out = []
    for i, b in enumerate(parts):
        where = f"boxes[{i}]"
        a = _validate.as_numbers(where, _transfers.to_host(b) if _arrays.is_cupy(b) or _arrays.is_torch(b)
                                 else b)
        if a.size % 4 or (a.ndim and a.shape[-1] != 4):
            raise ValueError(f"{where}: expected (K, 4) xyxy boxes, got {_arrays.describe(b)}")
        a = a.reshape(-1, 4)
        if not np.isfinite(a).all():
            raise ValueError(f"{where}: expected finite coordinates, got {a[~np.isfinite(a).all(axis=1)][0]}")
        out.append(a)
    return out
