"""W1: 32 frames 1080x1920x3 uint8 BGR -> letterbox 640x640, pad 114, RGB, /255, NCHW
float32; also with area interpolation (W1a), and as a ragged list of 32 frames of mixed
sizes around 1080p (W1r)."""
from __future__ import annotations

N, H, W, C = 32, 1080, 1920, 3
SIZE = (640, 640)


def run(bench):
    import numpy as np
    import torch
    import torch.nn.functional as F

    import cupyprep

    inputs = bench.rotating_inputs(lambda: torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda"))
    out = torch.empty((N, C) + SIZE, dtype=torch.float32, device="cuda")
    nh, nw = 360, 640  # letterbox of 1080x1920 into 640x640: 140 rows of padding above and below

    def ours(i):
        cupyprep.preprocess(inputs[i], SIZE, out=out)

    def torch_method(i):
        x = inputs[i].permute(0, 3, 1, 2).flip(1).float()
        x = F.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False, antialias=False)
        x = F.pad(x, (0, 0, 140, 140), value=114.0)
        return x / 255

    # bilinear at exactly 1/3 samples source row 3d + 1 with weight 1 and row 3d + 2 with
    # weight 0: one source row in three has to be read
    rows_read = nh
    floor_bytes = N * rows_read * W * C + N * C * SIZE[0] * SIZE[1] * 4
    bench.record("W1", "cupyprep preprocess (1 launch)", ours, len(inputs), floor_bytes)
    bench.record("W1", "torch interpolate + pad + div", torch_method, len(inputs), floor_bytes, baseline=True)

    # area (YOLOv5's interpolation for shrinking): 1080 x 1920 to 360 x 640 is a factor of 3
    # on both axes, where OpenCV's area is a cell mean (fused into the preprocess kernel)
    # and torch's "area" (adaptive average pooling) the same cells; every source pixel is
    # read
    def ours_area(i):
        cupyprep.preprocess(inputs[i], SIZE, interpolation="area", out=out)

    def torch_area(i):
        x = inputs[i].permute(0, 3, 1, 2).flip(1).float()
        x = F.interpolate(x, size=(nh, nw), mode="area")
        x = F.pad(x, (0, 0, 140, 140), value=114.0)
        return x / 255

    floor_area = N * H * W * C + N * C * SIZE[0] * SIZE[1] * 4
    bench.record("W1a", "cupyprep preprocess, area (1 launch: a whole factor, fused)", ours_area,
                 len(inputs), floor_area)
    bench.record("W1a", "torch interpolate (area) + pad + div", torch_area, len(inputs), floor_area,
                 baseline=True)

    # ragged: 32 frames of mixed sizes around 1080p, one launch
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in zip(rng.integers(960, 1200, N), rng.integers(1700, 2100, N))]
    ragged_sets = [[torch.randint(0, 256, s + (C,), dtype=torch.uint8, device="cuda") for s in shapes]
                   for _ in range(len(inputs))]

    def ours_ragged(i):
        cupyprep.preprocess(ragged_sets[i], SIZE, out=out)

    _, meta = cupyprep.preprocess(ragged_sets[0], SIZE, out=out)
    floor_ragged = int(sum(min(2 * int(nh_), h) * w * C for (h, w), nh_ in zip(shapes, meta.resized_size[:, 0]))) \
        + N * C * SIZE[0] * SIZE[1] * 4
    # up to 64 images go to the kernel by value: the call can be captured like a batch's
    bench.record("W1r", "cupyprep preprocess, ragged list (1 launch)", ours_ragged, len(ragged_sets), floor_ragged)
