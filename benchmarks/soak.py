"""Soak: many calls of each op family (mixed shapes, ragged lists; CuPy and torch inputs on a
GPU, NumPy on the CPU backend otherwise), printing device memory (CuPy's pool and torch's
allocator), host RSS after warm-up and at the end, and the sizes of the kernel cache, the
launch-plan caches and the kept device tables.

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
    from cupyprep import _kernels, _plans, _transfers
    out["kernel_cache"] = len(_kernels._cuda_cache)
    out["source_cache"] = _kernels._read_expanded.cache_info().currsize
    out["plans"] = sum(len(cache) for cache in _plans._CACHES)
    out["tables"] = len(_transfers._constants)
    return out


VARIANTS = 32  # argument sets per family, drawn and uploaded once, then cycled


def families(rng):
    """(name, draw, op) triples: draw(convert) gives one argument tuple with its own shapes
    (arrays already converted), op(*args) is the call."""
    import cupyprep

    def img(h, w):
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)

    def sizes():
        return int(rng.integers(8, 96)), int(rng.integers(8, 96))

    def boxes(n):
        xy = rng.uniform(0, 500, (n, 2))
        return np.concatenate([xy, xy + rng.uniform(5, 60, (n, 2))], 1).astype(np.float32)

    def nms_args(c):
        b = boxes(int(rng.integers(1, 400)))
        return c(b), c(b[:, 0] / 500)

    rot = cupyprep.get_rotation_matrix_2d((20.0, 20.0), 15.0, 1.1)
    return [
        ("resize", lambda c: (c(img(*sizes())), sizes()), cupyprep.resize),
        ("warp_affine", lambda c: (c(img(*sizes())), c(rot), sizes()), cupyprep.warp_affine),
        ("normalize", lambda c: (c(img(*sizes())),),
         lambda a: cupyprep.normalize(a, (0.5,) * 3, (0.2,) * 3, scale=1 / 255)),
        ("color", lambda c: (c(img(*sizes())),), cupyprep.to_gray),
        ("preprocess_ragged", lambda c: ([c(img(*sizes())) for _ in range(3)],),
         lambda images: cupyprep.preprocess(images, (64, 64))),
        ("nms", nms_args, lambda b, s: cupyprep.nms(b, s, 0.5)),
        ("roi_align", lambda c: (c(rng.random((1, 4, 16, 16), dtype=np.float32)),
                                 c(np.c_[np.zeros(8), boxes(8) / 40].astype(np.float32))),
         lambda x, r: cupyprep.roi_align(x, r, 3)),
        ("box_iou", lambda c: (c(boxes(20)), c(boxes(30))), cupyprep.box_iou),
        ("flip_pad", lambda c: (c(img(*sizes())),),
         lambda a: cupyprep.pad(cupyprep.flip(a, "horizontal"), (3, 1, 2, 5), border_mode="reflect101")),
        ("rotate90", lambda c: (c(img(*sizes())), int(rng.integers(0, 4))), cupyprep.rotate90),
        ("crop", lambda c: (c(img(80, 90)), c(boxes(12) / 8), (16, 16)), cupyprep.crop),
        ("cvt_color", lambda c: (c(img(*sizes())),), lambda a: cupyprep.cvt_color(a, "bgr2hsv")),
        ("gaussian_blur", lambda c: (c(img(*sizes())),), lambda a: cupyprep.gaussian_blur(a, (5, 5), 1.2)),
        ("resize_antialias", lambda c: (c(img(*sizes())), sizes()),
         lambda a, size: cupyprep.resize(a, size, antialias=True)),
        ("color_jitter", lambda c: (c(rng.integers(0, 256, (2, 24, 32, 3), dtype=np.uint8)), int(rng.integers(1 << 30))),
         lambda a, seed: cupyprep.color_jitter(a, 0.3, 0.3, 0.3, 0.05, seed=seed)),
        ("hsv_gain", lambda c: (c(rng.integers(0, 256, (int(rng.integers(1, 4)), 24, 32, 3), dtype=np.uint8)),
                                int(rng.integers(1 << 30))),
         lambda a, seed: cupyprep.hsv_gain(a, seed=seed)),
        ("denormalize", lambda c: (c(rng.random((3, *sizes()), dtype=np.float32)),),
         lambda a: cupyprep.denormalize(a, (0.5,) * 3, (0.2,) * 3, scale=1 / 255)),
    ]


def growth(before, after):
    return {k: round(after[k] - before[k], 1) for k in after}


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
        for name, draw, op in families(rng):
            if chosen and name not in chosen:
                continue
            variants = [draw(convert) for _ in range(VARIANTS)]
            calls = [lambda args=args: op(*args) for args in variants]
            for i in range(args.warmup):
                calls[i % len(calls)]()
            before = memory()
            step = max(1, args.calls // 5)
            for i in range(args.calls):
                calls[i % len(calls)]()
                if (i + 1) % step == 0 and i + 1 < args.calls:
                    print(f"{kind:6s} {name:18s} {i + 1} calls, growth {growth(before, memory())}", flush=True)
            after = memory()
            print(f"{kind:6s} {name:18s} calls {args.calls} after warm-up {before} end {after} "
                  f"growth {growth(before, after)}", flush=True)
    print("end", memory())


if __name__ == "__main__":
    main()
