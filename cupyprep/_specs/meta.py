"""boxes.cu's cupyprep_map_coords<T, W, INVERSE, CLIP>: PreprocessMeta's mapping of
coordinates between original images and the network input."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import C_TYPES

FILE = "boxes.cu"
# the coordinates' float dtype -> its C type
MAP_TYPES = {**{np.dtype(t): C_TYPES[np.dtype(t)] for t in (np.float16, np.float32)},
             np.dtype(np.float64): "double"}


@dataclass(frozen=True)
class MetaSpec:
    name: str = "meta"

    def expr(self, dtype, width, inverse, clip):
        return (f"cupyprep_map_coords<{MAP_TYPES[np.dtype(dtype)]}, {width}, "
                f"{'true' if inverse else 'false'}, {'true' if clip else 'false'}>")

    def variants(self):
        return [(FILE, self.expr(t, w, i, c)) for t in MAP_TYPES for w in (2, 4)
                for i in (False, True) for c in (False, True)]


SPEC = MetaSpec()
CUDA_CONSTANTS = ()
