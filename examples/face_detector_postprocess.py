"""RetinaFace-style post-processing: head outputs -> anchors -> decoded boxes and 5-point
landmarks -> NMS -> detections in the original photograph, drawn and saved as a PNG.

No model weights are downloaded: the head outputs are synthesized for a scikit-image
photograph by encoding a known face box and landmarks against the anchors (the anchors
that overlap the face get high scores), plus noise and a few distractors. The point is the
post-processing and the coordinate bookkeeping (letterbox in, original pixels out).

Runs on the GPU when CuPy and a CUDA device are there, on the NumPy backend otherwise.

    python examples/face_detector_postprocess.py [out.png]
"""
from __future__ import annotations

import sys

import cv2
import numpy as np
from skimage import data

import cupyprep
from cupyprep import detection

SIZE = (640, 640)
MIN_SIZES = [[16, 32], [64, 128], [256, 512]]
STEPS = [8, 16, 32]
VARIANCES = (0.1, 0.2)

# the astronaut's face in skimage.data.astronaut() (512 x 512), original pixels
FACE_BOX = np.array([172.0, 62.0, 262.0, 182.0])
LANDMARKS = np.array([[197.0, 112.0], [238.0, 110.0], [219.0, 136.0], [201.0, 158.0], [236.0, 157.0]])


def backend():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy, "GPU (CuPy)"
    except Exception:
        pass
    return np, "CPU (NumPy)"


def synthesize_head(priors, meta, rng):
    """loc (1, P, 4), conf (1, P), landms (1, P, 10) as a trained head would give them."""
    H, W = SIZE
    scale = np.array([W, H, W, H], np.float64)
    face = meta.to_network(FACE_BOX[None, None].astype(np.float32))[0, 0] / scale
    pts = meta.to_network(LANDMARKS[None].astype(np.float32))[0] / scale[:2]
    pri_xyxy = np.concatenate([priors[:, :2] - priors[:, 2:] / 2, priors[:, :2] + priors[:, 2:] / 2], 1)
    iou = detection.box_iou(pri_xyxy.astype(np.float32), face[None].astype(np.float32))[:, 0]
    positive = iou > 0.35
    P = len(priors)
    loc = rng.normal(0, 0.3, (P, 4)).astype(np.float32)
    jitter = rng.normal(0, 0.004, (P, 4))
    target = np.clip(face[None] + jitter, 0, 1)
    loc[positive] = detection.encode_boxes(target[positive], priors[positive], VARIANCES)
    conf = rng.uniform(0, 0.2, P).astype(np.float32)
    conf[positive] = np.clip(0.55 + 0.4 * iou[positive] + rng.normal(0, 0.02, positive.sum()), 0, 1)
    # distractors: a few confident anchors elsewhere, below the score threshold but one above
    others = rng.choice(np.flatnonzero(~positive), 4, replace=False)
    conf[others] = [0.45, 0.4, 0.35, 0.62]
    landms = rng.normal(0, 0.5, (P, 10)).astype(np.float32)
    off = (pts[None] + rng.normal(0, 0.002, (P, 5, 2)) - priors[:, None, :2]) / (VARIANCES[0] * priors[:, None, 2:])
    landms[positive] = off[positive].reshape(-1, 10)
    return loc[None], conf[None], landms[None]


def main(out_path="face_detections.png"):
    xp, where = backend()
    photo = np.ascontiguousarray(data.astronaut()[:, :, ::-1])  # BGR, as cv2.imread gives
    frame = xp.asarray(photo)
    batch, meta = cupyprep.preprocess([frame], SIZE, mode="letterbox", pad_value=0)  # the model's input
    priors = detection.prior_boxes(SIZE, MIN_SIZES, STEPS)
    loc, conf, landms = synthesize_head(priors, meta, np.random.default_rng(0))
    loc, conf, landms = xp.asarray(loc), xp.asarray(conf), xp.asarray(landms)

    # decode against the anchors (normalized), to network pixels
    H, W = SIZE
    boxes = detection.decode_boxes(loc, priors, VARIANCES) * xp.asarray(np.float32([W, H, W, H]))
    points = detection.decode_landmarks(landms, priors, VARIANCES) * xp.asarray(np.float32([W, H]))

    # score threshold, top 5000 before NMS, IoU 0.4, at most 50 faces: one call, no host sync
    det = detection.multiclass_nms(boxes, conf, iou_threshold=0.4, score_threshold=0.5, top_k=5000,
                                   max_detections=50)
    # back to the photograph through the letterbox meta
    det = det.to_original(meta)
    kept_points = points[0][xp.maximum(det.indices[0], 0)]  # (D, 5, 2); padded rows unused
    kept_points = meta.to_original(kept_points.reshape(1, -1, 2)).reshape(-1, 5, 2)

    n = int(det.counts[0])
    to_np = (lambda a: a.get()) if xp is not np else np.asarray
    face_boxes, face_scores, face_points = to_np(det.boxes[0, :n]), to_np(det.scores[0, :n]), to_np(kept_points[:n])
    print(f"{where}: {n} face(s)")
    canvas = photo.copy()
    for box, score, pts in zip(face_boxes, face_scores, face_points):
        x1, y1, x2, y2 = (int(round(float(v))) for v in box)
        print(f"  box ({x1}, {y1}, {x2}, {y2}) score {float(score):.3f}; "
              f"landmarks {np.round(pts).astype(int).tolist()}")
        cv2.rectangle(canvas, (x1, y1), (x2, y2), (0, 255, 0), 2)
        cv2.putText(canvas, f"{float(score):.2f}", (x1, max(12, y1 - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.5,
                    (0, 255, 0), 1, cv2.LINE_AA)
        for (px, py), color in zip(pts, [(255, 0, 0), (0, 0, 255), (0, 255, 255), (255, 0, 255), (0, 255, 0)]):
            cv2.circle(canvas, (int(round(float(px))), int(round(float(py)))), 3, color, -1, cv2.LINE_AA)
    cv2.imwrite(out_path, canvas)
    print(f"wrote {out_path}")
    return face_boxes, face_points


if __name__ == "__main__":
    main(*sys.argv[1:2])
