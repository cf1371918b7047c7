"""resize.cu: cupyprep_resize_<kernel><T, CN>, one kernel per OpenCV algorithm."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "resize.cu"
INTERPOLATIONS = ("nearest", "linear", "area", "cubic")
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
# interpolations that are several algorithms in OpenCV get one kernel per algorithm
KERNELS = {"nearest": ("nearest",), "linear": ("linear",), "cubic": ("cubic",),
           "area": ("area_fast", "area_weighted", "area_up")}
CHANNELS = (1, 2, 3, 4)  # channels a pixel of one kernel thread; more go plane by plane
# Planes of a pixel of more than 4 channels: OpenCV averages 2x2 cells of such pixels in its
# general loop (ties to even), not its 1-, 3- and 4-channel vector path (ties up), so the
# kernels with 2x2 cells get the pixel's channel count; any count above 4 acts the same.
WIDE_PIXEL_CN = 5
WIDE_PIXEL_KERNELS = ("linear", "area_fast")


@dataclass(frozen=True)
class ResizeSpec:
    name: str = "resize"

    def expr(self, kernel, dtype, cn, pixel_cn=None):
        """``pixel_cn``: the channel count of the pixel OpenCV sees where it is not ``cn``
        (WIDE_PIXEL_CN for planes of a pixel of more than 4 channels)."""
        tail = "" if pixel_cn is None or pixel_cn == cn else f", {pixel_cn}"
        return f"cupyprep_resize_{kernel}<{ctype(dtype)}, {cn}{tail}>"

    def variants(self):
        return [(FILE, self.expr(k, d, cn)) for i in INTERPOLATIONS for k in KERNELS[i]
                for d in DTYPES for cn in CHANNELS] + \
            [(FILE, self.expr(k, d, 1, WIDE_PIXEL_CN)) for k in WIDE_PIXEL_KERNELS for d in DTYPES]


SPEC = ResizeSpec()
CUDA_CONSTANTS = ()
