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


@dataclass(frozen=True)
class ResizeSpec:
    name: str = "resize"

    def expr(self, kernel, dtype, cn):
        return f"cupyprep_resize_{kernel}<{ctype(dtype)}, {cn}>"

    def variants(self):
        return [(FILE, self.expr(k, d, cn)) for i in INTERPOLATIONS for k in KERNELS[i]
                for d in DTYPES for cn in CHANNELS]


SPEC = ResizeSpec()
CUDA_CONSTANTS = ()
