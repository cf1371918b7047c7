"""Launch plans of roi_align (cupyprep._plans, as test_plans.py for preprocess): a repeated
NCHW call with (K, 5) float32 rois of the features' kind and the geometry of an earlier call
launches that call's plan with this call's rois: the general path's bits, without
validation or a kernel lookup. Lists of rois, other dtypes and NHWC get no plan."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting
from plan_checks import without_plans

import cupyprep
from cupyprep import _arrays, _kernels, _plans

ra = importlib.import_module("cupyprep.roi_align")


def general(*args, **kw):
    return without_plans(ra, cupyprep.roi_align, *args, **kw)


def rois(rng, k, n, size):
    x1, y1 = rng.uniform(-2, size - 3, (2, k))
    w, h = rng.uniform(0.5, 9, (2, k))
    return np.stack([rng.integers(0, n, k), x1, y1, x1 + w, y1 + h], 1).astype(np.float32)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_a_repeated_roi_align_launches_its_plan_with_the_new_rois(kernels, monkeypatch, aligned, sampling_ratio):
    rng = np.random.default_rng([aligned, sampling_ratio + 1])
    kw = dict(spatial_scale=0.5, sampling_ratio=sampling_ratio, aligned=aligned)
    for dtype, view in ((np.float32, False), (np.float16, False), (np.float32, True)):
        feats = [kernels.put(rng.standard_normal((2, 5, 16, 18)).astype(dtype)) for _ in range(3)]
        if view:  # every other channel
            feats = [kernels.put(np.repeat(kernels.get(f), 2, 1))[:, ::2] for f in feats]
        sets = [kernels.put(rois(rng, 6, 2, 30)) for _ in range(3)]
        got = [cupyprep.roi_align(feats[0], sets[0], (3, 4), **kw)]
        assert len(ra._PLANS) == 1
        guards = [counting(monkeypatch, _kernels, "get_function"), counting(monkeypatch, _arrays, "prepare")]
        got += [cupyprep.roi_align(f, r, (3, 4), **kw) for f, r in zip(feats[1:], sets[1:])]
        assert guards == [[], []], f"{dtype} view={view}: a later call planned again"
        monkeypatch.undo()
        for f, r, g in zip(feats, sets, got):
            np.testing.assert_array_equal(kernels.get(g), kernels.get(general(f, r, (3, 4), **kw)),
                                          err_msg=f"{dtype} view={view}")
        assert not np.array_equal(kernels.get(got[1]), kernels.get(got[2]))
        _plans.clear_all()


def test_other_rois_and_nhwc_take_the_general_path(kernels):
    rng = np.random.default_rng(3)
    f = kernels.put(rng.standard_normal((2, 4, 10, 12)).astype(np.float32))
    r = rois(rng, 5, 2, 20)
    r = r[np.argsort(r[:, 0], kind="stable")]  # image 0's first, as a per-image list gives them
    per_image = [kernels.put(r[r[:, 0] == i, 1:]) for i in range(2)]
    want = kernels.get(general(f, kernels.put(r), 3))
    for other in (per_image, kernels.put(r.astype(np.float16))):
        for _ in range(2):
            got = cupyprep.roi_align(f, other, 3)
        np.testing.assert_allclose(kernels.get(got), want, rtol=1e-3, atol=1e-3)  # float16 rois round
    nhwc = kernels.put(np.ascontiguousarray(kernels.get(f).transpose(0, 2, 3, 1)))
    for _ in range(2):
        got = cupyprep.roi_align(nhwc, kernels.put(r), 3, layout="NHWC")
    np.testing.assert_array_equal(kernels.get(got), want.transpose(0, 2, 3, 1))
    assert len(ra._PLANS) == 0
    cupyprep.roi_align(f, kernels.put(r), 3)
    assert len(ra._PLANS) == 1
    with pytest.raises(ValueError, match="rois"):  # a planned geometry, rois of another shape
        cupyprep.roi_align(f, kernels.put(r[:, :4]), 3)


@pytest.mark.gpu
def test_torch_roi_align_replays_its_plan_and_matches_torchvision(torch_cuda, monkeypatch):
    torch = torch_cuda
    tv = pytest.importorskip("torchvision")
    rng = np.random.default_rng(5)
    feats = torch.randn(2, 8, 20, 24, device="cuda")
    sets = [torch.from_numpy(rois(rng, 7, 2, 40)).cuda() for _ in range(3)]
    got = [cupyprep.roi_align(feats, sets[0], 5, 0.5)]
    calls = counting(monkeypatch, _kernels, "get_function")
    got += [cupyprep.roi_align(feats, r, 5, 0.5) for r in sets[1:]]
    assert calls == [] and len(ra._PLANS) == 1
    for r, g in zip(sets, got):
        torch.testing.assert_close(g, tv.ops.roi_align(feats, r, 5, 0.5), rtol=1e-5, atol=1e-5)
