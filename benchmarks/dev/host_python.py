"""The Python of preprocess's S1 / S4 calls alone, general path against launch plan: the
calls run under the CPU kernel emulator with every launch stubbed out, so what is timed is
cupyprep's own argument handling (no GPU, no CuPy or torch work).

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
    cases = {
        "S1 one 1080p frame, out=": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16", out=out1),
        "S1 one 1080p frame, new output": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16"),
        "S4 a list of 8 frames, out=": lambda: cupyprep.preprocess(frames, (640, 640), out=out4),
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
