"""boxes.cu: the box ops and head decoders, one kernel each."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import cbool, ctype

FILE = "boxes.cu"
BOX_DTYPES = (np.float32, np.float16)
FORMATS = ("xyxy", "xywh", "cxcywh")


@dataclass(frozen=True)
class BoxesSpec:
    name: str = "boxes"
    # decode_yolo of a transposed (YOLOv8) head: a block of yolo_threads makes a tile of
    # yolo_rows anchors by yolo_cols channels
    yolo_rows: int = 128
    yolo_cols: int = 32
    yolo_threads: int = 256

    def convert_expr(self, dtype, in_fmt, out_fmt):
        return f"cupyprep_box_convert<{ctype(dtype)}, {FORMATS.index(in_fmt)}, {FORMATS.index(out_fmt)}>"

    def iou_expr(self, dtype_a, dtype_b):
        return f"cupyprep_box_iou<{ctype(dtype_a)}, {ctype(dtype_b)}>"

    def op_expr(self, op, dtype):
        """clip_boxes, decode_boxes, decode_landmarks."""
        return f"cupyprep_{op}<{ctype(dtype)}>"

    def yolo_expr(self, layout, dtype, objectness):
        """layout: "rows" (a warp a row) or "tiles" (a transposed head)."""
        return f"cupyprep_decode_yolo_{layout}<{ctype(dtype)}, {cbool(objectness)}>"

    def variants(self):
        out = []
        for t in BOX_DTYPES:
            out += [self.convert_expr(t, i, o) for i in FORMATS for o in FORMATS]
            out += [self.iou_expr(t, u) for u in BOX_DTYPES]
            out += [self.op_expr(op, t) for op in ("clip_boxes", "decode_boxes", "decode_landmarks")]
            out += [self.yolo_expr(k, t, obj) for k in ("rows", "tiles") for obj in (False, True)]
        return [(FILE, e) for e in out]


SPEC = BoxesSpec()
CUDA_CONSTANTS = ((FILE, "kYoloRows", SPEC.yolo_rows), (FILE, "kYoloCols", SPEC.yolo_cols),
                  (FILE, "kYoloThreads", SPEC.yolo_threads))
