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


# --- nms / batched_nms: the Python of a call, and what it asks of the device -----------------------
class _Tally:
    """Per call: kernel lookups by name, launches, allocations, library sorts, arrays made
    of scratch memory (views) and scratch addresses passed as numbers (pointers), uploads
    and device queries, counted by wrapping the functions that do them (launches stubbed,
    sorts stubbed to an empty result of the right size)."""

    FIELDS = ("lookups", "launches", "allocations", "sorts", "views", "pointers", "uploads", "queries")

    def __init__(self):
        self.counts = dict.fromkeys(self.FIELDS, 0)

    def bump(self, field):
        self.counts[field] += 1

    @contextlib.contextmanager
    def installed(self):
        import importlib
        import importlib.util

        from cupyprep import _arrays, _kernels, _nms_pipeline, _transfers

        def launch(*args, **kw):
            self.bump("launches")

        def lookup(filename, expr):
            self.bump("lookups")
            return launch

        def counted(field, fn):
            def wrapper(*args, **kw):
                self.bump(field)
                return fn(*args, **kw)
            return wrapper

        def sort_stub(call, native, view):
            self.bump("sorts")
            return np.empty(view.shape, np.int64)

        patches = [(_kernels, "get_function", lookup), (_nms_pipeline, "_argsort", sort_stub),
                   (_nms_pipeline, "_sorted", sort_stub),
                   (_arrays.Prepared, "output", counted("allocations", _arrays.Prepared.output)),
                   (_transfers, "upload", counted("uploads", _transfers.upload)),
                   (_transfers, "upload_like", counted("uploads", _transfers.upload_like)),
                   (_kernels, "multiprocessors", counted("queries", _kernels.multiprocessors))]
        # arrays made of scratch memory (a CuPy array or torch view each on the device), and
        # scratch addresses passed as numbers (where the pipeline has them)
        plan_module = importlib.import_module("cupyprep._nms_plan") if importlib.util.find_spec(
            "cupyprep._nms_plan") else None
        for module, owner, name, field in ((_nms_pipeline, "Carve", "view", "views"),
                                           (_nms_pipeline, "Carve", "native", "views"),
                                           (plan_module, "Carve", "array", "views"),
                                           (plan_module, "Carve", "argument", "pointers")):
            cls = getattr(module, owner, None)
            if cls is not None:
                patches.append((cls, name, counted(field, getattr(cls, name))))
        kept = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
        for owner, name, value in patches:
            setattr(owner, name, value)
        try:
            yield self
        finally:
            for owner, name, value in kept:
                setattr(owner, name, value)


def _nms_general_path():
    """nms without its launch plans, where it has them."""
    import importlib

    from cupyprep import _plans

    module = importlib.import_module("cupyprep.nms")
    if not hasattr(module, "_PLANS"):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def swapped():
        kept, module._PLANS = module._PLANS, _plans.PlanCache(maxsize=0)
        try:
            yield
        finally:
            module._PLANS = kept

    return swapped()


def nms_main(calls=2000):
    """nms / batched_nms at W3's sizes: microseconds of Python per call and the counts per
    call, on the general path and (where nms keeps plans) on a repeated call's plan.

        python -c "from benchmarks.dev.host_python import nms_main; nms_main()"
    """
    import cupyprep
    from cupyprep import _plans, testing

    rng = np.random.default_rng(0)

    def boxes(n, dtype):
        c = rng.uniform(0, 1000, (n, 2))
        s = rng.uniform(10, 110, (n, 2))
        return np.concatenate([c - s / 2, c + s / 2], axis=1).astype(dtype)

    sets = {(n, dt): (boxes(n, dt), rng.random(n).astype(dt), rng.integers(0, 80, n).astype(np.int64))
            for n in (1000, 5000, 20000) for dt in (np.float32, np.float16)}

    head = (boxes(8400, np.float32)[None], (rng.random((1, 8400, 80)) ** 8).astype(np.float32))

    def case(op, n, dtype, return_count):
        if op == "multiclass_nms":  # S2: one image's YOLO head
            return lambda: cupyprep.multiclass_nms(*head, score_threshold=0.25, top_k=1000)
        b, s, c = sets[(n, dtype)]
        if op == "nms":
            return lambda: cupyprep.nms(b, s, 0.5, return_count=return_count)
        return lambda: cupyprep.batched_nms(b, s, c, 0.5, return_count=return_count)

    cases = [("nms", 1000, np.float32, True), ("nms", 1000, np.float32, False), ("nms", 1000, np.float16, True),
             ("nms", 5000, np.float32, True), ("batched_nms", 1000, np.float32, True),
             ("batched_nms", 1000, np.float16, False), ("batched_nms", 20000, np.float32, True),
             ("multiclass_nms", 8400, np.float32, True)]
    with testing.emulate():
        for op, n, dtype, return_count in cases:
            call = case(op, n, dtype, return_count)
            name = f"{op} {n} {np.dtype(dtype).name} return_count={return_count}"
            for label, plans in (("general path", _nms_general_path), ("repeated call", contextlib.nullcontext)):
                _plans.clear_all()  # a plan holds the launch stubs of the tally it was made under
                with plans():
                    tally = _Tally()
                    with tally.installed():
                        for _ in range(50):
                            call()
                        rounds = []  # the best of five rounds: other work on the machine only adds
                        for _ in range(5):
                            t0 = time.perf_counter()
                            for _ in range(calls // 5):
                                call()
                            rounds.append((time.perf_counter() - t0) / (calls // 5) * 1e6)
                        us = min(rounds)
                        tally.counts = dict.fromkeys(tally.FIELDS, 0)
                        call()
                counts = ", ".join(f"{k} {v}" for k, v in tally.counts.items())
                print(f"{name}, {label}: {us:.1f} us; per call: {counts}")

