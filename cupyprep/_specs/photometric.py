"""photometric.cu: YOLO's HSV gain (cupyprep_hsv_gain_luts, cupyprep_hsv_gain<BIDX>) and
torchvision's ColorJitter (cupyprep_jitter_params, cupyprep_jitter_gray_sums<T, BIDX>,
cupyprep_jitter_apply<T, BIDX>)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype

FILE = "photometric.cu"
JITTER_DTYPES = (np.uint8, np.float32)
# color_jitter's operations, in the index order the kernels and the drawn parameters use
JITTER_OPS = ("brightness", "contrast", "saturation", "hue")
HSV_GAIN_LUTS_KERNEL = "cupyprep_hsv_gain_luts"
JITTER_PARAMS_KERNEL = "cupyprep_jitter_params"


@dataclass(frozen=True)
class PhotometricSpec:
    name: str = "photometric"
    # cupyprep_jitter_gray_sums' launch: threads a block (a multiple of the warp) and the
    # most blocks an image takes (each adds its warps' partial sums atomically)
    sums_block: int = 256
    sums_blocks_per_image: int = 64

    def __post_init__(self):
        if self.sums_block % 32 or not 32 <= self.sums_block <= 1024:
            raise ValueError(f"sums_block: expected a multiple of 32 in [32, 1024], got {self.sums_block}")
        if self.sums_blocks_per_image < 1:
            raise ValueError(f"sums_blocks_per_image: expected >= 1, got {self.sums_blocks_per_image}")

    def hsv_gain_expr(self, blue_index):
        return f"cupyprep_hsv_gain<{blue_index}>"

    def gray_sums_expr(self, dtype, blue_index):
        return f"cupyprep_jitter_gray_sums<{ctype(dtype)}, {blue_index}>"

    def apply_expr(self, dtype, blue_index):
        return f"cupyprep_jitter_apply<{ctype(dtype)}, {blue_index}>"

    def variants(self):
        out = [HSV_GAIN_LUTS_KERNEL, JITTER_PARAMS_KERNEL] + [self.hsv_gain_expr(b) for b in (0, 2)]
        for d in JITTER_DTYPES:
            for b in (0, 2):
                out += [self.gray_sums_expr(d, b), self.apply_expr(d, b)]
        return [(FILE, e) for e in out]


SPEC = PhotometricSpec()
CUDA_CONSTANTS = ()
