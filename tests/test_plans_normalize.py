"""Launch plans of normalize (cupyprep._plans, as test_plans.py for preprocess): a repeated
call with the same geometry and options launches the stored plan, with the general path's
bits, and without validation or kernel lookup again; any other call takes the general
path."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image

import cupyprep
from cupyprep import _arrays, _kernels, _plans, _validate

nz = importlib.import_module("cupyprep.normalize")  # the module, not the function

STATS = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), scale=1 / 255)
# (input shape, layout, options): both kernels (the dense one and the pixel one, for a view),
# HWC, HW and NHWC inputs, CHW and HWC outputs, swap_rb, scale, mean / std as numbers
CASES = [
    ((9, 13, 3), "CHW", dict(STATS, swap_rb=True)),
    ((9, 13, 3), "HWC", dict(mean=0.5, std=2, scale=1 / 255)),
    ((9, 13), "CHW", dict(mean=[3], std=[0.5])),
    ((2, 9, 13, 4), "NCHW", dict(mean=(1, 2, 3, 4), std=(5, 6, 7, 8), swap_rb=True)),
    ((2, 9, 13, 3), "NHWC", dict(STATS)),
    ((9, 26, 2), "CHW", dict(mean=(0.1, 0.2), scale=0.5)),  # a view: every other column
    ((9, 13, 1), "HWC", dict()),
]


def make(kernels, rng, shape, dtype, view):
    image = random_image(rng, shape, dtype)
    return kernels.put(image)[:, ::2] if view else kernels.put(image)


@pytest.mark.filterwarnings("ignore::cupyprep.UnitsWarning")  # (statistics for the formula's sake)
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("out_dtype", ["float32", "float16", "uint8"])
@pytest.mark.parametrize("in_dtype", [np.uint8, np.uint16, np.float16, np.float32])
def test_a_repeated_normalize_launches_its_plan(kernels, monkeypatch, in_dtype, out_dtype, case):
    rng = np.random.default_rng(case)
    shape, layout, kw = CASES[case]
    view = shape == (9, 26, 2)
    if out_dtype == "uint8":  # results spread over 0..255, not all rounded to one value
        kw = dict(kw, scale=40.0 if np.dtype(in_dtype).kind == "f" else 100 / np.iinfo(in_dtype).max)
    first, second = (make(kernels, rng, shape, in_dtype, view) for _ in range(2))
    a = cupyprep.normalize(first, layout=layout, dtype=out_dtype, **kw)
    assert len(nz._PLANS) == 1
    lookups = counting(monkeypatch, _kernels, "get_function")
    checks = counting(monkeypatch, _validate, "image_layout")
    stats = counting(monkeypatch, _validate, "per_channel")
    inputs = counting(monkeypatch, _arrays, "prepare")
    b = cupyprep.normalize(second, layout=layout, dtype=out_dtype, **kw)
    assert (lookups, checks, stats, inputs) == ([], [], [], []), "the second call planned again"
    assert type(b) is type(second) and b.dtype == np.dtype(out_dtype) and b.shape == a.shape
    for image, got in ((first, a), (second, b)):  # the general path, on the same images
        _plans.clear_all()
        ref = cupyprep.normalize(image, layout=layout, dtype=out_dtype, **kw)
        np.testing.assert_array_equal(kernels.get(got), kernels.get(ref))
    assert len(lookups) == 2
    assert not np.array_equal(kernels.get(a), kernels.get(b))  # the replay read its own input


def test_out_is_written_and_an_overlapping_out_takes_the_general_path(kernels, monkeypatch):
    rng = np.random.default_rng(1)
    kw = dict(mean=(10.0, 20.0, 30.0), std=(2.0, 4.0, 8.0), swap_rb=True, layout="HWC")
    images = [random_image(rng, (2, 7, 11, 3), np.float32) for _ in range(3)]
    refs = []
    for image in images:  # the general path
        _plans.clear_all()
        refs.append(kernels.get(cupyprep.normalize(kernels.put(image), **kw)))
    _plans.clear_all()
    lookups = counting(monkeypatch, _kernels, "get_function")
    for i, (image, ref) in enumerate(zip(images, refs)):  # an out apart from the input
        out = kernels.poisoned(image.shape, np.float32)
        got = cupyprep.normalize(kernels.put(image), out=out, **kw)
        assert got is out
        np.testing.assert_array_equal(kernels.get(out), ref, err_msg=f"call {i}")
    assert len(lookups) == 1 and len(nz._PLANS) == 1  # stored, then replayed
    # out = the input itself (the same geometry, so the same key): staged by the general path
    x = kernels.put(images[0])
    got = cupyprep.normalize(x, out=x, **kw)
    assert got is x and len(lookups) == 2 and len(nz._PLANS) == 1
    np.testing.assert_array_equal(kernels.get(x), refs[0])
    # a strided out (the pixel kernel) and a contiguous one (the dense kernel): two plans
    wide = kernels.poisoned((2, 7, 22, 3), np.float32)
    for image, ref in zip(images, refs):
        got = cupyprep.normalize(kernels.put(image), out=wide[:, :, ::2], **kw)
        np.testing.assert_array_equal(kernels.get(got), ref)
    assert len(lookups) == 3 and len(nz._PLANS) == 2


def test_a_changed_option_gets_its_own_plan(kernels):
    rng = np.random.default_rng(2)
    image = kernels.put(random_image(rng, (9, 13, 3), np.uint8))
    mean = [0.5, 0.25, 0.125]
    calls = [dict(mean=mean, scale=1 / 255), dict(mean=mean, scale=1 / 255, swap_rb=True),
             dict(mean=mean, scale=1 / 127), dict(mean=mean, scale=1 / 255, layout="HWC"),
             dict(mean=mean, scale=1 / 255, dtype="float16"), dict(mean=mean, scale=1 / 255, std=0.5)]
    first = [kernels.get(cupyprep.normalize(image, **kw)) for kw in calls]
    assert len(nz._PLANS) == len(calls)
    for kw, a in zip(calls, first):  # every plan in turn
        np.testing.assert_array_equal(kernels.get(cupyprep.normalize(image, **kw)), a, err_msg=str(kw))
    assert len({a.tobytes() for a in first}) == len(calls)
    mean[0] = 0.75  # the same list, changed in place: another key
    got = kernels.get(cupyprep.normalize(image, **calls[0]))
    assert len(nz._PLANS) == len(calls) + 1
    _plans.clear_all()
    np.testing.assert_array_equal(got, kernels.get(cupyprep.normalize(image, mean=(0.75, 0.25, 0.125), scale=1 / 255)))
    with pytest.raises(TypeError, match="swap_rb"):  # refused as the first call would
        cupyprep.normalize(image, swap_rb=2)


def test_array_statistics_store_no_plan(kernels):
    rng = np.random.default_rng(3)
    image = kernels.put(random_image(rng, (9, 13, 3), np.float32))
    mean = np.array([0.5, 0.25, 0.125])
    a = kernels.get(cupyprep.normalize(image, mean, std=(1.0, 2.0, 4.0)))
    mean[0] = -1.0  # changed in place: a key by identity would replay the old values
    b = kernels.get(cupyprep.normalize(image, mean, std=(1.0, 2.0, 4.0)))
    assert len(nz._PLANS) == 0
    np.testing.assert_array_equal(b[0], kernels.get(image)[:, :, 0] + 1.0)
    assert not np.array_equal(a, b)


def test_a_replay_warns_again(kernels):
    image = kernels.put(np.zeros((5, 6, 3), np.uint8))
    for _ in range(3):  # 0..255 statistics with pixels scaled into [0, 1]
        with pytest.warns(cupyprep.UnitsWarning):
            cupyprep.normalize(image, (123.7, 116.3, 103.5), (58.4, 57.1, 57.4), scale=1 / 255)
    assert len(nz._PLANS) == 1


def test_denormalize_replays_normalize_plans(kernels):
    rng = np.random.default_rng(4)
    images = [random_image(rng, (8, 10, 3), np.uint8) for _ in range(2)]
    kw = dict(mean=STATS["mean"], std=STATS["std"], scale=STATS["scale"], swap_rb=True)
    for image in images:
        x = cupyprep.normalize(kernels.put(image), **kw)
        np.testing.assert_array_equal(kernels.get(cupyprep.denormalize(x, **kw)), image)
    assert len(nz._PLANS) == 2  # normalize's, and denormalize's (a normalize of the CHW view)
    assert len(nz._DENORMALIZE) == 1  # denormalize's: normalize's plan of the view


@pytest.mark.parametrize("layout", ["CHW", "NCHW", "HWC"])
def test_a_repeated_denormalize_skips_its_checks(kernels, monkeypatch, layout):
    rng = np.random.default_rng(5)
    batched = layout.startswith("N")
    images = [random_image(rng, (2, 8, 10, 3) if batched else (8, 10, 3), np.uint8) for _ in range(3)]
    kw = dict(mean=STATS["mean"], std=STATS["std"], scale=STATS["scale"], swap_rb=True, layout=layout)
    xs = [cupyprep.normalize(kernels.put(im), **kw) for im in images]
    got = [cupyprep.denormalize(xs[0], **kw)]
    guards = [counting(monkeypatch, _validate, name) for name in ("per_channel", "out_dtype")]
    guards.append(counting(monkeypatch, _arrays, "prepare"))
    guards.append(counting(monkeypatch, _kernels, "get_function"))
    got += [cupyprep.denormalize(x, **kw) for x in xs[1:]]
    assert guards == [[], [], [], []], "a repeated denormalize checked its arguments or planned again"
    monkeypatch.undo()
    for image, g in zip(images, got):
        np.testing.assert_array_equal(kernels.get(g), image)
    with pytest.raises(ValueError, match="std"):  # other arguments: checked
        cupyprep.denormalize(xs[0], mean=STATS["mean"], std=(0.0, 1.0, 1.0), layout=layout)


def test_the_cpu_backend_stores_no_plan():
    image = np.zeros((5, 6, 3), np.uint8)
    cupyprep.normalize(image)
    cupyprep.normalize(image)
    assert len(nz._PLANS) == 0


# --- torch on a GPU -------------------------------------------------------------------------
@pytest.mark.gpu
def test_torch_replays_make_no_cupy_view(torch_cuda, monkeypatch):
    torch = torch_cuda
    x = torch.randint(0, 256, (4, 64, 96, 3), dtype=torch.uint8, device="cuda")
    kw = dict(mean=STATS["mean"], std=STATS["std"], scale=STATS["scale"], swap_rb=True, layout="NCHW")
    cupyprep.normalize(x, **kw)
    views = counting(monkeypatch, _arrays, "from_torch")
    lookups = counting(monkeypatch, _kernels, "get_function")
    x.random_(0, 256)
    got = cupyprep.normalize(x, **kw)
    assert (views, lookups) == ([], [])
    monkeypatch.undo()
    _plans.clear_all()
    assert torch.equal(got, cupyprep.normalize(x, **kw))
    out = torch.empty_like(got)
    side = torch.cuda.Stream()
    cupyprep.normalize(x, out=out, **kw)  # the out= plan
    x.random_(0, 256)
    with cupyprep.stream(side):
        cupyprep.normalize(x, out=out, **kw)
    side.synchronize()
    _plans.clear_all()
    assert torch.equal(out, cupyprep.normalize(x, **kw))
