"""nms.cu: the NMS pipeline's kernels (keys, sort, gather, mask, greedy reduce, emit)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "nms.cu"
BOX_DTYPES = (np.float32, np.float16)
KEY_TYPES = ("int", "long long")
# how a candidate's class is found: none, one per candidate, from the box's row, the best
# of a row of scores
CLASS_NONE, CLASS_PER_CANDIDATE, CLASS_FROM_BOX, CLASS_BEST = 0, 1, 2, 3


@dataclass(frozen=True)
class NmsSpec:
    name: str = "nms"
    # batched_nms with more boxes than this sorts by class first, so the mask and the
    # greedy pass see each class's boxes alone (fewer launches and sorts below it)
    grouped_min_boxes: int = 16384
    # one segment of up to this many keys sorts in one block (cupyprep_nms_small: keys, sort
    # and gather in one launch, where the gather's other loops are this short too)
    small_sort: int = 4096
    # blocks per row of 64-row chunks in the mask launch (each loops over tiles)
    mask_y: int = 32
    # multiclass_nms with a score threshold and no (or a large) top_k: a worst-case
    # suppression mask (every candidate passing) above this many bytes is sized by a count
    # of the passing candidates instead (one read back)
    mask_budget: int = 1 << 30
    # a suppression mask of up to this many bytes shares one allocation with the scratch
    # arrays and the results (one allocation a call, where there are three above it); the
    # caller's results then keep that allocation (about 130 KB at 1000 boxes) while they live
    one_allocation: int = 1 << 20

    def keys_expr(self, score_dtype, best, key_type):
        return f"cupyprep_nms_keys<{ctype(score_dtype)}, {cbool(best)}, {key_type}>"

    def small_expr(self, score_dtype, box_dtype, classes):
        return f"cupyprep_nms_small<{ctype(score_dtype)}, {ctype(box_dtype)}, {classes}>"

    def gather_expr(self, box_dtype, classes, key_type):
        return f"cupyprep_nms_gather<{ctype(box_dtype)}, {classes}, {key_type}>"

    def mask_expr(self, half, classes, first):
        return f"cupyprep_nms_mask<{cbool(half)}, {cbool(classes)}, {cbool(first)}>"

    def reduce_expr(self, grouped):
        return f"cupyprep_nms_reduce<{cbool(grouped)}>"

    def final_keys_expr(self, score_dtype):
        return f"cupyprep_nms_final_keys<{ctype(score_dtype)}>"

    def emit_expr(self, box_dtype, score_dtype):
        return f"cupyprep_nms_emit<{ctype(box_dtype)}, {ctype(score_dtype)}>"

    def variants(self):
        out = [self.keys_expr(t, b, k) for t in BOX_DTYPES for b in (False, True) for k in KEY_TYPES]
        out += [self.gather_expr(t, c, k) for t in BOX_DTYPES for c in range(4) for k in KEY_TYPES]
        out += [self.small_expr(s, b, c) for s in BOX_DTYPES for b in BOX_DTYPES for c in range(4)]
        out += ["cupyprep_nms_first_chunk", "cupyprep_nms_small_sort"]
        out += [self.mask_expr(h, c, f) for h in (False, True) for c in (False, True)
                for f in (False, True)]
        out += [self.reduce_expr(g) for g in (False, True)]
        out += [self.final_keys_expr(t) for t in BOX_DTYPES]
        out.append("cupyprep_nms_final_ids")
        out += [self.emit_expr(b, s) for b in BOX_DTYPES for s in BOX_DTYPES]
        return [(FILE, e) for e in out]


SPEC = NmsSpec()
CUDA_CONSTANTS = ((FILE, "kSmallSort", SPEC.small_sort),)
