"""nms / batched_nms launch plans (cupyprep._nms_plan): a repeated call with the same
geometry replays the first call's launches, with no kernel looked up by name and one
allocation (three with a large mask), and gives what the general path gives; a call that differs in anything the
plan fixed takes its own."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, tune

import cupyprep
from cupyprep import _arrays, _kernels, _nms_pipeline, _plans
from cupyprep._specs import nms as nms_spec
from cupyprep.cpu import detection as cpu

nms_module = importlib.import_module("cupyprep.nms")



def launches(monkeypatch):
    """Every kernel launch (under the emulator)."""
    from cupyprep.testing import EmulatedKernel

    return counting(monkeypatch, EmulatedKernel, "__call__")


def scene(seed, n, dtype):
    """W3's boxes at a smaller extent (many overlaps), scores with ties, 5 classes."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0, 300, (n, 2))
    s = rng.uniform(10, 60, (n, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], axis=1).astype(dtype)
    scores = rng.random(n).astype(dtype)
    scores[: n // 5] = scores[n // 2: n // 2 + n // 5]
    return boxes, scores, rng.integers(0, 5, n).astype(np.int64)


def call(kernels, op, data, threshold=0.5, return_count=False):
    boxes, scores, idxs = (kernels.put(a) for a in data)
    if op == "nms":
        out = cupyprep.nms(boxes, scores, threshold, return_count=return_count)
    else:
        out = cupyprep.batched_nms(boxes, scores, idxs, threshold, return_count=return_count)
    if return_count:
        padded, count = (kernels.get(a) for a in out)
        assert padded.shape == (len(data[0]),) and padded.dtype == np.int64 and count.shape == ()
        assert (padded[int(count):] == -1).all()
        return padded[: int(count)]
    return kernels.get(out)


CASES = [("nms", 1), ("nms", 1000), ("nms", 3000), ("nms", 5000), ("batched_nms", 1), ("batched_nms", 1000),
         ("batched_nms", 5000), ("grouped", 1), ("grouped", 1000), ("grouped", 5000)]


@pytest.mark.parametrize("op, n", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("return_count", [False, True])
def test_a_repeated_call_replays_its_plan(kernels, monkeypatch, op, n, dtype, return_count):
    if op == "grouped":  # batched_nms's class-sorted path, here at small sizes
        tune(monkeypatch, nms_spec, grouped_min_boxes=0)
        op = "batched_nms"
    first, second = scene(n, n, dtype), scene(n + 1, n, dtype)
    seen = launches(monkeypatch) if kernels.name == "emulated" else []
    got_first = call(kernels, op, first, return_count=return_count)
    general_launches = len(seen)
    lookups = counting(monkeypatch, _kernels, "get_function")
    allocations = counting(monkeypatch, _arrays.Prepared, "output")
    got_second = call(kernels, op, second, return_count=return_count)
    assert lookups == [], "the repeated call looked a kernel up by name"
    # one allocation; three (scratch, mask, results) where the mask is large
    expected = 1 if _nms_pipeline.mask_bytes(1, n) <= nms_spec.SPEC.one_allocation else 3
    assert len(allocations) == expected, "the repeated call allocated more than it must"
    assert len(seen) == 2 * general_launches
    for data, got in ((first, got_first), (second, got_second)):
        boxes, scores, idxs = data
        np.testing.assert_array_equal(got, cpu.nms(boxes, scores, 0.5, idxs if op == "batched_nms" else None))
    # the general path (no plan) gives the replay's values
    _plans.clear_all()
    np.testing.assert_array_equal(call(kernels, op, second, return_count=return_count), got_second)
    assert len(lookups) > 0


@pytest.mark.parametrize("op", ["nms", "batched_nms"])
def test_no_boxes_store_no_plan(kernels, op):
    data = tuple(a[:0] for a in scene(0, 4, np.float32))
    for return_count in (False, True, False):
        got = call(kernels, op, data, return_count=return_count)
        assert got.shape == (0,) and got.dtype == np.int64
    assert len(nms_module._PLANS) == 0


def test_calls_that_differ_get_their_own_plan(kernels, monkeypatch):
    """A threshold of another value or type, return_count, the tuning, scores of other
    strides, idxs of another dtype: each call equals the CPU backend's answer."""
    boxes, scores, idxs = scene(3, 300, np.float32)
    for threshold in (0.5, 0.3, np.float32(0.3), 1, 0.0):
        np.testing.assert_array_equal(call(kernels, "nms", (boxes, scores, idxs), threshold),
                                      cpu.nms(boxes, scores, float(threshold)))
    np.testing.assert_array_equal(call(kernels, "nms", (boxes, scores, idxs), return_count=True),
                                  cpu.nms(boxes, scores, 0.5))
    wide = kernels.put(np.stack([scores, scores[::-1]], axis=1))
    got = cupyprep.nms(kernels.put(boxes), wide[:, 1], 0.5)
    np.testing.assert_array_equal(kernels.get(got), cpu.nms(boxes, scores[::-1], 0.5))
    ref = cpu.nms(boxes, scores, 0.5, idxs)
    tune(monkeypatch, nms_spec, small_sort=100)  # the library sort instead of the one-block one
    np.testing.assert_array_equal(call(kernels, "batched_nms", (boxes, scores, idxs)), ref)
    lookups = counting(monkeypatch, _kernels, "get_function")
    per_call = []
    for _ in range(2):  # int32 classes: converted at every call, no plan
        got = cupyprep.batched_nms(kernels.put(boxes), kernels.put(scores), kernels.put(idxs.astype(np.int32)), 0.5)
        np.testing.assert_array_equal(kernels.get(got), ref)
        per_call.append(len(lookups))
    assert per_call[0] > 0 and per_call[1] == 2 * per_call[0]


def test_bad_arguments_after_a_plan_still_raise(kernels):
    boxes, scores, idxs = (kernels.put(a) for a in scene(4, 50, np.float32))
    cupyprep.batched_nms(boxes, scores, idxs, 0.5)
    with pytest.raises(ValueError, match="iou_threshold"):
        cupyprep.batched_nms(boxes, scores, idxs, float("nan"))
    with pytest.raises(ValueError, match="scores"):
        cupyprep.batched_nms(boxes, scores[:49], idxs, 0.5)
    with pytest.raises(TypeError, match="idxs"):
        cupyprep.batched_nms(boxes, scores, idxs.astype(np.float32), 0.5)


def test_a_plan_keeps_no_array_alive(kernels):
    import gc
    import weakref

    boxes, scores, _ = (kernels.put(a) for a in scene(5, 70, np.float32))
    refs = [weakref.ref(boxes), weakref.ref(scores)]
    cupyprep.nms(boxes, scores, 0.5, return_count=True)
    del boxes, scores
    gc.collect()
    assert all(r() is None for r in refs)
    assert len(nms_module._PLANS) == 1


@pytest.mark.parametrize("kw", [dict(score_threshold=0.3, top_k=100, max_detections=20),
                                dict(class_agnostic=True, max_detections=300),
                                dict(iou_threshold=0.4)])
def test_a_repeated_multiclass_call_replays_its_plan(kernels, monkeypatch, kw):
    rng = np.random.default_rng(8)
    boxes = [scene(s, 2 * 300, np.float32)[0].reshape(2, 300, 4) for s in (8, 9)]
    scores = [rng.random((2, 300, 3)).astype(np.float16) for _ in range(2)]

    def run(i):
        det = cupyprep.multiclass_nms(kernels.put(boxes[i]), kernels.put(scores[i]), **kw)
        return [kernels.get(a) for a in det]

    run(0)
    lookups = counting(monkeypatch, _kernels, "get_function")
    allocations = counting(monkeypatch, _arrays.Prepared, "output")
    got = run(1)
    assert (lookups, len(allocations)) == ([], 1)
    _plans.clear_all()
    for a, b in zip(got, run(1)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_a_multiclass_call_that_counts_its_candidates_stores_no_plan(kernels, monkeypatch):
    """A mask sized by a count of the passing scores (read back) holds for those scores only."""
    tune(monkeypatch, nms_spec, mask_budget=1)
    rng = np.random.default_rng(10)
    boxes = scene(10, 200, np.float32)[0]
    for power in (4, 0.25):  # few, then many candidates pass
        scores = (rng.random((200, 2)) ** power).astype(np.float32)
        det = cupyprep.multiclass_nms(kernels.put(boxes), kernels.put(scores), score_threshold=0.5,
                                      max_detections=200)
        assert len(nms_module._PLANS) == 0
        _, _, expected = cpu.multiclass_nms(boxes[None], scores[None], 0.5, 0.5, None, 200, False)
        np.testing.assert_array_equal(kernels.get(det.counts), expected)


# --- torch on a GPU -------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("grouped_min", [nms_spec.SPEC.grouped_min_boxes, 0])
def test_torch_replays_make_no_cupy_view(monkeypatch, grouped_min):
    torch = pytest.importorskip("torch")
    from cupyprep import _nms_plan

    tune(monkeypatch, nms_spec, grouped_min_boxes=grouped_min)
    first, second = scene(6, 1000, np.float32), scene(7, 1000, np.float32)
    tensors = [torch.from_numpy(a).cuda() for a in first]
    cupyprep.batched_nms(*tensors, 0.5, return_count=True)
    views = counting(monkeypatch, _arrays, "from_torch")
    plan_views = counting(monkeypatch, _nms_plan, "from_torch")
    lookups = counting(monkeypatch, _kernels, "get_function")
    for t, a in zip(tensors, second):
        t.copy_(torch.from_numpy(a))
    padded, count = cupyprep.batched_nms(*tensors, 0.5, return_count=True)
    assert (views, plan_views, lookups) == ([], [], [])
    assert isinstance(padded, torch.Tensor) and padded.dtype == torch.int64 and count.shape == ()
    ref = cpu.nms(second[0], second[1], 0.5, second[2])
    assert int(count) == len(ref)
    np.testing.assert_array_equal(padded.cpu().numpy()[: len(ref)], ref)
    np.testing.assert_array_equal(cupyprep.batched_nms(*tensors, 0.5).cpu().numpy(), ref)


@pytest.mark.parametrize("op", ["nms", "multiclass_nms"])
def test_a_replay_finishes_in_its_launch_context(kernels, monkeypatch, op):
    """A replay reads its count back (nms without return_count) and makes its results in
    the launch context its kernels ran in: on its stream (a chosen one, not the caller's
    current one, which the kernels did not run on), where a CUDA-graph capture refuses
    the read."""
    boxes, scores, _ = (kernels.put(a) for a in scene(12, 300, np.float32))
    if op == "nms":
        run, finishing = (lambda: cupyprep.nms(boxes, scores, 0.5)), (_nms_pipeline, "finish")
    else:
        run, finishing = (lambda: cupyprep.multiclass_nms(boxes[None], scores[None, :, None],
                                                          score_threshold=0.1)), (nms_module, "_detections")
    run()
    depth = []
    enter = _arrays.Prepared.launch

    class Tracked:
        def __init__(self, context):
            self.context = context

        def __enter__(self):
            depth.append(1)
            return self.context.__enter__()

        def __exit__(self, *exc):
            depth.pop()
            return self.context.__exit__(*exc)

    monkeypatch.setattr(_arrays.Prepared, "launch", lambda self: Tracked(enter(self)))
    inside = []
    original = getattr(*finishing)
    monkeypatch.setattr(*finishing, lambda *a, **kw: inside.append(bool(depth)) or original(*a, **kw))
    run()
    assert inside == [True], "the replay finished outside its launch context"


def test_carve_hands_torch_arrays_as_views_of_its_allocations():
    """A plan's results for torch input: typed strided views of the allocation, each the
    bytes the old slice-and-view gave (offsets, dtypes, 0-d and empty shapes)."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from cupyprep._nms_plan import Carve, Layout

    layout = Layout.of({"ids": ((2, 3, 5), np.int64), "counts": ((3,), np.int64),
                        "boxes": ((3, 5, 4), np.float32), "none": ((0, 4), np.float16)})
    call = SimpleNamespace(kind="torch", tensor=torch.zeros(1, dtype=torch.uint8))
    carve = Carve(call, layout)
    raw = carve.natives[0]
    raw.copy_(torch.arange(raw.numel()).to(torch.uint8))
    regions = [layout.region("ids"), layout.region("ids", 3 * 5 * 8, np.int64, (3, 5)),
               layout.region("counts", 0, np.int64, ()), layout.region("boxes"), layout.region("none"),
               layout.region("counts", 2, np.uint8, (5,))]  # (an offset no wider type divides)
    for index, offset, nbytes, dtype, shape in regions:
        got = carve.array((index, offset, nbytes, dtype, shape))
        want = raw[offset:offset + nbytes].view(got.dtype).view(shape)
        assert got.shape == want.shape and got.stride() == want.stride() and got.is_contiguous()
        assert got.numel() == 0 or got.data_ptr() == raw.data_ptr() + offset
        assert torch.equal(got, want)
