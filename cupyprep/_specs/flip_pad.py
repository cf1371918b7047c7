"""flip_pad.cu: the kernels of flip, rotate90 and pad.

``cupyprep_copy_border<T, CN>`` takes any strides; where pixels lie side by side, byte
kernels move whole rows or tiles: ``cupyprep_copy_rows`` (rows in order, with borders),
``cupyprep_mirror_rows<PX>`` (rows mirrored) and ``cupyprep_turn_tiles<PX>`` (quarter
turns), ``PX`` the bytes of a pixel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import ctype
from .warp import BORDER_MODES

FILE = "flip_pad.cu"
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
DIRECTIONS = ("horizontal", "vertical", "both")
CHANNELS = (1, 2, 3, 4)  # channels a pixel of one kernel thread; more go plane by plane
# pixel sizes (bytes) the mirror and turn kernels are built for: every dtype with 1 to 4
# channels (6-channel uint8 also lands on 6)
PIXEL_BYTES = (1, 2, 3, 4, 6, 8, 12, 16)
TURN_BLOCK = (32, 8)  # the threads of a cupyprep_turn_tiles block (the kernel assumes it)
TURN_TILE_SMALL, TURN_TILE_LARGE = 64, 32  # a turn tile's side, pixels of <= 3 bytes / more
ROWS_BLOCK = 128  # threads along a row in cupyprep_copy_rows / cupyprep_mirror_rows
__all__ = ["BORDER_MODES", "CHANNELS", "DIRECTIONS", "DTYPES", "FILE", "PIXEL_BYTES", "SPEC"]


@dataclass(frozen=True)
class FlipPadSpec:
    name: str = "flip_pad"
    # the byte kernels; off, every copy takes cupyprep_copy_border (tests compare the two)
    byte_kernels: bool = True

    def expr(self, dtype, cn):
        return f"cupyprep_copy_border<{ctype(dtype)}, {cn}>"

    def rows_expr(self):
        return "cupyprep_copy_rows"

    def mirror_expr(self, px):
        return f"cupyprep_mirror_rows<{px}>"

    def turn_expr(self, px):
        return f"cupyprep_turn_tiles<{px}>"

    @staticmethod
    def turn_tile(px):
        """Pixels a side of a cupyprep_turn_tiles tile (kernels/flip_pad.cu Tile::kSize)."""
        return TURN_TILE_SMALL if px <= 3 else TURN_TILE_LARGE

    def variants(self):
        return ([(FILE, self.expr(d, cn)) for d in DTYPES for cn in CHANNELS]
                + [(FILE, self.rows_expr())]
                + [(FILE, self.mirror_expr(px)) for px in PIXEL_BYTES]
                + [(FILE, self.turn_expr(px)) for px in PIXEL_BYTES])


SPEC = FlipPadSpec()
# border_mode numbers: kernels/common.cuh BORDER_* (warp.cu takes the same)
CUDA_CONSTANTS = tuple(("common.cuh", f"BORDER_{m.upper()}", i) for i, m in enumerate(BORDER_MODES)) + (
    (FILE, "kTurnThreadsX", TURN_BLOCK[0]),
    (FILE, "kTurnThreadsY", TURN_BLOCK[1]),
    (FILE, "kTurnTileSmallPixels", TURN_TILE_SMALL),
    (FILE, "kTurnTileLargePixels", TURN_TILE_LARGE),
)
