"""Developer tools for the fused preprocessing kernel.

    python -m benchmarks.dev.profile            # run W1 / W2 a few times (for ncu)
    python -m benchmarks.dev.profile --sweep    # time launch shapes (threads along x, rows per thread)

    ncu --clock-control none -k regex:cupyprep_preprocess python -m benchmarks.dev.profile
"""
from __future__ import annotations

import argparse
import dataclasses

import torch

import cupyprep
from cupyprep._specs import preprocess as preprocess_spec

from .._timing import time_cuda



def workloads():
    w1 = torch.randint(0, 256, (32, 1080, 1920, 3), dtype=torch.uint8, device="cuda")
    w2 = torch.randint(0, 256, (256, 480, 640, 3), dtype=torch.uint8, device="cuda")
    out1 = torch.empty((32, 3, 640, 640), device="cuda")
    out2 = torch.empty((256, 3, 224, 224), dtype=torch.float16, device="cuda")
    sizes = torch.randint(0, 200, (32, 2), generator=torch.Generator().manual_seed(0))
    ragged = [torch.randint(0, 256, (960 + int(h), 1700 + 2 * int(w), 3), dtype=torch.uint8, device="cuda")
              for h, w in sizes]
    return {
        "W1r": lambda i: cupyprep.preprocess(ragged, (640, 640), out=out1),
        "W1": lambda i: cupyprep.preprocess(w1, (640, 640), out=out1),
        "W2": lambda i: cupyprep.preprocess(w2, (224, 224), mode="stretch", mean=cupyprep.IMAGENET_MEAN,
                                            std=cupyprep.IMAGENET_STD, swap_rb=False, dtype="float16",
                                            out=out2),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dev.profile")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args(argv)
    runs = workloads()
    if not args.sweep:
        for _ in range(3):
            for fn in runs.values():
                fn(0)
        torch.cuda.synchronize()
        return
    del runs["W1r"]  # the sweep tabulates W1 and W2
    print("| columns per thread | block_x | rows | W1 ms | W2 ms |")
    print("|----|----|----|----|----|")
    for xpt in (1, 2, 4):
        for block_x, rows in ((128, 4), (64, 4), (128, 1), (128, 8)):
            # x_per_thread is a template argument: the sweep compiles those variants
            preprocess_spec.SPEC = dataclasses.replace(preprocess_spec.SPEC, x_per_thread=xpt,
                                                       block_x=block_x, rows_per_block=rows)
            t = {name: time_cuda(fn, 1, warmup=5, repeat=50)["median_ms"] for name, fn in runs.items()}
            print(f"| {xpt} | {block_x} | {rows} | {t['W1']:.4f} | {t['W2']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
