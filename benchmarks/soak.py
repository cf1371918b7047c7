"""Soak: many calls of each op family (mixed shapes, ragged lists; CuPy and torch inputs on a
GPU, NumPy on the CPU backend otherwise), printing device memory (CuPy's pool and torch's
allocator), host RSS after warm-up and at the end, and the kernel and table cache sizes.

    python -m benchmarks.soak --calls 100000
    python -m benchmarks.soak --families nms,resize --kinds torch   # a part, e.g. one process each
"""
from __future__ import annotations

import argparse
import resource
import sys

import numpy as np


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


ON_DEVICE = []  # set when the soak runs on a GPU


def memory():
    out = {"rss_mib": round(rss_mib(), 1)}
    cupy = sys.modules.get("cupy")
    if cupy is not None and ON_DEVICE:
        pool = cupy.get_default_memory_pool()
        out["cupy_used_mib"] = round(pool.used_bytes() / 2**20, 1)
        out["cupy_held_mib"] = round(pool.total_bytes() / 2**20, 1)
    torch = sys.modules.get("torch")
    if torch is not None and ON_DEVICE and torch.cuda.is_available():
        out["torch_allocated_mib"] = round(torch.cuda.memory_allocated() / 2**20, 1)
        out["torch_reserved_mib"] = round(torch.cuda.memory_reserved() / 2**20, 1)
    from cupyprep import _kernels
    out["kernel_cache"] = len(_kernels._cuda_cache)
    out["source_cache"] = _kernels._read_expanded.cache_info().currsize
    return out


def families(rng):
    """(name, call(convert)) pairs: each draws its own shapes."""
    import cupyprep

    def img(h, w):
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)

    def sizes():
        return int(rng.integers(8, 96)), int(rng.integers(8, 96))

    def boxes(n):
        xy = rng.uniform(0, 500, (n, 2))
        return np.concatenate([xy, xy + rng.uniform(5, 60, (n, 2))], 1).astype(np.float32)

    rot = cupyprep.get_rotation_matrix_2d((20.0, 20.0), 15.0, 1.1)
    return [
        ("resize", lambda c: cupyprep.resize(c(img(*sizes())), sizes())),
        ("warp_affine", lambda c: cupyprep.warp_affine(c(img(*sizes())), c(rot), sizes())),
        ("normalize", lambda c: cupyprep.normalize(c(img(*sizes())), (0.5,) * 3, (0.2,) * 3, scale=1 / 255)),
        ("color", lambda c: cupyprep.to_gray(c(img(*sizes())))),
        ("preprocess_ragged", lambda c: cupyprep.preprocess([c(img(*sizes())) for _ in range(3)], (64, 64))),
        ("nms", lambda c: (lambda b: cupyprep.nms(c(b), c(b[:, 0] / 500), 0.5))(boxes(int(rng.integers(1, 400))))),
        ("roi_align", lambda c: cupyprep.roi_align(c(rng.random((1, 4, 16, 16), dtype=np.float32)),
                                                   c(np.c_[np.zeros(8), boxes(8) / 40].astype(np.float32)), 3)),
        ("box_iou", lambda c: cupyprep.box_iou(c(boxes(20)), c(boxes(30)))),
        ("flip_pad", lambda c: cupyprep.pad(cupyprep.flip(c(img(*sizes())), "horizontal"),
                                            (3, 1, 2, 5), border_mode="reflect101")),
        ("rotate90", lambda c: cupyprep.rotate90(c(img(*sizes())), int(rng.integers(0, 4)))),
        ("crop", lambda c: cupyprep.crop(c(img(80, 90)), c(boxes(12) / 8), (16, 16))),
        ("cvt_color", lambda c: cupyprep.cvt_color(c(img(*sizes())), "bgr2hsv")),
        ("gaussian_blur", lambda c: cupyprep.gaussian_blur(c(img(*sizes())), (5, 5), 1.2)),
        ("resize_antialias", lambda c: cupyprep.resize(c(img(*sizes())), sizes(), antialias=True)),
        ("color_jitter", lambda c: cupyprep.color_jitter(c(rng.integers(0, 256, (2, 24, 32, 3), dtype=np.uint8)),
                                                         0.3, 0.3, 0.3, 0.05, seed=int(rng.integers(1 << 30)))),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="calls of each op family and kind")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--families", default="", help="comma-separated family names (default: all)")
    parser.add_argument("--kinds", default="", help="comma-separated input kinds: numpy, cupy, torch")
    args = parser.parse_args(argv)
    chosen = set(filter(None, args.families.split(",")))
    rng = np.random.default_rng(0)
    kinds = {"numpy": lambda a: a}
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            kinds = {"cupy": cupy.asarray}
            ON_DEVICE.append(True)
            try:
                import torch

                if torch.cuda.is_available():
                    kinds["torch"] = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
            except ImportError:
                pass
    except Exception:
        pass
    if args.kinds:
        kinds = {k: v for k, v in kinds.items() if k in args.kinds.split(",")}
    print("start", memory())
    for kind, convert in kinds.items():
        for name, call in families(rng):
            if chosen and name not in chosen:
                continue
            for _ in range(args.warmup):
                call(convert)
            before = memory()
            for i in range(args.calls):
                call(convert)
            after = memory()
            growth = {k: round(after[k] - before[k], 1) for k in after}
            print(f"{kind:6s} {name:18s} calls {args.calls} after warm-up {before} end {after} growth {growth}",
                  flush=True)
    print("end", memory())


if __name__ == "__main__":
    main()
