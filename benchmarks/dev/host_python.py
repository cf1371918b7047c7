"""The Python of preprocess's S1 / S4 calls, of warps (S3's and others), and of resize and
normalize calls, alone, general path against launch plan: the calls run under the CPU kernel
emulator with every launch stubbed out, so what is timed is cupyprep's own argument handling
(no GPU, no CuPy or torch work).

    python -m benchmarks.dev.host_python
"""
from __future__ import annotations

import contextlib
import time

import numpy as np


def main(calls=2000, rounds=5):
    import cupyprep
    from cupyprep import _kernels, testing

    from ..latency import general_path

    rng = np.random.default_rng(0)
    frame = np.zeros((1080, 1920, 3), np.uint8)
    out1 = np.empty((1, 3, 640, 640), np.float16)
    frames = [np.zeros((int(h), int(w), 3), np.uint8)
              for h, w in zip(rng.integers(360, 1080, 8), rng.integers(480, 1920, 8))]
    out4 = np.empty((8, 3, 640, 640), np.float32)
    small = np.empty((360, 640, 3), np.uint8)
    batch = np.zeros((8, 256, 256, 3), np.uint8)
    square = np.zeros((640, 640, 3), np.uint8)
    square_out = np.empty((3, 640, 640), np.float16)
    img = np.zeros((512, 512, 3), np.uint8)
    out3 = np.empty_like(img)
    fbatch = np.zeros((8, 256, 256, 3), np.float32)
    m = cupyprep.get_rotation_matrix_2d((255.5, 255.5), 30.0, 1.0)
    per_image = np.stack([m] * 8)
    h = np.array([[1.0, 0.1, 3.0], [0.05, 0.9, 2.0], [1e-4, 2e-4, 1.0]])
    cases = {
        "S1 one 1080p frame, out=": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16", out=out1),
        "S1 one 1080p frame, new output": lambda: cupyprep.preprocess(frame, (640, 640), dtype="float16"),
        "S4 a list of 8 frames, out=": lambda: cupyprep.preprocess(frames, (640, 640), out=out4),
        "resize one 1080p frame to 360x640 linear": lambda: cupyprep.resize(frame, (360, 640)),
        "resize one 1080p frame to 360x640 linear, out=": lambda: cupyprep.resize(frame, (360, 640), out=small),
        "resize one 1080p frame to 720x1280 area (weighted)": lambda: cupyprep.resize(
            frame, (720, 1280), interpolation="area"),
        "resize a 1080p HW plane to 540x960 cubic": lambda: cupyprep.resize(frame[:, :, 0], (540, 960),
                                                                              interpolation="cubic"),
        "resize an NHWC batch of 8 to 224x224 linear": lambda: cupyprep.resize(batch, (224, 224), layout="NHWC"),
        "normalize one 640x640 frame to CHW float32, ImageNet": lambda: cupyprep.normalize(
            square, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255, swap_rb=True),
        "normalize one 640x640 frame to CHW float16, out=": lambda: cupyprep.normalize(
            square, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255, swap_rb=True,
            dtype="float16", out=square_out),
        "normalize an NHWC batch of 8 to NCHW float32": lambda: cupyprep.normalize(
            batch, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255, layout="NCHW"),
        "S3 warp_affine 512x512, out=": lambda: cupyprep.warp_affine(img, m, (512, 512), out=out3),
        "warp_affine 512x512, new output": lambda: cupyprep.warp_affine(img, m, (512, 512)),
        "warp_affine batch of 8, one matrix per image": lambda: cupyprep.warp_affine(fbatch, per_image, (256, 256)),
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
                        best = float("inf")
                        for _ in range(rounds):  # the best round: other work on the machine only adds
                            t0 = time.perf_counter()
                            for _ in range(calls):
                                call()
                            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
                        per_call.append(best)
                print(f"{name}: general path {per_call[0]:.1f} us, plan {per_call[1]:.1f} us")
        finally:
            _kernels.get_function = real


if __name__ == "__main__":
    main()
