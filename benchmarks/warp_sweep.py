"""Developer tool for the warp kernels: W5 through each kernel variant.

    python -m benchmarks.warp_sweep          # time W5 (and a translation) per variant
    python -m benchmarks.warp_sweep --once   # run W5 once per variant (for ncu)

    ncu --clock-control none -k regex:cupyprep_warp python -m benchmarks.warp_sweep --once

Variants: the generic strided kernel with one-row warps (dense variants off) and the dense
one at 1, 2 and 4 output pixels per thread, each with a few warp tiles (block_x pixel
groups by 32 / block_x rows) and 4 or 2 rows per thread. Every variant's output is
checked against the generic kernel's, byte for byte.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

import cupyprep
from cupyprep import geometry

from ._timing import time_cuda

N, H, W, C = 64, 512, 512, 3
INPUT_SETS = 6  # 6 x 50 MB: one pass over the inputs exceeds the L2 several times over


def workloads():
    inputs = [torch.randint(0, 256, (N, H, W, C), dtype=torch.uint8, device="cuda")
              for _ in range(INPUT_SETS)]
    out = torch.empty((N, H, W, C), dtype=torch.uint8, device="cuda")
    angles = np.linspace(-170, 170, N)
    mats = geometry.get_rotation_matrix_2d(np.tile([(W - 1) / 2, (H - 1) / 2], (N, 1)), angles,
                                           np.full(N, 0.9))
    rotate = torch.from_numpy(geometry.invert_affine_transform(mats)).cuda()
    shift = np.zeros((N, 2, 3))
    shift[:, 0, 0] = shift[:, 1, 1] = 1.0
    shift[:, :, 2] = np.stack([np.linspace(-20.3, 20.7, N), np.linspace(11.6, -9.4, N)], axis=1)
    shift = torch.from_numpy(shift).cuda()

    def run(m):
        return lambda i: cupyprep.warp_affine(inputs[i], m, (H, W), inverse_map=True, out=out)

    return {"W5": run(rotate), "W5 translation": run(shift)}, out


def variants():
    """(label, dense, pixels per thread, threads of a block along x, rows per thread). A
    warp covers block_x pixel groups by 32 / block_x rows."""
    yield "generic (one-row warps), rows 4", False, 1, 32, 4
    for pixels, tiles in ((1, (32, 16, 8)), (2, (16, 8, 4)), (4, (8, 4, 2))):
        for block_x in tiles:
            for rows in (4, 2):
                yield (f"dense, {pixels} px, block {block_x}x{128 // block_x}, rows {rows}",
                       True, pixels, block_x, rows)


def set_variant(dense, pixels, block_x, rows):
    geometry._WARP_DENSE = dense
    geometry._WARP_PIXELS_PER_THREAD = pixels
    geometry._WARP_BLOCK_X = block_x
    geometry._WARP_ROWS_PER_THREAD = rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warp_sweep")
    parser.add_argument("--once", action="store_true")
    args = parser.parse_args(argv)
    runs, out = workloads()
    if args.once:
        for _, *setting in variants():
            set_variant(*setting)
            runs["W5"](0)
        torch.cuda.synchronize()
        return
    reference = {}
    set_variant(False, 1, 32, 4)
    for name, fn in runs.items():
        fn(0)
        reference[name] = out.clone()
    print("| variant | W5 ms | W5 translation ms | equal to generic |")
    print("|----|----|----|----|")
    for label, *setting in variants():
        set_variant(*setting)
        t, same = {}, True
        for name, fn in runs.items():
            fn(0)
            same = same and torch.equal(out, reference[name])
            t[name] = time_cuda(fn, INPUT_SETS, warmup=5, repeat=50)["median_ms"]
        print(f"| {label} | {t['W5']:.4f} | {t['W5 translation']:.4f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
