"""preprocess.cu: the fused kernel, cupyprep_preprocess_<interpolation><TIn, TOut, CN,
DENSE, RAGGED, NHWC, XPT>."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "preprocess.cu"
MODES = ("letterbox", "stretch", "center_crop", "letterbox_top_left")
IN_DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
OUT_DTYPES = ("float32", "float16", "uint8")
# the fused kernel's own resampling; "area" for whole factors only (OpenCV's fast area
# regime): other area factors resize first, then take nearest at scale 1
INTERPOLATIONS = ("nearest", "linear", "cubic", "area")
CHANNELS = (1, 3, 4)


@dataclass(frozen=True)
class PreprocessSpec:
    name: str = "preprocess"
    # Launch shape, measured on an H200 (docs/performance-history): threads per block
    # along x, output rows one thread makes in its columns (their taps computed once for
    # all of them), and adjacent columns per thread (2: stores of two elements at a time,
    # and the uint8 word path's loads of two pixels in flight together; 1 took W1 / W2 /
    # W1r 0.075 / 0.105 / 0.095 ms against 0.068 / 0.093 / 0.090, 128 threads 0.071 /
    # 0.092 / 0.095).
    block_x: int = 64
    rows_per_block: int = 8
    x_per_thread: int = 2

    def expr(self, interpolation, in_dtype, out_dtype, cn, dense, ragged, nhwc):
        return (f"cupyprep_preprocess_{interpolation}<{ctype(in_dtype)}, {ctype(out_dtype)}, "
                f"{cn}, {cbool(dense)}, {cbool(ragged)}, {cbool(nhwc)}, {self.x_per_thread}>")

    def variants(self):
        return [(FILE, self.expr(i, d, o, cn, dense, ragged, nhwc))
                for i in INTERPOLATIONS for d in IN_DTYPES for o in OUT_DTYPES for cn in CHANNELS
                for dense in (True, False) for ragged in (False, True) for nhwc in (False, True)]


SPEC = PreprocessSpec()
CUDA_CONSTANTS = ()
