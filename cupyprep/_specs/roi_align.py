"""roi_align.cu: cupyprep_roi_align<T, ALIGNED>."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "roi_align.cu"
DTYPES = (np.float32, np.float16)


@dataclass(frozen=True)
class RoiAlignSpec:
    name: str = "roi_align"
    block: int = 128  # threads per block
    items_per_block: int = 1024  # outputs per block (channels of one roi)
    # the largest in-image offset the kernel's shared tap tables take as int32
    narrow_limit: int = 2**31

    def expr(self, dtype, aligned):
        return f"cupyprep_roi_align<{ctype(dtype)}, {cbool(aligned)}>"

    def variants(self):
        return [(FILE, self.expr(d, a)) for d in DTYPES for a in (False, True)]


SPEC = RoiAlignSpec()
CUDA_CONSTANTS = ()
