"""The staged uint8 linear warp (a tile's source box in shared memory) against the dense
kernel, on W5 and inputs around it.

    python -m benchmarks.warp_staged [--rounds N] [--json PATH] [--profile]

Each input runs through every kernel (geometry._WARP_STAGED off and on) in one process,
alternating for ``--rounds`` rounds: device time per call (CUDA-event median of graph
replays, inputs rotated over more bytes than the L2 holds), the memory-traffic floor, and
whether the outputs are byte for byte equal (W5's also against cv2.warpAffine).
``--profile``: only a few staged W5 calls (the default settings), for ncu.
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch

import cupyprep
from cupyprep import geometry

from ._timing import copy_bandwidth, time_cuda

N, H, W = 64, 512, 512
L2_BYTES = 3 * 60 << 20
# each kernel timed: geometry._WARP_STAGED
KINDS = {"dense": False, "staged": True}


def configure(staged):
    geometry._WARP_STAGED = staged


def inverse_matrices(angles, scale, shift=(0.0, 0.0)):
    mats = geometry.get_rotation_matrix_2d(np.tile([(W - 1) / 2, (H - 1) / 2], (N, 1)), angles,
                                           np.full(N, scale))
    mats[:, :, 2] += shift
    return torch.from_numpy(geometry.invert_affine_transform(mats)).cuda(), mats


def cases():
    """(name, channels, dst->src matrices on the device, src->dst matrices, as a list)."""
    w5 = np.linspace(-170, 170, N)
    yield "W5", 3, *inverse_matrices(w5, 0.9), False
    yield "W5r (a list)", 3, *inverse_matrices(w5, 0.9), True
    yield "W5, 4 channels", 4, *inverse_matrices(w5, 0.9), False
    yield "translation", 3, *inverse_matrices(np.zeros(N), 1.0, (0.37, -0.61)), False
    yield "rotations, scale 1.6", 3, *inverse_matrices(w5, 1.6), False
    yield "rotations, scale 0.5", 3, *inverse_matrices(w5, 0.5), False
    yield "rotations, scale 0.2", 3, *inverse_matrices(w5, 0.2), False
    for angle in (0.0, 45.0, 90.0):
        yield f"all at {angle:g} degrees", 3, *inverse_matrices(np.full(N, angle), 0.9), False


def workload(c, inv, gen, listed=False):
    """Input sets of N images H x W x c (enough to pass the L2; as lists of images where
    `listed`) and ``fn(i)``, which warps set i by the inverse matrices `inv` into ``out``:
    ``(fn, sets, out, inputs)``."""
    sets = max(2, math.ceil(L2_BYTES / (N * H * W * c)))
    inputs = [torch.randint(0, 256, (N, H, W, c), dtype=torch.uint8, device="cuda", generator=gen)
              for _ in range(sets)]
    if listed:
        inputs = [list(x) for x in inputs]
    out = torch.empty((N, H, W, c), dtype=torch.uint8, device="cuda")

    def fn(i):
        cupyprep.warp_affine(inputs[i], inv, (H, W), inverse_map=True, out=out)

    return fn, sets, out, inputs


def alternate(fn, sets, out, setups, rounds):
    """``fn`` timed after each of ``setups`` (name: a callable that selects the kernel), in
    turn for `rounds` rounds: ``(times, outputs)``, each by name (an output: set 0's, made
    into `out` poisoned first)."""
    times = {k: [] for k in setups}
    results = {}
    for _ in range(rounds):
        for name, setup in setups.items():
            setup()
            times[name].append(time_cuda(fn, sets)["median_ms"])
            out.fill_(7)
            fn(0)
            torch.cuda.synchronize()
            results[name] = out.clone()
    return times, results


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warp_staged")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    gen = torch.Generator(device="cuda").manual_seed(0)
    if args.profile:
        geometry._WARP_STAGED = True
        inv, _ = inverse_matrices(np.linspace(-170, 170, N), 0.9)
        src = torch.randint(0, 256, (N, H, W, 3), dtype=torch.uint8, device="cuda", generator=gen)
        for _ in range(3):
            cupyprep.warp_affine(src, inv, (H, W), inverse_map=True)
        torch.cuda.synchronize()
        return
    import cv2

    rate = copy_bandwidth()
    print(f"device: {torch.cuda.get_device_name()}; copy rate {rate / 1e12:.2f} TB/s", flush=True)
    rows = []
    for name, c, inv, mats, listed in cases():
        fn, sets, out, inputs = workload(c, inv, gen, listed)
        nbytes = N * H * W * c
        default = geometry._WARP_STAGED
        times, results = alternate(fn, sets, out, {k: (lambda s=s: configure(s)) for k, s in KINDS.items()},
                                   args.rounds)
        configure(default)
        equal = all(torch.equal(results[k], results["dense"]) for k in KINDS)
        cv2_equal = ""
        if name.startswith("W5"):
            host = [x.cpu().numpy() for x in inputs[0]]
            got = results["staged"].cpu().numpy()
            cv2_equal = all(np.array_equal(got[n], cv2.warpAffine(host[n], mats[n], (W, H),
                                                                  flags=cv2.INTER_LINEAR))
                            for n in range(N))
        floor = 2 * nbytes / rate * 1e3
        row = dict(case=name, channels=c, floor_ms=floor, outputs_equal=equal, cv2_equal=cv2_equal,
                   **{f"{k} ms": v for k, v in times.items()})
        rows.append(row)
        print(f"  {name}: " + ", ".join(f"{k} {min(v):.4f}-{max(v):.4f}" for k, v in times.items())
              + f"; floor {floor:.4f}; equal {equal} {cv2_equal}", flush=True)
        del inputs, out, results
    print("\n| input | " + " | ".join(f"{k} ms" for k in KINDS) + " | floor ms | outputs equal |")
    print("|----|" + "----|" * len(KINDS) + "----|----|")
    for r in rows:
        eq = "yes" if r["outputs_equal"] else "NO"
        if r["cv2_equal"] != "":
            eq += ", = cv2" if r["cv2_equal"] else ", NOT cv2"
        cells = " | ".join(f"{min(r[k + ' ms']):.4f}-{max(r[k + ' ms']):.4f}" for k in KINDS)
        print(f"| {r['case']} | {cells} | {r['floor_ms']:.4f} | {eq} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), copy_rate=rate, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
