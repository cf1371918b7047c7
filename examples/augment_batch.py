"""A grid of randomly augmented photographs, with boxes transformed along, saved as a PNG.

    python examples/augment_batch.py [--out augment.png] [--cpu]

Runs the kernels on a GPU when CuPy finds one (or with --cpu, NumPy through OpenCV).
"""
from __future__ import annotations

import argparse

import numpy as np


def load_batch(size=256):
    import cv2
    from skimage import data

    names = ["astronaut", "coffee", "chelsea", "rocket"]
    imgs = [cv2.resize(getattr(data, n)(), (size, size), interpolation=cv2.INTER_AREA) for n in names]
    # a box per photograph around its subject, xyxy in pixels of the resized image
    boxes = np.array([[70, 10, 200, 150], [40, 20, 220, 200], [60, 40, 190, 200], [100, 20, 160, 250]], float)
    return np.stack([np.ascontiguousarray(i) for i in imgs]), boxes


def box_corners(boxes):
    x0, y0, x1, y1 = boxes.T
    return np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1),
                     np.stack([x0, y1], 1)], axis=1)  # (N, 4, 2)


def main():
    import cv2

    from cupyprep import geometry

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="augment.png")
    parser.add_argument("--cpu", action="store_true", help="use the CPU backend even with a GPU")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    batch, boxes = load_batch()
    copies = 4
    batch = np.concatenate([batch] * copies)
    boxes = np.concatenate([boxes] * copies)
    xp = np
    if not args.cpu:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                xp = cupy
        except Exception:
            pass
    warped, mats = geometry.random_affine(xp.asarray(batch), degrees=25, translate=(0.1, 0.1),
                                          scale=(0.75, 1.15), shear=8, flip_p=0.5, seed=args.seed)
    warped = warped.get() if hasattr(warped, "get") else warped
    mats = mats.get() if hasattr(mats, "get") else mats
    corners = geometry.transform_points(box_corners(boxes), mats)  # (N, 4, 2)
    tiles = []
    for img, quad in zip(warped, corners):
        tile = np.ascontiguousarray(img[:, :, ::-1])  # RGB -> BGR for cv2
        cv2.polylines(tile, [np.round(quad).astype(np.int32)], True, (0, 255, 255), 2)  # the box, rotated
        x0, y0 = quad.min(axis=0)
        x1, y1 = quad.max(axis=0)  # its axis-aligned hull, as a detector's label becomes
        cv2.rectangle(tile, (int(x0), int(y0)), (int(x1), int(y1)), (0, 0, 255), 1)
        tiles.append(tile)
    rows = [np.concatenate(tiles[r * 4:(r + 1) * 4], axis=1) for r in range(len(tiles) // 4)]
    cv2.imwrite(args.out, np.concatenate(rows, axis=0))
    print(f"wrote {args.out} ({'GPU' if xp is not np else 'CPU'}): {len(tiles)} augmented images")


if __name__ == "__main__":
    main()
