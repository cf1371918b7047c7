"""The warp kernels: warp.cu (nearest, linear and cubic after OpenCV's float warp kernels,
generic and dense; OpenCV's fixed-point remap for 2 channels), warp_staged.cu (uint8
linear affine, 3 or 4 channels, constant border: a tile's source box in shared memory)
and warp_matrices.cu (random_affine's and align_faces' matrices)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ._common import cbool, ctype

FILE = "warp.cu"
STAGED_FILE = "warp_staged.cu"
MATRICES_FILE = "warp_matrices.cu"

INTERPOLATIONS = ("nearest", "linear", "cubic")
BORDER_MODES = ("constant", "replicate", "reflect", "reflect101", "wrap")
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
OPS = ("affine", "perspective")
# the kernels that follow OpenCV's float coordinates; they also come as dense and
# several-pixels-a-thread variants, for one strided batch or a list of sources
FLOAT_KERNELS = ("nearest", "linear", "cubic")
RANDOM_AFFINE_KERNEL = "cupyprep_random_affine_matrices"
SIMILARITY_KERNEL = "cupyprep_similarity"
# OpenCV's SIMD step for its float warp kernels on AVX2 (2 x 8 float lanes): pixels below
# the destination width rounded down to it take the vector arithmetic, the rest the scalar
OPENCV_WARP_STEP = 16


def _frozen(mapping):
    return field(default_factory=lambda: MappingProxyType(dict(mapping)))


@dataclass(frozen=True)
class WarpSpec:
    """The warp kernels' variants and launch tuning (measured on an H200; the sweeps are
    in docs/performance-history)."""

    name: str = "warp"
    # dense variants (every pixel's channels adjacent in sources and output) at all;
    # False: always the generic strided kernel
    dense: bool = True
    # output rows one thread makes (its image's setup done once for them)
    rows_per_thread: int = 4
    # nearest / linear on dense pixels: pixels one thread makes side by side in a row
    # where pixels_by_size has no other count (uint8: 4 pixels of 1, 3 or 4 channels are
    # whole 32-bit words)
    pixels_per_thread: int = 4
    # where a pixel is wide, fewer pixels a thread ran faster on W5's rotations:
    # (kernel, bytes a pixel) -> pixels
    pixels_by_size: MappingProxyType = _frozen({
        ("nearest", 8): 2, ("nearest", 12): 1, ("nearest", 16): 1,
        ("linear", 8): 2, ("linear", 16): 2})
    # with a border other than constant every pixel outside the image goes through the
    # border pass after its group's store, and some kinds run faster at fewer pixels:
    # (kernel, element type, channels) -> (pixels for replicate, for the other borders)
    pixels_by_border: MappingProxyType = _frozen({
        ("nearest", "uint8", 4): (2, 2), ("linear", "uint8", 3): (2, 4),
        ("linear", "uint8", 4): (2, 2),
        ("nearest", "uint16", 1): (2, 2), ("linear", "uint16", 1): (2, 2),
        ("linear", "uint16", 3): (1, 4),
        ("nearest", "float16", 1): (2, 2), ("linear", "float16", 1): (2, 2),
        ("nearest", "float16", 3): (1, 1), ("linear", "float16", 3): (1, 4),
        ("linear", "float32", 1): (2, 2), ("linear", "float32", 3): (2, 2),
        ("cubic", "float32", 3): (1, 1), ("cubic", "float32", 4): (1, 1)})
    # dense variants: threads of a block along x, the rest of the block along y (a warp
    # is then a tile of block_x pixel groups by 32 / block_x rows; squarer tiles touch
    # fewer source rows under a rotation)
    block_x: int = 8
    block_threads: int = 128
    # the staged uint8 kernel (warp_staged.cu); False: the dense kernels take its inputs
    staged: bool = True
    staged_channels: tuple = (3, 4)
    staged_tile: int = 64  # output tile side (kStagedTile)
    staged_threads: int = 256  # threads a block (kStagedThreads)
    # launch bound, blocks an SM: 4 (64 registers, a box of up to 47.5 KB) ran W5 at
    # 0.0687 ms, 5 (48 registers, 44 KB) at 0.0767
    staged_blocks: int = 4
    # tiles a block makes in turn (neighbours in a row of tiles; 4 ran W5 fastest of 1-6
    # and 8), at most staged_most_tiles (kStagedMostTiles); the launch's last
    # staged_single_waves waves of blocks make one tile each, which keeps its end short
    staged_group: int = 4
    staged_single_waves: float = 1.5
    staged_most_tiles: int = 8

    def __post_init__(self):
        if not 1 <= self.staged_group <= self.staged_most_tiles:
            raise ValueError(f"staged_group: expected 1 to {self.staged_most_tiles}, "
                             f"got {self.staged_group}")

    # --- name expressions -----------------------------------------------------------------
    def kernel(self, interpolation, channels):
        """Which of OpenCV's implementations a warp takes: its float kernels for nearest
        and linear on 1, 3 and 4 channels and for cubic; its fixed-point remap for 2."""
        if interpolation == "cubic" or channels != 2:
            return interpolation
        return interpolation + "_fixed"

    def expr(self, op, kernel, dtype, cn, dense=False, pixels=1, listed=False):
        if kernel in FLOAT_KERNELS:
            return (f"cupyprep_warp_{op}_{kernel}<{ctype(dtype)}, {cn}, {cbool(dense)}, "
                    f"{pixels}, {cbool(listed)}>")
        return f"cupyprep_warp_{op}_{kernel}<{ctype(dtype)}, {cn}>"

    def staged_expr(self, cn, listed):
        return (f"cupyprep_warp_affine_linear_staged<unsigned char, {cn}, {cbool(listed)}, "
                f"{self.staged_blocks}>")

    # --- launch tuning -------------------------------------------------------------------
    def pixels(self, kernel, dtype, channels, border_mode="constant"):
        """Output pixels a thread of a dense kernel makes side by side (the host picks the
        variant per call, so the count may follow the border mode). Cubic, whose 16 taps
        a pixel are 4 times linear's work: one pixel a thread for uint8, two for float32,
        for 2-byte elements one of 3 or 4 channels and two of 1 or 2."""
        dtype = np.dtype(dtype)
        if border_mode != "constant":
            picks = self.pixels_by_border.get((kernel, dtype.name, channels))
            if picks is not None:
                return picks[border_mode != "replicate"]
        if kernel == "cubic":
            return {1: 1, 4: 2}.get(dtype.itemsize, 1 if channels >= 3 else 2)
        return self.pixels_by_size.get((kernel, dtype.itemsize * channels), self.pixels_per_thread)

    def rows(self, kernel, pixels):
        """Output rows a thread of a dense kernel makes: cubic at one pixel a row shares its
        image's setup over twice as many (uint8 3 channels 0.308 -> 0.288 ms; no other kind
        gained)."""
        return 2 * self.rows_per_thread if kernel == "cubic" and pixels == 1 else self.rows_per_thread

    # --- variants --------------------------------------------------------------------------
    def variants(self):
        generic = [self.expr(op, self.kernel(i, cn), d, cn)
                   for op in OPS for i in INTERPOLATIONS for d in DTYPES for cn in (1, 2, 3, 4)]
        dense = [self.expr(op, i, d, cn, True, px, listed)
                 for op in OPS for i in FLOAT_KERNELS for d in DTYPES for cn in (1, 2, 3, 4)
                 if self.kernel(i, cn) == i
                 for px in sorted({self.pixels(i, d, cn, b) for b in BORDER_MODES})
                 for listed in (False, True)]
        staged = [self.staged_expr(cn, listed) for cn in self.staged_channels
                  for listed in (False, True)]
        return ([(FILE, e) for e in generic + dense] + [(STAGED_FILE, e) for e in staged]
                + [(MATRICES_FILE, RANDOM_AFFINE_KERNEL), (MATRICES_FILE, SIMILARITY_KERNEL)])


SPEC = WarpSpec()
CUDA_CONSTANTS = ((STAGED_FILE, "kStagedTile", SPEC.staged_tile),
                  (STAGED_FILE, "kStagedThreads", SPEC.staged_threads),
                  (STAGED_FILE, "kStagedMostTiles", SPEC.staged_most_tiles))
