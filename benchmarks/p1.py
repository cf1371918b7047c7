"""P1: end to end. 32 host frames 1080x1920x3 uint8 (decoded, in pageable host memory) ->
letterbox 640x640, pad 114, RGB, /255, NCHW float32 on the GPU, pipelined over many batches.

Rows (all wall-clock, steady state; not CUDA events of one kernel, since the point is how
the host copies, the PCIe transfer and the kernels overlap):
- cupyprep.Loader: per-batch intervals as the consumer receives ready batches, after a
  warm-up; the mean over the run between two device synchronizations is printed too. Once
  from pageable frames (staged into pinned memory by the copy threads), once from frames
  already in page-locked memory (sent as they are).
- torch: frames already in one pinned batch -> ``.cuda(non_blocking=True)`` -> interpolate
  + pad + div (the number in DESIGN.md), and the same from the pageable frames (stacked
  into the pinned batch first); one batch at a time, synchronized per batch.
- cv2 CPU chain per frame (resize + copyMakeBorder + BGR->RGB + /255 + HWC->CHW), one
  thread and a 16-thread pool (host output, no upload).
- references: the measured pinned and pageable host-to-device copy of one batch, and the
  staging copy of one batch into pinned memory by the Loader's copy threads.
- decoding in the loop: skimage photographs written as JPEG / PNG to a temporary folder,
  decoded by the Loader's thread pool: images/s and the thread count.

The target: the Loader at >= 90% of the measured pinned host-to-device rate (the GPU
work hidden behind the copy).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

from . import _wall

N, H, W, C = 32, 1080, 1920, 3
SIZE = (640, 640)
BATCHES, WARMUP = 60, 8
_stats, _row = _wall.stats, _wall.row


def _copy_rate(host, dev):
    from ._timing import _events_once

    ms = _events_once(lambda: dev.copy_(host, non_blocking=True))
    return host.numel() / (ms * 1e-3)


def _synced_loop(fn, n, warmup=2):
    return _wall.synced_times(lambda i: fn(), n, warmup)


def _loader_run(source, n_batches, warmup, **kwargs):
    """Consumer-side intervals between ready batches, and the synchronized mean."""
    import torch

    from cupyprep import Loader

    intervals, t0, last = [], None, None
    with Loader(source, SIZE, device="cuda", output="torch", **kwargs) as loader:
        for k, (batch, meta) in enumerate(loader):
            if k == warmup - 1:
                torch.cuda.synchronize()
                t0 = last = time.perf_counter()
            elif k >= warmup:
                now = time.perf_counter()
                intervals.append(now - last)
                last = now
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        threads = (loader.workers, loader.copy_threads)
    return intervals, (t1 - t0) / max(1, n_batches), threads


def run(bench):
    import concurrent.futures

    import cv2
    import numpy as np
    import torch
    import torch.nn.functional as F

    from cupyprep import _staging

    rng = np.random.default_rng(0)
    # two batches of distinct pageable frames, cycled
    frames = [rng.integers(0, 256, (H, W, C), dtype=np.uint8) for _ in range(2 * N)]
    batch_bytes = N * H * W * C
    pinned = torch.empty((N, H, W, C), dtype=torch.uint8).pin_memory()
    pageable = torch.from_numpy(np.stack(frames[:N]))
    dev = torch.empty((N, H, W, C), dtype=torch.uint8, device="cuda")
    h2d = _copy_rate(pinned.view(-1), dev.view(-1))
    h2d_pageable = _copy_rate(pageable.view(-1), dev.view(-1))
    print(f"  P1 measured host-to-device: pinned {h2d / 1e9:.1f} GB/s, pageable {h2d_pageable / 1e9:.1f} GB/s "
          f"({batch_bytes / 1e6:.0f} MB per batch: floor {batch_bytes / h2d * 1e3:.2f} ms)", flush=True)
    ref = dict(median_ms=batch_bytes / h2d * 1e3, p10_ms=batch_bytes / h2d * 1e3, p90_ms=batch_bytes / h2d * 1e3)
    _row(bench, "P1", "reference: pinned H2D copy of one batch (CUDA events)", ref, batch_bytes, h2d)
    refp = {k: batch_bytes / h2d_pageable * 1e3 for k in ("median_ms", "p10_ms", "p90_ms")}
    _row(bench, "P1", "reference: pageable H2D copy of one batch (CUDA events)", refp, batch_bytes, h2d)

    # the Loader's staging copy alone: pageable frames -> one pinned buffer, in its copy threads
    copy_threads = min(16, os.cpu_count() or 1)
    host = pinned.view(-1).numpy()
    shapes = [f.shape for f in frames[:N]]
    offsets = [i * H * W * C for i in range(N)]
    jobs = _staging.copy_jobs(frames[:N], shapes, offsets, host)
    with concurrent.futures.ThreadPoolExecutor(copy_threads) as pool:
        staging = _synced_loop(lambda: list(pool.map(_staging.copy_band, jobs)), 10)
    _row(bench, "P1", f"reference: staging copy into pinned memory ({copy_threads} threads)", _stats(staging),
         batch_bytes, h2d, host_GBps=batch_bytes / statistics.median(staging) / 1e9)

    # cupyprep.Loader, pipelined
    def source(n_batches):
        return (frames[i % len(frames)] for i in range(n_batches * N))

    intervals, mean_s, (workers, copiers) = _loader_run(source(BATCHES + WARMUP), BATCHES, WARMUP,
                                                        batch_size=N, copy_threads=copy_threads)
    _row(bench, "P1", f"cupyprep Loader (pinned staging, copy/compute streams, {copiers} copy threads)",
         _stats(intervals), batch_bytes, h2d, mean_ms=mean_s * 1e3)

    # the same, with the frames already in page-locked memory (decoded into pinned buffers,
    # or torch pin_memory tensors): no staging copy, the copy engine reads them directly
    pinned_frames = [torch.from_numpy(f).pin_memory() for f in frames]

    def pinned_source(n_batches):
        return (pinned_frames[i % len(pinned_frames)] for i in range(n_batches * N))

    intervals, mean_s, _ = _loader_run(pinned_source(BATCHES + WARMUP), BATCHES, WARMUP, batch_size=N,
                                       copy_threads=copy_threads)
    _row(bench, "P1", "cupyprep Loader, frames in page-locked memory (sent directly, no staging copy)",
         _stats(intervals), batch_bytes, h2d, mean_ms=mean_s * 1e3)
    del pinned_frames

    # torch: pinned upload, then interpolate + pad + div
    nh, nw = 360, 640

    def torch_ops(x):
        x = x.permute(0, 3, 1, 2).flip(1).float()
        x = F.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False, antialias=False)
        x = F.pad(x, (0, 0, 140, 140), value=114.0)
        return x / 255

    pinned.copy_(pageable)
    _row(bench, "P1", "torch: pinned batch -> .cuda() + interpolate + pad + div",
         _stats(_synced_loop(lambda: torch_ops(pinned.cuda(non_blocking=True)), 20)), batch_bytes, h2d,
         baseline=True)
    pinned_np = pinned.numpy()

    def torch_from_pageable():
        np.stack(frames[:N], out=pinned_np)
        return torch_ops(pinned.cuda(non_blocking=True))

    _row(bench, "P1", "torch: stack pageable frames into pinned, upload, interpolate + pad + div",
         _stats(_synced_loop(torch_from_pageable, 10)), batch_bytes, h2d)

    # cv2 CPU chain, per frame
    out = np.empty((N, C) + SIZE, np.float32)

    def chain(i):
        r = cv2.resize(frames[i], (nw, nh), interpolation=cv2.INTER_LINEAR)
        b = cv2.copyMakeBorder(r, 140, 140, 0, 0, cv2.BORDER_CONSTANT, value=(114, 114, 114))
        rgb = cv2.cvtColor(b, cv2.COLOR_BGR2RGB)
        np.multiply(rgb.transpose(2, 0, 1), np.float32(1 / 255), out=out[i], dtype=np.float32)

    threads_before = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        single = _synced_loop(lambda: [chain(i) for i in range(N)], 3, warmup=1)
        _row(bench, "P1", "cv2 CPU chain, 1 thread (host output)", _stats(single), batch_bytes, h2d)
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            pooled = _synced_loop(lambda: list(pool.map(chain, range(N))), 8, warmup=1)
        _row(bench, "P1", "cv2 CPU chain, 16-thread pool (host output)", _stats(pooled), batch_bytes, h2d)
    finally:
        cv2.setNumThreads(threads_before)

    # decoding in the loop: photographs as JPEG / PNG files, decoded by the Loader's pool
    from skimage import data

    names = ["astronaut", "coffee", "chelsea", "rocket", "camera", "cat", "hubble_deep_field", "immunohistochemistry"]
    photos = []
    for name in names:
        fn = getattr(data, name, None)
        if fn is None:
            continue
        img = np.asarray(fn())
        img = np.stack([img] * 3, axis=2) if img.ndim == 2 else img[:, :, :3]
        photos.append(np.ascontiguousarray(img[:, :, ::-1]))
    workers = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        for ext in ("jpg", "png"):
            paths = []
            for i, img in enumerate(photos):
                p = os.path.join(folder, f"{i}.{ext}")
                cv2.imwrite(p, img)
                paths.append(p)
            n_batches = 12
            items = [paths[i % len(paths)] for i in range((n_batches + 2) * N)]
            upload = int(np.mean([p.nbytes for p in photos]) * N)
            intervals, mean_s, (w, _) = _loader_run(items, n_batches, 2, batch_size=N, workers=workers)
            _row(bench, f"P1-{ext}", f"cupyprep Loader decoding {ext.upper()} files ({w} decode threads)",
                 _stats(intervals), upload, h2d, images_per_s=N / mean_s, decode_threads=w,
                 mean_ms=mean_s * 1e3)


if __name__ == "__main__":
    from .__main__ import Bench

    bench = Bench(repeat=50, warmup=5)
    run(bench)
