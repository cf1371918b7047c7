"""Launch plans of flip, rotate90 and pad (cupyprep._plans, as test_plans.py for
preprocess): a repeated call on one array with the same geometry and arguments launches the
stored plan, with the general path's bits, without validation or kernel lookup again; an
``out`` that overlaps the image is staged by the general path; a mirror into a given ``out``
is chosen for that out's alignment, so it is planned afresh at every call."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image
from plan_checks import check_replays, without_plans

import cupyprep
from cupyprep import _kernels, _plans

flip_pad = importlib.import_module("cupyprep.flip_pad")

# every kernel of copy_plan: rows (flip vertical, pad), mirror (flip horizontal of adjacent
# channels), turn (quarter turns), general (channel planes mirrored, CHW)
CALLS = {
    "flip horizontal": lambda x, **kw: cupyprep.flip(x, "horizontal", **kw),
    "flip vertical": lambda x, **kw: cupyprep.flip(x, "vertical", **kw),
    "flip both": lambda x, **kw: cupyprep.flip(x, "both", **kw),
    "rotate90 1": lambda x, **kw: cupyprep.rotate90(x, 1, **kw),
    "rotate90 2": lambda x, **kw: cupyprep.rotate90(x, 2, **kw),
    "rotate90 -1": lambda x, **kw: cupyprep.rotate90(x, -1, **kw),
    "pad constant": lambda x, **kw: cupyprep.pad(x, (1, 2, 3, 0), value=7, **kw),
    "pad reflect101": lambda x, **kw: cupyprep.pad(x, 2, border_mode="reflect101", **kw),
    "copy_make_border wrap": lambda x, **kw: cupyprep.copy_make_border(x, 0, 3, 2, 1, "wrap", **kw),
}
def general(op, image, **kw):
    return without_plans(flip_pad, op, image, **kw)


@pytest.mark.parametrize("name", list(CALLS))
def test_a_repeated_copy_launches_its_plan(kernels, monkeypatch, name):
    check_replays(kernels, monkeypatch, flip_pad, CALLS[name], (np.uint8, np.float16, np.float32), len(name), name)


def test_out_is_written_and_an_overlapping_out_is_staged(kernels):
    rng = np.random.default_rng(7)
    images = [kernels.put(random_image(rng, (6, 9, 3), np.uint8)) for _ in range(3)]
    out = kernels.poisoned((6, 9, 3), np.uint8)
    for image in images:
        assert cupyprep.flip(image, "vertical", out=out) is out
        np.testing.assert_array_equal(kernels.get(out), kernels.get(image)[::-1])
    assert len(flip_pad._PLANS) == 1
    # out = the image itself (the same geometry, so the same key): staged, then copied
    x = kernels.put(kernels.get(images[0]).copy())
    cupyprep.flip(x, "vertical", out=x)
    np.testing.assert_array_equal(kernels.get(x), kernels.get(images[0])[::-1])


def test_a_mirror_into_a_given_out_is_planned_at_every_call(kernels):
    # mirrored 2-byte pixels run where out's rows start 2-byte aligned: an aligned out gets
    # the mirror kernel and stores no plan; an out one byte off gets the general kernel,
    # which takes any out, and stores it
    rng = np.random.default_rng(8)
    image = kernels.put(random_image(rng, (5, 12, 2), np.uint8))
    want = kernels.get(image)[:, ::-1]
    for offset, plans in ((0, 0), (0, 0), (1, 1), (0, 1)):
        buf = kernels.poisoned((5 * 12 * 2 + 1,), np.uint8)
        out = buf[offset:offset + 5 * 12 * 2].reshape(5, 12, 2)
        cupyprep.flip(image, "horizontal", out=out)
        np.testing.assert_array_equal(kernels.get(out), want, err_msg=f"offset {offset}")
        assert len(flip_pad._PLANS) == plans, f"offset {offset}"
    _plans.clear_all()
    cupyprep.flip(image, "horizontal")  # a new output: always aligned, planned
    assert len(flip_pad._PLANS) == 1


def test_a_bad_call_with_a_planned_geometry_still_raises(kernels):
    rng = np.random.default_rng(9)
    image = kernels.put(random_image(rng, (6, 9, 3), np.uint8))
    for _ in range(2):
        cupyprep.pad(image, 2, value=3)
    with pytest.raises(ValueError, match="border_mode"):
        cupyprep.pad(image, 2, border_mode="mirror", value=3)
    with pytest.raises(ValueError, match="padding"):
        cupyprep.pad(image, -2, value=3)
    with pytest.raises(ValueError, match="direction"):
        cupyprep.flip(image, "sideways")
    with pytest.raises(TypeError, match="k"):
        cupyprep.rotate90(image, 1.0)


def test_lists_get_no_plans(kernels):
    rng = np.random.default_rng(10)
    images = [kernels.put(random_image(rng, (4 + i, 5, 3), np.uint8)) for i in range(3)]
    for _ in range(2):
        got = cupyprep.flip(images, "vertical")
    assert len(flip_pad._PLANS) == 0
    for image, g in zip(images, got):
        np.testing.assert_array_equal(kernels.get(g), kernels.get(image)[::-1])


@pytest.mark.gpu
def test_torch_tensors_replay_their_plans(torch_cuda, monkeypatch):
    torch = torch_cuda
    frames = [torch.randint(0, 256, (7, 9, 3), dtype=torch.uint8, device="cuda") for _ in range(3)]
    got = [cupyprep.rotate90(f, 1) for f in frames[:1]]
    calls = counting(monkeypatch, _kernels, "get_function")
    got += [cupyprep.rotate90(f, 1) for f in frames[1:]]
    assert calls == []
    for f, g in zip(frames, got):
        assert isinstance(g, torch.Tensor) and g.is_cuda
        assert torch.equal(g, torch.rot90(f, 1, (0, 1)))
