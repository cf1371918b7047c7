"""BOX: the element-wise box ops at detection-head sizes, next to torchvision / torch
doing the same on the same tensors (not a DESIGN workload; these calls are small, so the
eager column, which counts the host's time per call, is the one that matters):

- box_iou of 1000 x 1000 boxes (torchvision.ops.box_iou);
- box_convert cxcywh -> xyxy of 8 x 8400 boxes (torchvision.ops.box_convert);
- decode_yolo of YOLOv8's 8 x 84 x 8400 output, transposed to rows (torch: slices, two
  products, a concatenation, and the scores made contiguous), and of YOLOv5's rows
  8 x 8400 x 85 with objectness (torch: the same, scores times objectness);
- decode_boxes of RetinaFace at 640 x 640 (8 x 16800 anchors; torch: the same formula).
"""
from __future__ import annotations

B, N, C = 8, 8400, 80


def _boxes(g, n):
    import torch

    xy = torch.rand((n, 2), generator=g, device="cuda") * 1000
    return torch.cat([xy, xy + torch.rand((n, 2), generator=g, device="cuda") * 100 + 10], dim=1)


def run(bench):
    import torch
    import torchvision

    import cupyprep

    g = torch.Generator(device="cuda").manual_seed(0)
    sets = range(4)
    a = [_boxes(g, 1000) for _ in sets]
    b = [_boxes(g, 1000) for _ in sets]
    iou_bytes = 1000 * 1000 * 4
    bench.record("BOX iou 1000x1000", "cupyprep box_iou", lambda i: cupyprep.box_iou(a[i], b[i]), 4, iou_bytes)
    bench.record("BOX iou 1000x1000", "torchvision box_iou", lambda i: torchvision.ops.box_iou(a[i], b[i]), 4,
                 iou_bytes, baseline=True)

    cxcywh = [torch.rand((B, N, 4), generator=g, device="cuda") * 600 for _ in sets]
    conv_bytes = B * N * 4 * 4 * 2
    bench.record("BOX convert 8x8400", "cupyprep box_convert",
                 lambda i: cupyprep.box_convert(cxcywh[i], "cxcywh", "xyxy"), 4, conv_bytes)
    bench.record("BOX convert 8x8400", "torchvision box_convert",
                 lambda i: torchvision.ops.box_convert(cxcywh[i], "cxcywh", "xyxy"), 4, conv_bytes, baseline=True)

    heads = [torch.rand((B, 4 + C, N), generator=g, device="cuda") for _ in sets]
    yolo_bytes = B * N * (4 + C) * 4 * 2

    def torch_yolo(i):
        p = heads[i].transpose(1, 2)
        xy, half = p[..., :2], p[..., 2:4] * 0.5
        return torch.cat([xy - half, xy + half], dim=-1), p[..., 4:].contiguous()

    bench.record("BOX decode_yolo 8x8400x84", "cupyprep decode_yolo",
                 lambda i: cupyprep.decode_yolo(heads[i].transpose(1, 2), objectness=False), 4, yolo_bytes)
    bench.record("BOX decode_yolo 8x8400x84", "torch ops", torch_yolo, 4, yolo_bytes, baseline=True)

    rows = [torch.rand((B, N, 5 + C), generator=g, device="cuda") for _ in sets]
    v5_bytes = B * N * (5 + C) * 4 + B * N * (4 + C) * 4

    def torch_yolo_v5(i):
        p = rows[i]
        xy, half = p[..., :2], p[..., 2:4] * 0.5
        return torch.cat([xy - half, xy + half], dim=-1), p[..., 5:] * p[..., 4:5]

    bench.record("BOX decode_yolo 8x8400x85 rows", "cupyprep decode_yolo",
                 lambda i: cupyprep.decode_yolo(rows[i]), 4, v5_bytes)
    bench.record("BOX decode_yolo 8x8400x85 rows", "torch ops", torch_yolo_v5, 4, v5_bytes, baseline=True)

    priors = torch.from_numpy(cupyprep.prior_boxes((640, 640), [[16, 32], [64, 128], [256, 512]],
                                                   [8, 16, 32])).cuda()
    P = priors.shape[0]
    loc = [torch.randn((B, P, 4), generator=g, device="cuda") for _ in sets]
    dec_bytes = B * P * 4 * 4 * 2

    def torch_decode(i):
        v0, v1 = 0.1, 0.2
        l = loc[i]
        c = priors[:, :2] + l[..., :2] * v0 * priors[:, 2:]
        wh = priors[:, 2:] * torch.exp(l[..., 2:] * v1)
        x1y1 = c - wh / 2
        return torch.cat([x1y1, x1y1 + wh], dim=-1)

    bench.record("BOX decode_boxes 8x16800", "cupyprep decode_boxes",
                 lambda i: cupyprep.decode_boxes(loc[i], priors), 4, dec_bytes)
    bench.record("BOX decode_boxes 8x16800", "torch ops", torch_decode, 4, dec_bytes, baseline=True)
