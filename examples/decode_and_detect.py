"""JPEG files -> decoded on the GPU -> one letterboxed batch -> a detector -> NMS -> boxes
drawn on the original photographs.

The files are decoded in one call (``cupyprep.decode``: nvImageCodec on the GPU where it
is installed, OpenCV otherwise) straight into torch CUDA tensors: no pixels cross PCIe,
only the compressed bytes. Without a GPU the same code runs on the CPU backend. The
detector has random weights (nothing is downloaded): torchvision's
fasterrcnn_mobilenet_v3_large_320_fpn where torchvision is installed, a small
convolutional head otherwise; the point is the data path and the coordinate bookkeeping.

    python examples/decode_and_detect.py [--out DIR]
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from skimage import data

import cupyprep

NAMES = ["astronaut", "coffee", "chelsea", "rocket", "camera", "immunohistochemistry"]
CANVAS = (320, 320)
STRIDE = 16  # the small head's grid


def write_jpegs(folder):
    """The input: skimage photographs as JPEG files."""
    import cv2

    paths = []
    for name in NAMES:
        img = np.asarray(getattr(data, name)())
        img = np.stack([img] * 3, axis=2) if img.ndim == 2 else img[:, :, :3]
        path = os.path.join(folder, f"{name}.jpg")
        cv2.imwrite(path, np.ascontiguousarray(img[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 90])
        paths.append(path)
    return paths


def detector(device):
    """``(name, fn)``: fn maps the (N, 3, H, W) batch to per-image (boxes (K, 4) xyxy on the
    canvas, scores (K,))."""
    torch.manual_seed(0)
    try:
        from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

        net = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0,
                                                    min_size=CANVAS[0], max_size=CANVAS[1]).eval().to(device)

        def run(batch):
            return [(d["boxes"], d["scores"]) for d in net(list(batch))]

        return "fasterrcnn_mobilenet_v3_large_320_fpn", run
    except ImportError:
        pass
    head = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 5, 3, stride=2, padding=1),  # per cell: dx, dy, log w, log h, score
    ).eval().to(device)

    def run(batch):
        out = head(batch)  # (N, 5, H/16, W/16)
        n, _, gh, gw = out.shape
        ys, xs = torch.meshgrid(torch.arange(gh, device=out.device), torch.arange(gw, device=out.device),
                                indexing="ij")
        cx = (xs + 0.5 + torch.tanh(out[:, 0])) * STRIDE
        cy = (ys + 0.5 + torch.tanh(out[:, 1])) * STRIDE
        w = 4 * STRIDE * torch.exp(out[:, 2].clamp(-2, 2))
        h = 4 * STRIDE * torch.exp(out[:, 3].clamp(-2, 2))
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1).reshape(n, -1, 4)
        scores = torch.sigmoid(out[:, 4]).reshape(n, -1)
        return list(zip(boxes, scores))

    return "a small convolutional head", run


def draw(image, boxes, path):
    import cv2

    canvas = np.ascontiguousarray(image)
    for x0, y0, x1, y1 in boxes.round().astype(int).tolist():
        cv2.rectangle(canvas, (x0, y0), (x1, y1), (0, 255, 0), 2)
    cv2.imwrite(path, canvas)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="detections", help="folder for the input JPEGs and the drawings")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    paths = write_jpegs(args.out)

    from cupyprep import _decoders

    gpu = torch.cuda.is_available()
    images = cupyprep.decode(paths, like=torch)  # HWC uint8 BGR tensors, on the GPU when there is one
    if not gpu:
        how = "with OpenCV (CPU backend)"
    elif _decoders.gpu_backend() is not None:
        how = "on the GPU (nvImageCodec)"
    else:
        how = "on the GPU (OpenCV on the host, uploaded: nvImageCodec is not installed)"
    print(f"decoded {len(images)} JPEG files {how}: {images[0].device}")

    batch, meta = cupyprep.preprocess(images, CANVAS, mode="letterbox")  # RGB, /255, NCHW
    print(f"batch: {tuple(batch.shape)} {batch.dtype} on {batch.device}")
    name, run = detector(batch.device)
    print(f"detector: {name} (random weights)")
    with torch.no_grad():
        detections = run(batch)

    for i, (path, image, (boxes, scores)) in enumerate(zip(paths, images, detections)):
        boxes, scores = boxes.float().contiguous(), scores.float().contiguous()
        keep = cupyprep.nms(boxes, scores, 0.5)[:5]  # torchvision's rule and order
        kept = meta.to_original(boxes[keep].double(), image_index=torch.full_like(keep, i))
        kept = kept.cpu().numpy()
        original = image.cpu().numpy()
        h, w = original.shape[:2]
        inside = bool(((kept[:, [0, 2]] >= 0) & (kept[:, [0, 2]] <= w) &
                       (kept[:, [1, 3]] >= 0) & (kept[:, [1, 3]] <= h)).all())
        out = os.path.join(args.out, f"detections_{os.path.basename(path).rsplit('.', 1)[0]}.png")
        draw(original, kept, out)
        print(f"{os.path.basename(path):26s} {w}x{h}: {len(kept)} boxes after NMS, "
              f"{'all inside the photograph' if inside else 'SOME OUTSIDE'}; wrote {out}")


if __name__ == "__main__":
    main()
