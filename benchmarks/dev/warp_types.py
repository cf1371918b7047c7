"""W5's rotations through every kind of warp: each element type, 1, 3 and 4 channels,
nearest, linear and cubic, and a few borders.

    python -m benchmarks.dev.warp_types [--json PATH]

W5's work (64 images of 512 x 512, a rotation each at scale 0.9, `warp_affine` with the
inverse matrices on the device, into one output batch) with the source's element type,
channel count, interpolation and border changed one at a time from W5's. Device time per
call (CUDA-event median of graph replays, inputs rotated over enough copies that they do
not stay in the L2 cache), the memory-traffic floor (each source and output byte once, at
the measured copy rate) and the fraction of it reached. Timing only: the kernels' results
are pinned to cv2 by the test suite.
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch

import cupyprep

from .._timing import copy_bandwidth, time_cuda

N, H, W = 64, 512, 512
L2_BYTES = 3 * 60 << 20  # inputs cycled over at least this many bytes

TYPES = {"uint8": torch.uint8, "uint16": torch.uint16, "float16": torch.float16,
         "float32": torch.float32}


def cases():
    """(element type, channels, interpolation, border), W5's first."""
    yield "uint8", 3, "linear", "constant"
    for t in TYPES:
        for c in (1, 3, 4):
            for interpolation in ("nearest", "linear", "cubic"):
                if (t, c, interpolation) != ("uint8", 3, "linear"):
                    yield t, c, interpolation, "constant"
    for t in ("uint8", "float32"):
        for border in ("replicate", "reflect101"):
            yield t, 3, "linear", border


def source(dtype, c, gen):
    shape = (N, H, W, c)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, device="cuda", generator=gen)
    if dtype == torch.uint16:
        return torch.randint(0, 65536, shape, dtype=torch.int32, device="cuda",
                             generator=gen).to(dtype)
    return torch.rand(shape, device="cuda", generator=gen).mul_(255).to(dtype)


def main():
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dev.warp_types", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    angles = np.linspace(-170, 170, N)
    mats = cupyprep.get_rotation_matrix_2d(np.tile([(W - 1) / 2, (H - 1) / 2], (N, 1)), angles,
                                           np.full(N, 0.9))
    inv = torch.from_numpy(cupyprep.invert_affine_transform(mats)).cuda()
    rate = copy_bandwidth()
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}; copy rate {rate / 1e12:.2f} TB/s "
          "(read + write)", flush=True)
    rows = []
    for t, c, interpolation, border in cases():
        dtype = TYPES[t]
        nbytes = N * H * W * c * torch.empty((), dtype=dtype).element_size()
        sets = max(2, math.ceil(L2_BYTES / nbytes))
        inputs = [source(dtype, c, gen) for _ in range(sets)]
        out = torch.empty_like(inputs[0])

        def fn(i, inputs=inputs, out=out, interpolation=interpolation, border=border):
            return cupyprep.warp_affine(inputs[i], inv, (H, W), inverse_map=True,
                                        interpolation=interpolation, border_mode=border, out=out)

        ms = time_cuda(fn, sets)["median_ms"]
        floor = 2 * nbytes / rate * 1e3
        rows.append(dict(type=t, channels=c, interpolation=interpolation, border=border,
                         ms=ms, floor_ms=floor))
        print(f"  {t} x{c} {interpolation} {border}: {ms:.4f} ms (floor {floor:.4f})", flush=True)
        del inputs, out
    print("\n| element type | channels | interpolation | border | device ms | floor ms | of floor |")
    print("|----|----|----|----|----|----|----|")
    for r in rows:
        print(f"| {r['type']} | {r['channels']} | {r['interpolation']} | {r['border']} | "
              f"{r['ms']:.4f} | {r['floor_ms']:.4f} | {r['floor_ms'] / r['ms']:.0%} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), copy_rate=rate, rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
