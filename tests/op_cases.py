"""Calls of every kernel-backed op on small inputs, shared by the tests that run each op
in some setting (another device, another stream): ``(name, host inputs, call)``, the call
taking the inputs converted to one array kind."""
from __future__ import annotations

import numpy as np

import cupyprep
from conftest import random_image


def image_ops():
    """(name, call) pairs: each call takes an array on some device, returns a result."""
    return [
        ("resize", lambda x: cupyprep.resize(x, (17, 29))),
        ("resize_cubic", lambda x: cupyprep.resize(x, (40, 50), interpolation="cubic")),
        # OpenCV's weighted area algorithm (a non-integer downscale): tables per geometry
        ("resize_area", lambda x: cupyprep.resize(x, (17, 29), interpolation="area")),
        ("normalize", lambda x: cupyprep.normalize(x, (0.4, 0.5, 0.6), (0.2, 0.2, 0.2), scale=1 / 255)),
        ("swap_rb", lambda x: cupyprep.swap_rb(x)),
        ("to_gray", lambda x: cupyprep.to_gray(x)),
        ("preprocess", lambda x: cupyprep.preprocess(x, (32, 32))[0]),
        ("preprocess_ragged", lambda x: cupyprep.preprocess([x[0], x[1, :20]], (32, 32))[0]),
        # area at other than whole factors: resize()'s kernel, then the fused kernel
        ("preprocess_area", lambda x: cupyprep.preprocess(x, (32, 32), interpolation="area")[0]),
        ("preprocess_area_ragged",
         lambda x: cupyprep.preprocess([x[0], x[1, :20]], (24, 28), interpolation="area")[0]),
        # area at whole factors (30 x 40 by 2; 30 x 40 and 30 x 20 by 5): fused
        ("preprocess_area_fused", lambda x: cupyprep.preprocess(x, (15, 20), interpolation="area")[0]),
        ("preprocess_area_fused_ragged",
         lambda x: cupyprep.preprocess([x[0], x[1, :, :20]], (6, 8), interpolation="area")[0]),
        # per-image parameters drawn on the batch's device from a seed (the same every call)
        ("color_jitter", lambda x: cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, seed=3)),
        ("hsv_gain", lambda x: cupyprep.hsv_gain(x, seed=4)),
    ]


def boxes_xyxy(rng, n):
    xy = rng.uniform(0, 1000, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(10, 110, (n, 2))], axis=1).astype(np.float32)


def flat(result):
    """The arrays of an op's result (an array, a tuple or list of them, or a Detections)."""
    if isinstance(result, (tuple, list)):  # NamedTuples too
        return [a for r in result for a in flat(r)]
    return [result]


def to_host(arrays):
    """Device arrays (CuPy or torch) as NumPy, read on the calling thread's current stream."""
    out = []
    for a in arrays:
        if hasattr(a, "get") and not isinstance(a, np.ndarray):
            a = a.get()
        elif hasattr(a, "cpu"):
            a = a.cpu().numpy()
        out.append(np.asarray(a))
    return out


# a letterbox's geometry for two images of different sizes (computed on the CPU backend)
_META = cupyprep.preprocess([np.zeros((30, 40, 3), np.uint8), np.zeros((50, 20, 3), np.uint8)], (64, 64))[1]


def post_ops():
    """(name, host inputs, call): the warps and the detection ops, whose inputs are more
    than one image batch; each call takes the inputs on one device."""
    rng = np.random.default_rng(4)
    imgs = random_image(rng, (3, 40, 50, 3), np.uint8)
    rot = cupyprep.get_rotation_matrix_2d(np.tile([25.0, 20.0], (3, 1)), np.array([10.0, -30.0, 75.0]),
                                          np.array([0.9, 1.1, 1.0]))
    persp = np.tile(np.eye(3), (3, 1, 1))
    persp[:, 2, :2] = [[1e-3, 0], [0, 2e-3], [-1e-3, 1e-3]]
    landmarks = cupyprep.ARCFACE_112[None] * 0.3 + rng.uniform(5, 15, (4, 1, 2))
    faces = np.array([0, 2, 1, 2], np.int32)
    small, large = boxes_xyxy(rng, 500), boxes_xyxy(rng, 3000)  # one-block sort / library sort
    huge = boxes_xyxy(rng, 17000)  # batched_nms sorts by class first above 16384 boxes
    feats = rng.standard_normal((2, 8, 20, 30)).astype(np.float32)
    rois = np.concatenate([rng.integers(0, 2, (40, 1)), boxes_xyxy(rng, 40) / 40], axis=1).astype(np.float32)
    pri = cupyprep.prior_boxes((64, 64), [[16, 32]], [16])
    loc = rng.normal(0, 1, (2, len(pri), 4)).astype(np.float32)
    pre = rng.normal(0, 1, (2, len(pri), 10)).astype(np.float32)
    yolo = rng.random((2, 4 + 80, 300), dtype=np.float32)  # YOLOv8's (B, 4 + C, N)
    return [
        ("warp_affine", (imgs, rot), lambda x, m: cupyprep.warp_affine(x, m, (40, 50))),
        ("warp_affine_cubic", (imgs, rot),
         lambda x, m: cupyprep.warp_affine(x, m, (40, 50), interpolation="cubic", border_mode="reflect")),
        ("warp_perspective", (imgs, persp), lambda x, m: cupyprep.warp_perspective(x, m, (40, 50))),
        ("random_affine", (imgs,), lambda x: cupyprep.random_affine(x, degrees=20, scale=(0.8, 1.2), seed=7)),
        ("align_faces", (imgs, landmarks, faces), lambda x, lm, i: cupyprep.align_faces(x, lm, i)),
        ("nms_small", (small, small[:, 0] / 1000), lambda b, s: cupyprep.nms(b, s, 0.5)),
        ("nms_large", (large, large[:, 1] / 1000), lambda b, s: cupyprep.nms(b, s, 0.5, return_count=True)),
        ("batched_nms", (huge, huge[:, 0] / 1000, (huge[:, 1] // 13).astype(np.int64)),
         lambda b, s, c: cupyprep.batched_nms(b, s, c, 0.5)),
        ("multiclass_nms", (large.reshape(2, 1500, 4), rng.random((2, 1500, 5), dtype=np.float32)),
         lambda b, s: cupyprep.multiclass_nms(b, s, score_threshold=0.2, top_k=400)),
        ("multiclass_nms_flat", (large.reshape(2, 1500, 4), rng.random((2, 1500, 5), dtype=np.float32)),
         lambda b, s: cupyprep.multiclass_nms(b, s, score_threshold=0.5, class_agnostic=True).flatten()),
        ("roi_align", (feats, rois), lambda f, r: cupyprep.roi_align(f, r, 7, 0.5, 2, aligned=True)),
        ("roi_align_list", (feats, rois[:30, 1:], rois[30:, 1:]),
         lambda f, a, b: cupyprep.roi_align(f, [a, b], (5, 6), 0.5, -1)),
        ("nms_empty", (np.zeros((0, 4), np.float32), np.zeros((0,), np.float32)),
         lambda b, s: cupyprep.nms(b, s, 0.5, return_count=True)),
        ("box_iou", (small[:50], small[50:120]), cupyprep.box_iou),
        ("box_convert", (large,), lambda b: cupyprep.box_convert(b[::2], "xyxy", "cxcywh")),
        ("clip_boxes", (large,), lambda b: cupyprep.clip_boxes(b, (600, 800))),
        ("decode_boxes", (loc, pri), cupyprep.decode_boxes),
        ("decode_landmarks", (pre, pri), cupyprep.decode_landmarks),
        ("decode_yolo", (yolo,), lambda p: cupyprep.decode_yolo(p.swapaxes(1, 2), objectness=False)),
        ("meta_to_original", (rng.uniform(0, 64, (2, 5, 4)).astype(np.float32),), _META.to_original),
        ("meta_to_network_list", (rng.uniform(0, 40, (3, 4)), rng.uniform(0, 40, (2, 4))),
         lambda a, b: _META.to_network([a, b], clip=True)),
        ("meta_to_original_index", (rng.uniform(0, 64, (7, 2)).astype(np.float32), rng.integers(0, 2, 7)),
         lambda c, i: _META.to_original(c, image_index=i)),
        ("transform_points", (rng.uniform(0, 50, (3, 5, 2)), rot), cupyprep.transform_points),
        ("transform_points_perspective", (rng.uniform(0, 50, (3, 5, 2)), persp), cupyprep.transform_points),
    ]


def matrix_helpers():
    """(name, host inputs, call) of the matrix helpers that take numpy or cupy arrays."""
    rng = np.random.default_rng(5)
    quad = np.array([[0.0, 0.0], [40.0, 3.0], [38.0, 30.0], [2.0, 28.0]]) + rng.uniform(0, 2, (3, 4, 2))
    return [
        ("get_rotation_matrix_2d", (rng.uniform(0, 50, (3, 2)), rng.uniform(-90, 90, 3), rng.uniform(0.5, 2, 3)),
         cupyprep.get_rotation_matrix_2d),
        ("invert_affine_transform", (cupyprep.get_rotation_matrix_2d((20.0, 10.0), 30.0, 1.5),),
         cupyprep.invert_affine_transform),
        ("get_affine_transform", (quad[:, :3], quad[:, :3] * 1.5 + 2), cupyprep.get_affine_transform),
        ("get_perspective_transform", (quad, quad[:, ::-1] * 0.8), cupyprep.get_perspective_transform),
        ("estimate_similarity", (quad, quad * 0.7 + 3), cupyprep.estimate_similarity),
    ]
