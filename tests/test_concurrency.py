"""Many host threads at once: 8 threads call every op family in a loop, each on its own
inputs (and on a GPU its own CuPy and torch stream), and get what the same calls give one
after another; threads racing to compile one kernel variant compile it once, and none of
them sees a half-built cache entry."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from conftest import random_image
from op_cases import flat, image_ops, post_ops, to_host

THREADS = 8
# on the CPU backend these two are NumPy loops over thousands of boxes: fewer boxes there
CPU_BOXES = {"nms_large": 600, "batched_nms": 600}
EMULATED_POST_OPS = ("warp_affine", "warp_perspective", "random_affine", "nms_small", "multiclass_nms",
                     "roi_align", "box_iou", "decode_boxes", "decode_yolo")


def thread_cases(thread, names=None, boxes=None):
    """Every op's (name, inputs, call) with inputs of this thread's own: the images drawn
    from its seed, the other inputs rolled by ``thread + 1`` along their first axis (boxes,
    scores and classes together)."""
    rng = np.random.default_rng(1000 + thread)
    images = random_image(rng, (2, 30, 40, 3), np.uint8)
    cases = [(name, (images,), call) for name, call in image_ops()]
    for name, inputs, call in post_ops():
        keep = (boxes or {}).get(name)
        inputs = tuple(np.roll(a[:keep] if keep and a.ndim else a, thread + 1, axis=0)
                       if isinstance(a, np.ndarray) and a.ndim else a for a in inputs)
        cases.append((name, inputs, call))
    return [c for c in cases if names is None or c[0] in names or c[0] in dict(image_ops())]


def as_host(result):
    return to_host(flat(result))


def run_threads(work, n=THREADS):
    """``work(thread)`` in n threads started together; their results (or the first error)."""
    start = threading.Barrier(n)
    results = [None] * n
    errors = []

    def body(t):
        try:
            start.wait()
            results[t] = work(t)
        except BaseException as exc:  # reported in the test's thread
            errors.append((t, exc))

    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0][1]
    return results


def assert_same(threaded, serial):
    for t, (got, want) in enumerate(zip(threaded, serial)):
        for (name, g), (_, w) in zip(got, want):
            assert len(g) == len(w), (t, name)
            for a, b in zip(g, w):
                np.testing.assert_array_equal(a, b, err_msg=f"thread {t}, {name}")


def calls(cases, rounds, convert=lambda a: a):
    out = []
    for _ in range(rounds):
        for name, inputs, call in cases:
            out.append((name, as_host(call(*[convert(a) for a in inputs]))))
    return out


# --- the CPU backend and the emulated kernels -----------------------------------------------
def test_threads_on_the_cpu_backend_equal_serial_calls():
    cases = [thread_cases(t, boxes=CPU_BOXES) for t in range(THREADS)]
    serial = [calls(c, 1) * 3 for c in cases]
    threaded = run_threads(lambda t: calls(cases[t], 3))
    assert_same(threaded, serial)
    assert sum(len(r) for r in threaded) == THREADS * 3 * len(cases[0])


@pytest.mark.emulated
def test_threads_on_emulated_kernels_equal_serial_calls():
    from cupyprep.testing import emulate

    cases = [thread_cases(t, EMULATED_POST_OPS) for t in range(THREADS)]
    with emulate():
        serial = [calls(c, 1) for c in cases]
        threaded = run_threads(lambda t: calls(cases[t], 1))
    assert_same(threaded, serial)


# --- compiling a variant once -----------------------------------------------------------------
class SlowModule:
    """A stand-in for ``cupy.RawModule``: counts builds, takes a while, and marks its
    functions finished only at the end of the build."""

    builds = 0
    lock = threading.Lock()

    def __init__(self, code, options, name_expressions):
        with SlowModule.lock:
            SlowModule.builds += 1
        self.expr = name_expressions[0]
        time.sleep(0.2)  # the others arrive while this one builds
        self.finished = True

    def get_function(self, expr):
        assert expr == self.expr
        return ("kernel", expr, self)


def test_threads_racing_to_compile_one_variant_build_it_once(monkeypatch):
    cupy = pytest.importorskip("cupy")
    from cupyprep import _kernels

    monkeypatch.setattr(cupy, "RawModule", SlowModule)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(_kernels, "_cuda_cache", {})
    monkeypatch.setattr(SlowModule, "builds", 0)
    filename, expr = _kernels.variants("resize")[0]
    other = _kernels.variants("resize")[1][1]

    def work(t):
        fn = _kernels._cuda_function(filename, expr if t % 4 else other)
        return fn, fn[2].finished

    got = run_threads(work, 16)
    assert SlowModule.builds == 2  # one per variant, not one per thread
    assert all(finished for _, finished in got)
    firsts = {id(fn) for (fn, _), t in zip(got, range(16)) if t % 4}
    assert len(firsts) == 1  # every thread has the one cached function


@pytest.mark.emulated
def test_threads_racing_on_the_emulator_compile_once(tmp_path):
    from cupyprep import _kernels
    from cupyprep.testing import Emulator

    em = Emulator(cache_dir=tmp_path)  # an empty cache: the first calls compile
    filename, expr = next(v for v in _kernels.variants("color"))
    got = run_threads(lambda t: em.get_function(filename, expr))
    assert em.compile_count == 1
    assert len({id(fn) for fn in got}) == 1


# --- GPU: each thread on its own CuPy and torch streams ----------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_gpu_threads_on_their_own_streams_equal_serial_calls(kind):
    import cupy

    if kind == "torch":
        torch = pytest.importorskip("torch")

        def convert(a):
            return torch.from_numpy(np.ascontiguousarray(a)).cuda() if isinstance(a, np.ndarray) else a
    else:
        def convert(a):
            return cupy.asarray(a) if isinstance(a, np.ndarray) else a

    # under compute-sanitizer one round: every op family still runs on eight threads at
    # once, and the run fits the tool's time (four rounds outlasted initcheck's 300 s budget)
    rounds = 1 if os.environ.get("CUPYPREP_TEST_SANITIZER") else 4
    cases = [thread_cases(t) for t in range(THREADS)]
    serial = [calls(c, 1, convert) * rounds for c in cases]

    def work(t):
        if kind == "torch":
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                return calls(cases[t], rounds, convert)
        with cupy.cuda.Stream(non_blocking=True):
            return calls(cases[t], rounds, convert)

    threaded = run_threads(work)
    assert_same(threaded, serial)
