"""cupyprep: GPU image pre- and post-processing for deep-learning models.

CUDA C kernels compiled at run time by CuPy; NumPy, CuPy and PyTorch arrays in, the same
kind out (PyTorch CUDA tensors without a copy). NumPy inputs run on the CPU backend
(OpenCV), with the same semantics.
"""
from . import detection, geometry  # noqa: F401  (the earlier module paths, still importable)
from ._allocators import DeviceMemoryError
from ._kernels import GPUUnavailableError, KernelCompileError, warmup
from ._validate import UnitsWarning
from .augment import random_affine
from .boxes import (
    box_convert,
    box_iou,
    clip_boxes,
    decode_boxes,
    decode_landmarks,
    decode_yolo,
    encode_boxes,
    prior_boxes,
)
from .color import cvt_color, swap_rb, to_gray
from .crop import crop
from .decode import DecodeError, DecodeFailure, decode
from .display import show
from .faces import ARCFACE_112, align_faces
from .flip_pad import copy_make_border, flip, pad, rotate90
from .filter import box_filter, gaussian_blur
from .interop import (
    as_array,
    from_torch,
    release_graph_memory,
    stream,
    to_torch,
    use_torch_allocator,
)
from .matrices import (
    estimate_similarity,
    get_affine_transform,
    get_perspective_transform,
    get_rotation_matrix_2d,
    invert_affine_transform,
    transform_points,
)
from .nms import Detections, batched_nms, multiclass_nms, nms
from .normalize import IMAGENET_MEAN, IMAGENET_STD, denormalize, normalize
from .photometric import JitterParams, color_jitter, hsv_gain
from .pipeline import Loader, LoaderMeta, Skipped
from .preprocess import PreprocessMeta, preprocess
from .resize import resize
from .roi_align import roi_align
from .warp import warp_affine, warp_perspective

__version__ = "0.1.0"

__all__ = [
    "decode",
    "DecodeError",
    "DecodeFailure",
    "resize",
    "warp_affine",
    "warp_perspective",
    "align_faces",
    "random_affine",
    "color_jitter",
    "hsv_gain",
    "JitterParams",
    "get_rotation_matrix_2d",
    "get_affine_transform",
    "get_perspective_transform",
    "invert_affine_transform",
    "estimate_similarity",
    "transform_points",
    "ARCFACE_112",
    "normalize",
    "denormalize",
    "preprocess",
    "PreprocessMeta",
    "swap_rb",
    "to_gray",
    "flip",
    "rotate90",
    "pad",
    "copy_make_border",
    "crop",
    "cvt_color",
    "gaussian_blur",
    "box_filter",
    "warmup",
    "to_torch",
    "from_torch",
    "as_array",
    "stream",
    "use_torch_allocator",
    "release_graph_memory",
    "Loader",
    "LoaderMeta",
    "Skipped",
    "show",
    "nms",
    "batched_nms",
    "multiclass_nms",
    "Detections",
    "roi_align",
    "box_convert",
    "box_iou",
    "clip_boxes",
    "prior_boxes",
    "decode_boxes",
    "decode_landmarks",
    "encode_boxes",
    "decode_yolo",
    "KernelCompileError",
    "GPUUnavailableError",
    "UnitsWarning",
    "DeviceMemoryError",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "__version__",
]


def __getattr__(name):
    # cv2compat and testing stay unimported until asked for
    if name in ("cv2compat", "testing"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
