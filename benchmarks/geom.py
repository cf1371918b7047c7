"""GEOM: the index-mapping copies and crop-and-resize on a batch of 8 frames 1080x1920x3
uint8, next to their torch equivalents in the same process.

GEOMf  flip (horizontal)            torch.flip of the width axis
GEOMr  rotate90 (one turn)          torch.rot90(...).contiguous() (rot90 alone is a view)
GEOMc  pad 32 px, constant 114      torch.nn.functional.pad, constant (NCHW)
GEOMp  pad 32 px, reflect101        torch.nn.functional.pad, mode="reflect" (NCHW)
GEOMx  crop 1000 boxes to 64x64     torchvision.ops.roi_align(aligned=False, sampling_ratio=1)
                                    on the batch as float32 NCHW (made once, not timed)

GEOMf-, GEOMr-, GEOMc-<gray, nchw, f32, f16x4>: the same flip, rotate90 and constant pad
       of other layouts and types (8 frames 1080x1920 each): uint8 gray NHWC (1 channel),
       uint8 NCHW planes, float32 3 channels and float16 4 channels, next to torch's flip,
       rot90 + contiguous and F.pad of the same tensor

torch's pads run on an NCHW copy of the batch (their layout); every row reads and writes
the same bytes. roi_align averages bins where crop resizes (a different result, the usual
way to cut boxes out of a batch on the GPU), so only the time compares there. Each row is
printed with its share of the copy rate (the floor over the time), as the table gives it.
"""
from __future__ import annotations

N, H, W, C = 8, 1080, 1920, 3
PAD = 32
BOXES, CROP = 1000, 64


def run(bench):
    import numpy as np
    import torch
    import torch.nn.functional as F

    import cupyprep

    bench = _WithRate(bench)

    inputs = bench.rotating_inputs(
        lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    nchw = [x.permute(0, 3, 1, 2).contiguous() for x in inputs]
    frame = N * H * W * C

    # -- flip ---------------------------------------------------------------------------------
    out = torch.empty_like(inputs[0])
    bench.record("GEOMf", "cupyprep flip", lambda i: cupyprep.flip(inputs[i], "horizontal", out=out),
                 len(inputs), 2 * frame)
    bench.record("GEOMf", "torch.flip", lambda i: torch.flip(inputs[i], (2,)), len(inputs), 2 * frame,
                 baseline=True)
    _check("GEOMf", cupyprep.flip(inputs[0], "horizontal"), torch.flip(inputs[0], (2,)))

    # -- rotate90 -----------------------------------------------------------------------------
    out_r = torch.empty((N, W, H, C), dtype=torch.uint8, device="cuda")
    bench.record("GEOMr", "cupyprep rotate90", lambda i: cupyprep.rotate90(inputs[i], 1, out=out_r),
                 len(inputs), 2 * frame)
    bench.record("GEOMr", "torch.rot90 + contiguous",
                 lambda i: torch.rot90(inputs[i], 1, (1, 2)).contiguous(), len(inputs), 2 * frame,
                 baseline=True)
    _check("GEOMr", cupyprep.rotate90(inputs[0], 1), torch.rot90(inputs[0], 1, (1, 2)))

    # -- pad ----------------------------------------------------------------------------------
    padded = N * (H + 2 * PAD) * (W + 2 * PAD) * C
    out_p = torch.empty((N, H + 2 * PAD, W + 2 * PAD, C), dtype=torch.uint8, device="cuda")
    bench.record("GEOMc", "cupyprep pad constant",
                 lambda i: cupyprep.pad(inputs[i], PAD, value=114, out=out_p), len(inputs),
                 frame + padded)
    bench.record("GEOMc", "torch F.pad constant (NCHW)",
                 lambda i: F.pad(nchw[i], (PAD,) * 4, value=114), len(inputs), frame + padded,
                 baseline=True)
    _check("GEOMc", cupyprep.pad(inputs[0], PAD, value=114),
           F.pad(nchw[0], (PAD,) * 4, value=114).permute(0, 2, 3, 1))

    bench.record("GEOMp", "cupyprep pad reflect101",
                 lambda i: cupyprep.pad(inputs[i], PAD, border_mode="reflect101", out=out_p),
                 len(inputs), frame + padded)
    try:
        F.pad(nchw[0][:1], (PAD,) * 4, mode="reflect")
        reflect_src, label = nchw, "torch F.pad reflect (NCHW, uint8)"
    except (RuntimeError, NotImplementedError):  # builds without a uint8 reflection pad
        reflect_src, label = [x.float() for x in nchw], "torch F.pad reflect (NCHW, float32)"
    bench.record("GEOMp", label, lambda i: F.pad(reflect_src[i], (PAD,) * 4, mode="reflect"),
                 len(inputs), frame + padded, baseline=True)
    _check("GEOMp", cupyprep.pad(inputs[0], PAD, border_mode="reflect101"),
           F.pad(reflect_src[0], (PAD,) * 4, mode="reflect").permute(0, 2, 3, 1).to(torch.uint8))

    _other_layouts(bench, torch, F, cupyprep)

    # -- crop ---------------------------------------------------------------------------------
    rng = np.random.default_rng(0)
    size = rng.uniform(32, 400, (BOXES, 2))
    x1 = rng.uniform(0, W - size[:, 0])
    y1 = rng.uniform(0, H - size[:, 1])
    rows = np.stack([rng.integers(0, N, BOXES), x1, y1, x1 + size[:, 0], y1 + size[:, 1]], axis=1)
    rois = torch.from_numpy(rows.astype(np.float32)).cuda()
    out_x = torch.empty((BOXES, CROP, CROP, C), dtype=torch.uint8, device="cuda")
    crop_bytes = BOXES * CROP * CROP * C  # the crops written (what they read depends on the boxes)
    bench.record("GEOMx", "cupyprep crop, linear, uint8 NHWC",
                 lambda i: cupyprep.crop(inputs[i], rois, (CROP, CROP), out=out_x), len(inputs),
                 crop_bytes)
    try:
        from torchvision.ops import roi_align
    except ImportError:
        print("  GEOMx: torchvision is not installed; roi_align not timed")
        return
    features = [x.float() for x in nchw[:2]]
    bench.record("GEOMx", "torchvision roi_align (float32 NCHW, sampling_ratio=1)",
                 lambda i: roi_align(features[i % 2], rois, (CROP, CROP), 1.0, 1, False), 2,
                 crop_bytes, baseline=True)


# (workload suffix, label, one input set, layout); torch's image axes follow the layout
OTHER_LAYOUTS = (
    ("gray", "uint8 gray NHWC", lambda torch: torch.randint(0, 256, (N, H, W, 1), dtype=torch.uint8,
                                                            device="cuda"), "NHWC"),
    ("nchw", "uint8 NCHW", lambda torch: torch.randint(0, 256, (N, C, H, W), dtype=torch.uint8,
                                                       device="cuda"), "NCHW"),
    ("f32", "float32 NHWC", lambda torch: torch.rand((N, H, W, C), device="cuda"), "NHWC"),
    ("f16x4", "float16 4-channel NHWC",
     lambda torch: torch.rand((N, H, W, 4), device="cuda", dtype=torch.float16), "NHWC"),
)


def _other_layouts(bench, torch, F, cupyprep):
    for suffix, label, make, layout in OTHER_LAYOUTS:
        _other_layout(bench, torch, F, cupyprep, suffix, label, make, layout)
        torch.cuda.empty_cache()


def _other_layout(bench, torch, F, cupyprep, suffix, label, make, layout):
    """GEOMf-, GEOMr-, GEOMc-<suffix>: flip, rotate90 and constant pad of another layout."""
    inputs = bench.rotating_inputs(lambda: make(torch))
    nbytes = inputs[0].numel() * inputs[0].element_size()
    ay, ax = (2, 3) if layout == "NCHW" else (1, 2)
    out = torch.empty_like(inputs[0])
    bench.record(f"GEOMf-{suffix}", f"cupyprep flip, {label}",
                 lambda i: cupyprep.flip(inputs[i], "horizontal", layout=layout, out=out), len(inputs),
                 2 * nbytes)
    bench.record(f"GEOMf-{suffix}", f"torch.flip, {label}", lambda i: torch.flip(inputs[i], (ax,)),
                 len(inputs), 2 * nbytes, baseline=True)
    _check(f"GEOMf-{suffix}", cupyprep.flip(inputs[0], "horizontal", layout=layout),
           torch.flip(inputs[0], (ax,)))

    turned = torch.rot90(inputs[0], 1, (ay, ax)).contiguous()
    out_r = torch.empty_like(turned)
    bench.record(f"GEOMr-{suffix}", f"cupyprep rotate90, {label}",
                 lambda i: cupyprep.rotate90(inputs[i], 1, layout=layout, out=out_r), len(inputs),
                 2 * nbytes)
    bench.record(f"GEOMr-{suffix}", f"torch.rot90 + contiguous, {label}",
                 lambda i: torch.rot90(inputs[i], 1, (ay, ax)).contiguous(), len(inputs), 2 * nbytes,
                 baseline=True)
    _check(f"GEOMr-{suffix}", cupyprep.rotate90(inputs[0], 1, layout=layout), turned)

    # torch pads the last axes: (W, H) of NCHW; (C, W, H) of NHWC, C by nothing
    sides = (PAD,) * 4 if layout == "NCHW" else (0, 0) + (PAD,) * 4
    padded = F.pad(inputs[0], sides, value=7)
    out_p = torch.empty_like(padded)
    pad_bytes = nbytes + padded.numel() * padded.element_size()
    bench.record(f"GEOMc-{suffix}", f"cupyprep pad constant, {label}",
                 lambda i: cupyprep.pad(inputs[i], PAD, value=7, layout=layout, out=out_p), len(inputs),
                 pad_bytes)
    bench.record(f"GEOMc-{suffix}", f"torch F.pad constant, {label}",
                 lambda i: F.pad(inputs[i], sides, value=7), len(inputs), pad_bytes, baseline=True)
    _check(f"GEOMc-{suffix}", cupyprep.pad(inputs[0], PAD, value=7, layout=layout), padded)


class _WithRate:
    """The runner's bench, each recorded row printed with its share of the copy rate (the
    floor over the median, the table's "of copy rate"); everything else passes through."""

    def __init__(self, bench):
        self._bench = bench

    def record(self, *args, **kwargs):
        self._bench.record(*args, **kwargs)
        row = self._bench.rows[-1]
        print(f"    {row['workload']} {row['impl']}: {row['floor_ms'] / row['median_ms']:.0%} of copy rate "
              f"(floor {row['floor_ms']:.4f} ms)", flush=True)

    def __getattr__(self, name):
        return getattr(self._bench, name)


def _check(workload, ours, theirs):
    import torch

    torch.cuda.synchronize()
    print(f"  {workload} cupyprep == torch: {bool(torch.equal(ours, theirs.contiguous()))}")
