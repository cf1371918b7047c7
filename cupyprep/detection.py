"""The detection ops under their earlier module path: ``cupyprep.detection`` re-exports
:mod:`cupyprep.nms`, :mod:`cupyprep.boxes` and :mod:`cupyprep.roi_align`."""
from __future__ import annotations

from ._specs.boxes import BOX_DTYPES
from .boxes import (
    BOX_FORMATS,
    box_convert,
    box_iou,
    clip_boxes,
    decode_boxes,
    decode_landmarks,
    decode_yolo,
    encode_boxes,
    prior_boxes,
)
from .nms import Detections, FlatDetections, batched_nms, multiclass_nms, nms
from .roi_align import roi_align

__all__ = [
    "nms", "batched_nms", "multiclass_nms", "Detections", "FlatDetections", "roi_align",
    "box_convert", "box_iou", "clip_boxes", "prior_boxes", "decode_boxes", "decode_landmarks",
    "encode_boxes", "decode_yolo", "BOX_DTYPES", "BOX_FORMATS",
]
