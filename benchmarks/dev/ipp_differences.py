"""How far stock ``cv2`` (Intel IPP on, OpenCV's default on x86) is from OpenCV's own code
(IPP off), which the kernels and the CPU backend compute: the figures in docs/exactness.md.

    python -m benchmarks.dev.ipp_differences

Prints a Markdown table: the largest difference per op, dtype and mode over photographs
and random images at several sizes, in pixel units and as a share of the value range, and
the share of elements that differ. A build without IPP prints zeros.
"""
from __future__ import annotations

import numpy as np


def _images():
    from skimage import data

    rng = np.random.default_rng(0)
    photos = [np.ascontiguousarray(getattr(data, n)()) for n in ("astronaut", "coffee", "chelsea")]
    noise = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    return photos + [noise, photos[0][:, :, :1].copy(), np.dstack([photos[0], photos[0][:, :, :1]])]


def _typed(img, dtype):
    """``img`` (uint8) in ``dtype`` over its full range: uint16 * 257; float32 in [0, 1]
    and in [0, 255] (the two ways float images come)."""
    if dtype == "uint8":
        return img, 255.0
    if dtype == "uint16":
        return img.astype(np.uint16) * 257, 65535.0
    if dtype == "float32 [0, 1]":
        return img.astype(np.float32) / np.float32(255), 1.0
    return img.astype(np.float32), 255.0


def _both(cv2, fn):
    cv2.ipp.setUseIPP(True)
    stock = fn()
    cv2.ipp.setUseIPP(False)
    own = fn()
    cv2.ipp.setUseIPP(True)
    return stock, own


def measure():
    import cv2

    rows = []
    images = _images()
    sizes = [(224, 224), (300, 437), (640, 640), (777, 1001), (1024, 1024)]
    dtypes = ["uint8", "uint16", "float32 [0, 1]", "float32 [0, 255]"]
    resize_modes = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR,
                    "area": cv2.INTER_AREA, "cubic": cv2.INTER_CUBIC}
    cases = []
    for name, flag in resize_modes.items():
        for dt in dtypes:
            def resize_case(img, size, flag=flag):
                return cv2.resize(img, size[::-1], interpolation=flag)
            cases.append(("resize", dt, name, resize_case))
    rng = np.random.default_rng(1)
    for name, flag in (("nearest", cv2.INTER_NEAREST), ("linear", cv2.INTER_LINEAR)):
        for border, bflag in (("constant", cv2.BORDER_CONSTANT), ("replicate", cv2.BORDER_REPLICATE)):
            for dt in dtypes:
                angle = float(rng.uniform(-30, 30))

                def warp_case(img, size, flag=flag, bflag=bflag, angle=angle):
                    h, w = img.shape[:2]
                    M = cv2.getRotationMatrix2D((w / 2, h / 2), angle, size[0] / h)
                    return cv2.warpAffine(img, M, size[::-1], flags=flag, borderMode=bflag)
                cases.append(("warp_affine", dt, f"{name}, {border}", warp_case))
    for dt in dtypes:
        def gray_case(img, size):
            return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 and img.shape[2] == 3 else None
        cases.append(("to_gray", dt, "rgb", gray_case))
    for op, dt, mode, fn in cases:
        worst = worst_rel = 0.0
        differ = total = 0
        for img8 in images:
            img, span = _typed(img8, dt)
            for size in sizes:
                stock, own = _both(cv2, lambda img=img, size=size, fn=fn: fn(img, size))
                if stock is None:
                    continue
                d = np.abs(stock.astype(np.float64) - own.astype(np.float64))
                worst = max(worst, float(d.max()))
                worst_rel = max(worst_rel, float(d.max()) / span)
                differ += int((d > 0).sum())
                total += d.size
        rows.append((op, dt, mode, worst, worst_rel, differ / max(total, 1)))
    return rows


def main():
    import cv2

    print(f"OpenCV {cv2.__version__}, IPP: {cv2.ipp.getIppVersion() if cv2.ipp.useIPP() else 'off'}")
    print()
    print("| op | dtype | mode | largest difference | of the range | elements that differ |")
    print("|----|----|----|----|----|----|")
    for op, dt, mode, worst, rel, share in measure():
        if worst == 0:
            print(f"| {op} | {dt} | {mode} | 0 | 0 | 0 |")
        else:
            print(f"| {op} | {dt} | {mode} | {worst:.3g} | {rel:.2g} | {100 * share:.2g}% |")


if __name__ == "__main__":
    main()
