"""W2: 256 images 480x640x3 uint8 -> 224x224 bilinear, ImageNet mean/std, NCHW float16."""
from __future__ import annotations

N, H, W, C = 256, 480, 640, 3
OUT = (224, 224)


def run(bench):
    import torch
    import torch.nn.functional as F

    import cupyprep

    inputs = bench.rotating_inputs(lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    mean = torch.tensor(cupyprep.IMAGENET_MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(cupyprep.IMAGENET_STD, device="cuda").view(1, 3, 1, 1)
    small = torch.empty((N,) + OUT + (C,), dtype=torch.uint8, device="cuda")
    out = torch.empty((N, C) + OUT, dtype=torch.float16, device="cuda")

    def ours(i):
        cupyprep.resize(inputs[i], OUT, out=small)
        cupyprep.normalize(small, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255,
                           layout="NCHW", dtype="float16", out=out)

    def torch_method(i):
        x = inputs[i].permute(0, 3, 1, 2).float()
        x = F.interpolate(x, size=OUT, mode="bilinear", align_corners=False, antialias=False)
        return ((x / 255 - mean) / std).half()

    def ours_fused(i):
        cupyprep.preprocess(inputs[i], OUT, mode="stretch", mean=cupyprep.IMAGENET_MEAN,
                            std=cupyprep.IMAGENET_STD, swap_rb=False, dtype="float16", out=out)

    floor_bytes = N * H * W * C + N * C * OUT[0] * OUT[1] * 2
    bench.record("W2", "cupyprep preprocess, stretch (1 launch)", ours_fused, len(inputs), floor_bytes)
    bench.record("W2", "cupyprep resize + normalize (2 launches)", ours, len(inputs), floor_bytes)
    bench.record("W2", "torch interpolate + normalize", torch_method, len(inputs), floor_bytes,
                 baseline=True)
