"""Ray Data batch preprocessing, images/s: cupyprep's Preprocess on a GPU actor against the
usual map_batches baseline, per-image torchvision transforms on CPU workers, in the same
Ray and on the same images.

python -m benchmarks.ray_pipeline [--images 3000] [--batch-size 64] [--cpus N] [--device cpu]

Both pipelines read the same dataset of ragged uint8 BGR images (sides 360-720 x
480-960) from Ray's object store and produce YOLO's letterboxed 640 x 640 RGB float32 NCHW
batch on the host (the stage's output in the object store); the time is the wall clock of
the whole pass (``materialize``), after one warm-up pass of each pipeline on a few
batches. The baseline: per image ``torchvision.transforms.v2.functional.resize`` (bilinear,
antialias off) to the letterbox size, ``pad`` with 114, ``/ 255``; then a stack. Not a
CUDA-event timing: Ray's scheduling and the object store are part of what is measured, so
it is not one of the ``python -m benchmarks`` workloads.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

SIZE = (640, 640)


def _images(n, seed=0):
    """n ragged images: 32 distinct ones, repeated (the object store holds them all)."""
    rng = np.random.default_rng(seed)
    pool = [rng.integers(0, 256, (int(rng.integers(360, 721)), int(rng.integers(480, 961)), 3), dtype=np.uint8)
            for _ in range(32)]
    return [pool[i % len(pool)] for i in range(n)]


def torchvision_letterbox(batch):
    """The baseline stage: per-image torchvision transforms on a CPU worker."""
    import torch

    resize, pad = _torchvision_ops()
    H, W = SIZE
    out = np.empty((len(batch["image"]), 3, H, W), np.float32)
    for i, img in enumerate(batch["image"]):
        h, w = img.shape[:2]
        r = min(H / h, W / w)
        nh, nw = max(1, round(h * r)), max(1, round(w * r))
        t = torch.from_numpy(np.ascontiguousarray(img[:, :, ::-1])).permute(2, 0, 1)
        t = resize(t, [nh, nw])
        top, left = (H - nh) // 2, (W - nw) // 2
        t = pad(t, [left, top, W - nw - left, H - nh - top])
        out[i] = (t.float() / 255).numpy()
    return {"id": batch["id"], "input": out}


def _torchvision_ops():
    """torchvision's resize and pad (v2 functional); where torchvision is not installed,
    the torch calls it makes for them (bilinear interpolate, constant pad)."""
    try:
        from torchvision.transforms.v2 import functional as F

        return (lambda t, hw: F.resize(t, hw, antialias=False)), (lambda t, p: F.pad(t, p, fill=114))
    except ImportError:
        import torch

        def resize(t, hw):
            out = torch.nn.functional.interpolate(t[None].float(), size=hw, mode="bilinear", align_corners=False)
            return out[0].round().clamp(0, 255).to(torch.uint8)

        # torchvision's [left, top, right, bottom] as torch's (left, right, top, bottom)
        return resize, (lambda t, p: torch.nn.functional.pad(t, (p[0], p[2], p[1], p[3]), value=114))


def _timed(ds):
    start = time.perf_counter()
    n = ds.materialize().count()
    return n, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cpus", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="auto", help="the Preprocess actor's device ('cpu': a check run)")
    args = parser.parse_args(argv)

    import ray

    from cupyprep.integrations import ray as cray

    gpus = 0 if args.device == "cpu" else 1
    ray.init(num_cpus=args.cpus, num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    images = _images(args.images)
    ds = ray.data.from_items([{"id": i, "image": im} for i, im in enumerate(images)]).materialize()
    warm = ray.data.from_items([{"id": i, "image": im} for i, im in enumerate(images[:4 * args.batch_size])])

    def ours(d):
        return d.map_batches(cray.Preprocess, fn_constructor_args=(SIZE,),
                             fn_constructor_kwargs={"device": args.device}, batch_size=args.batch_size,
                             concurrency=1, num_gpus=gpus, num_cpus=1)

    def baseline(d):
        return d.map_batches(torchvision_letterbox, batch_size=args.batch_size, num_cpus=1)

    try:
        import torchvision  # noqa: F401

        baseline_name = "torchvision"
    except ImportError:
        baseline_name = "torch (torchvision not installed)"
    results = {}
    for name, pipeline in (("cupyprep Preprocess, 1 GPU actor" if gpus else "cupyprep Preprocess, 1 CPU actor",
                            ours),
                           (f"{baseline_name} per image, CPU tasks ({args.cpus} CPUs)", baseline)):
        _timed(pipeline(warm))
        n, seconds = _timed(pipeline(ds))
        assert n == args.images, (n, args.images)
        results[name] = n / seconds
        print(f"{name}: {n} images in {seconds:.2f} s, {n / seconds:.1f} images/s", flush=True)
    (ours_name, ours_rate), (base_name, base_rate) = results.items()
    print(f"{ours_name} / {base_name}: {ours_rate / base_rate:.2f}x")
    ray.shutdown()


if __name__ == "__main__":
    main()
