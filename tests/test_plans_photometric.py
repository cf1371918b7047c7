"""Launch plans of color_jitter and hsv_gain (cupyprep._draw_plan): a repeated call with
the same geometry and arguments draws new parameters and runs the stored launches, without
validation or kernel lookup again, with the general path's bits for the same draw; the
generator is still checked at every call; an ``out`` that overlaps the batch is staged by
the general path."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting
from plan_checks import without_plans

import cupyprep
from cupyprep import _arrays, _kernels, _validate

photometric = importlib.import_module("cupyprep.photometric")


def batch(seed, shape=(3, 11, 14, 3), dtype=np.uint8):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    return x if dtype == np.uint8 else (x / np.float32(255)).astype(np.float32)


CALLS = {
    "hsv_gain bgr": (np.uint8, "NHWC", lambda x, **kw: cupyprep.hsv_gain(x, 0.5, 0.7, 0.4, **kw)),
    "hsv_gain rgb": (np.uint8, "NHWC", lambda x, **kw: cupyprep.hsv_gain(x, 0.1, 0.2, 0.3, order="rgb", **kw)),
    "jitter uint8 all": (np.uint8, "NHWC", lambda x, **kw: cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, **kw)),
    "jitter float32 NCHW bgr": (np.float32, "NCHW", lambda x, **kw: cupyprep.color_jitter(
        x, (0.5, 1.5), 0.3, 0, 0.2, order="bgr", layout="NCHW", **kw)),
    "jitter uint8 no contrast": (np.uint8, "NHWC", lambda x, **kw: cupyprep.color_jitter(x, 0.3, 0, 0.3, 0.05, **kw)),
}


def params_of(result):
    _, p = result
    return p if isinstance(p, tuple) else (p,)


@pytest.mark.parametrize("name", list(CALLS))
def test_a_repeated_call_launches_its_plan(kernels, monkeypatch, name):
    dtype, layout, op = CALLS[name]
    for view in (False, True):
        shape = (3, 11, 28, 3) if view else (3, 11, 14, 3)
        images = [batch(s, shape, dtype) for s in (1, 2)]
        if layout == "NCHW":
            images = [np.ascontiguousarray(x.transpose(0, 3, 1, 2)) for x in images]
        images = [kernels.put(x) for x in images]
        if view:
            images = [x[..., ::2, :] if layout == "NHWC" else x[..., ::2] for x in images]
        where = f"{name} view={view}"
        first = op(images[0], seed=5)
        assert len(photometric._PLANS) == 1, f"{where}: no plan stored"
        guards = [counting(monkeypatch, owner, attr) for owner, attr in (
            (_kernels, "get_function"), (_arrays, "prepare"), (_validate, "image_layout"))]
        second = op(images[1], seed=6)
        assert guards == [[], [], []], f"{where}: the second call planned again"
        monkeypatch.undo()
        for image, got, seed in zip(images, (first, second), (5, 6)):
            want = without_plans(photometric, op, image, seed=seed)
            np.testing.assert_array_equal(kernels.get(got[0]), kernels.get(want[0]), err_msg=where)
            for a, b in zip(params_of(got), params_of(want)):
                np.testing.assert_array_equal(kernels.get(a), kernels.get(b), err_msg=where)
        photometric._PLANS.clear()


def test_each_replay_draws_anew_and_checks_its_generator(kernels):
    _, _, op = CALLS["jitter uint8 all"]
    x = kernels.put(batch(3))
    a = op(x)
    b = op(x)  # a plan's call: new parameters from a new generator
    assert len(photometric._PLANS) == 1
    assert not np.array_equal(kernels.get(a[1].factors), kernels.get(b[1].factors))
    with pytest.raises(TypeError, match="generator"):
        op(x, generator=object())
    with pytest.raises(ValueError, match="seed"):
        op(x, seed=-1)


def test_out_is_written_and_an_overlapping_out_is_staged(kernels):
    _, _, op = CALLS["hsv_gain bgr"]
    images = [kernels.put(batch(s)) for s in (7, 8)]
    want = [kernels.get(without_plans(photometric, op, x, seed=s)[0]) for x, s in zip(images, (1, 2))]
    out = kernels.poisoned((3, 11, 14, 3), np.uint8)
    for image, w, s in zip(images, want, (1, 2)):
        assert op(image, seed=s, out=out)[0] is out
        np.testing.assert_array_equal(kernels.get(out), w)
    assert len(photometric._PLANS) == 1
    x = kernels.put(kernels.get(images[0]).copy())
    assert op(x, seed=1, out=x)[0] is x  # in place: the general path stages it
    np.testing.assert_array_equal(kernels.get(x), want[0])
