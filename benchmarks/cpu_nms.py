"""CPU NMS: cupyprep's NumPy backend next to cv2.dnn.NMSBoxes and a plain NumPy greedy loop,
on 1k and 20k boxes, IoU 0.5. Runs on the CPU only (no GPU needed):

    python -m benchmarks.cpu_nms [--repeat N] [--sizes 1000 20000]

Two box sets per size: "clustered", a detector's raw output (objects in a 1920 x 1080
frame, each with a cloud of jittered boxes whose scores fall with the jitter), and
"uniform", W3's boxes (random centers in 1000 x 1000, sides 10-110). Each row is the median
wall-clock time of --repeat calls (after one untimed call; by default 200000 // boxes, at
least 5) with the 10th-90th percentile range, and the number of boxes kept; the three
implementations take turns call by call, so load from other work on the machine falls on
all of them alike. cupyprep keeps torchvision's indices (IoU > threshold suppresses);
NMSBoxes and the plain loop are the usual CPU ways of doing the same and may keep a few
boxes more or fewer at the threshold (their own IoU arithmetic).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

IOU = 0.5


def clustered_boxes(n, seed):
    """``n`` xyxy float32 boxes around n // 40 objects, and float32 scores."""
    rng = np.random.default_rng(seed)
    objects = max(1, n // 40)
    sides = rng.uniform(20, 300, (objects, 2))
    centers = rng.uniform(0, 1, (objects, 2)) * ([1920, 1080] - sides) + sides / 2
    conf = rng.uniform(0.3, 1.0, objects)
    who = rng.integers(0, objects, n)
    jitter = rng.normal(0, 0.12, (n, 4))
    c = centers[who] + jitter[:, :2] * sides[who]
    s = sides[who] * np.exp(jitter[:, 2:])
    boxes = np.concatenate([c - s / 2, c + s / 2], axis=1).astype(np.float32)
    scores = (conf[who] * np.exp(-4 * np.abs(jitter).sum(axis=1))).astype(np.float32)
    return boxes, scores


def uniform_boxes(n, seed):
    """W3's boxes: random centers in 1000 x 1000, sides 10-110."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 1000, (n, 2))
    sides = rng.uniform(10, 110, (n, 2))
    boxes = np.concatenate([centers - sides / 2, centers + sides / 2], axis=1).astype(np.float32)
    return boxes, rng.uniform(0, 1, n).astype(np.float32)


def numpy_greedy(boxes, scores, iou_threshold):
    """The plain NumPy loop: take the best box left, drop the boxes over the threshold."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        order = rest[inter / (areas[i] + areas[rest] - inter) <= iou_threshold]
    return np.asarray(keep, np.int64)


def implementations():
    import cv2

    import cupyprep

    def opencv(boxes, scores, thr):
        xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1).astype(np.float64)
        return np.asarray(cv2.dnn.NMSBoxes(xywh, scores, 0.0, thr)).reshape(-1)  # every score > 0

    return {"cupyprep nms (CPU backend)": lambda b, s, t: cupyprep.nms(b, s, t),
            "cv2.dnn.NMSBoxes": opencv,
            "plain NumPy greedy loop": numpy_greedy}


def time_calls(fns, repeat):
    """Per function: median, 10th and 90th percentile of ``repeat`` calls in ms, and the
    length of its result; the functions called in turn."""
    results = [fn() for fn in fns]  # untimed: first-call costs (imports, caches)
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e3)
    out = []
    for t, result in zip(times, results):
        t.sort()
        out.append((statistics.median(t), t[len(t) // 10], t[(len(t) * 9) // 10], len(result)))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=None, help="calls a row (default 200000 // boxes, >= 5)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000])
    args = parser.parse_args(argv)
    impls = implementations()
    rows = []
    for n in args.sizes:
        repeat = args.repeat or max(5, 200000 // n)
        for name, make in (("clustered", clustered_boxes), ("uniform", uniform_boxes)):
            boxes, scores = make(n, 0)
            fns = [lambda fn=fn, b=boxes, s=scores: fn(b, s, IOU) for fn in impls.values()]
            for impl, (med, p10, p90, kept) in zip(impls, time_calls(fns, repeat)):
                rows.append((f"{n // 1000}k {name}", impl, repeat, med, p10, p90, kept))
                print(f"  {rows[-1][0]} {impl}: {med:.2f} ms ({p10:.2f}-{p90:.2f}), {kept} kept", flush=True)
    print("\n| boxes | implementation | calls | ms, median (p10-p90) | kept |")
    print("|----|----|----|----|----|")
    for case, impl, repeat, med, p10, p90, kept in rows:
        print(f"| {case} | {impl} | {repeat} | {med:.2f} ({p10:.2f}-{p90:.2f}) | {kept} |")


if __name__ == "__main__":
    main()
