"""W4: roi_align, features 8x256x200x272 float32, 1000 rois, 7x7, scale 0.25, sampling 2,
aligned, next to torchvision.ops.roi_align."""
from __future__ import annotations

N, C, H, W = 8, 256, 200, 272
K = 1000
OUT = (7, 7)


def make_rois(seed):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    xy = torch.rand((K, 2), generator=g, device="cuda") * torch.tensor([W * 4.0, H * 4.0], device="cuda")
    wh = torch.rand((K, 2), generator=g, device="cuda") * 256 + 16
    image = torch.randint(0, N, (K, 1), generator=g, device="cuda").float()
    return torch.cat([image, xy, xy + wh], dim=1)


def run(bench):
    import torch
    import torchvision

    import cupyprep

    feats = bench.rotating_inputs(lambda: torch.randn((N, C, H, W), device="cuda"))
    rois = [make_rois(i) for i in range(len(feats))]
    out_bytes = K * C * OUT[0] * OUT[1] * 4
    # every output reads up to 4 x 4 samples x 4 corners; the floor counts the output only
    bench.record("W4", "cupyprep roi_align",
                 lambda i: cupyprep.roi_align(feats[i], rois[i], OUT, 0.25, 2, True), len(feats), out_bytes)
    bench.record("W4", "torchvision roi_align",
                 lambda i: torchvision.ops.roi_align(feats[i], rois[i], OUT, 0.25, 2, True), len(feats),
                 out_bytes, baseline=True)
