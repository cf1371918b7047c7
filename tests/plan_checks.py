"""The check the plan tests of the single-image ops share: a repeated call on each layout
(and a strided view) launches the stored plan without planning again, with the general
path's bits."""
from __future__ import annotations

import numpy as np
from conftest import counting, random_image

from cupyprep import _arrays, _kernels, _plans, _validate

# (shape, layout): HWC, NHWC, CHW and HW images
SHAPES = [((9, 13, 3), "HWC"), ((2, 7, 11, 4), "NHWC"), ((3, 6, 10), "CHW"), ((5, 8), "HWC")]


def without_plans(module, op, *args, **kw):
    """``op(*args, **kw)`` with ``module``'s plans off (the general path)."""
    kept, module._PLANS = module._PLANS, _plans.PlanCache(maxsize=0)
    try:
        return op(*args, **kw)
    finally:
        module._PLANS = kept


def check_replays(kernels, monkeypatch, module, op, dtypes, seed, label):
    """For each dtype and each of SHAPES (and a view of every other element of the last
    axis): the first call stores one plan in ``module``, the second looks no kernel up,
    prepares no array and checks no layout, and both equal the general path."""
    rng = np.random.default_rng(seed)
    for dtype in dtypes:
        for (shape, layout), view in [(s, False) for s in SHAPES] + [(SHAPES[0], True)]:
            wide = shape[:-1] + (shape[-1] * 2,)
            images = [kernels.put(random_image(rng, wide if view else shape, dtype)) for _ in range(2)]
            if view:
                images = [x[..., ::2] for x in images]
            where = f"{label} {np.dtype(dtype)} {shape} {layout} view={view}"
            first = op(images[0], layout=layout)
            assert len(module._PLANS) == 1, f"{where}: no plan stored"
            guards = [counting(monkeypatch, owner, name) for owner, name in (
                (_kernels, "get_function"), (_arrays, "prepare"), (_validate, "image_layout"))]
            second = op(images[1], layout=layout)
            assert guards == [[], [], []], f"{where}: the second call planned again"
            monkeypatch.undo()
            for image, got in zip(images, (first, second)):
                want = without_plans(module, op, image, layout=layout)
                np.testing.assert_array_equal(kernels.get(got), kernels.get(want), err_msg=where)
            _plans.clear_all()
