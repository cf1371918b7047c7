"""python -m cupyprep.demo: resize and normalize a photograph, on the GPU when there is one.

Prints which backend ran, the shapes, and the timings; on a GPU it also checks the result
against the CPU backend (OpenCV).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import cupyprep


def _gpu():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:
        pass
    return None


def _median_ms(fn, sync, repeat=20):
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    try:
        from skimage import data
    except ImportError:
        raise SystemExit("the demo reads a photograph from scikit-image: pip install 'cupyprep[demo]'")
    rgb = data.astronaut()  # 512x512x3 uint8, RGB
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])  # as cv2.imread would give it
    batch = np.stack([bgr] * 8)

    def pipeline(x):
        small = cupyprep.resize(x, (224, 224), interpolation="linear")
        return cupyprep.normalize(small, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD,
                                  scale=1 / 255, swap_rb=True, layout="NCHW", dtype="float32")

    cupy = _gpu()
    cpu_out = pipeline(batch)
    cpu_ms = _median_ms(lambda: pipeline(batch), lambda: None)
    print(f"input: {batch.shape} {batch.dtype} (8 copies of skimage.data.astronaut, BGR)")
    print(f"CPU backend (OpenCV + NumPy): {cpu_out.shape} {cpu_out.dtype}, {cpu_ms:.2f} ms per batch")
    if cupy is None:
        print("no CUDA GPU found: ran on the CPU backend only")
        return
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"].decode()
    x = cupy.asarray(batch)
    t0 = time.perf_counter()
    gpu_out = pipeline(x)
    cupy.cuda.get_current_stream().synchronize()
    first_ms = (time.perf_counter() - t0) * 1e3
    gpu_ms = _median_ms(lambda: pipeline(x), cupy.cuda.get_current_stream().synchronize)
    same = bool((cupy.asnumpy(gpu_out) == cpu_out).all())
    print(f"GPU ({name}): {gpu_out.shape} {gpu_out.dtype}, {gpu_ms:.3f} ms per batch "
          f"(first call {first_ms:.0f} ms, compiling kernels)")
    print(f"GPU result equal to the CPU backend bit for bit: {same}")


if __name__ == "__main__":
    main()
