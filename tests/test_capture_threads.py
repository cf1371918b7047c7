"""Ops called while another thread captures a CUDA graph on a stream of its own.

Thread A makes one call of preprocess and nms (``return_count=True``) on its stream (kernels
compiled, pools warm), then captures the same calls there; meanwhile thread B calls several
op families on its own stream. The threads meet at a barrier and two events, so B's calls
run while A's capture is open (no timing beyond that); every wait has a time limit, and a
thread still alive after its join fails the test.

- ``thread_local`` and ``relaxed`` captures (``torch.cuda.graph(capture_error_mode=...)``;
  ``cupy.cuda.Stream.begin_capture(mode=...)``, whose default is relaxed): CUDA ignores
  other threads' calls, so B works as it would alone (host uploads, new allocations, read
  backs, even a raw ``cudaMalloc``) and gets what serial calls give; A's graph, replayed
  after new input values are copied in, computes what a direct call computes.
- ``global`` (``torch.cuda.graph``'s default): CUDA refuses potentially unsafe calls, such
  as ``cudaMalloc``, from every thread while the capture is open, and the refusal
  invalidates the capture. Each of B's calls either works and is right, or raises a CUDA
  error (never a wrong result); A's capture either replays right or ends with a CUDA error;
  after it, every call works and is right, also those that raised (no half-built cache
  entry stays behind).
- While a *blocking* stream captures, the legacy default stream is unusable from any
  thread whatever the mode: a call there raises a CUDA error, and works after the capture.

Outputs are poisoned (filled with a value no kernel writes by accident) as they are
allocated, and graph outputs again before the replay, so an element left unwritten shows.
Each test is confined to its own process's threads (xdist workers are processes), so none
needs the ``serial`` marker.
"""
from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import cupyprep
from conftest import cupy_pool_off, random_image, torch_graphs_need_caching
from op_cases import boxes_xyxy, flat, to_host

WAIT = 120.0  # seconds a thread waits for the other before the test fails (no hang)
RESERVE = 32 << 20  # bytes of CuPy's pool kept free for a CuPy capture's allocations
TESTS = Path(__file__).resolve().parent


# --- the calls ---------------------------------------------------------------------------------
def captured_ops(x, boxes, scores):
    """Thread A's calls: a letterbox batch and a sync-free NMS."""
    batch, _ = cupyprep.preprocess(x, (32, 32))
    keep, count = cupyprep.nms(boxes, scores, 0.5, return_count=True)
    return batch, keep, count


def a_inputs(seed):
    """Host inputs of thread A's calls: ``(x, boxes, scores)``."""
    rng = np.random.default_rng(seed)
    boxes = boxes_xyxy(rng, 500)
    return random_image(rng, (2, 30, 40, 3), np.uint8), boxes, rng.permutation(500).astype(np.float32) / 500


def warm_cases():
    """Thread B's calls, (name, host inputs, call): several op families, each called by B
    once before the capture opens (kernels loaded, tables made, B's pools warm)."""
    rng = np.random.default_rng(31)
    imgs = random_image(rng, (2, 30, 40, 3), np.uint8)
    boxes = boxes_xyxy(rng, 600)
    scores = rng.permutation(600).astype(np.float32) / 600
    feats = rng.standard_normal((2, 8, 20, 30)).astype(np.float32)
    rois = np.concatenate([rng.integers(0, 2, (40, 1)), boxes_xyxy(rng, 40) / 40], axis=1).astype(np.float32)
    rot = cupyprep.get_rotation_matrix_2d((20.0, 15.0), 30.0, 0.9)  # one host matrix: passed by value
    return [
        ("resize", (imgs,), lambda x: cupyprep.resize(x, (17, 29))),
        ("resize_area", (imgs,), lambda x: cupyprep.resize(x, (17, 29), interpolation="area")),
        ("normalize", (imgs,),
         lambda x: cupyprep.normalize(x, (0.4, 0.5, 0.6), (0.2, 0.2, 0.2), scale=1 / 255)),
        ("to_gray", (imgs,), cupyprep.to_gray),
        ("warp_affine", (imgs,), lambda x: cupyprep.warp_affine(x, rot, (30, 40))),
        ("nms", (boxes, scores), lambda b, s: cupyprep.nms(b, s, 0.5, return_count=True)),
        ("roi_align", (feats, rois), lambda f, r: cupyprep.roi_align(f, r, 7, 0.5, 2, aligned=True)),
        ("box_iou", (boxes[:50], boxes[50:120]), cupyprep.box_iou),
    ]


def cold_cases():
    """Calls thread B makes first under the capture: an area resize of new sizes (its
    tables are made and uploaded by that call) and a kernel variant no other call here
    uses (compiled and loaded by that call, in a fresh process)."""
    rng = np.random.default_rng(32)
    imgs = random_image(rng, (2, 30, 40, 3), np.uint8)
    deep = random_image(rng, (2, 30, 40, 3), np.uint16)
    return [
        ("resize_area_new_sizes", (imgs,), lambda x: cupyprep.resize(x, (13, 21), interpolation="area")),
        ("resize_cubic_uint16", (deep,), lambda x: cupyprep.resize(x, (13, 21), interpolation="cubic")),
    ]


# --- arrays of either kind -------------------------------------------------------------------------
def to_device(kind):
    """A function putting a host array on the device as ``kind`` (other values as they are),
    on the calling thread's current stream."""
    if kind == "torch":
        import torch

        return lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda() if isinstance(a, np.ndarray) else a
    import cupy

    return lambda a: cupy.asarray(a) if isinstance(a, np.ndarray) else a


def own_stream(kind):
    """A new stream of ``kind`` made current on this thread (a context manager)."""
    if kind == "torch":
        import torch

        return torch.cuda.stream(torch.cuda.Stream())
    import cupy

    return cupy.cuda.Stream(non_blocking=True)


def synchronize():
    import cupy

    cupy.cuda.Device().synchronize()


def poison_value(dtype):
    dtype = np.dtype(dtype)
    return np.nan if dtype.kind == "f" else np.iinfo(dtype).max // 3 + 7


def numpy_dtype(a):
    if isinstance(a.dtype, np.dtype):  # CuPy
        return a.dtype
    import torch

    return torch.empty(0, dtype=a.dtype).numpy().dtype


def fill(a, value):
    if hasattr(a, "fill_"):
        a.fill_(value)
    else:
        a.fill(value)


@contextlib.contextmanager
def poisoned():
    """While entered, every integer or float array an op allocates (its outputs, and scratch
    carved from such allocations) starts filled with :func:`poison_value`, on the launch
    stream (so a capture captures the fill too)."""
    from cupyprep import _arrays

    allocate = _arrays.Prepared.output

    def output(self, out, shape, dtype, name="out"):
        native, view = allocate(self, out, shape, dtype, name)
        if out is None and np.dtype(dtype).kind in "fiu":
            view.fill(poison_value(dtype))
        return native, view

    _arrays.Prepared.output = output
    try:
        yield
    finally:
        _arrays.Prepared.output = allocate


def calls(cases, args):
    """Each case's call on its device arguments: ``{name: [device arrays]}``."""
    return {name: flat(call(*args[name])) for name, _, call in cases}


def upload(cases, convert):
    return {name: [convert(a) for a in inputs] for name, inputs, _ in cases}


def assert_same(got, want, what):
    assert got.keys() == want.keys(), what
    for name in want:
        assert len(got[name]) == len(want[name]), (what, name)
        for g, w in zip(got[name], want[name]):
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: {name}")


def is_cuda_error(exc):
    """Whether ``exc`` is an error CUDA reported (through CuPy or torch): not an argument
    check of cupyprep's, not an assertion."""
    import cupy

    if isinstance(exc, (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError)):
        return True
    text = str(exc)
    # "Invalid capture.": torch's word for a capture that CUDA ended without a graph
    return isinstance(exc, RuntimeError) and any(
        s in text for s in ("CUDA error", "cudaError", "CUDA_ERROR", "Invalid capture"))


def describe_error(exc):
    return f"{type(exc).__module__}.{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


# --- the two threads -------------------------------------------------------------------------------
class Meeting:
    """Where threads A and B meet: ``ready`` (both warmed up), ``opened`` (A's capture is
    open), ``done`` (B's calls under the capture are over). A thread that fails sets
    ``failed`` and releases every wait, so the other fails at once instead of waiting."""

    def __init__(self):
        self.ready = threading.Barrier(2, timeout=WAIT)
        self.opened = threading.Event()
        self.done = threading.Event()
        self.failed = False
        self.keep = []  # objects the threads made that outlive them

    def wait(self, event, what):
        if not event.wait(WAIT):
            raise TimeoutError(f"waited {WAIT:.0f} s for {what}")
        if self.failed:
            raise RuntimeError(f"the other thread failed before {what}")

    def give_up(self):
        self.failed = True
        self.ready.abort()
        self.opened.set()
        self.done.set()


def in_two_threads(meeting, a_work, b_work):
    """``a_work()`` and ``b_work()`` in two threads: their results, or the first error."""
    results, errors = {}, []

    def body(name, work):
        try:
            results[name] = work()
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
            meeting.give_up()

    threads = [threading.Thread(target=body, args=(name, work), daemon=True)
               for name, work in (("A", a_work), ("B", b_work))]
    # collect now and not while the capture is open: a CUDA object freed then (a stream, an
    # event) makes a call the capture may refuse
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(3 * WAIT)
    finally:
        if collecting:
            gc.enable()
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return results["A"], results["B"]


class TorchCapture:
    """``torch.cuda.graph`` on a side stream, in one of torch's ``capture_error_mode`` s."""

    def __init__(self, mode):
        import torch

        self.torch, self.mode = torch, mode
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def warm(self, fn):
        torch = self.torch
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            fn()
        torch.cuda.current_stream().wait_stream(self.stream)

    def begin(self):
        self.context = self.torch.cuda.graph(self.graph, stream=self.stream, capture_error_mode=self.mode)
        self.context.__enter__()

    def end(self):
        self.context.__exit__(None, None, None)

    def replay(self):
        self.graph.replay()


class CupyCapture:
    """``cupy.cuda.Stream.begin_capture`` on a non-blocking stream (``blocking=True``: a
    blocking one); mode "relaxed" is CuPy's default (``begin_capture()`` without a mode)."""

    def __init__(self, mode, blocking=False):
        import cupy

        self.cupy = cupy
        name = {"global": "streamCaptureModeGlobal", "thread_local": "streamCaptureModeThreadLocal",
                "relaxed": None}[mode]
        self.mode = None if name is None else getattr(cupy.cuda.runtime, name)
        self.stream = cupy.cuda.Stream(non_blocking=not blocking)

    def warm(self, fn):
        """``fn()`` on the stream, then room in CuPy's pool for that stream: under capture
        cupyprep keeps every block a call allocates (the graph replays into them), so the
        call needs more blocks than it did outside, and outside relaxed mode a capturing
        thread may not cudaMalloc. A block freed at once leaves a chunk the pool splits.
        The stream is first ordered after the legacy stream, where the test made the inputs
        (as the torch capture's ``wait_stream``): with a stream-ordered allocator
        (``POOLS=async``) memcheck reported the inputs' blocks as read before their
        allocation, the device synchronize between not counting as an order."""
        self.stream.wait_event(self.cupy.cuda.Stream.null.record())
        with self.stream:
            fn()
            self.cupy.empty(RESERVE, self.cupy.uint8)
        self.stream.synchronize()

    def begin(self):
        self.stream.__enter__()
        try:
            if self.mode is None:
                self.stream.begin_capture()
            else:
                self.stream.begin_capture(mode=self.mode)
        except BaseException:
            self.stream.__exit__(None, None, None)
            raise

    def end(self):
        try:
            self.graph = self.stream.end_capture()
        finally:
            self.stream.__exit__(None, None, None)

    def replay(self):
        self.graph.launch(self.stream)


def skip_without_pool(kind, mode):
    """A CuPy capture in other than relaxed mode needs CuPy's default pool (conftest turns
    it off for CUPYPREP_TEST_NO_POOL=1, and replaces it for CUPYPREP_TEST_ASYNC_POOL=1):
    without a pool every allocation is a cudaMalloc, and CuPy's stream-ordered pool calls
    cudaMemPoolGetAttribute as it allocates; the capturing thread may make neither in
    global or thread_local mode (under memcheck with the stream-ordered pool, both such
    tests' captures were invalidated by that call). A torch capture allocates into its
    graph only through torch's caching allocator."""
    if kind == "torch":
        torch_graphs_need_caching()
    if kind == "cupy" and mode != "relaxed" and cupy_pool_off():
        pytest.skip("a CuPy capture outside relaxed mode allocates from CuPy's default pool, not in use here")


def capture(kind, mode):
    return TorchCapture(mode) if kind == "torch" else CupyCapture(mode)


def a_work(cap, args, meeting):
    """Thread A: a call of :func:`captured_ops` (compiled, pools warm), the barrier, the
    capture of the same calls held open until B is done. Returns ``(outputs, end_error)``,
    ``end_error`` what ending the capture raised (None: the graph can be replayed)."""
    cap.warm(lambda: captured_ops(*args))
    meeting.ready.wait()
    cap.begin()
    try:
        outs = flat(captured_ops(*args))
    except BaseException:
        meeting.give_up()
        with contextlib.suppress(Exception):
            cap.end()
        raise
    meeting.opened.set()
    waited = None
    try:
        meeting.wait(meeting.done, "thread B's calls under the capture")
    except BaseException as exc:  # raised once the capture is ended
        waited = exc
    try:
        cap.end()
        end_error = None
    except Exception as exc:  # the capture was invalidated
        end_error = exc
    if waited is not None:
        raise waited
    return outs, end_error


def b_work(kind, meeting, before, under):
    """Thread B, on its own stream: ``before()``, the barrier, ``under()`` while A's capture
    is open; returns what ``under()`` returned."""
    stream = own_stream(kind)
    meeting.keep.append(stream)  # a CuPy stream destroyed while the capture is open: a call it may refuse
    try:
        with stream:
            before()
            meeting.ready.wait()
            meeting.wait(meeting.opened, "thread A's capture to open")
            return under()
    finally:
        meeting.done.set()


def check_replay(cap, args, fresh, outs, want):
    """New values copied into the captured calls' inputs and the outputs poisoned, one
    replay computes what a direct call on those values computed."""
    for dst, src in zip(args, fresh):
        dst[...] = src
    for o in outs:
        fill(o, poison_value(numpy_dtype(o)))
    synchronize()
    cap.replay()
    synchronize()
    got = to_host(outs)
    assert len(got) == len(want)
    for name, g, w in zip(("batch", "keep", "count"), got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"the graph's replay: {name}")


# --- thread_local and relaxed: the other thread works as usual --------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["thread_local", "relaxed"])
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_calls_beside_a_thread_local_or_relaxed_capture_work_as_usual(kind, mode):
    """While thread A's capture (``thread_local``, or ``relaxed``: CuPy's default) is open,
    thread B on its own stream uploads host inputs, calls several op families (with the
    :func:`cold_cases`: a first call of new sizes, whose tables it makes and uploads, and of
    a kernel variant), reads the results back and allocates device memory with a raw
    ``cudaMalloc``: all of it works, and the results equal serial calls (for the cold
    cases, made after the capture; the new area tables give OpenCV's result). A's graph
    then replays new input values as a direct call computes them."""
    if kind == "torch":
        pytest.importorskip("torch")
    skip_without_pool(kind, mode)
    import cupy

    convert = to_device(kind)
    warm, cold = warm_cases(), cold_cases()
    serial = {name: to_host(out) for name, out in calls(warm, upload(warm, convert)).items()}
    args = [convert(a) for a in a_inputs(41)]
    fresh = [convert(a) for a in a_inputs(42)]
    want = to_host(flat(captured_ops(*fresh)))
    synchronize()

    meeting, cap = Meeting(), capture(kind, mode)
    cases = warm + cold  # the cold ones' first calls in this test are B's, under the capture

    def under():
        got = {name: to_host(out) for name, out in calls(cases, upload(cases, convert)).items()}
        return got, cupy.cuda.runtime.malloc(1 << 20)

    with poisoned():
        (outs, end_error), (got, block) = in_two_threads(
            meeting, lambda: a_work(cap, args, meeting),
            lambda: b_work(kind, meeting, lambda: calls(warm, upload(warm, convert)), under))
    cupy.cuda.runtime.free(block)  # after the capture: cudaFree may synchronize the device
    serial.update((name, to_host(out)) for name, out in calls(cold, upload(cold, convert)).items())
    assert_same(got, serial, "thread B under the capture")
    area = {name: inputs for name, inputs, _ in cold}["resize_area_new_sizes"][0]
    np.testing.assert_array_equal(got["resize_area_new_sizes"][0],  # tables B made: OpenCV's result
                                  cupyprep.resize(area, (13, 21), interpolation="area"))
    assert end_error is None, describe_error(end_error)
    check_replay(cap, args, fresh, outs, want)


# --- global: CUDA refuses unsafe calls from every thread -------------------------------------------
@pytest.mark.gpu
def test_global_capture_refuses_another_threads_malloc():
    """Under a capture in global mode (``torch.cuda.graph``'s default), CUDA refuses a
    ``cudaMalloc`` from another thread, and the refusal invalidates the capture: ending it
    raises. After it, the same allocation works."""
    import cupy

    skip_without_pool("cupy", "global")
    meeting, cap = Meeting(), CupyCapture("global")
    x, boxes, scores = (cupy.asarray(a) for a in a_inputs(43))
    synchronize()

    def under():
        try:
            block = cupy.cuda.runtime.malloc(1 << 20)
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            return exc
        cupy.cuda.runtime.free(block)
        return None

    (_, end_error), refused = in_two_threads(
        meeting, lambda: a_work(cap, (x, boxes, scores), meeting),
        lambda: b_work("cupy", meeting, lambda: None, under))
    assert refused is not None, "cudaMalloc in another thread worked under a global capture"
    assert end_error is not None and is_cuda_error(end_error), "the refusal did not invalidate the capture"
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1 << 20))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_calls_beside_a_global_capture_work_or_raise_a_cuda_error(kind):
    """Thread B's calls while A's capture in global mode is open (B's inputs already on the
    device, B's pools warmed by a first call of each, except the :func:`cold_cases`): each
    works and equals a serial call, or raises a CUDA error; A's capture replays right or
    ends with a CUDA error; after it, every call works and is right.

    Run in a fresh process (:func:`global_scenario`): there every cold case is really a
    first call, and torch's allocator, which keeps counting a capture whose end failed as
    underway (later ``torch.cuda.empty_cache()`` and captures in that process then fail),
    affects nothing else. ``-rP`` shows which calls worked and which raised."""
    if kind == "torch":
        pytest.importorskip("torch")
    skip_without_pool(kind, "global")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(TESTS.parent), env.get("PYTHONPATH")]))
    code = f"import test_capture_threads as t; t.global_scenario({kind!r})"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=TESTS.parent, timeout=4 * WAIT, check=False)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr[-6000:]


def global_scenario(kind):
    """The test above, in the process it starts. Prints each call's outcome."""
    convert = to_device(kind)
    warm, cold = warm_cases(), cold_cases()
    serial = {name: to_host(out) for name, out in calls(warm, upload(warm, convert)).items()}
    args = [convert(a) for a in a_inputs(44)]
    fresh = [convert(a) for a in a_inputs(45)]
    want = to_host(flat(captured_ops(*fresh)))
    synchronize()

    meeting, cap = Meeting(), capture(kind, "global")
    b_args = {}

    def before():
        b_args.update(upload(warm + cold, convert))  # no host copies under the capture
        calls(warm, b_args)

    def under():
        got = {}
        for name, _, call in warm + cold:
            try:
                got[name] = flat(call(*b_args[name]))
            except Exception as exc:  # judged below: a CUDA error, or the test fails
                got[name] = exc
        return got

    with poisoned():
        (outs, end_error), got = in_two_threads(
            meeting, lambda: a_work(cap, args, meeting), lambda: b_work(kind, meeting, before, under))
    synchronize()

    # after the capture, every call works and is right
    after = {name: to_host(out) for name, out in calls(warm + cold, b_args).items()}
    assert_same({n: after[n] for n in serial}, serial, "after the capture")
    area = {name: inputs for name, inputs, _ in cold}["resize_area_new_sizes"][0]
    np.testing.assert_array_equal(after["resize_area_new_sizes"][0],  # its tables made now: OpenCV's result
                                  cupyprep.resize(area, (13, 21), interpolation="area"))
    for g, w in zip(to_host(flat(captured_ops(*fresh))), want):
        np.testing.assert_array_equal(g, w, err_msg="thread A's calls after the capture")

    for name, result in got.items():
        if isinstance(result, Exception):
            print(f"{kind} B {name}: raised {describe_error(result)}")
            assert is_cuda_error(result), f"{name} raised other than a CUDA error: {describe_error(result)}"
        else:
            print(f"{kind} B {name}: worked")
            assert_same({name: to_host(result)}, {name: after[name]}, "thread B under the capture")
    if end_error is None:
        print(f"{kind} A capture: valid")
        check_replay(cap, args, fresh, outs, want)
    else:
        print(f"{kind} A capture: ended with {describe_error(end_error)}")
        assert is_cuda_error(end_error), describe_error(end_error)


# --- the legacy default stream beside a blocking stream's capture ----------------------------------
@pytest.mark.gpu
def test_legacy_stream_refused_while_a_blocking_stream_captures():
    """While a blocking stream (``cupy.cuda.Stream()`` without ``non_blocking``) captures,
    even in thread_local mode, CUDA refuses work on the legacy default stream from any
    thread: an op there raises a CUDA error. After the capture the same call works and
    equals a serial call."""
    import cupy

    skip_without_pool("cupy", "thread_local")
    if cupy.cuda.get_current_stream().ptr != 0:
        pytest.skip("CuPy's default stream here is the per-thread one, not the legacy stream")
    name, inputs, call = warm_cases()[0]
    x = cupy.asarray(inputs[0])
    want = cupy.asnumpy(call(x))
    a_args = [cupy.asarray(a) for a in a_inputs(46)]
    synchronize()
    meeting, cap = Meeting(), CupyCapture("thread_local", blocking=True)

    def on_legacy():
        call(x)  # warm: nothing to allocate beyond the pool
        cupy.cuda.Stream.null.synchronize()
        meeting.ready.wait()
        meeting.wait(meeting.opened, "thread A's capture to open")
        try:
            call(x)
        except Exception as exc:  # judged in the test's thread
            return exc
        finally:
            meeting.done.set()
        return None

    with poisoned():
        _, refused = in_two_threads(meeting, lambda: a_work(cap, a_args, meeting), on_legacy)
    assert refused is not None, f"{name} ran on the legacy stream beside a blocking stream's capture"
    assert is_cuda_error(refused), describe_error(refused)
    np.testing.assert_array_equal(cupy.asnumpy(call(x)), want)


# --- without a GPU: the harness and the caches' part ---------------------------------------------
def test_a_thread_failing_before_the_meeting_releases_the_other_at_once():
    """The harness: a thread that fails before the capture opens releases the other's waits
    (no wait runs to its limit), and its own error is the one reported."""
    meeting = Meeting()
    started = time.monotonic()

    def a_fails():
        raise ValueError("thread A failed")

    def b_waits():
        meeting.ready.wait()
        meeting.wait(meeting.opened, "thread A's capture to open")

    with pytest.raises(ValueError, match="thread A failed"):
        in_two_threads(meeting, a_fails, b_waits)
    assert time.monotonic() - started < WAIT / 4


class RefusedOnce(RuntimeError):
    """Stands in for the CUDA error of a call refused under another thread's capture."""


def test_a_kernel_whose_load_is_refused_is_not_cached(monkeypatch):
    """A kernel variant whose first load raises (as a module load refused under another
    thread's capture does) leaves no entry in the kernel cache: the next call builds and
    caches it, and later calls get that one function."""
    cupy = pytest.importorskip("cupy")
    from cupyprep import _kernels

    builds = []

    class Module:
        def __init__(self, code, options, name_expressions):
            builds.append(name_expressions[0])

        def get_function(self, expr):
            if len(builds) == 1:
                raise RefusedOnce("cudaErrorStreamCaptureUnsupported")
            return ("kernel", expr)

    monkeypatch.setattr(cupy, "RawModule", Module)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(_kernels, "_cuda_cache", {})
    filename, expr = _kernels.variants("resize")[0]
    with pytest.raises(RefusedOnce):
        _kernels._cuda_function(filename, expr)
    assert _kernels._cuda_cache == {}
    fn = _kernels._cuda_function(filename, expr)
    assert fn == ("kernel", expr) and _kernels._cuda_function(filename, expr) is fn
    assert builds == [expr, expr]


def test_a_table_whose_upload_is_refused_is_not_cached(monkeypatch):
    """A device table whose upload raises (as a host copy refused under another thread's
    global capture does) leaves no entry in the cache of tables: the next call makes and
    uploads it, and later calls get that table without making it again."""
    cupy = pytest.importorskip("cupy")
    from cupyprep import _transfers

    class Stream:
        ptr = 7

        @staticmethod
        def is_capturing():
            return False

    class Event:
        def __init__(self, **kw):
            self.done = True

        def record(self, stream):
            pass

    made, uploads = [], []

    def upload(xp, a, what, hint, dtype=None, *, in_graph=True):
        uploads.append(a)
        if len(uploads) == 1:
            raise RefusedOnce("cudaErrorStreamCaptureUnsupported")
        return ("on the device", a)

    def make():
        made.append(1)
        return np.arange(4)

    monkeypatch.setattr(_transfers, "_constants", {})
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: Stream())
    monkeypatch.setattr(cupy.cuda, "Event", Event)
    monkeypatch.setattr(_transfers, "upload", upload)
    key = ("a table", 3)
    with pytest.raises(RefusedOnce):
        _transfers.device_constant(cupy, key, make, "a table", "")
    assert _transfers._constants == {}
    table = _transfers.device_constant(cupy, key, make, "a table", "")
    assert table[0] == "on the device"
    assert _transfers.device_constant(cupy, key, make, "a table", "") is table
    assert len(made) == 2 and len(uploads) == 2
