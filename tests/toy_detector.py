"""A stand-in detector for the integration tests and the Ray benchmark: a YOLOv5-shaped head
computed only with exactly rounded operations (max pooling, sums, and products by powers of
two or by values in [0, 1]: every step one IEEE operation), so the CPU and a GPU give the
same bits and a pipeline's detections can be compared exactly across devices.

Per cell of a ``stride`` grid over the (N, 3, H, W) input, with ``m`` the cell's per-channel
maximum: center ``((g + 0.5) + (m - 0.5)) * stride`` (channels 0 / 1 for x / y), width
``(1 + m2) * 2 * stride``, height ``(1 + m0) * 2 * stride``, objectness ``m1``, three class
scores ``(m0, m2, 1 - m1)``. Importable by Ray workers (tests/ is on their path)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


class GridDetector(torch.nn.Module):
    def __init__(self, stride=8):
        super().__init__()
        self.stride = stride

    def forward(self, x):
        s = float(self.stride)
        m = F.max_pool2d(x.float(), self.stride)  # (N, 3, gh, gw)
        n, _, gh, gw = m.shape
        gy = torch.arange(gh, device=x.device, dtype=torch.float32)[:, None].expand(gh, gw)
        gx = torch.arange(gw, device=x.device, dtype=torch.float32)[None, :].expand(gh, gw)
        m0, m1, m2 = m[:, 0], m[:, 1], m[:, 2]
        cx = ((gx + 0.5) + (m0 - 0.5)) * s
        cy = ((gy + 0.5) + (m1 - 0.5)) * s
        w = (m2 + 1.0) * (2 * s)
        h = (m0 + 1.0) * (2 * s)
        rows = torch.stack([cx, cy, w, h, m1, m0, m2, 1.0 - m1], dim=-1)  # (N, gh, gw, 8)
        return rows.reshape(n, gh * gw, 8)


def make_detector(stride=8):
    """The factory ``Detect`` calls in each actor."""
    return GridDetector(stride)
