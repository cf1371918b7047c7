"""crop.cu: cupyprep_crop_resize<T, CN, INTERP>, resize.cu's arithmetic on boxes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "crop.cu"
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
# sampling.cuh's INTERP_* numbers
INTERPOLATIONS = {"nearest": 0, "linear": 1, "cubic": 2}
CHANNELS = (1, 2, 3, 4)
BOX_DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int64)


@dataclass(frozen=True)
class CropSpec:
    name: str = "crop"

    def expr(self, interpolation, dtype, cn):
        return f"cupyprep_crop_resize<{ctype(dtype)}, {cn}, {INTERPOLATIONS[interpolation]}>"

    def variants(self):
        return [(FILE, self.expr(i, d, cn)) for i in INTERPOLATIONS for d in DTYPES
                for cn in CHANNELS]


SPEC = CropSpec()
CUDA_CONSTANTS = ()
