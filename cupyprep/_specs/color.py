"""color.cu: cupyprep_swap_rb<T, CN> and cupyprep_to_gray<T, CN, BIDX>."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "color.cu"
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
ORDERS = ("bgr", "rgb")


@dataclass(frozen=True)
class ColorSpec:
    name: str = "color"

    def swap_rb_expr(self, dtype, cn):
        return f"cupyprep_swap_rb<{ctype(dtype)}, {cn}>"

    def to_gray_expr(self, dtype, cn, blue_index):
        return f"cupyprep_to_gray<{ctype(dtype)}, {cn}, {blue_index}>"

    def variants(self):
        out = []
        for d in DTYPES:
            for cn in (3, 4):
                out.append(self.swap_rb_expr(d, cn))
                out += [self.to_gray_expr(d, cn, b) for b in (0, 2)]
        return [(FILE, e) for e in out]


SPEC = ColorSpec()
CUDA_CONSTANTS = ()
