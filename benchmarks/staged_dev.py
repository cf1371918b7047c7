"""Versions of the staged uint8 warp (kernels/warp.cu), timed side by side.

    python -m benchmarks.staged_dev [--source NAME=PATH ...] [--define NAME=MACRO ...]
                                    [--set NAME=ATTR=VALUE[,ATTR=VALUE...] ...]
                                    [--variants current,NAME,...] [--rounds N] [--trace]

A version is kernels/warp.cu as it is ("current"), another source file of it (``--source``:
a copy with its includes inlined, as cupyprep._kernels.read_source returns it; an earlier
revision's kernel must take the same template arguments), or either built with a
preprocessor definition (``--define``), each with settings of cupyprep.geometry
(``--set``, say ``_STAGED_GROUP=1``; ``launch=tiles``: the grid of kernels before the work
split, a block a tile (x, y) of an image (z), for sources from before it). All run in one
process on W5 and inputs around it,
alternating for ``--rounds`` rounds (CUDA-event medians of graph replays, inputs rotated past
the L2); outputs are compared byte for byte with the first version's. ``--trace`` runs W5
once per version built with CUPYPREP_STAGED_TRACE (each block's start, plan, copy and end
times and its SM) and prints how the blocks fill the GPU over time and how long each phase
of a block takes.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

import cupyprep
from cupyprep import _kernels, geometry

from .warp_staged import H, N, W, alternate, inverse_matrices, workload

# name: preprocessor definitions and source file (None: kernels/warp.cu)
VARIANTS = {"current": dict()}
BASE_OPTIONS = _kernels.NVRTC_OPTIONS
_modules = {}


GEOMETRY_DEFAULTS = {k: getattr(geometry, k) for k in ("_STAGED_GROUP", "_STAGED_SINGLE_WAVES")}


def tiles_launch(fn):
    """``fn`` (a kernel from before the work split) launched as a block a tile (x, y) of an
    image (z), whatever grid and split the caller passes."""
    def launch(grid, block, args):
        *args, _, _ = args  # the split's two arguments
        dh, dw, n_out = int(args[14]), int(args[15]), int(args[-2])
        tile = geometry._STAGED_TILE
        fn((-(-dw // tile), -(-dh // tile), n_out), block, tuple(args))

    return launch


def use(name, trace=False):
    """Route warp.cu's staged kernels to the build of variant ``name``."""
    import cupy

    v = VARIANTS[name]
    for k, value in GEOMETRY_DEFAULTS.items():
        setattr(geometry, k, value)
    for k, value in v.get("settings", {}).items():
        if k != "launch":
            setattr(geometry, k, type(GEOMETRY_DEFAULTS[k])(value))
    defines = tuple(v.get("defines", ())) + (("CUPYPREP_STAGED_TRACE",) if trace else ())
    path = v.get("source")
    code = open(path).read() if path else _kernels.read_source("warp.cu")
    options = BASE_OPTIONS + tuple(f"-D{d}" for d in defines)
    _kernels._cuda_cache.clear()
    dev = cupy.cuda.runtime.getDevice()
    for cn in (3, 4):
        expr = geometry._staged_expr(cn, False)
        key = (name, trace, expr)
        if key not in _modules:
            mod = cupy.RawModule(code=code, options=options, name_expressions=[expr])
            _modules[key] = (mod, mod.get_function(expr))
        fn = _modules[key][1]
        _kernels._cuda_cache[(dev, "warp.cu", expr)] = (
            tiles_launch(fn) if v.get("settings", {}).get("launch") == "tiles" else fn)
    return _modules[(name, trace, geometry._staged_expr(3, False))][0]


def cases():
    w5 = np.linspace(-170, 170, N)
    yield "W5", 3, inverse_matrices(w5, 0.9)[0]
    yield "W5, 4 channels", 4, inverse_matrices(w5, 0.9)[0]
    yield "all at 0 degrees", 3, inverse_matrices(np.zeros(N), 0.9)[0]
    yield "all at 45 degrees", 3, inverse_matrices(np.full(N, 45.0), 0.9)[0]
    yield "rotations, scale 0.5", 3, inverse_matrices(w5, 0.5)[0]


def trace_stats(raw, sms):
    """Per-block [start, plan, copy, end, sm, action] (ns) -> a summary dict."""
    t = raw.astype(np.int64)
    t0 = t[:, 0].min()
    start, plan, copy, end = (t[:, i] - t0 for i in range(4))
    span = end.max()
    # blocks resident on each SM over time, sampled every 100 ns
    grid = np.arange(0, span, 100)
    resident = np.zeros((sms, grid.size))
    for s, e, sm in zip(start, end, t[:, 4]):
        resident[sm, (grid >= s) & (grid < e)] += 1
    busy = resident.mean(axis=0)
    last_start = start.max()
    act = t[:, 5]
    kinds = {"inside": act == 8, "border": act == 0, "fill": act == 1, "split": act == 2}
    out = dict(span_us=float(span / 1e3), last_start_us=float(last_start / 1e3),
               mean_resident=float(resident.mean()),
               resident_first_5us=float(busy[grid < 5000].mean()),
               resident_after_last_start=float(busy[grid >= last_start].mean()),
               blocks_per_sm=np.bincount(t[:, 4], minlength=sms).tolist())
    for k, m in kinds.items():
        if m.any():
            out[k] = dict(count=int(m.sum()),
                          plan_us=float(np.median(plan[m] - start[m]) / 1e3),
                          copy_us=float(np.median(copy[m] - plan[m]) / 1e3),
                          pixels_us=float(np.median(end[m] - copy[m]) / 1e3),
                          total_us=float(np.median(end[m] - start[m]) / 1e3))
    return out, resident


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.staged_dev")
    parser.add_argument("--variants", default="current")
    parser.add_argument("--source", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=MACRO[=VALUE]")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=ATTR=VALUE,...")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--cases", default="all")
    parser.add_argument("--save")
    args = parser.parse_args(argv)
    for spec in args.source:
        name, path = spec.split("=", 1)
        VARIANTS[name] = dict(source=path)
    for spec in args.define:
        name, macro = spec.split("=", 1)
        VARIANTS[name] = dict(defines=(macro,))
    for spec in args.set:
        name, pairs = spec.split("=", 1)
        VARIANTS.setdefault(name, {})["settings"] = dict(p.split("=", 1) for p in pairs.split(","))
    names = args.variants.split(",")
    gen = torch.Generator(device="cuda").manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    geometry._WARP_STAGED = True
    if args.trace:
        inv = inverse_matrices(np.linspace(-170, 170, N), 0.9)[0]
        src = torch.randint(0, 256, (N, H, W, 3), dtype=torch.uint8, device="cuda", generator=gen)
        saved = {}
        for name in names:
            mod = use(name, trace=True)
            for _ in range(3):
                cupyprep.warp_affine(src, inv, (H, W), inverse_map=True)
            torch.cuda.synchronize()
            ptr = mod.get_global("cupyprep_staged_trace")
            raw = np.zeros(((H // 64) * (W // 64) * N, 8), np.uint64)  # at most a block a tile
            ptr.copy_to_host(raw.ctypes.data, raw.nbytes)
            raw = raw[raw[:, 3] != 0]  # the launch's blocks
            stats, resident = trace_stats(raw[:, :6], sms)
            saved[name] = raw
            bps = stats.pop("blocks_per_sm")
            print(f"trace {name}: {stats}; blocks an SM {min(bps)}-{max(bps)}", flush=True)
            # a coarse timeline: mean blocks resident an SM per 2 us
            step = 20
            line = [resident[:, i:i + step].mean() for i in range(0, resident.shape[1], step)]
            print("  resident per 2 us: " + " ".join(f"{v:.1f}" for v in line), flush=True)
        if args.save:
            np.savez(args.save, **saved)
        return
    selected = [c for c in cases() if args.cases == "all" or c[0] in args.cases.split(";")]
    table = []
    for case, cn, inv in selected:
        fn, sets, out, inputs = workload(cn, inv, gen)
        times, results = alternate(fn, sets, out, {n: (lambda n=n: use(n)) for n in names}, args.rounds)
        equal = [torch.equal(results[n], results[names[0]]) for n in names]
        cells = " | ".join(f"{min(times[n]):.4f}-{max(times[n]):.4f}{'' if e else ' (DIFFERS)'}"
                           for n, e in zip(names, equal))
        table.append(f"| {case} | {cells} |")
        print(table[-1], flush=True)
        del inputs, out, results
    print("\n| input | " + " | ".join(names) + " |")
    print("|----|" + "----|" * len(names))
    print("\n".join(table))


if __name__ == "__main__":
    main()
