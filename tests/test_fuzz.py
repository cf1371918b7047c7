"""Bad input, drawn by hypothesis: every public op is called with some of its arguments
replaced (dtypes, shapes with 0 and 1, strided, negative-strided, broadcast and transposed
views, NaN / inf, huge, negative and zero sizes, wrong kinds, another array library, an
``out`` that overlaps the input). Each call returns a valid result (the right kind, and
the right shape where the op's shape is known) or raises TypeError / ValueError whose
message names a replaced argument (MemoryError for a size too large to allocate). Never
another exception, a crash, a hang or a wrong shape.

The "ci" profile (conftest.py) draws a fixed set: NumPy inputs on the CPU backend for
every op, and a few ops on the emulated kernels. ``--hypothesis-profile=deep`` on a GPU
(``-m gpu``) draws many more per op, with CuPy and torch inputs on the kernels.
"""
from __future__ import annotations

import math
import random
import re
import signal
from dataclasses import dataclass, field

import cv2
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cupyprep  # noqa: E402
from cupyprep import cv2compat
from cupyprep.cpu import without_ipp

PROFILE_EXAMPLES = settings().max_examples
DEEP = PROFILE_EXAMPLES > 200  # the "deep" profile (or one asked for on the command line)
CPU_EXAMPLES = PROFILE_EXAMPLES if DEEP else 60
EMULATED_EXAMPLES = 40
CALL_SECONDS = 60  # a call that takes longer counts as a hang
_FUZZ_DEVICE_BYTES = 4 << 30  # device memory a GPU fuzz test may hold


@dataclass
class Op:
    name: str
    fn: object
    args: dict  # valid arguments (NumPy), by parameter name
    shape: object = None  # args -> the result's shape, where it follows from the arguments
    aliases: dict = field(default_factory=dict)  # parameter -> other names its errors may use
    extra: dict = field(default_factory=dict)  # parameter -> bad values of its own kind, beside GARBAGE
    out: str = "out"  # the output argument's name ("dst" in cv2compat)


def _img(shape=(20, 30, 3), dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 200).astype(dtype)


def _boxes(n, seed=1):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 100, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(1, 30, (n, 2))], axis=1).astype(np.float32)


def _hwc_shape(a):
    img, (h, w) = a["img"], a["size"]
    return (h, w) + tuple(img.shape[2:]) if img.ndim == 3 else (img.shape[0], h, w) + tuple(img.shape[3:]) \
        if img.ndim == 4 else (h, w)


QUAD = np.array([[0.0, 0.0], [40.0, 3.0], [38.0, 30.0], [2.0, 28.0]])
_PRIORS = cupyprep.prior_boxes((32, 32), [[8, 16]], [8])
# generators of the kinds the random ops may be given (a NumPy one is valid for NumPy input)
_GENERATORS = [np.random.default_rng(0), np.random.RandomState(0), np.random.SeedSequence(0),
               np.random.PCG64(0), random.Random(0)]

OPS = [
    Op("resize", cupyprep.resize, {"img": _img(), "size": (12, 17), "interpolation": "linear",
                                   "layout": "HWC", "out": None},
       lambda a: _hwc_shape(a) if a["layout"] in ("HWC", "NHWC") else None),
    Op("warp_affine", cupyprep.warp_affine,
       {"img": _img(), "M": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0]]), "size": (12, 17),
        "interpolation": "linear", "border_mode": "constant", "border_value": 0, "inverse_map": False,
        "out": None}, _hwc_shape, {"M": ("matrix",)}),
    Op("warp_perspective", cupyprep.warp_perspective,
       {"img": _img(), "M": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0], [1e-3, 0.0, 1.0]]), "size": (12, 17),
        "interpolation": "nearest", "border_mode": "reflect", "border_value": 0, "inverse_map": False,
        "out": None}, _hwc_shape, {"M": ("matrix",)}),
    Op("normalize", cupyprep.normalize,
       {"img": _img(), "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.2, 0.2), "scale": 1 / 255, "swap_rb": False,
        "layout": "CHW", "dtype": "float32", "out": None}),
    Op("swap_rb", cupyprep.swap_rb, {"img": _img(), "out": None}, lambda a: a["img"].shape),
    Op("to_gray", cupyprep.to_gray, {"img": _img(), "order": "bgr", "out": None},
       lambda a: a["img"].shape[:-1]),
    Op("preprocess", cupyprep.preprocess,
       {"images": _img((2, 20, 30, 3)), "size": (16, 16), "mode": "letterbox", "interpolation": "linear",
        "pad_value": 114, "swap_rb": True, "layout": "NCHW", "dtype": "float32", "out": None},
       lambda a: None),
    Op("nms", cupyprep.nms, {"boxes": _boxes(30), "scores": np.linspace(0, 1, 30, dtype=np.float32),
                             "iou_threshold": 0.5}),
    Op("batched_nms", cupyprep.batched_nms,
       {"boxes": _boxes(30), "scores": np.linspace(0, 1, 30, dtype=np.float32),
        "idxs": np.arange(30, dtype=np.int64) % 3, "iou_threshold": 0.5}),
    Op("multiclass_nms", cupyprep.multiclass_nms,
       {"boxes": _boxes(40).reshape(2, 20, 4), "scores": _img((2, 20, 4), np.float32) / 200,
        "iou_threshold": 0.5, "score_threshold": 0.1, "top_k": 10, "max_detections": 5,
        "class_agnostic": False}),
    Op("roi_align", cupyprep.roi_align,
       {"features": _img((2, 3, 10, 12), np.float32),
        "rois": np.concatenate([[[0], [1], [1]], _boxes(3) / 10], axis=1).astype(np.float32),
        "output_size": (3, 4), "spatial_scale": 0.5, "sampling_ratio": 2, "aligned": True}),
    Op("box_convert", cupyprep.box_convert, {"boxes": _boxes(5), "in_fmt": "xyxy", "out_fmt": "cxcywh"},
       lambda a: a["boxes"].shape),
    Op("clip_boxes", cupyprep.clip_boxes, {"boxes": _boxes(5), "size": (50, 60)}, lambda a: a["boxes"].shape),
    Op("box_iou", cupyprep.box_iou, {"boxes1": _boxes(4), "boxes2": _boxes(6, 2)},
       lambda a: (a["boxes1"].shape[0], a["boxes2"].shape[0])),
    Op("prior_boxes", cupyprep.prior_boxes, {"image_size": (32, 32), "min_sizes": [[8, 16]], "steps": [8],
                                             "clip": False}, aliases={"steps": ("step",)}),
    Op("decode_boxes", cupyprep.decode_boxes,
       {"loc": _img((2, len(_PRIORS), 4), np.float32) / 100, "priors": _PRIORS, "variances": (0.1, 0.2)},
       lambda a: a["loc"].shape),
    Op("decode_landmarks", cupyprep.decode_landmarks,
       {"pre": _img((len(_PRIORS), 10), np.float32) / 100, "priors": _PRIORS, "variances": (0.1, 0.2)},
       lambda a: a["pre"].shape[:-1] + (a["pre"].shape[-1] // 2, 2)),
    Op("encode_boxes", cupyprep.encode_boxes,
       {"boxes": _boxes(len(_PRIORS)) / 100, "priors": _PRIORS, "variances": (0.1, 0.2)},
       lambda a: a["boxes"].shape),
    Op("decode_yolo", cupyprep.decode_yolo, {"pred": _img((2, 30, 9), np.float32) / 100, "objectness": True}),
    Op("get_rotation_matrix_2d", cupyprep.get_rotation_matrix_2d, {"center": (10.0, 5.0), "angle": 30.0,
                                                                   "scale": 1.5}),
    Op("invert_affine_transform", cupyprep.invert_affine_transform,
       {"matrix": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0]])}, lambda a: a["matrix"].shape),
    Op("get_affine_transform", cupyprep.get_affine_transform, {"src": QUAD[:3], "dst": QUAD[:3] * 1.5 + 2}),
    Op("get_perspective_transform", cupyprep.get_perspective_transform, {"src": QUAD, "dst": QUAD * 0.8 + 1}),
    Op("estimate_similarity", cupyprep.estimate_similarity, {"src": QUAD, "dst": QUAD * 0.7 + 3}),
    Op("transform_points", cupyprep.transform_points,
       {"points": QUAD, "matrix": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0]])}, lambda a: a["points"].shape),
    Op("random_affine", cupyprep.random_affine,
       {"batch": _img((2, 20, 30, 3)), "degrees": 10.0, "translate": (0.1, 0.1), "scale": (0.9, 1.1),
        "shear": 0.0, "flip_p": 0.5, "seed": 3, "generator": None, "interpolation": "linear",
        "border_mode": "constant", "border_value": 0, "out": None}, lambda a: a["batch"].shape,
       extra={"generator": _GENERATORS}),
    Op("align_faces", cupyprep.align_faces,
       {"images": _img((2, 40, 50, 3)), "landmarks": cupyprep.ARCFACE_112[None] * 0.3 + np.array([[[5.0, 6.0]]]),
        "image_index": np.array([1], np.int32), "size": (16, 16), "interpolation": "linear", "out": None}),
]


def _hw_axes(img, layout):
    """The (height, width) axes of ``img`` read in ``layout`` (image_layout's rule: 2-D is HW,
    4-D a batch)."""
    if img.ndim == 2:
        return 0, 1
    return (img.ndim - 3, img.ndim - 2) if layout in ("HWC", "NHWC") else (img.ndim - 2, img.ndim - 1)


def _rotated_shape(img, turns, layout):
    shape = list(img.shape)
    if turns % 2:
        y, x = _hw_axes(img, layout)
        shape[y], shape[x] = shape[x], shape[y]
    return tuple(shape)


def _padded_shape(img, sides, layout):
    top, bottom, left, right = sides
    shape = list(img.shape)
    y, x = _hw_axes(img, layout)
    shape[y] += top + bottom
    shape[x] += left + right
    return tuple(shape)


def _crop_shape(a):
    img, k = a["img"], a["boxes"].shape[0]
    return (k,) + tuple(a["size"]) + ((img.shape[-1],) if img.ndim in (3, 4) else ())


def _cvt_shape(img, code):
    if code.endswith("gray"):
        return img.shape[:-1]
    return img.shape[:-1] + (3,) if code not in ("bgr2rgb", "rgb2bgr") else img.shape


def _denormalized_shape(a):
    img, layout = a["img"], a["layout"]
    if img.ndim == 2 or layout in ("HWC", "NHWC"):
        return img.shape
    return img.shape[:-3] + img.shape[-2:] + img.shape[-3:-2]


def _dsize_shape(a):
    """cv2compat: ``(width, height)`` to the result's shape."""
    w, h = a["dsize"]
    return (h, w) + tuple(a["src"].shape[2:])


def _shown_shape(a):
    batch, gap = a["batch"], a["gap"]
    n = min(len(batch), a["max_images"])
    h, w = batch.shape[2:] if a["layout"] == "NCHW" else batch.shape[1:3]
    cols = a["columns"] or max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    return rows * (h + gap) - gap, cols * (w + gap) - gap, 3


def _encoded(ext, img):
    ok, buf = cv2.imencode(ext, img)
    assert ok
    return buf.reshape(-1)


_PNG = _encoded(".png", _img((9, 13, 3), seed=4)).tobytes()
_JPEG = _encoded(".jpg", _img((16, 24, 3), seed=5))


def cv_op(name, fn, args, shape=None, aliases=None):
    """A cv2compat Op: OpenCV's argument names, ``dst`` the output; the cupyprep op it calls
    names ``src`` img and ``dst`` out."""
    return Op(name, fn, args, shape, {"src": ("img",), "dst": ("out",), **(aliases or {})}, out="dst")


_ROTATE_TURNS = {0: 3, 1: 2, 2: 1}  # cv2.rotate's codes -> quarter turns counter-clockwise

# the ops added after the first suite, then cupyprep.cv2compat's
OPS += [
    Op("resize_antialias", cupyprep.resize,
       {"img": _img(), "size": (12, 17), "interpolation": "linear", "layout": "HWC", "antialias": True,
        "out": None}, lambda a: _hwc_shape(a) if a["layout"] in ("HWC", "NHWC") else None),
    Op("preprocess_antialias", cupyprep.preprocess,
       {"images": _img((2, 20, 30, 3)), "size": (16, 16), "mode": "center_crop", "interpolation": "cubic",
        "antialias": True, "resize_size": 18, "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.2, 0.2),
        "layout": "NCHW", "dtype": "float32", "out": None}),
    Op("flip", cupyprep.flip, {"img": _img(), "direction": "horizontal", "layout": "HWC", "out": None},
       lambda a: a["img"].shape),
    Op("rotate90", cupyprep.rotate90, {"img": _img(), "k": 1, "layout": "HWC", "out": None},
       lambda a: _rotated_shape(a["img"], a["k"], a["layout"])),
    Op("pad", cupyprep.pad,
       {"img": _img(), "padding": (1, 2, 3, 4), "border_mode": "reflect", "value": (1, 2, 3),
        "layout": "HWC", "out": None},
       lambda a: _padded_shape(a["img"], (a["padding"],) * 4 if isinstance(a["padding"], int)
                               else a["padding"], a["layout"])),
    Op("copy_make_border", cupyprep.copy_make_border,
       {"img": _img(), "top": 2, "bottom": 0, "left": 1, "right": 3, "border_mode": "wrap", "value": 7,
        "layout": "HWC", "out": None},
       lambda a: _padded_shape(a["img"], (a["top"], a["bottom"], a["left"], a["right"]), a["layout"]),
       {k: ("padding",) for k in ("top", "bottom", "left", "right")}),
    Op("crop", cupyprep.crop,
       {"img": _img((2, 20, 30, 3)), "boxes": np.concatenate([[[0], [1], [1]], _boxes(3) / 4], axis=1)
        .astype(np.float32), "size": (6, 5), "interpolation": "linear", "out": None}, _crop_shape),
    Op("cvt_color", cupyprep.cvt_color, {"img": _img(), "code": "bgr2hsv", "out": None},
       lambda a: _cvt_shape(a["img"], a["code"])),
    Op("denormalize", cupyprep.denormalize,
       {"img": _img((3, 20, 30), np.float32) / 200, "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.2, 0.2),
        "scale": 1 / 255, "swap_rb": True, "layout": "CHW", "dtype": "uint8", "out": None},
       _denormalized_shape),
    Op("color_jitter", cupyprep.color_jitter,
       {"batch": _img((2, 20, 30, 3)), "brightness": 0.4, "contrast": (0.5, 1.5), "saturation": 0.4,
        "hue": 0.1, "order": "rgb", "layout": "NHWC", "seed": 3, "generator": None, "out": None},
       lambda a: a["batch"].shape, extra={"generator": _GENERATORS}),
    Op("hsv_gain", cupyprep.hsv_gain,
       {"batch": _img((2, 20, 30, 3)), "hgain": 0.015, "sgain": 0.7, "vgain": 0.4, "order": "bgr", "seed": 3,
        "generator": None, "out": None}, lambda a: a["batch"].shape, extra={"generator": _GENERATORS}),
    Op("gaussian_blur", cupyprep.gaussian_blur,
       {"img": _img(), "ksize": (5, 3), "sigma_x": 1.2, "sigma_y": 0.0, "border": "reflect101",
        "layout": "HWC", "out": None}, lambda a: a["img"].shape),
    Op("box_filter", cupyprep.box_filter,
       {"img": _img(), "ksize": (3, 4), "normalize": True, "anchor": (1, 1), "border": "replicate",
        "layout": "HWC", "out": None}, lambda a: a["img"].shape),
    Op("decode", cupyprep.decode,
       {"sources": [_PNG, _JPEG], "device": None, "like": None, "color": "bgr", "on_error": "raise"},
       extra={"sources": [[b""], [_PNG[:40]], [_JPEG[:100]], [_PNG, None], [3], [np.zeros((2, 8), np.uint8)],
                          [_JPEG.astype(np.float32)], [_JPEG[::-1]], [_JPEG[::2]], ["/nonexistent/x.png"],
                          ["."], [""], [memoryview(_PNG)], [bytearray(_PNG)], [], iter([_PNG]),
                          np.array([_PNG], dtype=object), (b"\xff\xd8\xff" + b"\x00" * 64,)]}),
    # cv2compat: OpenCV's names; the ops it calls name their own (img, out, size, ...)
    cv_op("cv2.resize", cv2compat.resize,
          {"src": _img(), "dsize": (17, 12), "dst": None, "fx": 0, "fy": 0,
           "interpolation": cv2compat.INTER_AREA},
          lambda a: _dsize_shape(a) if tuple(a["dsize"]) != (0, 0) else None,
          {"dsize": ("size",), "fx": ("dsize",), "fy": ("dsize",)}),
    cv_op("cv2.cvtColor", cv2compat.cvtColor, {"src": _img(), "code": cv2compat.COLOR_BGR2YCrCb, "dst": None},
          lambda a: a["src"].shape[:-1] + (3,)),
    cv_op("cv2.warpAffine", cv2compat.warpAffine,
          {"src": _img(), "M": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0]]), "dsize": (17, 12), "dst": None,
           "flags": cv2compat.INTER_CUBIC | cv2compat.WARP_INVERSE_MAP, "borderMode": cv2compat.BORDER_WRAP,
           "borderValue": (1, 2, 3, 4)}, _dsize_shape,
          {"M": ("matrix",), "dsize": ("size",), "borderValue": ("border_value",)}),
    cv_op("cv2.warpPerspective", cv2compat.warpPerspective,
          {"src": _img(), "M": np.array([[1.0, 0.1, 2.0], [0.0, 0.9, 1.0], [1e-3, 0.0, 1.0]]),
           "dsize": (17, 12), "dst": None, "flags": cv2compat.INTER_LINEAR,
           "borderMode": cv2compat.BORDER_CONSTANT,
           "borderValue": 9}, _dsize_shape,
          {"M": ("matrix",), "dsize": ("size",), "borderValue": ("border_value",)}),
    cv_op("cv2.flip", cv2compat.flip, {"src": _img(), "flipCode": -1, "dst": None}, lambda a: a["src"].shape),
    cv_op("cv2.rotate", cv2compat.rotate,
          {"src": _img(), "rotateCode": cv2compat.ROTATE_90_CLOCKWISE, "dst": None},
          lambda a: _rotated_shape(a["src"], _ROTATE_TURNS[a["rotateCode"]], "HWC")),
    cv_op("cv2.copyMakeBorder", cv2compat.copyMakeBorder,
          {"src": _img(), "top": 1, "bottom": 2, "left": 0, "right": 3,
           "borderType": cv2compat.BORDER_REFLECT_101 | cv2compat.BORDER_ISOLATED, "dst": None,
           "value": None},
          lambda a: _padded_shape(a["src"], (a["top"], a["bottom"], a["left"], a["right"]), "HWC"),
          {k: ("padding",) for k in ("top", "bottom", "left", "right")}),
    cv_op("cv2.GaussianBlur", cv2compat.GaussianBlur,
          {"src": _img(), "ksize": (3, 5), "sigmaX": 0.8, "dst": None, "sigmaY": 1.1,
           "borderType": cv2compat.BORDER_REPLICATE}, lambda a: a["src"].shape,
          {"sigmaX": ("sigma_x", "ksize"), "sigmaY": ("sigma_y", "ksize")}),
    cv_op("cv2.blur", cv2compat.blur,
          {"src": _img(), "ksize": (4, 3), "dst": None, "anchor": (-1, 0),
           "borderType": cv2compat.BORDER_REFLECT},
          lambda a: a["src"].shape),
    cv_op("cv2.boxFilter", cv2compat.boxFilter,
          {"src": _img(), "ddepth": -1, "ksize": (4, 3), "dst": None, "anchor": (2, 1), "normalize": False,
           "borderType": cv2compat.BORDER_CONSTANT}, lambda a: a["src"].shape),
]
OPS.append(Op("show", cupyprep.show,
              {"batch": _img((3, 3, 8, 10), np.float32) / 200, "boxes": _boxes(6).reshape(3, 2, 4) / 10,
               "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.2, 0.2), "scale": 1 / 255, "layout": "NCHW",
               "channels": "rgb", "columns": 2, "max_images": 16, "gap": 4}, _shown_shape))
try:
    import torch
except ImportError:  # the interop ops need torch
    torch = None
if torch is not None:
    _T = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    OPS += [
        Op("to_torch", cupyprep.to_torch, {"x": _img()}, lambda a: a["x"].shape),
        Op("from_torch", cupyprep.from_torch, {"t": _T}, lambda a: tuple(a["t"].shape),
           extra={"t": [_T.to(torch.bfloat16), _T[:, ::2], _T.permute(2, 0, 1), _T.to("meta"),
                        _T.to(torch.complex64).conj(), torch.zeros(3, dtype=torch.complex64)._neg_view(),
                        _T.to_sparse(), torch.zeros((), dtype=torch.float32), _T.expand(2, 2, 3, 4),
                        _T.clone().requires_grad_(), torch.zeros(3, dtype=torch.uint16),
                        torch.zeros(3, dtype=torch.float8_e4m3fn), torch.zeros(2, dtype=torch.bool),
                        torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]), _img()]}),
    ]
# Public callables not fuzzed here (test_every_public_op_is_fuzzed holds the list to this): warmup
# (it takes kernel family names and compiles; it needs a GPU or the emulator, and every draw
# would compile variants), stream, use_torch_allocator and release_graph_memory (they switch
# process-wide state: streams, allocators), as_array (its ``name`` is the argument its errors
# name, for the ops that call it), and the classes (Loader, the results and errors).
NOT_FUZZED = {"warmup", "stream", "use_torch_allocator", "release_graph_memory", "as_array"}
if torch is None:
    NOT_FUZZED |= {"to_torch", "from_torch"}
BY_NAME = {op.name: op for op in OPS}
# a few ops on the emulated kernels in CI: one a kernel family, the newer families included
EMULATED = ("resize", "swap_rb", "normalize", "warp_affine", "nms", "box_iou", "resize_antialias", "pad",
            "crop", "gaussian_blur", "cvt_color", "color_jitter", "denormalize", "cv2.resize")

# --- what replaces an argument ----------------------------------------------------------------
NAN = float("nan")
GARBAGE = [None, "x", "", "linear ", 0, -1, 1, 3, 2**31, 2**63, -(2**63), 1.5, NAN, float("inf"),
           -float("inf"), True, False, (), (0, 0), (-3, 4), (4, -3), (0, 5), (2**31, 2), (2**40, 2**40),
           (1.5, 2), (NAN, NAN), ("a", "b"), [1, 2, 3], [[8, 16]], np.zeros(3), np.zeros((2, 2)),
           np.array(NAN), object(), b"ab", {"k": 1}, np.int64(5), np.float32(0.5), [NAN] * 3]
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.float16, np.float32,
          np.float64, np.complex64]


def _mutate_array(a, how, dtype):
    if a.ndim == 0 and how not in ("dtype", "nan", "inf", "huge", "extra_dim"):
        return a  # nothing to slice
    if how == "dtype":
        return a.astype(dtype)
    if how == "reversed":
        return a[::-1]
    if how == "strided":
        return a[..., ::-2] if a.ndim else a
    if how == "transposed":
        return a.T
    if how == "broadcast":
        return np.broadcast_to(a[:1], a.shape) if a.ndim and a.shape[0] else a
    if how == "empty":
        return a[:0]
    if how == "empty_inner":
        return a[:, :0] if a.ndim > 1 else a[:0]
    if how == "one":
        return a[tuple(slice(0, 1) for _ in a.shape)]
    if how == "extra_dim":
        return a[None]
    if how == "fewer_dims":
        return a[0] if a.ndim and a.shape[0] else a.reshape(-1)
    if how == "flat":
        return a.reshape(-1)
    if how == "scalar":
        return a.reshape(-1)[:1].reshape(()) if a.size else np.array(0, a.dtype)
    if how in ("nan", "inf", "huge"):
        b = a.astype(np.float32) if a.dtype.kind != "f" else a.copy()
        if b.size:
            b.reshape(-1)[:: max(1, b.size // 3)] = {"nan": NAN, "inf": -np.inf, "huge": 3e38}[how]
        return b
    if how == "channels":
        return np.concatenate([a, a[..., :1]], axis=-1) if a.ndim else a
    raise AssertionError(how)


ARRAY_MUTATIONS = ["dtype", "reversed", "strided", "transposed", "broadcast", "empty", "empty_inner", "one",
                   "extra_dim", "fewer_dims", "flat", "scalar", "nan", "inf", "huge", "channels"]


@st.composite
def replacement(draw, op, name):
    """A value for parameter ``name`` of ``op`` other than its valid one."""
    base = op.args[name]
    kinds = ["garbage"]
    if isinstance(base, np.ndarray):
        kinds += ["array", "array", "array2", "torch"]
    if name == op.out:
        kinds += ["overlap", "fresh", "fresh_reversed"]
    if name in op.extra:
        kinds += ["extra", "extra"]
    kind = draw(st.sampled_from(kinds))
    if kind == "extra":
        return draw(st.sampled_from(op.extra[name]))
    if kind == "garbage":
        return draw(st.sampled_from(GARBAGE))
    if kind in ("array", "array2"):
        out = base
        for _ in range(1 if kind == "array" else 2):
            out = _mutate_array(out, draw(st.sampled_from(ARRAY_MUTATIONS)), draw(st.sampled_from(DTYPES)))
        return out
    if kind == "torch":  # another array library beside NumPy inputs: mixed kinds
        torch = pytest.importorskip("torch")
        return torch.from_numpy(np.ascontiguousarray(base))
    first = next(v for v in op.args.values() if isinstance(v, np.ndarray))
    if kind == "overlap":
        return first
    if kind == "fresh":
        return np.empty_like(first)
    return np.empty_like(first)[::-1]


@st.composite
def calls(draw, op):
    """(arguments, the names replaced): one to three of op's arguments replaced."""
    names = list(op.args)
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=min(3, len(names)), unique=True))
    args = dict(op.args)
    for name in chosen:
        args[name] = draw(replacement(op, name))
    return args, chosen


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a call ran longer than {CALL_SECONDS} s")


def _asked_bytes(args):
    """The largest count a size-like argument asks for (an int, or the product of a pair),
    for MemoryError: an output that large may not fit."""
    biggest = 0
    for v in args.values():
        if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) for x in v):
            biggest = max(biggest, abs(v[0]) * abs(v[1]))
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            biggest = max(biggest, abs(int(v)))
    return biggest


def check_call(op, args, replaced, convert=lambda a: a):
    """Call ``op`` and hold the outcome to the rules in the module docstring."""
    call_args = {k: convert(v) for k, v in args.items()}
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CALL_SECONDS)
    try:
        result = op.fn(**call_args)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        names = [n for r in replaced for n in (r, *op.aliases.get(r, ()))]
        if len({_kind(v) for v in call_args.values()} - {None}) > 1:
            names += list(op.args)  # mixed kinds or devices: the error may name either side
        # a name counts as a word of the message: one-letter names (t, x, k, M) are in any text
        assert any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", message) for n in names), \
            f"{op.name}: {type(exc).__name__} names none of {replaced}: {message}"
        return "refused"
    except MemoryError as exc:
        # an output of that many pixels (up to 64 bytes each) may pass the GPU tests' cap
        assert _asked_bytes(args) >= _FUZZ_DEVICE_BYTES // 64, f"{op.name}: MemoryError for a small call: {exc}"
        return "refused"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    _check_result(op, args, call_args, result)
    return "ran"


def _kind(value):
    """Where an argument's array lives ("numpy", "cupy", "torch:cpu", "torch:cuda"), or None
    for anything else."""
    module = type(value).__module__
    if isinstance(value, np.ndarray):
        return "numpy"
    if module.startswith("cupy"):
        return "cupy"
    if module.startswith("torch") and hasattr(value, "device"):
        return f"torch:{value.device.type}"
    return None


def _arrays_of(result):
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _arrays_of(r)]
    return [result]


def _check_result(op, args, call_args, result):
    out = call_args.get(op.out)
    if out is not None:
        main = result[0] if isinstance(result, tuple) else result
        assert main is out, f"{op.name}: out= given but another array returned"
    for a in _arrays_of(result):
        if a is None or isinstance(a, (int, float, np.generic, str)) or not hasattr(a, "shape"):
            continue
        assert all(int(s) >= 0 for s in a.shape)
    if op.shape is not None:
        main = result[0] if isinstance(result, tuple) else result  # (result, what was drawn)
        try:
            want = op.shape(args)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            want = None
        if want is not None:
            assert tuple(main.shape) == tuple(want), f"{op.name}: shape {tuple(main.shape)}, expected {want}"


def _fuzz_settings(n):
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.filter_too_much, HealthCheck.data_too_large])


# --- the CPU backend: every op ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BY_NAME))
def test_fuzz_cpu_backend(name):
    op = BY_NAME[name]
    seen = {"ran": 0, "refused": 0}

    @_fuzz_settings(CPU_EXAMPLES)
    @given(calls(op))
    def run(case):
        args, replaced = case
        seen[check_call(op, args, replaced)] += 1

    run()
    assert sum(seen.values()) >= min(CPU_EXAMPLES, 20)


def test_every_public_op_is_fuzzed():
    """Every public function of cupyprep and cupyprep.cv2compat is an Op here, or one of
    NOT_FUZZED (whose comment says why)."""
    fuzzed = {op.fn for op in OPS}
    for module in (cupyprep, cv2compat):
        for name in module.__all__:
            fn = getattr(module, name)
            if callable(fn) and not isinstance(fn, type) and name not in NOT_FUZZED:
                assert fn in fuzzed, f"{module.__name__}.{name} is not fuzzed (add an Op, or to NOT_FUZZED)"


def test_the_valid_calls_run():
    """The base calls themselves succeed (so a replaced argument is what a refusal is for)."""
    for op in OPS:
        _check_result(op, op.args, op.args, op.fn(**op.args))


# --- the emulated kernels: a few ops -----------------------------------------------------------
@pytest.mark.emulated
@pytest.mark.parametrize("name", EMULATED)
def test_fuzz_emulated(name):
    from cupyprep.testing import emulate

    op = BY_NAME[name]

    @_fuzz_settings(EMULATED_EXAMPLES)
    @given(calls(op))
    def run(case):
        args, replaced = case
        with emulate():
            check_call(op, args, replaced)

    run()


# --- GPU: CuPy and torch inputs on the kernels ---------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("name", list(BY_NAME))
def test_fuzz_gpu(name, kind):
    import cupy

    if kind == "torch":
        torch = pytest.importorskip("torch")

        def convert(a):
            # numbers only (object arrays, e.g. decode's sources, stay NumPy), not broadcast;
            # a.copy() keeps 0-d arrays 0-d and gives empty reversed views positive strides
            if isinstance(a, np.ndarray) and a.dtype.kind in "iuf" and not (a.ndim and 0 in a.strides):
                return torch.from_numpy(a.copy()).cuda()[tuple(slice(None) for _ in a.shape)]
            return a
    else:
        def convert(a):
            return cupy.asarray(a) if isinstance(a, np.ndarray) and a.dtype.kind in "biufc" else a

    op = BY_NAME[name]
    # huge sizes ask for all the device has: a cap per process leaves the rest to the tests
    # beside (xdist), and an allocation past it is the out-of-memory error under test
    pool = cupy.get_default_memory_pool()
    limit = pool.get_limit()
    pool.set_limit(size=_FUZZ_DEVICE_BYTES)
    if kind == "torch":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, _FUZZ_DEVICE_BYTES / total))

    @_fuzz_settings(PROFILE_EXAMPLES)
    @given(calls(op))
    def run(case):
        args, replaced = case
        try:
            check_call(op, args, replaced, convert)
            cupy.cuda.Device().synchronize()  # a kernel's fault shows here, in this case
        finally:
            # huge sizes allocate what the device has: give it back, for the tests beside
            cupy.get_default_memory_pool().free_all_blocks()
            if kind == "torch":
                torch.cuda.empty_cache()

    try:
        run()
    finally:
        pool.set_limit(size=limit)
        if kind == "torch":
            torch.cuda.set_per_process_memory_fraction(1.0)



# --- what the fuzzing found, kept as cases ----------------------------------------------------------
_IMG = _img()
_B = _boxes(30)
FOUND = [
    # NumPy reads some strings as a record format and raised its own ValueError
    (lambda: cupyprep.preprocess(_IMG, (8, 8), dtype="float, 3> evil<int"), TypeError, "dtype"),
    # flags went through bool(): an array raised "truth value ... ambiguous"
    (lambda: cupyprep.multiclass_nms(_B.reshape(2, 15, 4), np.ones((2, 15, 3), np.float32),
                                     class_agnostic=np.zeros((2, 2))), TypeError, "class_agnostic"),
    (lambda: cupyprep.warp_affine(_IMG, np.eye(2, 3), (8, 8), inverse_map=np.zeros(3)), TypeError, "inverse_map"),
    (lambda: cupyprep.normalize(_IMG, swap_rb=np.zeros((2, 2))), TypeError, "swap_rb"),
    (lambda: cupyprep.preprocess(_IMG, (8, 8), swap_rb=np.zeros(3)), TypeError, "swap_rb"),
    (lambda: cupyprep.roi_align(BY_NAME["roi_align"].args["features"], BY_NAME["roi_align"].args["rois"], 2,
                                aligned=np.zeros(3)), TypeError, "aligned"),
    (lambda: cupyprep.decode_yolo(_img((2, 30, 9), np.float32), objectness=np.zeros(3)), TypeError, "objectness"),
    # sequences and arrays of numbers taken without a check: len() of None, float("x")
    (lambda: cupyprep.prior_boxes((32, 32), None, [8]), TypeError, "min_sizes"),
    (lambda: cupyprep.prior_boxes((32, 32), [[8]], np.array(8.0)), TypeError, "steps"),
    (lambda: cupyprep.prior_boxes((32, 32), [[8]], [float("nan")]), ValueError, "steps"),
    (lambda: cupyprep.decode_boxes(_img((len(_PRIORS), 4), np.float32), "x"), TypeError, "priors"),
    (lambda: cupyprep.decode_landmarks(_img((10, len(_PRIORS)), np.float32), _PRIORS), ValueError, "pre"),
    (lambda: cupyprep.encode_boxes(None, _PRIORS), TypeError, "boxes"),
    (lambda: cupyprep.encode_boxes(_boxes(4)[0], _PRIORS), ValueError, "boxes"),
    (lambda: cupyprep.encode_boxes(_boxes(len(_PRIORS)), "x"), TypeError, "priors"),
    (lambda: cupyprep.get_rotation_matrix_2d("x", 30.0), TypeError, "center"),
    (lambda: cupyprep.get_rotation_matrix_2d((1.0, 2.0), [NAN] * 3, (4, -3)), ValueError, "angle"),
    (lambda: cupyprep.get_affine_transform("x", QUAD[:3]), TypeError, "src"),
    (lambda: cupyprep.estimate_similarity(QUAD[:2], QUAD), ValueError, "dst"),
    (lambda: cupyprep.transform_points(QUAD, None), TypeError, "matrix"),
    (lambda: cupyprep.random_affine(_img((2, 8, 8, 3)), seed={"k": 1}), TypeError, "seed"),
    # image_index=None reached the CUDA runtime (a capture check) on a machine without a GPU
    (lambda: cupyprep.align_faces(_img((2, 40, 50, 3)), BY_NAME["align_faces"].args["landmarks"], None),
     ValueError, "image_index"),
    (lambda: cupyprep.align_faces(_img((2, 40, 50, 3)), "x", [0]), TypeError, "landmarks"),
    # sampling_ratio=2**63 looped for ever on the CPU backend (and wrapped to int32 on the GPU)
    (lambda: cupyprep.roi_align(BY_NAME["roi_align"].args["features"], BY_NAME["roi_align"].args["rois"], 2,
                                1.0, 2**63), ValueError, "sampling_ratio"),
    (lambda: cupyprep.roi_align(BY_NAME["roi_align"].args["features"], BY_NAME["roi_align"].args["rois"], 2,
                                float("inf")), ValueError, "spatial_scale"),
    # NumPy's "Maximum allowed dimension exceeded"
    (lambda: cupyprep.multiclass_nms(_B.reshape(2, 15, 4), np.ones((2, 15, 3), np.float32),
                                     max_detections=2**63), ValueError, "max_detections"),
    # on a GPU: sizes and counts of 2**31 and more wrapped in the kernels' int32 arguments
    (lambda: cupyprep.resize(_IMG, (2**31, 4)), ValueError, "size"),
    (lambda: cupyprep.align_faces(_img((2, 40, 50, 3)), BY_NAME["align_faces"].args["landmarks"], [0],
                                  size=(4, 2**31)), ValueError, "size"),
    (lambda: cupyprep.multiclass_nms(_B.reshape(2, 15, 4), np.ones((2, 15, 3), np.float32), top_k=2**31),
     ValueError, "top_k"),
    # the error named mean for an image of the wrong channel count
    (lambda: cupyprep.normalize(_IMG[..., :2], (0.4, 0.5, 0.6)), ValueError, "img"),
    # --- the ops added later, and cv2compat ---
    # the same for the per-channel values of pad, denormalize, the warps and preprocess
    (lambda: cupyprep.pad(_IMG[..., :1], 2, value=(1, 2, 3)), ValueError, "img"),
    (lambda: cupyprep.denormalize(_IMG[..., :2].astype(np.float32), (0.4, 0.5, 0.6), layout="HWC"),
     ValueError, "img"),
    (lambda: cupyprep.warp_affine(_IMG[..., :2], np.eye(2, 3), (8, 8), border_value=(1, 2, 3)), ValueError,
     "img"),
    (lambda: cupyprep.preprocess(_IMG[..., :1], (8, 8), pad_value=(1, 2, 3)), ValueError, "images"),
    # crop's image indexes past an empty batch: the error said only "boxes"
    (lambda: cupyprep.crop(_img((0, 8, 8, 3)), [[0, 1, 1, 4, 4]], (4, 4)), ValueError, "img"),
    # code, border, color, device compared with == first: an array raised "truth value ... ambiguous"
    (lambda: cupyprep.cvt_color(_IMG, np.zeros(3)), TypeError, "code"),
    (lambda: cupyprep.gaussian_blur(_IMG, 3, 1.0, border=np.zeros(3)), ValueError, "border"),
    (lambda: cupyprep.decode([_PNG], color=np.zeros(3)), ValueError, "color"),
    (lambda: cupyprep.decode([_PNG], device=np.zeros(3)), ValueError, "device"),
    # seeds and generators went to NumPy unchecked: SeedSequence's errors, an AttributeError
    (lambda: cupyprep.color_jitter(_img((2, 8, 8, 3)), 0.4, seed="x"), TypeError, "seed"),
    (lambda: cupyprep.hsv_gain(_img((2, 8, 8, 3)), seed=-1), ValueError, "seed"),
    (lambda: cupyprep.hsv_gain(_img((2, 8, 8, 3)), seed=np.array(1.5)), TypeError, "seed"),
    (lambda: cupyprep.random_affine(_img((2, 8, 8, 3)), seed=2**64), ValueError, "seed"),
    (lambda: cupyprep.color_jitter(_img((2, 8, 8, 3)), 0.4, generator=random.Random(0)), TypeError,
     "generator"),
    (lambda: cupyprep.random_affine(_img((2, 8, 8, 3)), generator=np.random.SeedSequence(0)), TypeError,
     "generator"),
    # an empty list of images gave an empty list (out=() returned another object)
    (lambda: cupyprep.box_filter([], 3), ValueError, "img"),
    (lambda: cupyprep.gaussian_blur((), 3, 1.0, out=()), ValueError, "img"),
    # the anchor outside a window made smaller: the error did not say ksize
    (lambda: cupyprep.box_filter(_IMG, 1, anchor=(1, 1)), ValueError, "ksize"),
    # sizes past int32 reached OpenCV ("Can't parse 'ksize'") or the kernels' int32 arguments
    (lambda: cupyprep.box_filter(_IMG, (2**40, 3)), ValueError, "ksize"),
    (lambda: cupyprep.gaussian_blur(_IMG, 0, 1e300), ValueError, "ksize"),
    (lambda: cupyprep.preprocess(_IMG, (8, 8), mode="center_crop", resize_size=2**63), ValueError,
     "resize_size"),
    (lambda: cupyprep.preprocess(_IMG, (8, 8), mode="center_crop", resize_size=2**31 - 1), ValueError,
     "resize_size"),
    # OpenCV's own out-of-memory error (a cv2.error) where the CPU backend resizes before cropping
    (lambda: cupyprep.preprocess(_IMG, (8, 8), mode="center_crop", resize_size=2**20), MemoryError,
     "allocate"),
    # swap_rb went through `and`: an array raised "truth value ... ambiguous"
    (lambda: cupyprep.denormalize(_img((3, 8, 8), np.float32), swap_rb=np.zeros(3)), TypeError, "swap_rb"),
    # no priors: "cannot reshape array of size 0" (the landmark count taken as -1)
    (lambda: cupyprep.decode_landmarks(np.zeros((0, 10), np.float32), np.zeros((0, 4), np.float32)).shape,
     None, (0, 5, 2)),
    # show: arguments used unchecked (slices, comparisons, np.full of negative sizes, float())
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), max_images="x"), ValueError, "max_images"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), columns=-1), ValueError, "columns"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), gap=0.5), ValueError, "gap"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), mean="x"), TypeError, "mean"),
    (lambda: cupyprep.show(_img((2, 1, 8, 8), np.float32), std=(1, 2, 3)), ValueError, "batch"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), boxes=float("inf")), TypeError, "boxes"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), boxes=[[[NAN] * 4], [[0, 0, 1, 1]]]), ValueError,
     "boxes[0]"),
    (lambda: cupyprep.show("x"), TypeError, "batch"),
    (lambda: cupyprep.show(_img((2, 3, 8, 8), np.float32), layout=np.zeros(3)), ValueError, "layout"),
    # cv2compat: flags looked up in dicts (unhashable lists and arrays), `&` of non-ints, len() of
    # numbers, OpenCV's own errors where cv2.resize took the arguments unchecked
    (lambda: cv2compat.resize(_IMG, [[8, 16]]), TypeError, "dsize"),
    (lambda: cv2compat.resize(_IMG, None, fx=0.0, fy=1.0), ValueError, "fx"),
    (lambda: cv2compat.resize(_IMG, None, fx=1e-3, fy=1e-3), ValueError, "fx"),
    (lambda: cv2compat.resize(_IMG, (4, 4), interpolation=[1]), TypeError, "interpolation"),
    (lambda: cv2compat.resize(_IMG.astype(bool), (4, 4)), TypeError, "src"),
    (lambda: cv2compat.cvtColor(_IMG, [1, 2, 3]), TypeError, "code"),
    (lambda: cv2compat.warpAffine(_IMG, np.eye(2, 3), (8, 8), flags="x"), TypeError, "flags"),
    (lambda: cv2compat.warpAffine(_IMG, np.eye(2, 3), 8), TypeError, "dsize"),
    (lambda: cv2compat.warpPerspective(_IMG, np.eye(3), (8, 8), borderMode=[1]), TypeError, "borderMode"),
    (lambda: cv2compat.warpAffine(_IMG, np.eye(2, 3), (8, 8), borderValue="x"), TypeError, "borderValue"),
    (lambda: cv2compat.warpAffine(_IMG, np.eye(2, 3), (8, 8), borderValue=(1, 2, 3, 4, 5)), ValueError,
     "borderValue"),
    (lambda: cv2compat.rotate(_IMG, [0]), TypeError, "rotateCode"),
    (lambda: cv2compat.copyMakeBorder(_IMG, 1, 1, 1, 1, 0, value=object()), TypeError, "value"),
    (lambda: cv2compat.GaussianBlur(_IMG, (3, 3), 1.0, borderType=np.zeros(2)), TypeError, "borderType"),
    (lambda: cv2compat.boxFilter(_IMG, np.zeros(2), (3, 3)), TypeError, "ddepth"),
    (lambda: cv2compat.boxFilter(_IMG, -1, (3, 3), normalize=np.zeros(2)), TypeError, "normalize"),
]
if torch is not None:
    _TT = torch.zeros((8, 9, 3))
    FOUND += [
        # tensors NumPy / CuPy cannot view: torch's RuntimeError or a TypeError naming no argument
        (lambda: cupyprep.from_torch(_TT.to(torch.complex64).conj()), ValueError,
         "t: a tensor with its conj"),
        (lambda: cupyprep.from_torch(_TT.to_sparse()), TypeError, "t: expected a dense"),
        (lambda: cupyprep.from_torch(_TT.to(torch.float8_e4m3fn)), TypeError, "t: expected a dtype"),
        (lambda: cupyprep.from_torch(torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])), TypeError,
         "t: expected a dense"),
        (lambda: cupyprep.resize(_TT._neg_view(), (4, 4)), ValueError, "img"),
        (lambda: cupyprep.flip(_TT.to_sparse()), TypeError, "img"),
    ]


@pytest.mark.parametrize("case", range(len(FOUND)))
def test_found_by_fuzzing(case):
    """Each case raises ``exc`` naming ``word`` (or, with ``exc`` None, returns ``word``)."""
    call, exc, word = FOUND[case]
    if exc is None:
        assert call() == word
        return
    with pytest.raises(exc) as info:
        call()
    assert word in str(info.value), str(info.value)


def test_found_cv2compat_resize_keeps_opencvs_step_on_every_side():
    """cv2compat.resize's NumPy side called cv2.resize with the arguments unchecked (and an
    HxWx1 image lost its axis there, not on the kernels): now both sides take the same
    checked arguments; with fx / fy the step stays OpenCV's 1 / fx."""
    img = _img((9, 13, 3))
    for f, interp in ((0.3, cv2compat.INTER_NEAREST), (0.7, cv2compat.INTER_LINEAR),
                      (0.5, cv2compat.INTER_AREA), (1.7, cv2compat.INTER_CUBIC)):
        with without_ipp(cv2):  # OpenCV's own code (IPP's uint8 cubic differs by 1)
            want = cv2.resize(img, None, fx=f, fy=f / 2 + 0.2, interpolation=interp)
        got = cv2compat.resize(img, None, fx=f, fy=f / 2 + 0.2, interpolation=interp)
        np.testing.assert_array_equal(got, want)
    assert cv2compat.resize(img[..., :1], (5, 4)).shape == (4, 5, 1)
    wide = _img((9, 13, 6))
    got = cv2compat.resize(wide, (0, 0), fx=0.6, fy=0.6, interpolation=cv2compat.INTER_AREA)
    with without_ipp(cv2):
        want = cv2.resize(wide[..., 4], None, fx=0.6, fy=0.6, interpolation=cv2compat.INTER_AREA)
    np.testing.assert_array_equal(got[..., 4], want)


def test_found_rotate90_of_more_than_4_channels():
    """cv2.rotate transposes pixels of some sizes only (5 uint8 channels: an assertion):
    the CPU backend turns such images plane by plane."""
    img = _img((5, 7, 5))
    for k in range(4):
        np.testing.assert_array_equal(cupyprep.rotate90(img, k), np.rot90(img, k))
    batch = _img((2, 5, 7, 9), np.float32)
    np.testing.assert_array_equal(cupyprep.rotate90(batch, 3, layout="NHWC"), np.rot90(batch, 3, axes=(1, 2)))


@pytest.mark.emulated
def test_found_any_negative_sampling_ratio_is_the_adaptive_grid():
    """sampling_ratio=-2**63 wrapped in the kernel's int32 argument: every value <= 0 is
    torchvision's adaptive grid, on the CPU backend and the kernels alike."""
    from cupyprep.testing import emulate

    args = BY_NAME["roi_align"].args
    want = cupyprep.roi_align(args["features"], args["rois"], 3, 0.5, -1)
    np.testing.assert_array_equal(cupyprep.roi_align(args["features"], args["rois"], 3, 0.5, -2**63), want)
    with emulate():
        np.testing.assert_array_equal(cupyprep.roi_align(args["features"], args["rois"], 3, 0.5, -2**63), want)
