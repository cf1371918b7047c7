"""Launch plans of gaussian_blur and box_filter (cupyprep._plans, as test_plans.py for
preprocess): a repeated call with the same geometry and arguments launches the stored plan,
with the general path's bits, without validation or kernel lookup again; the Gaussian
weights (a kept table) are fetched again at every call, so a table dropped in between is
uploaded again; an ``out`` that overlaps the image is staged by the general path."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image
from plan_checks import check_replays, without_plans

import cupyprep
from cupyprep import _transfers

filter_ = importlib.import_module("cupyprep.filter")

CALLS = {
    "gaussian 5": lambda x, **kw: cupyprep.gaussian_blur(x, 5, 1.2, **kw),
    "gaussian (3, 7) constant": lambda x, **kw: cupyprep.gaussian_blur(x, (3, 7), 0.0, 2.0, border="constant", **kw),
    "box 3 sum": lambda x, **kw: cupyprep.box_filter(x, 3, normalize=False, **kw),
    "box (5, 2) anchor": lambda x, **kw: cupyprep.box_filter(x, (5, 2), anchor=(1, 0), border="reflect", **kw),
}
def general(op, image, **kw):
    return without_plans(filter_, op, image, **kw)


@pytest.mark.parametrize("name", list(CALLS))
def test_a_repeated_filter_launches_its_plan(kernels, monkeypatch, name):
    check_replays(kernels, monkeypatch, filter_, CALLS[name], (np.uint8, np.uint16, np.float32), len(name), name)


def test_the_weights_are_fetched_at_every_call(kernels, monkeypatch):
    rng = np.random.default_rng(3)
    images = [kernels.put(random_image(rng, (8, 10, 3), np.uint8)) for _ in range(3)]
    want = [kernels.get(general(CALLS["gaussian 5"], x)) for x in images]
    fetched = counting(monkeypatch, _transfers, "device_constant")
    got = [CALLS["gaussian 5"](x) for x in images[:2]]
    assert len(fetched) == 2 and len(filter_._PLANS) == 1
    _transfers.drop_constants()  # the plan's next call uploads the weights again
    got.append(CALLS["gaussian 5"](images[2]))
    assert len(fetched) == 3
    for w, g in zip(want, got):
        np.testing.assert_array_equal(kernels.get(g), w)


def test_out_is_written_and_an_overlapping_out_is_staged(kernels):
    rng = np.random.default_rng(7)
    images = [kernels.put(random_image(rng, (6, 9, 3), np.float32)) for _ in range(3)]
    want = [kernels.get(general(CALLS["box 3 sum"], x)) for x in images]
    out = kernels.poisoned((6, 9, 3), np.float32)
    for image, w in zip(images, want):
        assert CALLS["box 3 sum"](image, out=out) is out
        np.testing.assert_array_equal(kernels.get(out), w)
    assert len(filter_._PLANS) == 1
    x = kernels.put(kernels.get(images[0]).copy())
    CALLS["box 3 sum"](x, out=x)  # in place: staged by the general path
    np.testing.assert_array_equal(kernels.get(x), want[0])


def test_a_bad_call_with_a_planned_geometry_still_raises(kernels):
    image = kernels.put(np.zeros((6, 9, 3), np.uint8))
    for _ in range(2):
        cupyprep.gaussian_blur(image, 3, 1.0)
    with pytest.raises(ValueError, match="border"):
        cupyprep.gaussian_blur(image, 3, 1.0, border="wrap")
    with pytest.raises(ValueError, match="ksize"):
        cupyprep.gaussian_blur(image, 4, 1.0)


def test_a_one_pixel_kernel_copies_without_a_plan(kernels):
    image = kernels.put(np.arange(30, dtype=np.uint8).reshape(5, 6))
    for _ in range(2):
        got = cupyprep.gaussian_blur(image, 1, 0.5)
    assert len(filter_._PLANS) == 0
    np.testing.assert_array_equal(kernels.get(got), kernels.get(image))
