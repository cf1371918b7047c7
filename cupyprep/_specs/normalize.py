"""normalize.cu: cupyprep_normalize<TIn, TOut, CN, SWAP> (any strides) and
cupyprep_normalize_dense<..., NHWC> (contiguous images)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "normalize.cu"
IN_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
OUT_DTYPES = ("float32", "float16", "uint8")


@dataclass(frozen=True)
class NormalizeSpec:
    name: str = "normalize"
    # cupyprep_normalize_dense's launch: threads per block, and about how many pixels a
    # thread makes (H200, graph replays: one each left threads too little work; 4 took
    # 64 x 512^2 x 3 uint8 into NCHW float32 from 0.130 ms with the pixel kernel to 0.069)
    dense_block: int = 256
    dense_items: int = 4

    def expr(self, in_dtype, out_dtype, cn, swap_rb, nhwc=None):
        """The pixel kernel's name expression; with ``nhwc`` given, the dense kernel's."""
        args = f"{ctype(in_dtype)}, {ctype(out_dtype)}, {cn}, {cbool(swap_rb)}"
        if nhwc is None:
            return f"cupyprep_normalize<{args}>"
        return f"cupyprep_normalize_dense<{args}, {cbool(nhwc)}>"

    def variants(self):
        combos = [(i, o, cn, swap) for i in IN_DTYPES for o in OUT_DTYPES for cn in (1, 2, 3, 4)
                  for swap in ((False, True) if cn >= 3 else (False,))]
        return ([(FILE, self.expr(*k)) for k in combos]
                + [(FILE, self.expr(*k, nhwc)) for k in combos for nhwc in (False, True)])


SPEC = NormalizeSpec()
CUDA_CONSTANTS = ()
