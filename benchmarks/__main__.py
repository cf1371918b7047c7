"""python -m benchmarks [--workloads W2 ...] [--json PATH]"""
from __future__ import annotations

import argparse
import datetime
import json
import platform

from . import _timing, boxes, color, d1, filter, geom, latency, p1, w1, w2, w3, w4, w5

WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "P1": p1, "D1": d1, "BOX": boxes,
             "S": latency, "GEOM": geom, "COLOR": color, "FILT": filter}


class Bench:
    def __init__(self, repeat, warmup):
        self.repeat, self.warmup = repeat, warmup
        self.rows = []
        self.latency_rows = []  # S1-S5: eager, device and host time per call
        self.copy_rate = _timing.copy_bandwidth()

    @staticmethod
    def rotating_inputs(make, min_bytes=256 << 20):
        """Enough input sets that one pass over them exceeds the L2 several times over."""
        first = make()
        sets = [first]
        nbytes = first.numel() * first.element_size()
        while nbytes * len(sets) < min_bytes and len(sets) < 8:
            sets.append(make())
        return sets

    def record(self, workload, impl, fn, n_inputs, floor_bytes, baseline=False, capture=True):
        t = _timing.time_cuda(fn, n_inputs, self.warmup, self.repeat, capture=capture)
        floor_ms = floor_bytes / self.copy_rate * 1e3
        row = dict(workload=workload, impl=impl, baseline=baseline, floor_ms=floor_ms,
                   floor_bytes=floor_bytes, **t)
        row["bandwidth_TBps"] = floor_bytes / (t["median_ms"] * 1e-3) / 1e12
        self.rows.append(row)
        print(f"  {workload} {impl}: {t['median_ms']:.4f} ms ({t['timing']}; eager {t['eager_median_ms']:.4f} ms)", flush=True)

    def _of_rate(self, row):
        # host-to-device rows compare with the pinned upload rate, device rows with the
        # device-to-device copy rate
        if row.get("of_pinned_h2d") is not None:
            return f"{row['of_pinned_h2d']:.0%} of pinned H2D"
        return f"{row['bandwidth_TBps'] * 1e12 / self.copy_rate:.0%}"

    def table(self):
        lines = ["| id | implementation | device ms, median (p10-p90) | eager ms | vs baseline | floor ms | of copy rate |",
                 "|----|----|----|----|----|----|----|"]
        for row in self.rows:
            base = next((r for r in self.rows if r["workload"] == row["workload"] and r["baseline"]), None)
            ratio = "—" if base is None or base is row else f"{base['median_ms'] / row['median_ms']:.1f}x faster"
            lines.append(
                f"| {row['workload']} | {row['impl']}{'' if row['timing'] == 'graph replay' else ' (eager)'} | {row['median_ms']:.4f} "
                f"({row['p10_ms']:.4f}-{row['p90_ms']:.4f}) | {row['eager_median_ms']:.4f} | {ratio} | {row['floor_ms']:.4f} | "
                f"{self._of_rate(row)} |"
            )
        return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--profile", action="store_true",
                        help="S workloads: where each call's host time goes")
    args = parser.parse_args(argv)

    import torch

    import cupyprep

    if not torch.cuda.is_available():
        raise SystemExit("benchmarks need a CUDA GPU")
    # kernels compile on first use inside the warm-up runs; warmup() of every variant is not needed
    bench = Bench(args.repeat, args.warmup)
    device = torch.cuda.get_device_name()
    print(f"device: {device}; copy rate {bench.copy_rate / 1e12:.2f} TB/s (read + write)")
    for name in args.workloads:
        if name == "S":
            latency.run(bench, profile=args.profile)
        else:
            WORKLOADS[name].run(bench)
    print()
    if bench.rows:
        print(bench.table())
    if bench.latency_rows:
        print(latency.table(bench.latency_rows))
    if args.json:
        import cupy
        import numpy

        meta = dict(device=device, date=datetime.date.today().isoformat(),
                    copy_rate_TBps=bench.copy_rate / 1e12, torch=torch.__version__,
                    cupy=cupy.__version__, numpy=numpy.__version__, python=platform.python_version(),
                    cupyprep=cupyprep.__version__)
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, results=bench.rows, table=bench.table(), latency=bench.latency_rows,
                           latency_table=latency.table(bench.latency_rows)), f, indent=1)


if __name__ == "__main__":
    main()
