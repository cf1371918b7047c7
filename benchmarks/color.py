"""COLOR: color conversions and photometric augmentation on 8 frames 1080x1920x3 uint8.

COLOR-hsv: cvt_color "bgr2hsv" and "hsv2bgr" next to the same conversions written as torch
tensor formulas (float32, OpenCV's conventions: H in [0, 180)). COLOR-jit: color_jitter
(brightness, contrast, saturation 0.4, hue 0.1; a factor set and an order per image) next
to torchvision.transforms.v2.ColorJitter on the same batch (NCHW, one factor set a call),
and hue alone next to torchvision's adjust_hue. COLOR-yolo: hsv_gain (Ultralytics' HSV
augmentation) on its own. Graph replay and eager times; torchvision's ColorJitter draws its
factors on the host, so it is timed eagerly.
"""
from __future__ import annotations

N, H, W, C = 8, 1080, 1920, 3


def torch_bgr2hsv(x):
    """OpenCV's BGR -> HSV (uint8, H in [0, 180)) as torch float formulas."""
    import torch

    f = x.float()
    b, g, r = f.unbind(-1)
    v, _ = f.max(-1)
    m, _ = f.min(-1)
    d = v - m
    s = torch.where(v > 0, d * 255 / v.clamp(min=1), torch.zeros_like(v))
    dd = d.clamp(min=1e-6)
    h = torch.where(v == r, (g - b) / dd, torch.where(v == g, 2 + (b - r) / dd, 4 + (r - g) / dd)) * 30
    h = torch.where(d > 0, h, torch.zeros_like(h))
    h = torch.where(h < 0, h + 180, h)
    return torch.stack([h, s, v], -1).round_().clamp_(0, 255).to(torch.uint8)


def torch_hsv2bgr(x, pick):
    """OpenCV's HSV (uint8, H in [0, 180)) -> BGR as torch float formulas; ``pick``: the
    sector table (hsv_sectors) on the device."""
    import torch

    f = x.float()
    h, s, v = f[..., 0] / 30, f[..., 1] / 255, f[..., 2] / 255
    i = torch.floor(h)
    fr = h - i
    i = i.long() % 6
    p, q, t = v * (1 - s), v * (1 - s * fr), v * (1 - s * (1 - fr))
    tab = torch.stack([v, p, q, t], -1)
    return (tab.gather(-1, pick[i]) * 255).round_().clamp_(0, 255).to(torch.uint8)


def hsv_sectors(device):
    """Which of (v, p, q, t) is B, G, R in each sector (made before a capture: no upload)."""
    import torch

    return torch.tensor([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]], device=device)


def run(bench):
    import numpy as np
    import torch

    import cupyprep

    cv2 = __import__("cv2")
    inputs = bench.rotating_inputs(lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    hsv_inputs = [cupyprep.cvt_color(x, "bgr2hsv") for x in inputs]
    out = torch.empty((N, H, W, C), dtype=torch.uint8, device="cuda")
    gen = torch.cuda.default_generators[torch.cuda.current_device()]  # known to every graph
    floor_bytes = 2 * N * H * W * C
    pick = hsv_sectors("cuda")

    bench.record("COLOR-hsv", "cupyprep cvt_color bgr2hsv", lambda i: cupyprep.cvt_color(inputs[i], "bgr2hsv", out=out),
                 len(inputs), floor_bytes)
    bench.record("COLOR-hsv", "torch formula bgr2hsv (float)", lambda i: torch_bgr2hsv(inputs[i]), len(inputs),
                 floor_bytes, baseline=True)
    bench.record("COLOR-hsv2", "cupyprep cvt_color hsv2bgr",
                 lambda i: cupyprep.cvt_color(hsv_inputs[i], "hsv2bgr", out=out), len(inputs), floor_bytes)
    bench.record("COLOR-hsv2", "torch formula hsv2bgr (float)", lambda i: torch_hsv2bgr(hsv_inputs[i], pick), len(inputs),
                 floor_bytes, baseline=True)
    # 1920 columns are whole vector blocks for any OpenCV build: equal to cv2 bit for bit
    frame = inputs[0][0].cpu().numpy()
    same = np.array_equal(cupyprep.cvt_color(inputs[0][0], "bgr2hsv").cpu().numpy(),
                          cv2.cvtColor(frame, cv2.COLOR_BGR2HSV))
    hsv = cv2.cvtColor(frame, cv2.COLOR_BGR2HSV)
    same_back = np.array_equal(cupyprep.cvt_color(torch.from_numpy(hsv).cuda(), "hsv2bgr").cpu().numpy(),
                               cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR))
    print(f"  COLOR-hsv cupyprep == cv2.cvtColor: bgr2hsv {same}, hsv2bgr {same_back}")

    def jitter(i):
        cupyprep.color_jitter(inputs[i], 0.4, 0.4, 0.4, 0.1, generator=gen, out=out)

    def hue_only(i):
        cupyprep.color_jitter(inputs[i], hue=0.1, generator=gen, out=out)

    bench.record("COLOR-jit", "cupyprep color_jitter (per-image factors and order)", jitter, len(inputs),
                 floor_bytes * 4)
    bench.record("COLOR-hue", "cupyprep color_jitter, hue only", hue_only, len(inputs), floor_bytes)
    try:
        from torchvision.transforms import v2
        from torchvision.transforms.v2 import functional as F
    except ImportError:
        print("  COLOR-jit: torchvision not installed, no baseline")
    else:
        nchw = [x.permute(0, 3, 1, 2) for x in inputs]
        tv_jitter = v2.ColorJitter(0.4, 0.4, 0.4, 0.1)
        bench.record("COLOR-jit", "torchvision v2.ColorJitter (one factor set a call)", lambda i: tv_jitter(nchw[i]),
                     len(inputs), floor_bytes * 4, baseline=True, capture=False)
        bench.record("COLOR-hue", "torchvision adjust_hue", lambda i: F.adjust_hue(nchw[i], 0.1), len(inputs),
                     floor_bytes, baseline=True)
    bench.record("COLOR-yolo", "cupyprep hsv_gain (Ultralytics augment_hsv)",
                 lambda i: cupyprep.hsv_gain(inputs[i], generator=gen, out=out), len(inputs), floor_bytes)
