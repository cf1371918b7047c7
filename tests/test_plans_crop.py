"""Launch plans of crop (cupyprep._plans, as test_plans.py for preprocess): a repeated crop
from one image or a batch, with float32 boxes of the images' kind and the geometry of an
earlier call, launches that call's plan with this call's boxes: the general path's bits,
without validation or a kernel lookup. Host boxes (checked value by value) and lists of
images get no plan."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image
from plan_checks import without_plans

import cupyprep
from cupyprep import _arrays, _kernels, _plans

crop_ = importlib.import_module("cupyprep.crop")


def general(*args, **kw):
    return without_plans(crop_, cupyprep.crop, *args, **kw)


def boxes(rng, k, h, w, index=None):
    x1, y1 = rng.uniform(-3, w - 2, k), rng.uniform(-3, h - 2, k)
    xyxy = np.stack([x1, y1, x1 + rng.uniform(1, 9, k), y1 + rng.uniform(1, 9, k)], 1)
    if index is not None:
        xyxy = np.concatenate([rng.integers(0, index, (k, 1)), xyxy], 1)
    return xyxy.astype(np.float32)


@pytest.mark.parametrize("interpolation", list(crop_.CROP_INTERPOLATIONS))
def test_a_repeated_crop_launches_its_plan_with_the_new_boxes(kernels, monkeypatch, interpolation):
    rng = np.random.default_rng(len(interpolation))
    cases = [((12, 15, 3), np.uint8, None), ((12, 15), np.float32, None), ((9, 11, 4), np.float16, None)]
    if kernels.name == "gpu":  # image indexes in device boxes (NumPy ones are host boxes on a GPU)
        cases.append(((2, 10, 13, 3), np.uint8, 2))
    for shape, dtype, index in cases:
        h, w = shape[-3:-1] if len(shape) == 4 else shape[:2]
        images = [kernels.put(random_image(rng, shape, dtype)) for _ in range(3)]
        sets = [kernels.put(boxes(rng, 5, h, w, index)) for _ in range(3)]
        sets[2] = kernels.put(np.repeat(kernels.get(sets[2]), 2, 0))[::2]  # a strided view
        sets[:2] = [kernels.put(np.repeat(kernels.get(b), 2, 0))[::2] for b in sets[:2]]
        got = [cupyprep.crop(images[0], sets[0], (6, 7), interpolation=interpolation)]
        assert len(crop_._PLANS) == 1, f"{shape}: no plan stored"
        guards = [counting(monkeypatch, _kernels, "get_function"), counting(monkeypatch, _arrays, "prepare")]
        got += [cupyprep.crop(x, b, (6, 7), interpolation=interpolation) for x, b in zip(images[1:], sets[1:])]
        assert guards == [[], []], f"{shape}: a later call planned again"
        monkeypatch.undo()
        for x, b, g in zip(images, sets, got):
            np.testing.assert_array_equal(kernels.get(g), kernels.get(general(x, b, (6, 7), interpolation=interpolation)),
                                          err_msg=f"{shape} {dtype}")
        assert not np.array_equal(kernels.get(got[1]), kernels.get(got[2]))
        _plans.clear_all()


def test_other_boxes_take_the_general_path(kernels):
    rng = np.random.default_rng(3)
    image = kernels.put(random_image(rng, (12, 15, 3), np.uint8))
    b = boxes(rng, 4, 12, 15)
    for other in (b.tolist(), b.astype(np.float64), [b]):  # a list, float64, a per-image list
        for _ in range(2):
            got = cupyprep.crop(image, other, (5, 5))
        np.testing.assert_array_equal(kernels.get(got), kernels.get(general(image, kernels.put(b), (5, 5))))
    assert len(crop_._PLANS) == 0
    cupyprep.crop(image, kernels.put(b), (5, 5))
    assert len(crop_._PLANS) == 1
    with pytest.raises(ValueError, match="boxes"):  # a planned image, boxes of another shape
        cupyprep.crop(image, kernels.put(np.zeros((4, 3), np.float32)), (5, 5))


def test_out_is_written_and_an_image_list_gets_no_plan(kernels):
    rng = np.random.default_rng(4)
    image = kernels.put(random_image(rng, (12, 15, 3), np.uint8))
    out = kernels.poisoned((4, 5, 5, 3), np.uint8)
    for _ in range(3):
        b = kernels.put(boxes(rng, 4, 12, 15))
        assert cupyprep.crop(image, b, (5, 5), out=out) is out
        np.testing.assert_array_equal(kernels.get(out), kernels.get(general(image, b, (5, 5))))
    assert len(crop_._PLANS) == 1
    _plans.clear_all()
    images = [kernels.put(random_image(rng, (12, 15, 3), np.uint8)) for _ in range(2)]
    rows = kernels.put(boxes(rng, 3, 12, 15, 2))
    for _ in range(2):
        cupyprep.crop(images, rows, (5, 5))
    assert len(crop_._PLANS) == 0


@pytest.mark.gpu
def test_torch_crops_replay_their_plan(torch_cuda, monkeypatch):
    torch = torch_cuda
    rng = np.random.default_rng(5)
    image = torch.randint(0, 256, (20, 24, 3), dtype=torch.uint8, device="cuda")
    sets = [torch.from_numpy(boxes(rng, 6, 20, 24)).cuda() for _ in range(3)]
    got = [cupyprep.crop(image, sets[0], (8, 8))]
    calls = counting(monkeypatch, _kernels, "get_function")
    got += [cupyprep.crop(image, b, (8, 8)) for b in sets[1:]]
    assert calls == [] and len(crop_._PLANS) == 1
    monkeypatch.undo()
    for b, g in zip(sets, got):
        assert isinstance(g, torch.Tensor)
        assert torch.equal(g, general(image, b, (8, 8)))
