"""A bar chart of cupyprep against the baseline per workload, from results JSON files.

    python -m benchmarks.plot benchmarks/results/A.json [B.json ...] --out docs/images/performance.png
                              [--workloads W1 W2 "W3 1k" ...]

Rows are taken from every file given; where several files hold a row of the same workload and
implementation, the latest one counts (the file's date, then its place on the command line).
Per workload: the fastest cupyprep row (its device time: graph replays where the call can be
captured) against the row marked as the baseline, on a log scale, with the ratio. Workloads
without both are left out. Needs matplotlib (no display: the Agg backend).
"""
from __future__ import annotations

import argparse
import json
import math

FAMILIES = ["W1", "W1a", "W1r", "W2", "W3", "W4", "W5", "W5r", "P1", "P1-jpg", "P1-png", "BOX"]
# what each workload does, for the chart's labels (other ids are shown as they are)
LABELS = {"W1": "W1 letterbox, 32 x 1080p", "W1a": "W1a letterbox (area)", "W2": "W2 resize + normalize, 256",
          "W4": "W4 roi_align", "W5": "W5 warp_affine, 64 x 512²", "P1": "P1 host frames -> batch"}


def label(workload):
    if workload in LABELS:
        return LABELS[workload]
    if workload.startswith("W3 8x"):
        return f"W3 multiclass_nms {workload[3:]}"
    if workload.startswith("W3 ") and "cls" in workload:
        return f"W3 batched_nms {workload[3:].replace(' x', ', ')}"
    if workload.startswith("W3 "):
        return f"W3 nms {workload[3:]}"
    return workload


def latest_rows(paths):
    """{(workload, impl): row} over ``paths``, the latest file's row where several have one."""
    rows, order = {}, {}
    for k, path in enumerate(paths):
        with open(path) as f:
            data = json.load(f)
        when = (data.get("meta", {}).get("date", ""), k)
        for row in data["results"]:
            key = (row["workload"], row["impl"])
            if key not in rows or when >= rows[key][0]:
                rows[key] = (when, dict(row, source=path, date=when[0]))
            order.setdefault(row["workload"], len(order))
    return {key: row for key, (_, row) in rows.items()}, order


def pairs(rows, order, workloads=None):
    """[(workload, fastest cupyprep row, baseline row)], in ``workloads``' order if given."""
    by_workload = {}
    for (workload, impl), row in rows.items():
        by_workload.setdefault(workload, []).append(row)
    if workloads is None:
        def family(w):
            head = w.split()[0]
            return FAMILIES.index(head) if head in FAMILIES else len(FAMILIES)
        workloads = sorted(by_workload, key=lambda w: (family(w), order[w]))
    out = []
    for workload in workloads:
        group = by_workload.get(workload)
        if group is None:
            raise SystemExit(f"no rows of workload {workload!r} in the files given")
        ours = [r for r in group if r["impl"].startswith("cupyprep")]
        base = [r for r in group if r["baseline"]]
        if ours and base:
            out.append((workload, min(ours, key=lambda r: r["median_ms"]), base[0]))
    return out


def plot(data, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(data)
    fig, ax = plt.subplots(figsize=(9, 0.52 * n + 1.4), dpi=90)
    bar = 0.38
    ys = list(range(n))
    ours = [o["median_ms"] for _, o, _ in data]
    base = [b["median_ms"] for _, _, b in data]
    ax.barh([y - bar / 2 for y in ys], ours, bar, color="#2a7ab9", label="cupyprep")
    ax.barh([y + bar / 2 for y in ys], base, bar, color="#b8b8b8", label="baseline (torch / torchvision)")
    ax.set_xscale("log")
    right = max(base + ours) * 40
    ax.set_xlim(10 ** math.floor(math.log10(min(base + ours) / 1.5)), right)
    for y, o, b in zip(ys, ours, base):
        ax.text(o * 1.08, y - bar / 2, f"{o:.3g} ms", va="center", fontsize=8)
        ax.text(b * 1.08, y + bar / 2, f"{b:.3g} ms", va="center", fontsize=8, color="#555555")
        ax.text(right / 1.15, y, f"{b / o:.1f}× faster" if b >= o else f"{o / b:.1f}× slower",
                va="center", ha="right", fontsize=9, fontweight="bold")
    ax.set_yticks(ys)
    ax.set_yticklabels([label(w) for w, _, _ in data])
    ax.invert_yaxis()
    ax.set_xlabel("ms per call, log scale (device time; P1: wall clock per batch)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, fontsize=8, frameon=False)
    ax.grid(axis="x", which="major", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="results files written by python -m benchmarks --json")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--workloads", nargs="*", help="workload ids to plot, in this order (default: all)")
    parser.add_argument("--title", help="default: the device and the runs' dates")
    args = parser.parse_args(argv)
    rows, order = latest_rows(args.json)
    data = pairs(rows, order, args.workloads)
    if not data:
        raise SystemExit("no workload has both a cupyprep row and a baseline row")
    devices, dates = set(), set()
    for path in args.json:
        with open(path) as f:
            meta = json.load(f).get("meta", {})
        devices.add(meta.get("device", "?"))
        dates.add(meta.get("date", "?"))
    title = args.title or f"{', '.join(sorted(devices))}: cupyprep against the baseline ({', '.join(sorted(dates))})"
    plot(data, args.out, title)
    for workload, o, b in data:
        print(f"{workload}: {o['impl']} {o['median_ms']:.4f} ms ({o['source']}) against "
              f"{b['impl']} {b['median_ms']:.4f} ms ({b['source']}): {b['median_ms'] / o['median_ms']:.1f}x")


if __name__ == "__main__":
    main()
