"""color.cu: cupyprep_swap_rb<T, CN>, cupyprep_to_gray<T, CN, BIDX> and
cupyprep_cvt_color<T, CONV, SCN, BIDX> (HSV and YCrCb, color.cuh)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "color.cu"
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
ORDERS = ("bgr", "rgb")
# cvt_color's HSV and YCrCb conversions: what OpenCV has them for
CVT_DTYPES = (np.uint8, np.float32)
# CONV template argument of each conversion (kernels/color.cu)
CONVERSIONS = {"bgr2hsv": 0, "hsv2bgr": 1, "bgr2ycrcb": 2, "ycrcb2bgr": 3}


@dataclass(frozen=True)
class ColorSpec:
    name: str = "color"
    # HSV -> BGR for uint8: OpenCV converts each row in blocks of its CPU's vector width
    # (64 pixels on x86 with AVX-512, 32 with AVX2 only, 16 with SSE or NEON), truncating,
    # and the rest of the row with scalar code that rounds; the kernels follow the same
    # split for this block (0: scalar code everywhere). cupyprep.cpu.opencv_hsv_block()
    # finds the block of the OpenCV at hand.
    hsv_vector_block: int = 64

    def __post_init__(self):
        if self.hsv_vector_block < 0:
            raise ValueError(f"hsv_vector_block: expected >= 0, got {self.hsv_vector_block}")

    def swap_rb_expr(self, dtype, cn):
        return f"cupyprep_swap_rb<{ctype(dtype)}, {cn}>"

    def to_gray_expr(self, dtype, cn, blue_index):
        return f"cupyprep_to_gray<{ctype(dtype)}, {cn}, {blue_index}>"

    def cvt_color_expr(self, dtype, conversion, src_channels, blue_index):
        conv = CONVERSIONS[conversion]
        return f"cupyprep_cvt_color<{ctype(dtype)}, {conv}, {src_channels}, {blue_index}>"

    def variants(self):
        out = []
        for d in DTYPES:
            for cn in (3, 4):
                out.append(self.swap_rb_expr(d, cn))
                out += [self.to_gray_expr(d, cn, b) for b in (0, 2)]
        for d in CVT_DTYPES:
            for conv in CONVERSIONS:
                for scn in ((3, 4) if conv.startswith("bgr") else (3,)):
                    out += [self.cvt_color_expr(d, conv, scn, b) for b in (0, 2)]
        return [(FILE, e) for e in out]


SPEC = ColorSpec()
CUDA_CONSTANTS = ()
