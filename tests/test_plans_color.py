"""Launch plans of the color conversions (swap_rb, to_gray, cvt_color; cupyprep._plans, as
test_plans.py for preprocess): a repeated call with the same geometry and options launches
the stored plan, with the general path's bits, without validation or kernel lookup again;
an ``out`` that overlaps the image is staged by the general path."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image

import cupyprep
from cupyprep import _arrays, _kernels, _plans, _validate

color = importlib.import_module("cupyprep.color")

# (op, dtypes, channels): every code's family, and the dtypes each takes
CALLS = [
    (lambda x, **kw: cupyprep.swap_rb(x, **kw), (np.uint8, np.uint16, np.float16, np.float32), (3, 4)),
    (lambda x, **kw: cupyprep.to_gray(x, order="rgb", **kw), (np.uint8, np.uint16, np.float32), (3, 4)),
    (lambda x, **kw: cupyprep.cvt_color(x, "bgr2hsv_full", **kw), (np.uint8, np.float32), (3, 4)),
    (lambda x, **kw: cupyprep.cvt_color(x, "hsv2rgb", **kw), (np.uint8, np.float32), (3,)),
    (lambda x, **kw: cupyprep.cvt_color(x, "rgb2ycrcb", **kw), (np.uint8, np.float32), (3,)),
    (lambda x, **kw: cupyprep.cvt_color(x, "bgr2gray", **kw), (np.uint8,), (3,)),
]


def general(op, image, **kw):
    kept, color._PLANS = color._PLANS, _plans.PlanCache(maxsize=0)
    try:
        return op(image, **kw)
    finally:
        color._PLANS = kept


@pytest.mark.parametrize("which", range(len(CALLS)))
def test_a_repeated_conversion_launches_its_plan(kernels, monkeypatch, which):
    op, dtypes, channels = CALLS[which]
    rng = np.random.default_rng(which)
    for dtype in dtypes:
        for c in channels:
            for shape, view in (((9, 13, c), False), ((2, 7, 11, c), False), ((9, 26, c), True)):
                images = [kernels.put(random_image(rng, shape, dtype)) for _ in range(2)]
                if view:  # every other column
                    images = [x[:, ::2] for x in images]
                first = op(images[0])
                assert len(color._PLANS) == 1
                guards = [counting(monkeypatch, owner, name) for owner, name in (
                    (_kernels, "get_function"), (_arrays, "prepare"), (_validate, "image_layout"))]
                second = op(images[1])
                assert guards == [[], [], []], f"{dtype} {shape}: the second call planned again"
                monkeypatch.undo()
                for image, got in zip(images, (first, second)):
                    np.testing.assert_array_equal(kernels.get(got), kernels.get(general(op, image)),
                                                  err_msg=f"{dtype} {shape} view={view}")
                _plans.clear_all()


def test_out_is_written_and_an_overlapping_out_is_staged(kernels):
    rng = np.random.default_rng(7)
    images = [kernels.put(random_image(rng, (6, 9, 3), np.uint8)) for _ in range(3)]
    out = kernels.poisoned((6, 9, 3), np.uint8)
    for image in images:
        assert cupyprep.swap_rb(image, out=out) is out
        np.testing.assert_array_equal(kernels.get(out), kernels.get(image)[..., ::-1])
    assert len(color._PLANS) == 1
    # out = the image itself (the same geometry, so the same key): staged, then copied
    x = kernels.put(kernels.get(images[0]).copy())
    cupyprep.swap_rb(x, out=x)
    np.testing.assert_array_equal(kernels.get(x), kernels.get(images[0])[..., ::-1])


def test_a_bad_call_with_a_planned_geometry_still_raises(kernels):
    rng = np.random.default_rng(8)
    image = kernels.put(random_image(rng, (6, 9, 3), np.uint8))
    cupyprep.to_gray(image)
    cupyprep.to_gray(image)
    with pytest.raises(ValueError, match="order"):
        cupyprep.to_gray(image, order="gbr")
    with pytest.raises(ValueError, match="code"):
        cupyprep.cvt_color(image, "bgr2lab")
    with pytest.raises(ValueError, match="out"):
        cupyprep.to_gray(image, out=kernels.poisoned((6, 9, 3), np.uint8))


@pytest.mark.gpu
def test_torch_replays_equal_the_general_path():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    frames = [torch.from_numpy(random_image(rng, (2, 31, 47, 3), np.uint8)).cuda() for _ in range(3)]
    got = [cupyprep.cvt_color(f, "bgr2hsv") for f in frames]
    assert len(color._PLANS) == 1
    for f, g in zip(frames, got):
        assert isinstance(g, torch.Tensor) and torch.equal(g, general(cupyprep.cvt_color, f, code="bgr2hsv"))
