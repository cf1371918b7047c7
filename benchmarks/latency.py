"""S1-S5: latency at batch 1, called eagerly as a service or a notebook calls.

S1 one 1080p frame -> letterbox 640x640 float16; S2 one image's YOLO head (8400 boxes x 80
classes) -> multiclass_nms; S3 one 512x512 warp_affine; S4 a list of 8 frames of mixed sizes
-> preprocess (and of 64, the longest list that goes by value); S5 to_torch / from_torch /
as_array round trip of a CUDA tensor; S6 one resize, S7 one normalize, S8 nms at 1k boxes;
S9 every op family once on one 512x512 image (or its boxes), with and without its plan.

Each row gives three figures for the same call in the same run: **eager**, wall-clock per
call of a loop of calls followed by one synchronization (what a user's loop sees); **device**,
the call's CUDA-graph replay time (its kernels alone); and **host**, eager minus device (the
Python, validation and launch time that the device does not hide). The torch / torchvision
way of doing the same work runs beside it. ``--profile`` adds, per cupyprep row, where the
host time goes (a cProfile of the calls, each module's own time grouped by topic and scaled
to the unprofiled per-call time).
"""
from __future__ import annotations

import contextlib
import cProfile
import pstats
import statistics
import time

from . import _timing

CALLS, ROUNDS = 200, 7

# where a function's own time goes: the first matching fragment of its file or name
CATEGORIES = (
    ("validation", ("_validate.py",)),
    ("kernel lookup", ("_kernels.py", "_specs")),
    ("argument packing and launch", ("_launch.py", "raw.pyx", "RawKernel", "_function")),
    ("allocation", ("_allocators.py", "memory.pyx", "torch.empty", "method 'empty'", "cupy/_creation")),
    ("streams", ("_streams.py", "Stream", "stream", "_cuda_getCurrentRawStream")),
    ("array views and dlpack", ("_arrays.py", "_torch.py", "interop.py", "dlpack", "from_dlpack")),
    ("op logic", ("cupyprep",)),
)


def eager_per_call(fn, calls=CALLS, rounds=ROUNDS):
    """Median over ``rounds`` of the wall-clock per call of ``calls`` calls and one sync."""
    import torch

    for i in range(20):
        fn(i)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i)
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(per_call)


def host_profile(fn, eager_ms, calls=CALLS):
    """Microseconds per call by category (cProfile's own times, scaled so they sum to the
    unprofiled host time per call)."""
    import torch

    prof = cProfile.Profile()
    prof.enable()
    for i in range(calls):
        fn(i)
    prof.disable()
    torch.cuda.synchronize()
    totals = dict.fromkeys([c for c, _ in CATEGORIES] + ["other (torch, cupy, python)"], 0.0)
    for (filename, _, func), (_, _, own, _, _) in pstats.Stats(prof).stats.items():
        where = f"{filename} {func}"
        for category, marks in CATEGORIES:
            if any(m in where for m in marks):
                totals[category] += own
                break
        else:
            totals["other (torch, cupy, python)"] += own
    whole = sum(totals.values()) or 1.0
    return {k: v / whole * eager_ms * 1e3 for k, v in totals.items() if v}


@contextlib.contextmanager
def general_path():
    """cupyprep's ops without their launch plans (the path of a call with a new geometry),
    to show what the plans save in the same run: every plan cache of every loaded module
    (each ``_plans.PlanCache`` it holds) swapped for one that keeps nothing (``maxsize`` 0)."""
    import sys

    from cupyprep import _plans

    kept = [(m, name, value) for mname, m in list(sys.modules.items()) if mname.startswith("cupyprep.")
            for name, value in list(vars(m).items()) if isinstance(value, _plans.PlanCache)]
    for module, name, _ in kept:
        setattr(module, name, _plans.PlanCache(maxsize=0))
    try:
        yield
    finally:
        for module, name, value in kept:
            setattr(module, name, value)


class Rows:
    def __init__(self, bench, profile):
        self.bench, self.profile = bench, profile

    def add(self, workload, impl, fn, capture=True, baseline=False, generators=()):
        eager = eager_per_call(fn)
        device = None
        if capture:
            t = _timing.time_cuda(fn, 1, self.bench.warmup, self.bench.repeat, capture=True,
                                  generators=generators)
            device = t["median_ms"] if t["timing"] == "graph replay" else None
        host = eager - device if device is not None else None
        row = dict(workload=workload, impl=impl, baseline=baseline, eager_ms=eager,
                   device_ms=device, host_ms=host, latency=True)
        shown = f"  {workload} {impl}: eager {eager * 1e3:.1f} us"
        if device is not None:
            shown += f", device {device * 1e3:.1f} us, host {host * 1e3:.1f} us"
        if self.profile and not baseline:
            row["host_profile_us"] = host_profile(fn, eager)
            shown += "\n    " + ", ".join(f"{k} {v:.1f}" for k, v in row["host_profile_us"].items())
        print(shown, flush=True)
        self.bench.latency_rows.append(row)


def run(bench, profile=False):
    import cupy
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torchvision

    import cupyprep

    rows = Rows(bench, profile)
    gen = torch.Generator(device="cuda").manual_seed(0)

    # S1: one 1080p frame, letterbox to 640x640 float16
    frame = torch.randint(0, 256, (1080, 1920, 3), dtype=torch.uint8, device="cuda", generator=gen)
    out1 = torch.empty((1, 3, 640, 640), dtype=torch.float16, device="cuda")
    rows.add("S1", "cupyprep preprocess", lambda i: cupyprep.preprocess(frame, (640, 640), dtype="float16",
                                                                          out=out1))
    rows.add("S1", "cupyprep preprocess, output allocated", lambda i: cupyprep.preprocess(
        frame, (640, 640), dtype="float16"))
    with general_path():
        rows.add("S1", "cupyprep preprocess, general path (no plan)", lambda i: cupyprep.preprocess(
            frame, (640, 640), dtype="float16", out=out1))

    def torch_s1(i):
        x = frame.permute(2, 0, 1)[None].flip(1).float()
        x = F.interpolate(x, size=(360, 640), mode="bilinear", align_corners=False)
        return (F.pad(x, (0, 0, 140, 140), value=114.0) / 255).half()

    rows.add("S1", "torch interpolate + pad + div", torch_s1, baseline=True)

    # S2: one image's YOLO head -> multiclass_nms (sync-free)
    centers = torch.rand((1, 8400, 2), device="cuda", generator=gen) * 640
    sides = torch.rand((1, 8400, 2), device="cuda", generator=gen) * 100 + 10
    boxes = torch.cat([centers - sides / 2, centers + sides / 2], -1)
    scores = torch.rand((1, 8400, 80), device="cuda", generator=gen) ** 8  # few above 0.25
    rows.add("S2", "cupyprep multiclass_nms", lambda i: cupyprep.multiclass_nms(
        boxes, scores, score_threshold=0.25, top_k=1000))
    with general_path():
        rows.add("S2", "cupyprep multiclass_nms, general path (no plan)", lambda i: cupyprep.multiclass_nms(
            boxes, scores, score_threshold=0.25, top_k=1000))

    def torch_s2(i):
        s, c = scores[0].max(1)
        keep = s > 0.25
        return torchvision.ops.batched_nms(boxes[0][keep], s[keep], c[keep], 0.5)

    rows.add("S2", "torchvision filter + batched_nms", torch_s2, capture=False, baseline=True)

    # S3: one 512x512 warp_affine (a rotation), bilinear, constant border
    img = torch.randint(0, 256, (512, 512, 3), dtype=torch.uint8, device="cuda", generator=gen)
    m = np.array([[0.866, -0.5, 162.0], [0.5, 0.866, -93.0]])
    out3 = torch.empty_like(img)
    rows.add("S3", "cupyprep warp_affine", lambda i: cupyprep.warp_affine(img, m, (512, 512), out=out3))
    with general_path():
        rows.add("S3", "cupyprep warp_affine, general path (no plan)", lambda i: cupyprep.warp_affine(
            img, m, (512, 512), out=out3))
    theta = torch.tensor([[[0.866, -0.5, 0.1], [0.5, 0.866, -0.1]]], device="cuda")

    def torch_s3(i):
        x = img.permute(2, 0, 1)[None].float()
        grid = F.affine_grid(theta, (1, 3, 512, 512), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False).to(torch.uint8)

    rows.add("S3", "torch affine_grid + grid_sample", torch_s3, baseline=True)

    # S4: a list of 8 frames of mixed sizes -> preprocess
    rng = np.random.default_rng(0)
    frames = [torch.randint(0, 256, (int(h), int(w), 3), dtype=torch.uint8, device="cuda", generator=gen)
              for h, w in zip(rng.integers(360, 1080, 8), rng.integers(480, 1920, 8))]
    out4 = torch.empty((8, 3, 640, 640), dtype=torch.float32, device="cuda")
    rows.add("S4", "cupyprep preprocess (list of 8)", lambda i: cupyprep.preprocess(frames, (640, 640),
                                                                                      out=out4))

    def torch_s4(i):
        for j, f in enumerate(frames):
            h, w = f.shape[:2]
            r = min(640 / h, 640 / w)
            nh, nw = round(h * r), round(w * r)
            x = F.interpolate(f.permute(2, 0, 1)[None].flip(1).float(), size=(nh, nw), mode="bilinear")
            top, left = (640 - nh) // 2, (640 - nw) // 2
            out4[j] = F.pad(x, (left, 640 - nw - left, top, 640 - nh - top), value=114.0)[0] / 255

    rows.add("S4", "torch per frame", torch_s4, baseline=True)

    # S4 at 64 frames (the most that go by value), torch tensors and CuPy arrays
    sizes = list(zip(rng.integers(360, 1080, 64), rng.integers(480, 1920, 64)))
    frames64 = [torch.randint(0, 256, (int(h), int(w), 3), dtype=torch.uint8, device="cuda", generator=gen)
                for h, w in sizes]
    frames64_cp = [cupy.from_dlpack(f) for f in frames64]
    out64 = torch.empty((64, 3, 640, 640), dtype=torch.float16, device="cuda")
    out64_cp = cupy.from_dlpack(out64)
    rows.add("S4", "cupyprep preprocess (list of 64 tensors)", lambda i: cupyprep.preprocess(
        frames64, (640, 640), dtype="float16", out=out64))
    # (CuPy rows are eager only: a torch graph captures torch's stream, not CuPy's)
    rows.add("S4", "cupyprep preprocess (list of 64 CuPy arrays)", lambda i: cupyprep.preprocess(
        frames64_cp, (640, 640), dtype="float16", out=out64_cp), capture=False)

    # S6-S8: one call of each other op that keeps launch plans, torch in and out (CuPy for S1)
    frame_cp = cupy.from_dlpack(frame)
    out1_cp = cupy.from_dlpack(out1)
    rows.add("S1", "cupyprep preprocess, CuPy in and out", lambda i: cupyprep.preprocess(
        frame_cp, (640, 640), dtype="float16", out=out1_cp), capture=False)
    small = torch.empty((360, 640, 3), dtype=torch.uint8, device="cuda")
    rows.add("S6", "cupyprep resize 1080p -> 360x640 linear", lambda i: cupyprep.resize(
        frame, (360, 640), out=small))
    with general_path():
        rows.add("S6", "cupyprep resize, general path (no plan)", lambda i: cupyprep.resize(
            frame, (360, 640), out=small))
    rows.add("S6", "torch interpolate (HWC uint8 -> float -> uint8)", lambda i: F.interpolate(
        frame.permute(2, 0, 1)[None].float(), size=(360, 640), mode="bilinear").to(torch.uint8),
        baseline=True)
    square = torch.randint(0, 256, (640, 640, 3), dtype=torch.uint8, device="cuda", generator=gen)
    chw = torch.empty((3, 640, 640), dtype=torch.float32, device="cuda")
    rows.add("S7", "cupyprep normalize 640x640 -> CHW float32, ImageNet", lambda i: cupyprep.normalize(
        square, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255, out=chw))
    with general_path():
        rows.add("S7", "cupyprep normalize, general path (no plan)", lambda i: cupyprep.normalize(
            square, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255, out=chw))
    mean = torch.tensor(cupyprep.IMAGENET_MEAN, device="cuda").view(3, 1, 1)
    std = torch.tensor(cupyprep.IMAGENET_STD, device="cuda").view(3, 1, 1)
    rows.add("S7", "torch permute + float + sub + div", lambda i: (
        square.permute(2, 0, 1).float() / 255 - mean) / std, baseline=True)
    from .w3 import make_boxes

    b1k, s1k, _ = make_boxes(1000, 0)
    rows.add("S8", "cupyprep nms 1k boxes, sync-free", lambda i: cupyprep.nms(b1k, s1k, 0.5, return_count=True))
    with general_path():
        rows.add("S8", "cupyprep nms 1k, general path (no plan)", lambda i: cupyprep.nms(
            b1k, s1k, 0.5, return_count=True))
    rows.add("S8", "torchvision nms 1k", lambda i: torchvision.ops.nms(b1k, s1k, 0.5), capture=False,
             baseline=True)

    # S5: a CUDA tensor to CuPy and back, and as_array
    t = torch.empty((640, 640, 3), dtype=torch.uint8, device="cuda")
    rows.add("S5", "cupyprep from_torch + to_torch + as_array", lambda i: (
        cupyprep.to_torch(cupyprep.from_torch(t)), cupyprep.as_array(t)), capture=False)
    rows.add("S5", "cupy.from_dlpack + torch.from_dlpack", lambda i: torch.from_dlpack(cupy.from_dlpack(t)),
             capture=False, baseline=True)

    families, draws = op_families(torch, gen)
    for name, fn in families:
        # the augmentations draw from `draws`: each graph replay draws anew, as eager calls do
        generators = (draws,) if name.startswith(("color_jitter", "hsv_gain")) else ()
        rows.add("S9", name, fn, generators=generators)
        with general_path():
            rows.add("S9", f"{name}, general path (no plan)", fn, generators=generators)


def op_families(torch, gen, device="cuda"):
    """S9: ``(name, call)`` of each op family on one 512x512 uint8 HWC tensor (a batch of
    one where the op takes batches), its boxes, or its features, as a service calls it; and
    the generator the augmentations draw from."""
    import numpy as np

    import cupyprep

    img = torch.randint(0, 256, (512, 512, 3), dtype=torch.uint8, device=device, generator=gen)
    batch = img[None]
    chw = cupyprep.normalize(img, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255)
    xy = torch.rand(1000, 2, device=device, generator=gen) * 400
    b1k = torch.cat([xy, xy + 8 + torch.rand(1000, 2, device=device, generator=gen) * 100], 1)
    b100 = b1k[:100].contiguous()
    feats = torch.rand(1, 256, 64, 64, device=device, generator=gen)
    rois = torch.cat([torch.zeros(64, 1, device=device), b1k[:64] / 8], 1)
    crops = b1k[:8].contiguous()
    draws = torch.Generator(device=device).manual_seed(1)  # the augmentations' (a training loop's)
    loc = torch.randn(16800, 4, device=device, generator=gen) * 0.1
    priors = torch.rand(16800, 4, device=device, generator=gen) * 0.5 + 0.1
    m = np.array([[0.866, -0.5, 162.0], [0.5, 0.866, -93.0]])
    mean, std = cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD
    return [
        ("resize 512 -> 256 linear", lambda i: cupyprep.resize(img, (256, 256))),
        ("resize 512 -> 224 antialias", lambda i: cupyprep.resize(img, (224, 224), antialias=True)),
        ("warp_affine 512", lambda i: cupyprep.warp_affine(img, m, (512, 512))),
        ("normalize -> CHW float32", lambda i: cupyprep.normalize(img, mean, std, scale=1 / 255)),
        ("denormalize CHW -> uint8", lambda i: cupyprep.denormalize(chw, mean, std, scale=1 / 255)),
        ("swap_rb", lambda i: cupyprep.swap_rb(img)),
        ("to_gray", lambda i: cupyprep.to_gray(img)),
        ("cvt_color bgr2hsv", lambda i: cupyprep.cvt_color(img, "bgr2hsv")),
        ("flip horizontal", lambda i: cupyprep.flip(img, "horizontal")),
        ("rotate90", lambda i: cupyprep.rotate90(img, 1)),
        ("pad 16 reflect101", lambda i: cupyprep.pad(img, 16, border_mode="reflect101")),
        ("gaussian_blur 5", lambda i: cupyprep.gaussian_blur(img, 5, 1.2)),
        ("box_filter 3", lambda i: cupyprep.box_filter(img, 3)),
        ("crop 8 boxes -> 64x64", lambda i: cupyprep.crop(img, crops, (64, 64))),
        ("color_jitter (batch of 1)", lambda i: cupyprep.color_jitter(batch, 0.4, 0.4, 0.4, 0.1, generator=draws)),
        ("hsv_gain (batch of 1)", lambda i: cupyprep.hsv_gain(batch, generator=draws)),
        ("roi_align 64 rois 7x7", lambda i: cupyprep.roi_align(feats, rois, 7, 1.0)),
        ("box_convert 1k", lambda i: cupyprep.box_convert(b1k, "xyxy", "cxcywh")),
        ("clip_boxes 1k", lambda i: cupyprep.clip_boxes(b1k, (512, 512))),
        ("box_iou 100 x 100", lambda i: cupyprep.box_iou(b100, b100)),
        ("decode_boxes 16.8k priors", lambda i: cupyprep.decode_boxes(loc, priors)),
    ], draws


def table(rows):
    lines = ["| id | implementation | eager us | device us | host us (eager - device) |",
             "|----|----|----|----|----|"]
    for r in rows:
        dev = "—" if r["device_ms"] is None else f"{r['device_ms'] * 1e3:.1f}"
        host = "—" if r["host_ms"] is None else f"{r['host_ms'] * 1e3:.1f}"
        lines.append(f"| {r['workload']} | {r['impl']} | {r['eager_ms'] * 1e3:.1f} | {dev} | {host} |")
    return "\n".join(lines)
