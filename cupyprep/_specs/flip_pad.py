"""flip_pad.cu: cupyprep_copy_border<T, CN>, the one kernel of flip, rotate90 and pad."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype
from .warp import BORDER_MODES

FILE = "flip_pad.cu"
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
DIRECTIONS = ("horizontal", "vertical", "both")
CHANNELS = (1, 2, 3, 4)  # channels a pixel of one kernel thread; more go plane by plane
__all__ = ["BORDER_MODES", "CHANNELS", "DIRECTIONS", "DTYPES", "FILE", "SPEC"]


@dataclass(frozen=True)
class FlipPadSpec:
    name: str = "flip_pad"

    def expr(self, dtype, cn):
        return f"cupyprep_copy_border<{ctype(dtype)}, {cn}>"

    def variants(self):
        return [(FILE, self.expr(d, cn)) for d in DTYPES for cn in CHANNELS]


SPEC = FlipPadSpec()
# border_mode numbers: kernels/common.cuh BORDER_* (warp.cu takes the same)
CUDA_CONSTANTS = tuple(("common.cuh", f"BORDER_{m.upper()}", i) for i, m in enumerate(BORDER_MODES))
