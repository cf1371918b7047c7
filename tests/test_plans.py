"""Launch plans (cupyprep._plans): a repeated call with the same geometry and options
launches the plan its first call stored, with the first call's results, and without the
validation, planning, kernel lookup or CuPy view of a torch tensor again; a call that
differs in anything (a value, a value's type, strides, an ``out`` that overlaps the input)
takes the general path."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
from conftest import counting, random_image, torch_graphs_need_caching

import cupyprep
from cupyprep import _kernels, _plans, _validate

pp = importlib.import_module("cupyprep.preprocess")  # the module, not the function

SIZE = (24, 32)



def reference(kernels, batch, size, **kw):
    """The batch and meta of the images of an NHWC NumPy batch as a list (the list launch,
    which stores no plan; pinned to the CPU recipe in test_preprocess)."""
    out, meta = cupyprep.preprocess([kernels.put(image) for image in batch], size, **kw)
    return kernels.get(out), meta


def assert_meta_equal(a, b):
    for field in ("orig_size", "resized_size", "offset"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.size == b.size


@pytest.mark.parametrize("shape, kw", [
    ((1, 37, 53, 3), dict(dtype="float16")),
    ((3, 19, 11, 3), dict(mode="center_crop", layout="NHWC", mean=(0.485, 0.456, 0.406),
                          std=(0.229, 0.224, 0.225))),
    ((2, 9, 40, 1), dict(mode="stretch", interpolation="nearest", dtype="uint8")),
    ((48, 64, 3), dict(interpolation="area", pad_value=(1, 2, 3))),  # one HWC image, area at a whole factor
    ((41, 29), dict(mode="letterbox_top_left", interpolation="cubic")),  # one HW image
])
def test_a_repeated_call_launches_its_plan(kernels, monkeypatch, shape, kw):
    rng = np.random.default_rng(0)
    first, second = (random_image(rng, shape, np.uint8) for _ in range(2))
    a, meta_a = cupyprep.preprocess(kernels.put(first), SIZE, **kw)
    lookups = counting(monkeypatch, _kernels, "get_function")
    layouts = counting(monkeypatch, _validate, "image_layout")
    plans = counting(monkeypatch, pp, "plan")
    b, meta_b = cupyprep.preprocess(kernels.put(second), SIZE, **kw)
    assert (lookups, layouts, plans) == ([], [], []), "the second call planned again"

    def batch(x):  # one image as a batch of one
        return x if x.ndim == 4 else x[None] if x.ndim == 3 else x[None, :, :, None]

    for image, out, meta in ((first, a, meta_a), (second, b, meta_b)):
        ref, ref_meta = reference(kernels, batch(image), SIZE, **kw)
        np.testing.assert_array_equal(kernels.get(out), ref)
        assert_meta_equal(meta, ref_meta)
    # the general path (no plan) gives the replay's values
    _plans.clear_all()
    before = len(lookups)
    c, meta_c = cupyprep.preprocess(kernels.put(second), SIZE, **kw)
    assert len(lookups) == before + 1
    np.testing.assert_array_equal(kernels.get(b), kernels.get(c))
    assert_meta_equal(meta_b, meta_c)


def test_a_repeated_list_launches_its_plan(kernels, monkeypatch):
    rng = np.random.default_rng(5)
    shapes = [(37, 53, 3), (9, 13, 3), (1, 1, 3), (60, 20, 3)]
    kw = dict(mode="letterbox", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), dtype="float16")

    def images():
        out = [kernels.put(random_image(rng, s, np.uint8)) for s in shapes]
        out[1] = kernels.put(random_image(rng, (9, 26, 3), np.uint8))[:, ::2]  # strided
        return out

    first = images()
    cupyprep.preprocess(first, SIZE, **kw)
    lookups = counting(monkeypatch, _kernels, "get_function")
    checks = counting(monkeypatch, _validate, "list_images")
    for _ in range(2):
        second = images()
        got, meta = cupyprep.preprocess(second, SIZE, **kw)
        assert (lookups, checks) == ([], []), "the repeated list planned again"
        _plans.clear_all()
        ref, ref_meta = cupyprep.preprocess(second, SIZE, **kw)  # the general path
        np.testing.assert_array_equal(kernels.get(got), kernels.get(ref))
        assert_meta_equal(meta, ref_meta)
        lookups.clear(), checks.clear()
        cupyprep.preprocess(first, SIZE, **kw)  # the plan again
    # another order of the same sizes, a contiguous image where a strided one was: other plans
    cupyprep.preprocess(second[::-1], SIZE, **kw)
    third = images()
    third[1] = kernels.put(kernels.get(third[1]))
    got, _ = cupyprep.preprocess(third, SIZE, **kw)
    assert len(pp._PLANS) == 3
    ref, _ = reference(kernels, [kernels.get(a) for a in third], SIZE, **kw)
    np.testing.assert_array_equal(kernels.get(got), ref)


def test_a_list_past_the_by_value_records_stores_no_plan(kernels):
    rng = np.random.default_rng(6)
    many = [kernels.put(random_image(rng, (5 + i % 3, 7, 3), np.uint8)) for i in range(65)]
    cupyprep.preprocess(many, (6, 8))
    cupyprep.preprocess(many[:64], (6, 8))
    assert len(pp._PLANS) == 1  # the 64


def test_out_is_written_and_an_overlapping_out_takes_the_general_path(kernels):
    rng = np.random.default_rng(1)
    shape = (2, 17, 23, 3)
    kw = dict(mode="stretch", dtype="uint8", layout="NHWC", interpolation="nearest", swap_rb=False,
              scale=1.0)
    images = [random_image(rng, shape, np.uint8) for _ in range(4)]
    for i, image in enumerate(images):  # a separate out: the plan stored, then replayed
        out = kernels.poisoned(shape, np.uint8)
        got, _ = cupyprep.preprocess(kernels.put(image), (17, 23), out=out, **kw)
        assert got is out
        np.testing.assert_array_equal(kernels.get(out), image, err_msg=f"call {i}")
    assert len(pp._PLANS) == 1
    # out = the input itself (same geometry, so the same key): staged by the general path
    x = kernels.put(images[0][:, ::-1].copy())
    got, _ = cupyprep.preprocess(x, (17, 23), out=x, **kw)
    np.testing.assert_array_equal(kernels.get(got), images[0][:, ::-1])


def test_a_list_whose_out_overlaps_one_of_its_images_takes_the_general_path(kernels):
    rng = np.random.default_rng(11)
    kw = dict(mode="stretch", dtype="uint8", layout="NHWC", interpolation="nearest", swap_rb=False,
              scale=1.0)
    for flip in (slice(None), slice(None, None, -1)):  # the images' rows forward, then backward
        pp._PLANS.clear()
        frames = random_image(rng, (3, 17, 23, 3), np.uint8)
        separate = kernels.poisoned((3, 17, 23, 3), np.uint8)
        got, _ = cupyprep.preprocess([kernels.put(f)[flip] for f in frames], (17, 23), out=separate, **kw)
        np.testing.assert_array_equal(kernels.get(got), frames[:, flip])
        assert len(pp._PLANS) == 1
        # the same geometry, but the images lie in the out itself: staged, every image read whole
        buf = kernels.put(frames)
        images = [buf[i][flip] for i in range(3)]
        got, _ = cupyprep.preprocess(images, (17, 23), out=buf, **kw)
        assert got is buf
        np.testing.assert_array_equal(kernels.get(buf), frames[:, flip], err_msg=str(flip))
        # and the plan still replays into a separate out
        other = kernels.poisoned((3, 17, 23, 3), np.uint8)
        cupyprep.preprocess([kernels.put(f)[flip] for f in frames[::-1]], (17, 23), out=other, **kw)
        np.testing.assert_array_equal(kernels.get(other), frames[::-1, flip])


def test_values_of_other_types_or_geometry_get_their_own_plan(kernels):
    rng = np.random.default_rng(2)
    image = kernels.put(random_image(rng, (1, 21, 30, 3), np.uint8))
    cupyprep.preprocess(image, SIZE)
    assert len(pp._PLANS) == 1
    with pytest.raises(TypeError, match="size"):  # equal to (24, 32), refused as the first call would
        cupyprep.preprocess(image, (24.0, 32))
    with pytest.raises(TypeError, match="swap_rb"):
        cupyprep.preprocess(image, SIZE, swap_rb=2)
    cupyprep.preprocess(image, SIZE, swap_rb=1)  # the int 1 is a flag too, but its own key
    cupyprep.preprocess(image, list(SIZE))
    assert len(pp._PLANS) == 3
    strided = kernels.put(random_image(rng, (1, 21, 60, 3), np.uint8))[:, :, ::2]
    got, _ = cupyprep.preprocess(strided, SIZE)
    assert len(pp._PLANS) == 4
    ref, _ = reference(kernels, kernels.get(strided), SIZE)
    np.testing.assert_array_equal(kernels.get(got), ref)


def test_an_option_given_as_an_array_gets_no_plan(kernels):
    """An array's values are no key: mean / std as arrays take the general path every call
    (a plan keyed without them would replay the first call's statistics)."""
    rng = np.random.default_rng(8)
    image = kernels.put(random_image(rng, (1, 12, 16, 3), np.uint8))
    std = np.array([0.2, 0.25, 0.3])
    got = [kernels.get(cupyprep.preprocess(image, SIZE, mean=np.array(mean), std=std)[0])
           for mean in ([0.1, 0.2, 0.3], [0.5, 0.4, 0.6])]
    assert len(pp._PLANS) == 0
    ref, _ = reference(kernels, kernels.get(image), SIZE, mean=(0.5, 0.4, 0.6), std=(0.2, 0.25, 0.3))
    np.testing.assert_array_equal(got[1], ref)
    assert not np.array_equal(got[0], got[1])


def test_an_option_changed_in_place_is_seen(kernels):
    """An object compared by identity (a torch tensor as mean) is no key either: changed in
    place between two calls, the second call uses its new values."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    image = kernels.put(random_image(rng, (1, 12, 16, 3), np.uint8))
    mean = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    first = kernels.get(cupyprep.preprocess(image, SIZE, mean=mean, std=(0.2, 0.25, 0.3))[0])
    mean[:] = torch.tensor([0.5, 0.4, 0.6], dtype=torch.float64)
    second = kernels.get(cupyprep.preprocess(image, SIZE, mean=mean, std=(0.2, 0.25, 0.3))[0])
    ref, _ = reference(kernels, kernels.get(image), SIZE, mean=(0.5, 0.4, 0.6), std=(0.2, 0.25, 0.3))
    np.testing.assert_array_equal(second, ref)
    assert not np.array_equal(first, second)
    assert _plans.options_key([mean]) is None and _plans.options_key([(1.0, mean)]) is None
    assert _plans.options_key([(0.5, 2), "linear", None, np.float32(1), np.dtype("float16")]) is not None


def test_option_keys_tell_types_apart():
    """Equal values of other types are other keys (the first call's checks might refuse
    one of them); lists and tuples alike of equal values are other keys too; anything
    compared by identity or mutable, alone or inside a tuple, is no key."""
    k = _plans.options_key
    assert k((1,)) != k((True,)) and k((1,)) != k((1.0,)) and k((np.float32(1),)) != k((1.0,))
    assert k(((1, 2),)) != k(([1, 2],)) and k(((1, 2),)) == k(((1, 2),)) and k(([1, 2],)) == k(([1, 2],))
    assert k(((np.float32(1), 2),)) == k(((np.float32(1), 2),)) != k(((1.0, 2),))
    assert k((np.dtype("uint8"), float, "x", None)) == k((np.dtype("uint8"), float, "x", None))
    for bad in (np.array([1]), (np.array(1),), [object()], ((1, 2), (3, 4)), object()):
        assert k((bad,)) is None, bad


def test_a_replay_returns_its_own_meta_and_warns_again(kernels):
    rng = np.random.default_rng(3)
    image = kernels.put(random_image(rng, (1, 30, 50, 3), np.uint8))
    stats = dict(mean=(123.7, 116.3, 103.5), std=(58.4, 57.1, 57.4))  # 0..255 statistics at scale 1/255
    for _ in range(3):
        with pytest.warns(cupyprep.UnitsWarning):
            _, meta = cupyprep.preprocess(image, SIZE, **stats)
        expected = meta.offset.copy()
        meta.offset[:] = 99  # the caller's copy only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cupyprep.UnitsWarning)
        _, meta = cupyprep.preprocess(image, SIZE, **stats)
    np.testing.assert_array_equal(meta.offset, expected)


def test_the_cpu_backend_stores_no_plan():
    image = np.zeros((1, 8, 8, 3), np.uint8)
    cupyprep.preprocess(image, SIZE)
    cupyprep.preprocess(image, SIZE)
    assert len(pp._PLANS) == 0
    assert _plans.array_key(image) is None


def test_a_plan_keeps_no_array_alive(kernels):
    import gc
    import weakref

    rng = np.random.default_rng(7)
    image = kernels.put(random_image(rng, (1, 16, 20, 3), np.uint8))
    images = [kernels.put(random_image(rng, (9 + i, 13, 3), np.uint8)) for i in range(3)]
    batch, _ = cupyprep.preprocess(image, SIZE)
    lots, _ = cupyprep.preprocess(images, SIZE)
    assert len(pp._PLANS) == 2
    refs = [weakref.ref(a) for a in (image, batch, lots, *images)]
    del image, batch, lots, images
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_plan_cache_is_bounded():
    cache = _plans.PlanCache(maxsize=3)
    for i in range(5):
        cache.put(i, object())
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) is not None


# --- torch on a GPU -------------------------------------------------------------------------
@pytest.mark.gpu
def test_torch_replays_make_no_cupy_view_and_follow_the_stream(monkeypatch):
    torch = pytest.importorskip("torch")
    from cupyprep import _arrays

    rng = np.random.default_rng(4)
    frames = [random_image(rng, (1080, 1920, 3), np.uint8) for _ in range(3)]
    x = torch.from_numpy(frames[0]).cuda()
    cupyprep.preprocess(x, (640, 640), dtype="float16")
    views = counting(monkeypatch, _arrays, "from_torch")
    lookups = counting(monkeypatch, _kernels, "get_function")
    x.copy_(torch.from_numpy(frames[1]))
    got, meta = cupyprep.preprocess(x, (640, 640), dtype="float16")
    assert (views, lookups) == ([], []), "the replay made a CuPy view or looked a kernel up"
    def ref(frame):  # the list launch, which stores no plan
        return cupyprep.preprocess([torch.from_numpy(frame).cuda()], (640, 640), dtype="float16")[0].cpu().numpy()

    np.testing.assert_array_equal(got.cpu().numpy(), ref(frames[1]))
    # on a chosen stream, ordered after the caller's stream
    side = torch.cuda.Stream()
    out = torch.full((1, 3, 640, 640), float("nan"), dtype=torch.float16, device="cuda")
    cupyprep.preprocess(x, (640, 640), dtype="float16", out=out)  # the out= plan
    x2 = torch.from_numpy(frames[2]).cuda()
    with cupyprep.stream(side):
        cupyprep.preprocess(x2, (640, 640), dtype="float16", out=out)
    side.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), ref(frames[2]))
    # a list of torch frames of mixed sizes (S4's form): the replay equals the general path
    sizes = [(360, 480), (720, 1280), (1080, 1920), (481, 641)]
    frames_list = [torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, device="cuda") for h, w in sizes]
    cupyprep.preprocess(frames_list, (640, 640))
    views.clear(), lookups.clear()
    for f in frames_list:
        f.random_(0, 256)
    got, _ = cupyprep.preprocess(frames_list, (640, 640))
    assert (views, lookups) == ([], [])
    _plans.clear_all()
    general, _ = cupyprep.preprocess(frames_list, (640, 640))
    assert torch.equal(got, general)
    # captured into a CUDA graph (a replayed plan), then the graph replayed on new values
    torch_graphs_need_caching()
    static = torch.from_numpy(frames[0]).cuda()
    cupyprep.preprocess(static, (640, 640), dtype="float16")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured, _ = cupyprep.preprocess(static, (640, 640), dtype="float16")
    static.copy_(torch.from_numpy(frames[1]))
    graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(captured.cpu().numpy(), ref(frames[1]))


def test_held_arguments_carry_the_bytes_cupy_would_pass():
    """A plan's fixed arguments are converted once (not at every launch): each NumPy
    scalar becomes an object holding its bytes, which CuPy passes on as they are."""
    pytest.importorskip("cupy")
    import ctypes

    from cupyprep import _launch

    record = _launch.by_value([1.5, -2.0, 3.25], np.float32, 4)
    args = (np.int32(-7), np.int64(1 << 40), np.float32(0.1), np.float64(-2.5), np.float16(0.333),
            np.uint8(200), np.bool_(True), record, None)
    held = _launch.held(args)
    assert len(held) == len(args) and held[-1] is None
    for a, h in zip(args[:-1], held[:-1]):
        assert ctypes.string_at(h.ptr, a.itemsize) == a.tobytes(), a
    assert _launch.pointer(0x7F0012345600).ptr != 0
    assert ctypes.string_at(_launch.pointer(0x7F0012345600).ptr, 8) == np.uint64(0x7F0012345600).tobytes()


def test_held_arguments_stay_numpy_values_under_the_emulator():
    from cupyprep import _launch
    from cupyprep.testing import emulate

    args = (np.int32(3), np.float32(0.5), None)
    with emulate():
        held = _launch.held(args)
    assert all(type(h) is type(a) and h == a for a, h in zip(args, held))
