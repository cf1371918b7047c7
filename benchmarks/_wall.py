"""Wall-clock timing of host-bound pipelines (P1, D1): synchronized loops, their median and
spread, and one result row per batch beside the pinned host-to-device floor."""
from __future__ import annotations

import statistics
import time


def stats(times_s):
    """Median and p10 / p90 of per-batch times (seconds in, milliseconds out)."""
    ms = sorted(t * 1e3 for t in times_s)
    return dict(median_ms=statistics.median(ms), p10_ms=ms[len(ms) // 10], p90_ms=ms[(len(ms) * 9) // 10])


def synced_times(fn, n, warmup):
    """Seconds of ``fn(i)`` for i in range(n), each followed by a device synchronization,
    after ``warmup`` calls of ``fn(0)``."""
    import torch

    for _ in range(warmup):
        fn(0)
    torch.cuda.synchronize()
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def row(bench, workload, impl, stats, floor_bytes, h2d_rate, baseline=False, images=None, **extra):
    """One row per batch (wall clock) against the pinned H2D floor of ``floor_bytes``; with
    ``images`` (per batch), images/s from the median, printed instead of the H2D share."""
    fields = dict(workload=workload, impl=impl, baseline=baseline, floor_ms=floor_bytes / h2d_rate * 1e3,
                  floor_bytes=floor_bytes, eager_median_ms=stats["median_ms"],
                  timing="wall clock, steady state")
    if images is not None:
        fields["images_per_s"] = images / (stats["median_ms"] * 1e-3)
    r = dict(fields, **stats, **extra)
    r["bandwidth_TBps"] = floor_bytes / (stats["median_ms"] * 1e-3) / 1e12
    r["of_pinned_h2d"] = r["bandwidth_TBps"] * 1e12 / h2d_rate
    bench.rows.append(r)
    more = "".join(f"; {k} {v:.4g}" if isinstance(v, float) else f"; {k} {v}" for k, v in extra.items())
    rate = (f", {r['images_per_s']:.0f} images/s" if images is not None
            else f"; {r['of_pinned_h2d']:.0%} of pinned H2D")
    print(f"  {workload} {impl}: {stats['median_ms']:.3f} ms per batch (p10 {stats['p10_ms']:.3f}, "
          f"p90 {stats['p90_ms']:.3f}){rate}{more}", flush=True)
    return r
