"""FILT: 8 frames 1080x1920x3 uint8. FILT-aa: antialiased resize to 224x224 (bilinear);
FILT-g5: gaussian_blur 5x5 (sigma 1.5, reflect101); FILT-b5: box_filter 5x5 (mean,
reflect101). Baselines: torchvision.transforms.v2.functional.resize(antialias=True) and
gaussian_blur, a depthwise torch conv2d for the box."""
from __future__ import annotations

N, H, W, C = 8, 1080, 1920, 3
OUT = (224, 224)
K, SIGMA = 5, 1.5


def _torchvision():
    try:
        from torchvision.transforms.v2 import functional as F

        return F
    except ImportError:
        return None


def run(bench):
    import torch
    import torch.nn.functional as tF

    import cupyprep

    inputs = bench.rotating_inputs(lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    small = torch.empty((N,) + OUT + (C,), dtype=torch.uint8, device="cuda")
    full = torch.empty((N, H, W, C), dtype=torch.uint8, device="cuda")
    tv = _torchvision()

    def ours_aa(i):
        cupyprep.resize(inputs[i], OUT, antialias=True, layout="NHWC", out=small)

    def theirs_aa(i):
        x = inputs[i].permute(0, 3, 1, 2)  # NCHW view of the NHWC frames, as torchvision takes
        if tv is not None:
            return tv.resize(x, list(OUT), antialias=True)
        # torchvision's recipe on a CUDA tensor: float32, interpolate, round, uint8
        y = tF.interpolate(x.float(), size=OUT, mode="bilinear", align_corners=False, antialias=True)
        return y.round_().to(torch.uint8)

    def ours_gauss(i):
        cupyprep.gaussian_blur(inputs[i], K, SIGMA, layout="NHWC", out=full)

    def theirs_gauss(i):
        x = inputs[i].permute(0, 3, 1, 2)
        if tv is not None:
            return tv.gaussian_blur(x, [K, K], [SIGMA, SIGMA])
        return None

    box_weight = torch.full((C, 1, K, K), 1.0 / (K * K), device="cuda")

    def ours_box(i):
        cupyprep.box_filter(inputs[i], K, layout="NHWC", out=full)

    def theirs_box(i):
        x = inputs[i].permute(0, 3, 1, 2).float()
        x = tF.pad(x, (K // 2,) * 4, mode="reflect")  # torch's reflect is OpenCV's reflect101
        return tF.conv2d(x, box_weight, groups=C).round_().to(torch.uint8)

    frames = N * H * W * C
    bench.record("FILT-aa", "cupyprep resize(antialias=True) (2 launches)", ours_aa, len(inputs),
                 frames + N * OUT[0] * OUT[1] * C)
    name = "torchvision resize(antialias=True)" if tv is not None else "torch interpolate(antialias=True)"
    bench.record("FILT-aa", name, theirs_aa, len(inputs), frames + N * OUT[0] * OUT[1] * C, baseline=True)
    bench.record("FILT-g5", "cupyprep gaussian_blur 5x5", ours_gauss, len(inputs), 2 * frames)
    if tv is not None:
        bench.record("FILT-g5", "torchvision gaussian_blur 5x5", theirs_gauss, len(inputs), 2 * frames,
                     baseline=True)
    bench.record("FILT-b5", "cupyprep box_filter 5x5", ours_box, len(inputs), 2 * frames)
    bench.record("FILT-b5", "torch pad + depthwise conv2d 5x5", theirs_box, len(inputs), 2 * frames,
                 baseline=True)
