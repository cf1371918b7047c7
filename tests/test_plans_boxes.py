"""Launch plans of box_convert, clip_boxes and box_iou (cupyprep._plans, as test_plans.py for
preprocess): a repeated call with the same geometry and options launches the stored plan,
with the general path's bits, without validation or kernel lookup again; boxes the kernel
reads through a copy (leading strides that do not merge) get no plan."""
from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from conftest import counting

import cupyprep
from cupyprep import _arrays, _kernels, _plans

bx = importlib.import_module("cupyprep.boxes")

FORMATS = ("xyxy", "xywh", "cxcywh")


def boxes(kernels, rng, shape, dtype):
    xy = rng.uniform(-20, 120, shape[:-1] + (2,))
    wh = rng.uniform(1, 60, shape[:-1] + (2,))
    return kernels.put(np.concatenate([xy, xy + wh], -1).astype(dtype))


def general(op, *args):
    kept, bx._PLANS = bx._PLANS, _plans.PlanCache(maxsize=0)
    try:
        return op(*args)
    finally:
        bx._PLANS = kept


CALLS = [(f"box_convert {a} -> {b}", lambda x, a=a, b=b: cupyprep.box_convert(x, a, b))
         for a, b in itertools.product(FORMATS, FORMATS)] + [
    ("clip_boxes", lambda x: cupyprep.clip_boxes(x, (90, 70)))]


@pytest.mark.parametrize("which", range(len(CALLS)))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_repeated_box_op_launches_its_plan(kernels, monkeypatch, which, dtype):
    name, op = CALLS[which]
    rng = np.random.default_rng(which)
    for shape, view in (((13, 4), False), ((2, 5, 4), False), ((26, 4), True)):
        sets = [boxes(kernels, rng, shape, dtype) for _ in range(2)]
        if view:  # every other box
            sets = [b[::2] for b in sets]
        first = op(sets[0])
        assert len(bx._PLANS) == 1, name
        guards = [counting(monkeypatch, _kernels, "get_function"), counting(monkeypatch, _arrays, "prepare")]
        second = op(sets[1])
        assert guards == [[], []], f"{name} {shape}: the second call planned again"
        monkeypatch.undo()
        for b, got in zip(sets, (first, second)):
            assert got.shape == b.shape and got.dtype == b.dtype
            np.testing.assert_array_equal(kernels.get(got), kernels.get(general(op, b)), err_msg=f"{name} {shape}")
        _plans.clear_all()


def test_boxes_read_through_a_copy_get_no_plan(kernels):
    rng = np.random.default_rng(5)
    b = boxes(kernels, rng, (2, 6, 4, 4), np.float32)[:, :3]  # (2, 3, 4, 4): its leading strides don't merge
    for _ in range(2):
        got = cupyprep.clip_boxes(b, (90, 70))
    assert len(bx._PLANS) == 0
    np.testing.assert_array_equal(kernels.get(got), np.clip(kernels.get(b), 0, [70, 90, 70, 90]))


def test_a_bad_call_with_a_planned_geometry_still_raises(kernels):
    b = boxes(kernels, np.random.default_rng(6), (4, 4), np.float32)
    cupyprep.box_convert(b, "xyxy", "cxcywh")
    with pytest.raises(ValueError, match="out_fmt"):
        cupyprep.box_convert(b, "xyxy", "yxyx")
    with pytest.raises((TypeError, ValueError), match="size"):
        cupyprep.clip_boxes(b, (90, -1))


@pytest.mark.gpu
def test_torch_replays_equal_the_general_path():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    sets = [torch.from_numpy(np.sort(rng.uniform(-9, 99, (50, 4)).astype(np.float32), axis=1)).cuda()
            for _ in range(3)]
    got = [cupyprep.box_convert(b, "xyxy", "cxcywh") for b in sets]
    assert len(bx._PLANS) == 1
    for b, g in zip(sets, got):
        assert isinstance(g, torch.Tensor) and torch.equal(g, general(cupyprep.box_convert, b, "xyxy", "cxcywh"))


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float16, np.float32)])
def test_a_repeated_box_iou_launches_its_plan_with_the_new_second_boxes(kernels, monkeypatch, dtypes):
    rng = np.random.default_rng(5)
    for (n, m), view in (((7, 5), False), ((1, 9), False), ((12, 6), True)):
        pairs = [(boxes(kernels, rng, (n, 4), dtypes[0]), boxes(kernels, rng, (m, 4), dtypes[1]))
                 for _ in range(3)]
        if view:  # every other box of the second set
            pairs = [(a, kernels.put(np.repeat(kernels.get(b), 2, 0))[::2]) for a, b in pairs]
        got = [cupyprep.box_iou(*pairs[0])]
        assert len(bx._PLANS) == 1
        guards = [counting(monkeypatch, _kernels, "get_function"), counting(monkeypatch, _arrays, "prepare")]
        got += [cupyprep.box_iou(*p) for p in pairs[1:]]
        assert guards == [[], []], f"{n}x{m}: a later call planned again"
        monkeypatch.undo()
        for p, g in zip(pairs, got):
            assert g.shape == (n, m) and g.dtype == np.float32
            np.testing.assert_array_equal(kernels.get(g), kernels.get(general(cupyprep.box_iou, *p)))
        assert not np.array_equal(kernels.get(got[1]), kernels.get(got[2]))
        # second boxes of another geometry (count, dtype or strides): their own plan
        other = boxes(kernels, rng, (m + 1, 4), dtypes[1])
        np.testing.assert_array_equal(kernels.get(cupyprep.box_iou(pairs[0][0], other)),
                                      kernels.get(general(cupyprep.box_iou, pairs[0][0], other)))
        assert len(bx._PLANS) == 2
        _plans.clear_all()


def test_box_iou_with_a_planned_geometry_still_checks_the_second_boxes(kernels):
    rng = np.random.default_rng(6)
    a, b = boxes(kernels, rng, (4, 4), np.float32), boxes(kernels, rng, (3, 4), np.float32)
    for _ in range(2):
        cupyprep.box_iou(a, b)
    with pytest.raises(ValueError, match="boxes2"):
        cupyprep.box_iou(a, kernels.put(np.zeros((3, 5), np.float32)))
    with pytest.raises((TypeError, ValueError), match="boxes2"):
        cupyprep.box_iou(a, [[0, 0, 1, 1]])


@pytest.mark.gpu
def test_box_iou_plans_for_torch_tensors(torch_cuda, monkeypatch):
    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(0)

    def sets(n):
        xy = torch.rand(n, 2, device="cuda", generator=g) * 100
        return torch.cat([xy, xy + 1 + torch.rand(n, 2, device="cuda", generator=g) * 50], 1)

    pairs = [(sets(6), sets(4)[1:]) for _ in range(3)]  # second boxes: a view at an offset
    got = [cupyprep.box_iou(*pairs[0])]
    calls = counting(monkeypatch, _kernels, "get_function")
    got += [cupyprep.box_iou(*p) for p in pairs[1:]]
    assert calls == [] and len(bx._PLANS) == 1
    tv = pytest.importorskip("torchvision")
    for (a, b), r in zip(pairs, got):
        assert isinstance(r, torch.Tensor) and r.is_cuda
        torch.testing.assert_close(r, tv.ops.box_iou(a, b))


def priors_for(kernels, rng, p):
    c = rng.uniform(0.1, 0.9, (p, 2))
    return kernels.put(np.concatenate([c, rng.uniform(0.05, 0.4, (p, 2))], 1).astype(np.float32))


DECODERS = [("decode_boxes", lambda h, p: cupyprep.decode_boxes(h, p, (0.1, 0.2)), 4),
            ("decode_landmarks", lambda h, p: cupyprep.decode_landmarks(h, p), 10)]


@pytest.mark.parametrize("which", range(len(DECODERS)))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_repeated_decoder_launches_its_plan_with_the_new_priors(kernels, monkeypatch, which, dtype):
    name, op, k = DECODERS[which]
    rng = np.random.default_rng([which, dtype == np.float16])
    for shape in ((7, k), (2, 7, k)):
        heads = [kernels.put(rng.standard_normal(shape).astype(dtype)) for _ in range(3)]
        priors = [priors_for(kernels, rng, 7) for _ in range(3)]
        got = [op(heads[0], priors[0])]
        assert len(bx._PLANS) == 1, name
        guards = [counting(monkeypatch, _kernels, "get_function"), counting(monkeypatch, _arrays, "prepare")]
        got += [op(h, p) for h, p in zip(heads[1:], priors[1:])]
        assert guards == [[], []], f"{name} {shape}: a later call planned again"
        monkeypatch.undo()
        for h, p, g in zip(heads, priors, got):
            np.testing.assert_array_equal(kernels.get(g), kernels.get(general(op, h, p)), err_msg=f"{name} {shape}")
        assert not np.array_equal(kernels.get(got[1]), kernels.get(got[2]))
        _plans.clear_all()


def test_decoders_with_copied_priors_take_the_general_path(kernels):
    rng = np.random.default_rng(9)
    loc = kernels.put(rng.standard_normal((6, 4)).astype(np.float32))
    p = kernels.get(priors_for(kernels, rng, 6))
    for other in (kernels.put(p.astype(np.float16)), kernels.put(np.repeat(p, 2, 0))[::2]):
        for _ in range(2):
            got = cupyprep.decode_boxes(loc, other)
        np.testing.assert_allclose(kernels.get(got), kernels.get(general(cupyprep.decode_boxes, loc, kernels.put(p))),
                                   rtol=2e-3, atol=1e-3)  # (float16 priors round: about 1e-3 of values near 1)
    assert len(bx._PLANS) == 0
    with pytest.raises(ValueError, match="priors"):
        cupyprep.decode_boxes(loc, kernels.put(p[:5]))
