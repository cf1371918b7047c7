"""The Python of preprocess's S1 / S4 calls and of warps (S3's and others) alone, general
path against launch plan: the calls run under the CPU kernel emulator with every launch
stubbed out, so what is timed is cupyprep's own argument handling (no GPU, no CuPy or torch
work).

    python -m benchmarks.dev.host_python
"""
from __future__ import annotations

import contextlib
import time

import numpy as np


def main(calls=2000):
    import cupyprep
    from cupyprep import _kernels, testing

    from ..latency import general_path

    rng = np.random.default_rng(0)
    frame = np.zeros((1080, 1920, 3), np.uint8)
    out1 = np.empty((1, 3, 640, 640), np.float16)
    frames = [np.zeros((int(h), int(w), 3), np.uint8)
              for h, w in zip(rng.integers(360, 1080, 8), rng.integers(480, 1920, 8))]
    out4 = np.empty((8, 3, 640, 640), np.float32)
    img = np.zeros((512, 512, 3), np.uint8)
    out3 = np.empty_like(img)
    batch = np.zeros((8, 256, 256, 3), np.float32)
    m = cupyprep.get_rotation_matrix_2d((255.5, 255.5), 30.0, 1.0)
    per_image = np.stack([m] * 8)
    h = np.array([[1.0, 0.1, 3.0], [0.05, 0.9, 2.0], [1e-4, 2e-4, 1.0]])
    cases = {
        "S1 one 1080p frame, out=": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16", out=out1),
        "S1 one 1080p frame, new output": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16"),
        "S4 a list of 8 frames, out=": lambda: cupyprep.preprocess(frames, (640, 640), out=out4),
        "S3 warp_affine 512x512, out=": lambda: cupyprep.warp_affine(img, m, (512, 512), out=out3),
        "warp_affine 512x512, new output": lambda: cupyprep.warp_affine(img, m, (512, 512)),
        "warp_affine batch of 8, one matrix per image": lambda: cupyprep.warp_affine(batch, per_image, (256, 256)),
        "warp_perspective 512x512, out=": lambda: cupyprep.warp_perspective(img, h, (512, 512), out=out3),
    }
    real = _kernels.get_function
    with testing.emulate():
        _kernels.get_function = lambda filename, expr: (lambda *args, **kw: None)
        try:
            for name, call in cases.items():
                per_call = []
                for plans in (general_path, contextlib.nullcontext):
                    with plans():
                        for _ in range(50):
                            call()
                        t0 = time.perf_counter()
                        for _ in range(calls):
                            call()
                        per_call.append((time.perf_counter() - t0) / calls * 1e6)
                print(f"{name}: general path {per_call[0]:.1f} us, plan {per_call[1]:.1f} us")
        finally:
            _kernels.get_function = real


if __name__ == "__main__":
    main()
