"""filter.cu: cupyprep_filter_gaussian<T, CN, BORDER> and cupyprep_filter_box<T, CN, BORDER>."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "filter.cu"
KINDS = ("gaussian", "box")
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
# OpenCV's filters take these four borders (BORDER_WRAP is not one of them); the C++ enum
BORDERS = {"constant": 0, "replicate": 1, "reflect": 2, "reflect101": 3}
CHANNELS = (1, 2, 3, 4)  # channels a pixel of one kernel thread; more go plane by plane
FIXED_BITS = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16}  # the Gaussian's fixed point


@dataclass(frozen=True)
class FilterSpec:
    name: str = "filter"

    def expr(self, kind, dtype, cn, border):
        return f"cupyprep_filter_{kind}<{ctype(dtype)}, {cn}, {BORDERS[border]}>"

    def variants(self):
        return [(FILE, self.expr(k, d, cn, b)) for k in KINDS for d in DTYPES for cn in CHANNELS
                for b in BORDERS]


SPEC = FilterSpec()
CUDA_CONSTANTS = (("filter.cu", "CONSTANT", BORDERS["constant"]),
                  ("filter.cu", "REPLICATE", BORDERS["replicate"]),
                  ("filter.cu", "REFLECT", BORDERS["reflect"]),
                  ("filter.cu", "REFLECT101", BORDERS["reflect101"]))
