"""Launch plans of resize (cupyprep._plans, as test_plans.py for preprocess): a repeated call
with the same geometry and options launches the stored plan, with the general path's bits,
and without validation, kernel lookup or table fetch again; any other call takes the
general path. antialias=True keeps the plans of its passes (one or two) together."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import counting, random_image, torch_graphs_need_caching

import cupyprep
from cupyprep import _arrays, _kernels, _plans, _transfers, _validate, cv2compat

rz = importlib.import_module("cupyprep._resizing")

# (source, destination) sizes of each path of resize.cu: area at whole factors (cell means),
# other downscales (weighted cells, with tables) and upscales
SIZES = {
    "nearest": ((13, 17), (9, 23)),
    "linear": ((13, 17), (9, 23)),
    "cubic": ((13, 17), (9, 23)),
    "area_fast": ((12, 16), (4, 8)),
    "area_weighted": ((13, 17), (9, 11)),
    "area_up": ((7, 9), (12, 20)),
}
# the image forms: HWC, HW, an NHWC batch, more than 4 channels (a launch per plane), a
# strided view, CHW
FORMS = ["HWC", "HW", "NHWC", "HWC6", "view", "CHW"]


def make(kernels, rng, form, src, dtype):
    """A kernel-side image of ``form`` and ``src`` size, and its layout argument."""
    h, w = src
    if form == "HW":
        return kernels.put(random_image(rng, (h, w), dtype)), "HWC"
    if form == "NHWC":
        return kernels.put(random_image(rng, (2, h, w, 3), dtype)), "NHWC"
    if form == "HWC6":
        return kernels.put(random_image(rng, (h, w, 6), dtype)), "HWC"
    if form == "view":  # every other column, the channels reversed, read in place
        return kernels.put(random_image(rng, (h, 2 * w, 4), dtype))[:, ::2, 2::-1], "HWC"
    if form == "CHW":
        return kernels.put(random_image(rng, (3, h, w), dtype)), "CHW"
    return kernels.put(random_image(rng, (h, w, 3), dtype)), "HWC"


def interpolation_of(path):
    return "area" if path.startswith("area") else path


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32])
@pytest.mark.parametrize("path", list(SIZES))
def test_a_repeated_resize_launches_its_plan(kernels, monkeypatch, path, dtype, form):
    rng = np.random.default_rng(0)
    src, dst = SIZES[path]
    interpolation = interpolation_of(path)
    first, layout = make(kernels, rng, form, src, dtype)
    second, _ = make(kernels, rng, form, src, dtype)
    a = cupyprep.resize(first, dst, interpolation=interpolation, layout=layout)
    assert len(rz._PLANS) == 1
    lookups = counting(monkeypatch, _kernels, "get_function")
    checks = counting(monkeypatch, _validate, "image_layout")
    inputs = counting(monkeypatch, _arrays, "prepare")
    tables = counting(monkeypatch, _transfers, "device_constant")
    uploads = counting(monkeypatch, _transfers, "upload")
    b = cupyprep.resize(second, dst, interpolation=interpolation, layout=layout)
    assert (lookups, checks, inputs, uploads) == ([], [], [], []), "the second call planned again"
    if kernels.name == "emulated" or path != "area_weighted":  # (on a GPU its tables are fetched again)
        assert tables == []
    assert type(b) is type(second) and b.dtype == second.dtype and b.shape == a.shape
    for image, got in ((first, a), (second, b)):  # the general path, on the same images
        _plans.clear_all()
        ref = cupyprep.resize(image, dst, interpolation=interpolation, layout=layout)
        np.testing.assert_array_equal(kernels.get(got), kernels.get(ref))
    assert len(lookups) == 2
    assert not np.array_equal(kernels.get(a), kernels.get(b))  # the replay read its own input


def test_out_is_written_and_an_overlapping_out_takes_the_general_path(kernels, monkeypatch):
    rng = np.random.default_rng(1)
    src, dst = (11, 20), (11, 14)
    images = [random_image(rng, src + (3,), np.uint8) for _ in range(3)]
    refs = []
    for image in images:  # the general path
        _plans.clear_all()
        refs.append(kernels.get(cupyprep.resize(kernels.put(image), dst, interpolation="cubic")))
    _plans.clear_all()
    lookups = counting(monkeypatch, _kernels, "get_function")
    for i, (image, ref) in enumerate(zip(images, refs)):  # an out apart from the input
        out = kernels.poisoned(dst + (3,), np.uint8)
        got = cupyprep.resize(kernels.put(image), dst, interpolation="cubic", out=out)
        assert got is out
        np.testing.assert_array_equal(kernels.get(out), ref, err_msg=f"call {i}")
    assert len(lookups) == 1 and len(rz._PLANS) == 1  # stored, then replayed
    # the input and out as views of one buffer (out starting inside the input): the
    # geometry of a plan made with views of rows apart, the result of a staged write
    spare = kernels.put(random_image(rng, (22, 20, 3), np.uint8))
    cupyprep.resize(spare[:11], dst, interpolation="cubic", out=spare[11:, :14])
    assert len(lookups) == 2 and len(rz._PLANS) == 2
    base = random_image(rng, (22, 20, 3), np.uint8)
    shared = kernels.put(base)
    got = cupyprep.resize(shared[:11], dst, interpolation="cubic", out=shared[5:16, :14])
    assert len(lookups) == 3 and len(rz._PLANS) == 2  # the general path, which stores no plan
    ref = kernels.get(cupyprep.resize(kernels.put(base[:11]), dst, interpolation="cubic"))
    expect = base.copy()
    expect[5:16, :14] = ref
    np.testing.assert_array_equal(kernels.get(shared), expect)


def test_a_changed_option_gets_its_own_plan(kernels):
    rng = np.random.default_rng(2)
    image = kernels.put(random_image(rng, (13, 17, 3), np.float32))
    calls = [dict(size=(9, 23)), dict(size=(9, 23), interpolation="cubic"), dict(size=(9, 24)),
             dict(size=[9, 23]), dict(size=(9, 23), interpolation="nearest")]
    first = [kernels.get(cupyprep.resize(image, **kw)) for kw in calls]
    assert len(rz._PLANS) == len(calls)
    again = [kernels.get(cupyprep.resize(image, **kw)) for kw in calls]  # every plan in turn
    for kw, a, b in zip(calls, first, again):
        np.testing.assert_array_equal(a, b, err_msg=str(kw))
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[0], first[4])
    np.testing.assert_array_equal(first[0], first[3])
    with pytest.raises(TypeError, match="size"):  # equal to (9, 23), refused as the first call would
        cupyprep.resize(image, (9.0, 23))
    contiguous = kernels.put(random_image(rng, (13, 17, 3), np.float32))
    strided = kernels.put(np.repeat(kernels.get(contiguous), 2, axis=1))[:, ::2]
    a, b = (kernels.get(cupyprep.resize(x, (9, 23))) for x in (contiguous, strided))
    assert len(rz._PLANS) == len(calls) + 1  # the view's strides: another plan
    np.testing.assert_array_equal(a, b)


def test_cv2compat_factors_are_part_of_the_key(kernels):
    rng = np.random.default_rng(3)
    image = kernels.put(random_image(rng, (20, 30, 3), np.uint8))
    # fx / fy give the step (1 / fx), a dsize the sizes' ratio: same output size, other keys
    results = []
    for _ in range(2):
        results.append([kernels.get(r) for r in (
            cv2compat.resize(image, None, fx=0.7, fy=0.7, interpolation=cv2compat.INTER_AREA),
            cv2compat.resize(image, (21, 14), interpolation=cv2compat.INTER_AREA),
            cv2compat.resize(image, None, fx=0.71, fy=0.7, interpolation=cv2compat.INTER_AREA))])
    assert len(rz._PLANS) == 3
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    _plans.clear_all()
    general = kernels.get(cv2compat.resize(image, None, fx=0.71, fy=0.7, interpolation=cv2compat.INTER_AREA))
    np.testing.assert_array_equal(results[1][2], general)


# antialias=True: (source, destination) of both passes, of x only and of y only
AA_SIZES = {"both": ((13, 17), (9, 11)), "x": ((13, 17), (13, 8)), "y": ((13, 17), (20, 17))}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16])
@pytest.mark.parametrize("interpolation", ["linear", "cubic"])
@pytest.mark.parametrize("passes", list(AA_SIZES))
def test_a_repeated_antialiased_resize_launches_its_plans(kernels, monkeypatch, passes, interpolation, dtype,
                                                          form):
    rng = np.random.default_rng(1)
    src, dst = AA_SIZES[passes]
    kw = dict(interpolation=interpolation, antialias=True)
    first, layout = make(kernels, rng, form, src, dtype)
    second, _ = make(kernels, rng, form, src, dtype)
    a = cupyprep.resize(first, dst, layout=layout, **kw)
    assert len(rz._PLANS) == 1
    guards = [counting(monkeypatch, owner, name) for owner, name in (
        (_kernels, "get_function"), (_validate, "image_layout"), (_arrays, "prepare"), (_transfers, "upload"))]
    tables = counting(monkeypatch, _transfers, "device_constant")
    contexts = counting(monkeypatch, _plans, "Prepared")
    b = cupyprep.resize(second, dst, layout=layout, **kw)
    assert guards == [[], [], [], []], "the second call planned again"
    assert len(tables) == (2 if passes == "both" else 1)  # each pass fetches its axis's tables
    assert len(contexts) == 1  # both passes in one launch context
    monkeypatch.undo()
    assert type(b) is type(second) and b.dtype == second.dtype and b.shape == a.shape
    for image, got in ((first, a), (second, b)):  # the general path, on the same images
        _plans.clear_all()
        ref = cupyprep.resize(image, dst, layout=layout, **kw)
        np.testing.assert_array_equal(kernels.get(got), kernels.get(ref), err_msg=f"{passes} {form}")
    assert not np.array_equal(kernels.get(a), kernels.get(b))  # the replay read its own input


def test_antialiased_resize_into_out_and_in_place(kernels):
    rng = np.random.default_rng(4)
    images = [kernels.put(random_image(rng, (13, 17, 3), np.uint8)) for _ in range(3)]
    want = [kernels.get(cupyprep.resize(x, (9, 11), antialias=True)) for x in images]
    _plans.clear_all()
    out = kernels.poisoned((9, 11, 3), np.uint8)
    for x, w in zip(images, want):
        assert cupyprep.resize(x, (9, 11), antialias=True, out=out) is out
        np.testing.assert_array_equal(kernels.get(out), w)
    assert len(rz._PLANS) == 1
    # one pass into the image's own memory (the same geometry, so the same key): staged
    x = kernels.put(random_image(rng, (13, 17, 3), np.uint8))
    want_y = kernels.get(cupyprep.resize(x, (13, 17), antialias=True))  # no axis changes: a copy
    np.testing.assert_array_equal(want_y, kernels.get(x))
    wide = kernels.put(random_image(rng, (13, 17, 3), np.uint8))
    ref = kernels.get(cupyprep.resize(wide, (13, 8), antialias=True))
    other = kernels.poisoned((13, 17, 3), np.uint8)
    cupyprep.resize(wide, (13, 8), antialias=True, out=other[:, :8])  # a one-pass plan for such an out
    np.testing.assert_array_equal(kernels.get(other[:, :8]), ref)
    assert len(rz._PLANS) == 3
    view = wide[:, :8]  # an out of that geometry inside the image: the replay stages it
    cupyprep.resize(wide, (13, 8), antialias=True, out=view)
    np.testing.assert_array_equal(kernels.get(view), ref)


def test_the_cpu_backend_stores_no_plan():
    image = np.zeros((13, 17, 3), np.uint8)
    cupyprep.resize(image, (9, 11))
    cupyprep.resize(image, (9, 11))
    assert len(rz._PLANS) == 0


# --- torch on a GPU -------------------------------------------------------------------------
@pytest.mark.gpu
def test_torch_replays_make_no_cupy_view_and_capture(torch_cuda, monkeypatch):
    torch = torch_cuda
    torch_graphs_need_caching()
    rng = np.random.default_rng(5)
    frames = [random_image(rng, (720, 1280, 3), np.uint8) for _ in range(3)]
    for interpolation, size in (("linear", (360, 640)), ("area", (250, 500))):  # area: weighted
        x = torch.from_numpy(frames[0]).cuda()
        cupyprep.resize(x, size, interpolation=interpolation)
        views = counting(monkeypatch, _arrays, "from_torch")
        lookups = counting(monkeypatch, _kernels, "get_function")
        uploads = counting(monkeypatch, _transfers, "upload")
        x.copy_(torch.from_numpy(frames[1]))
        got = cupyprep.resize(x, size, interpolation=interpolation)
        assert (views, lookups, uploads) == ([], [], [])
        monkeypatch.undo()
        _plans.clear_all()
        assert torch.equal(got, cupyprep.resize(x, size, interpolation=interpolation))
        # captured into a CUDA graph (a replayed plan), the graph replayed on new values
        cupyprep.resize(x, size, interpolation=interpolation)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = cupyprep.resize(x, size, interpolation=interpolation)
        x.copy_(torch.from_numpy(frames[2]))
        graph.replay()
        torch.cuda.synchronize()
        _plans.clear_all()
        assert torch.equal(captured, cupyprep.resize(x, size, interpolation=interpolation))


@pytest.mark.gpu
def test_torch_antialiased_replays_equal_the_general_path(torch_cuda, monkeypatch):
    torch = torch_cuda
    frames = [torch.randint(0, 256, (2, 40, 52, 3), dtype=torch.uint8, device="cuda") for _ in range(3)]
    got = [cupyprep.resize(f, (17, 23), antialias=True, layout="NHWC") for f in frames[:1]]
    lookups = counting(monkeypatch, _kernels, "get_function")
    got += [cupyprep.resize(f, (17, 23), antialias=True, layout="NHWC") for f in frames[1:]]
    assert lookups == [] and len(rz._PLANS) == 1
    monkeypatch.undo()
    for f, g in zip(frames, got):
        _plans.clear_all()
        assert isinstance(g, torch.Tensor) and g.is_cuda
        assert torch.equal(g, cupyprep.resize(f, (17, 23), antialias=True, layout="NHWC"))
