"""Looking at a batch: a grid picture of preprocessed images, for matplotlib or a notebook."""
from __future__ import annotations

import math

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
        xyxy boxes in the batch's (network) coordinates, drawn in green.
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
        Images shown at most (the first ones).

    Returns
    -------
    Picture : RGB uint8 ``(rows * (H + gap) - gap, columns * (W + gap) - gap, 3)``.

    Example
    -------
    >>> batch, meta = cupyprep.preprocess(frames, (640, 640))          # doctest: +SKIP
    >>> plt.imshow(cupyprep.show(batch))                                # doctest: +SKIP
    """
    if getattr(batch, "ndim", 0) == 4:
        batch = batch[:max(max_images, 0)]  # only those shown are copied to the host
    x = _transfers.to_host(batch).astype(np.float64)
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout: expected 'NCHW' or 'NHWC', got {layout!r}")
    if channels not in ("rgb", "bgr"):
        raise ValueError(f"channels: expected 'rgb' or 'bgr', got {channels!r}")
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
    if mean is not None or std is not None:  # 0..255 statistics at scale 1/255: a UnitsWarning
        m, s = (tuple(float(v) for v in np.broadcast_to(np.asarray(v, np.float64), (c,)))
                for v in (0.0 if mean is None else mean, 1.0 if std is None else std))
        _validate.units("show", m, s, True, float(scale), np.float32, default_scale=1 / 255)
    if std is not None:
        x = x * np.broadcast_to(np.asarray(std, np.float64), (c,))
    if mean is not None:
        x = x + np.broadcast_to(np.asarray(mean, np.float64), (c,))
    x = np.clip(np.rint(x / scale), 0, 255).astype(np.uint8)
    if c == 1:
        x = np.repeat(x, 3, axis=3)
    x = x[..., :3]
    if channels == "bgr":
        x = x[..., ::-1]
    n = min(len(x), max_images)
    cols = columns or max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    h, w = x.shape[1:3]
    grid = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap, 3), 255, np.uint8)
    for i in range(n):
        tile = np.ascontiguousarray(x[i])
        if boxes is not None:
            for box in _transfers.to_host(boxes[i]).reshape(-1, 4):
                _draw_box(tile, box, (0, 200, 0))
        r, q = divmod(i, cols)
        grid[r * (h + gap):r * (h + gap) + h, q * (w + gap):q * (w + gap) + w] = tile
    return Picture(grid)
