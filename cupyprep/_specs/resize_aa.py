"""resize_aa.cu: cupyprep_resize_aa<TIn, TOut, CN, HORIZONTAL>, one launch per resampled
axis of torchvision's antialiased resize."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "resize_aa.cu"
INTERPOLATIONS = ("linear", "cubic")
DTYPES = (np.uint8, np.uint16, np.float16, np.float32)
CHANNELS = (1, 2, 3, 4)  # channels a pixel of one kernel thread; more go plane by plane


def pass_types(dtype, first, last):
    """(input, output) dtypes of one pass: uint8 stays uint8 (PyTorch's fixed point); the
    float path reads the image's dtype in the first pass, writes it in the last, and keeps
    float32 between the two."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return dtype, dtype
    f32 = np.dtype(np.float32)
    return (dtype if first else f32), (dtype if last else f32)


@dataclass(frozen=True)
class ResizeAaSpec:
    name: str = "resize_aa"

    def expr(self, in_dtype, out_dtype, cn, horizontal):
        return (f"cupyprep_resize_aa<{ctype(in_dtype)}, {ctype(out_dtype)}, {cn}, "
                f"{cbool(horizontal)}>")

    def variants(self):
        pairs = set()
        for d in DTYPES:
            for horizontal in (True, False):
                for first, last in ((True, True), (True, False), (False, True)):
                    if first and not last and not horizontal:
                        continue  # y is the second pass when both run
                    if last and not first and horizontal:
                        continue
                    pairs.add(pass_types(d, first, last) + (horizontal,))
        return [(FILE, self.expr(i, o, cn, h)) for i, o, h in sorted(pairs, key=str)
                for cn in CHANNELS]


SPEC = ResizeAaSpec()
CUDA_CONSTANTS = ()
