"""D1: JPEG files to the model's batch. Batches of 32 JPEGs (1080x1920, and about 512x512)
decoded and letterboxed to 640x640 (W1's output: pad 114, RGB, /255, NCHW float32).

Rows, per image size (all wall clock at steady state, per batch of 32, with images/s):
- cupyprep.decode of the batch's bytes (GPU: nvImageCodec), then the same followed by
  cupyprep.preprocess (decode + letterbox); where the time goes: the host time until
  decode() returns (parsing, and the Huffman decoding nvJPEG does on the CPU), the
  device time between CUDA events around the call, and preprocess alone.
- cupyprep.Loader(decode="gpu") over the files: the pool reads bytes, the batch is
  decoded and letterboxed on the GPU.
- cupyprep.Loader(decode="cpu") over the files with a decode thread per host core (the
  baseline: the issue's target is >= 5x its images/s for 1080p).
- cv2.imdecode in a thread pool of one thread per core (decode only, host images).
- torchvision.io.decode_jpeg(list of tensors, device="cuda"), batched (decode only, and
  followed by cupyprep.preprocess).

The images are skimage photographs scaled to the size, with a little noise (a camera's
grain: smooth upscaled photographs would compress, and decode, unrealistically fast),
written at quality 90 with 4:2:0 subsampling; 64 distinct files per size, cycled. The
floor column is the batch's compressed bytes at the measured pinned host-to-device rate.
"""
from __future__ import annotations

import concurrent.futures
import os
import statistics
import tempfile
import time

from . import _wall

N = 32
SIZE = (640, 640)
SHAPES = {"D1-1080p": (1080, 1920), "D1-512": (512, 512)}
FILES = 64
BATCHES = {"D1-1080p": 20, "D1-512": 40}
WARMUP = 3
OPTIONS = dict(mode="letterbox", pad_value=114)
_stats = _wall.stats


def _row(bench, workload, impl, stats, floor_bytes, h2d_rate, baseline=False, **extra):
    """A wall-clock row of one batch of N images: images/s from the median."""
    return _wall.row(bench, workload, impl, stats, floor_bytes, h2d_rate, baseline, images=N, **extra)


def _synced(fn, n, warmup=WARMUP):
    return _wall.synced_times(fn, n, warmup)


def make_jpegs(shape, count, seed=0):
    """``count`` distinct JPEGs of ``shape`` (H, W) from skimage photographs."""
    import cv2
    import numpy as np
    from skimage import data

    photos = []
    for name in ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "cat"):
        fn = getattr(data, name, None)
        if fn is not None:
            img = np.asarray(fn())
            img = np.stack([img] * 3, axis=2) if img.ndim == 2 else img[:, :, :3]
            photos.append(np.ascontiguousarray(img[:, :, ::-1]))
    h, w = shape

    def one(i):
        rng = np.random.default_rng(seed + i)
        img = photos[i % len(photos)]
        if i % 2:
            img = img[:, ::-1]
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC)
        noisy = np.clip(img.astype(np.int16) + rng.normal(0, 3, img.shape).astype(np.int16), 0, 255)
        ok, buf = cv2.imencode(".jpg", noisy.astype(np.uint8),
                               [cv2.IMWRITE_JPEG_QUALITY, 90,
                                cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420])
        assert ok
        return buf.tobytes()

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return list(pool.map(one, range(count)))


def _loader_rate(paths, batches, **kwargs):
    """Per-batch intervals as the consumer receives batches, after a warm-up."""
    import torch

    import cupyprep

    items = [paths[i % len(paths)] for i in range((batches + WARMUP) * N)]
    intervals, last = [], None
    with cupyprep.Loader(items, SIZE, batch_size=N, device="cuda", output="torch", **OPTIONS, **kwargs) as loader:
        for k, _ in enumerate(loader):
            if k == WARMUP - 1:
                torch.cuda.synchronize()
                last = time.perf_counter()
            elif k >= WARMUP:
                now = time.perf_counter()
                intervals.append(now - last)
                last = now
        torch.cuda.synchronize()
    return intervals


def run(bench):
    import torch

    from cupyprep import _decoders

    from ._timing import _events_once

    backend = _decoders.gpu_backend()
    if backend is None:
        print("  D1: skipped (nvImageCodec is not installed: pip install 'cupyprep[decode]')")
        return
    pinned = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(pinned, device="cuda")
    h2d = pinned.numel() / (_events_once(lambda: dev.copy_(pinned, non_blocking=True)) * 1e-3)
    for workload, shape in SHAPES.items():
        _run_size(bench, workload, shape, BATCHES[workload], h2d, backend.name)


def _run_size(bench, workload, shape, n, h2d, decoder_name):
    import cv2
    import numpy as np
    import torch

    import cupyprep

    cpus = os.cpu_count() or 1
    blobs = make_jpegs(shape, FILES)
    batches = [blobs[k * N:(k + 1) * N] for k in range(FILES // N)]
    batch_bytes = int(np.mean([sum(len(b) for b in batch) for batch in batches]))
    print(f"  {workload}: {N} JPEGs {shape[0]}x{shape[1]} a batch, {batch_bytes / N / 1e3:.0f} kB each; "
          f"GPU decoder {decoder_name}; {cpus} host cores", flush=True)

    # cupyprep.decode, alone and with the letterbox; where the time goes
    host_s = []

    def decode_only(i):
        t0 = time.perf_counter()
        images = cupyprep.decode(batches[i % len(batches)], like=torch)
        host_s.append(time.perf_counter() - t0)
        return images

    times = _synced(decode_only, n)
    host_ms = statistics.median(host_s[WARMUP:]) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    device_ms = []
    for i in range(n):
        start.record()
        decode_only(i)
        end.record()
        end.synchronize()
        device_ms.append(start.elapsed_time(end))
    _row(bench, workload, "cupyprep.decode (GPU)", _stats(times), batch_bytes, h2d,
         host_ms_until_return=host_ms, device_ms_events=statistics.median(device_ms))

    decoded = [cupyprep.decode(b, like=torch) for b in batches]
    pre = _synced(lambda i: cupyprep.preprocess(decoded[i % len(decoded)], SIZE, **OPTIONS), n)
    _row(bench, workload, "reference: cupyprep.preprocess alone (letterbox of the decoded list)",
         _stats(pre), batch_bytes, h2d)
    both = _synced(lambda i: cupyprep.preprocess(cupyprep.decode(batches[i % len(batches)], like=torch),
                                                 SIZE, **OPTIONS), n)
    _row(bench, workload, "cupyprep.decode + preprocess (letterbox 640)", _stats(both), batch_bytes, h2d)

    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i, b in enumerate(blobs):
            p = os.path.join(folder, f"{i}.jpg")
            with open(p, "wb") as f:
                f.write(b)
            paths.append(p)
        _row(bench, workload, "cupyprep.Loader(decode='gpu'), files -> letterbox 640",
             _stats(_loader_rate(paths, n, decode="gpu")), batch_bytes, h2d)
        _row(bench, workload, f"cupyprep.Loader(decode='cpu'), {cpus} decode threads -> letterbox 640",
             _stats(_loader_rate(paths, max(4, n // 4), decode="cpu", workers=cpus)), batch_bytes, h2d,
             baseline=True, decode_threads=cpus)

    # cv2.imdecode in a thread pool (decode only, host images)
    buffers = [[np.frombuffer(b, np.uint8) for b in batch] for batch in batches]
    with concurrent.futures.ThreadPoolExecutor(cpus) as pool:
        pooled = _synced(lambda i: list(pool.map(lambda a: cv2.imdecode(a, cv2.IMREAD_COLOR),
                                                 buffers[i % len(buffers)])), max(4, n // 4))
    _row(bench, workload, f"cv2.imdecode, {cpus}-thread pool (decode only, host images)", _stats(pooled),
         batch_bytes, h2d)

    # torchvision's batched GPU decode
    try:
        import torchvision
        from torchvision.io import decode_jpeg
    except ImportError:
        print("  torchvision not installed: its rows are skipped")
        return
    tensors = [[torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in batch] for batch in batches]
    try:
        tv = _synced(lambda i: decode_jpeg(tensors[i % len(tensors)], device="cuda"), n)
    except Exception as exc:  # a torchvision without batched GPU decoding
        print(f"  torchvision.io.decode_jpeg(device='cuda') failed: {type(exc).__name__}: {exc}")
        return
    _row(bench, workload, f"torchvision {torchvision.__version__} decode_jpeg(list, device='cuda') (decode only)",
         _stats(tv), batch_bytes, h2d)

    def tv_letterbox(i):
        images = decode_jpeg(tensors[i % len(tensors)], device="cuda")  # RGB, CHW
        hwc = [im.permute(1, 2, 0).contiguous() for im in images]
        return cupyprep.preprocess(hwc, SIZE, swap_rb=False, **OPTIONS)

    _row(bench, workload, "torchvision decode_jpeg(list, device='cuda') + cupyprep.preprocess",
         _stats(_synced(tv_letterbox, n)), batch_bytes, h2d)


if __name__ == "__main__":
    from .__main__ import Bench

    bench = Bench(repeat=50, warmup=5)
    run(bench)
    print(bench.table())
