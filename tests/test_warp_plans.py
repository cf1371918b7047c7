"""Launch plans of the warps (cupyprep._warping, cupyprep._plans): a repeated warp_affine /
warp_perspective on one image, a batch or a list of up to 64 images, with the geometry, options and matrix form of an
earlier call, launches that call's plan with this call's matrix, checked and inverted
again: the general path's results bit for bit, without a kernel lookup, a device query or
a check the key already implies. A call that differs in anything (a value's type, strides,
the image's alignment, an ``out`` that overlaps the image) takes the general path."""
from __future__ import annotations

import gc
import weakref

import cv2
import numpy as np
import pytest
from conftest import counting, random_image

import cupyprep
from cupyprep import _kernels, _plans, _transfers, _validate, _warping
from cupyprep._specs import warp as warp_spec

SIZE = (11, 14)



@pytest.fixture
def launches(monkeypatch):
    """The kernel name expressions launched during the test, in order, replays of a plan
    included (the plan keeps the function the lookup returned)."""
    seen = []
    get_function = _kernels.get_function

    def spy(filename, expr):
        fn = get_function(filename, expr)

        def launch(*args, **kwargs):
            seen.append(expr)
            return fn(*args, **kwargs)

        return launch

    monkeypatch.setattr(_kernels, "get_function", spy)
    return seen


def guards(monkeypatch):
    """What a replay must not do: look a kernel up, query the device, check the layout or
    the matrix's shape, choose the kernel again or copy anything to the device."""
    return [counting(monkeypatch, module, name) for module, name in (
        (_kernels, "get_function"), (_kernels, "multiprocessors"), (_validate, "image_layout"),
        (_warping, "check_matrices"), (_warping, "choose_path"), (_transfers, "upload"),
        (_transfers, "device_constant"))]


def matrices(rng, shape, perspective, count=3):
    """``count`` different source-to-destination matrices for images of ``shape`` (HW...):
    rotations and zooms about a point near the center, with perspective terms for
    homographies."""
    h, w = shape[:2]
    out = []
    for _ in range(count):
        m = cv2.getRotationMatrix2D((w / 2 + rng.uniform(-1, 1), h / 2 + rng.uniform(-1, 1)),
                                    rng.uniform(-40, 40), rng.uniform(0.7, 1.4))
        if perspective:
            m = np.vstack([m, [rng.uniform(-2e-3, 2e-3), rng.uniform(-2e-3, 2e-3), 1.0]])
        out.append(m)
    return out


def warp(perspective):
    return cupyprep.warp_perspective if perspective else cupyprep.warp_affine


def general(kernels, perspective, image, m, size, **kw):
    """The general path's result of the same call (no plan kept or used)."""
    kept, _warping._PLANS = _warping._PLANS, _plans.PlanCache(maxsize=0)
    try:
        return kernels.get(warp(perspective)(image, m, size, **kw))
    finally:
        _warping._PLANS = kept


def image_and_matrix(kernels, seed, zoom=1.0):
    """An 8 × 9 HWC uint8 image on the kernels' side and a rotation (times ``zoom``) for it."""
    rng = np.random.default_rng(seed)
    return kernels.put(random_image(rng, (8, 9, 3), np.uint8)), matrices(rng, (8, 9), False, 1)[0] * zoom


FORMS = [  # (shape, dtype): one HWC image, one HW image, NHWC batches
    ((9, 12, 3), np.uint8), ((9, 12), np.float32), ((2, 9, 12, 4), np.uint8), ((3, 7, 10, 1), np.float32),
    ((9, 12, 4), np.float32), ((2, 7, 10, 3), np.uint8), ((9, 12, 2), np.uint8)]


@pytest.mark.parametrize("perspective", [False, True])
@pytest.mark.parametrize("interpolation", list(warp_spec.INTERPOLATIONS))
@pytest.mark.parametrize("border_mode", list(warp_spec.BORDER_MODES))
def test_a_repeated_warp_launches_its_plan_with_the_new_matrix(kernels, monkeypatch, perspective,
                                                               interpolation, border_mode):
    """Every interpolation and border mode, uint8 and float32, 1 to 4 channels, one image
    (HW, HWC) or a batch: the second and third calls (new images, new matrices) replay the
    first call's plan and give the general path's results for their own matrices."""
    rng = np.random.default_rng([perspective, warp_spec.INTERPOLATIONS.index(interpolation),
                                 warp_spec.BORDER_MODES.index(border_mode)])
    for shape, dtype in FORMS:
        c = shape[-1] if len(shape) > 2 else 1
        kw = dict(interpolation=interpolation, border_mode=border_mode,
                  border_value=(7, 30, 60, 90)[:c] if c > 1 else 7)
        images = [kernels.put(random_image(rng, shape, dtype)) for _ in range(3)]
        ms = matrices(rng, shape[1:] if len(shape) == 4 else shape, perspective)
        got = [kernels.get(warp(perspective)(images[0], ms[0], SIZE, **kw))]
        # (two-channel linear reads the interpolation tables: the general path every time)
        planned = not (c == 2 and interpolation == "linear")
        assert len(_warping._PLANS) == planned
        counted = guards(monkeypatch)
        for image, m in zip(images[1:], ms[1:]):
            got.append(kernels.get(warp(perspective)(image, m, SIZE, **kw)))
        if planned:
            assert all(calls == [] for calls in counted), f"{shape} {dtype}: a replay checked or looked up"
        monkeypatch.undo()
        for image, m, result in zip(images, ms, got):
            np.testing.assert_array_equal(result, general(kernels, perspective, image, m, SIZE, **kw),
                                          err_msg=f"{shape} {dtype}")
        assert not np.array_equal(got[1], got[2]), "the matrices should make different images"
        _plans.clear_all()


@pytest.mark.parametrize("perspective", [False, True])
def test_matrix_forms_and_inverse_map(kernels, monkeypatch, perspective):
    """One host matrix of float64, float32 or int (by value), per-image matrices (read from
    memory: on a GPU uploaded, under the emulator as they are), with or without
    inverse_map: each form its own plan, each replay equal to the general path for the
    call's own values."""
    rng = np.random.default_rng(11)
    rows = 3 if perspective else 2
    batch = [kernels.put(random_image(rng, (3, 8, 9, 3), np.uint8)) for _ in range(2)]

    def forms():
        ms = matrices(rng, (8, 9), perspective, 4)
        shift = np.eye(rows, 3, dtype=np.int64)
        shift[:2, 2] = rng.integers(-3, 4, 2)
        return [ms[0], ms[1].astype(np.float32), shift, np.stack(ms[:3]), np.stack(ms[1:]).astype(np.float32)]

    for inverse_map in (False, True):
        for first, second in zip(forms(), forms()):
            warp(perspective)(batch[0], first, SIZE, inverse_map=inverse_map)
            lookups = counting(monkeypatch, _kernels, "get_function")
            got = kernels.get(warp(perspective)(batch[1], second, SIZE, inverse_map=inverse_map))
            assert lookups == [], f"{second.dtype} {second.shape}: no replay"
            monkeypatch.undo()
            np.testing.assert_array_equal(
                got, general(kernels, perspective, batch[1], second, SIZE, inverse_map=inverse_map),
                err_msg=f"{second.dtype} {second.shape} inverse_map={inverse_map}")
    assert len(_warping._PLANS) == 10
    # a matrix as nested lists or tuples, or an ndarray subclass, gets no plan (and the
    # right result)
    class Matrix(np.ndarray):
        pass

    m = matrices(rng, (8, 9), perspective, 1)[0]
    for form in (m.tolist(), tuple(map(tuple, m)), m.view(Matrix)):
        got = kernels.get(warp(perspective)(batch[1], form, SIZE))
        np.testing.assert_array_equal(got, general(kernels, perspective, batch[1], m, SIZE))
    assert len(_warping._PLANS) == 10


def test_a_replay_checks_each_matrix_as_the_general_path_does(kernels):
    rng = np.random.default_rng(12)
    image = kernels.put(random_image(rng, (8, 9, 3), np.uint8))
    m = matrices(rng, (8, 9), False, 1)[0]
    cupyprep.warp_affine(image, m, SIZE)
    for bad, message in ((np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0]]), "M: singular affine matrix"),
                         (np.array([[1.0, 0.0, np.nan], [0.0, 1.0, 0.0]]), "M: expected finite values"),
                         (np.array([[1.0, 0.0, 0.0], [0.0, np.inf, 0.0]]), "M: expected finite values")):
        with pytest.raises(ValueError, match=message):
            cupyprep.warp_affine(image, bad, SIZE)
    # inverse_map=True takes a singular matrix as it is, and still no infinity
    cupyprep.warp_affine(image, np.zeros((2, 3)), SIZE, inverse_map=True)
    with pytest.raises(ValueError, match="M: expected finite values"):
        cupyprep.warp_affine(image, np.full((2, 3), -np.inf), SIZE, inverse_map=True)
    h = np.vstack([m, [0.0, 0.0, 1.0]])
    cupyprep.warp_perspective(image, h, SIZE)
    with pytest.raises(ValueError, match="M: singular perspective matrix"):
        cupyprep.warp_perspective(image, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]]), SIZE)
    per_image = kernels.put(random_image(rng, (2, 8, 9, 3), np.uint8))
    cupyprep.warp_affine(per_image, np.stack([m, m]), SIZE)
    with pytest.raises(ValueError, match=r"M\[1\]: singular affine matrix"):
        cupyprep.warp_affine(per_image, np.stack([m, np.zeros((2, 3))]), SIZE)
    assert len(_warping._PLANS) == 4
    # the plans still give the new values after the refusals
    np.testing.assert_array_equal(kernels.get(cupyprep.warp_affine(image, m * 1.1, SIZE)),
                                  general(kernels, False, image, m * 1.1, SIZE))


def test_out_is_written_by_the_plan_and_an_overlapping_out_takes_the_general_path(kernels, launches,
                                                                                  monkeypatch):
    rng = np.random.default_rng(13)
    shape = (12, 16, 3)
    kw = dict(interpolation="linear", border_mode="constant", border_value=(9, 99, 199))
    images = [random_image(rng, shape, np.uint8) for _ in range(3)]
    ms = matrices(rng, shape, False)
    want = [general(kernels, False, kernels.put(image), m, shape[:2], **kw) for image, m in zip(images, ms)]
    launches.clear()
    for i in range(3):  # a separate out: the plan stored, then replayed
        out = kernels.poisoned(shape, np.uint8)
        got = cupyprep.warp_affine(kernels.put(images[i]), ms[i], shape[:2], out=out, **kw)
        assert got is out
        np.testing.assert_array_equal(kernels.get(out), want[i], err_msg=f"call {i}")
    assert len(_warping._PLANS) == 1
    staged = warp_spec.SPEC.staged_expr(3, False)
    assert launches == [staged] * 3  # (word-aligned uint8 linear: the staged kernel)
    # out windows of one buffer at other byte offsets (the output's alignment is the
    # kernel's business): the same plan
    flat = kernels.poisoned((np.prod(shape) + 8,), np.uint8)
    for offset in (1, 2, 3):
        out = flat[offset:offset + np.prod(shape)].reshape(shape)
        cupyprep.warp_affine(kernels.put(images[1]), ms[1], shape[:2], out=out, **kw)
        np.testing.assert_array_equal(kernels.get(out), want[1], err_msg=f"out at byte {offset}")
    assert len(_warping._PLANS) == 1
    # out = the image itself (same geometry, so the same key), and an out overlapping it
    # shifted by a row: the general path (which stages the output; the emulator's
    # arrays never alias, so only the path shows here), with or without a plan, and
    # storing none
    lookups = counting(monkeypatch, _kernels, "get_function")
    for plans_before in (1, 0):
        x = kernels.put(images[2])
        got = cupyprep.warp_affine(x, ms[2], shape[:2], out=x, **kw)
        assert got is x
        np.testing.assert_array_equal(kernels.get(x), want[2])
        buffer = kernels.put(np.concatenate([images[2], images[2][:1]]))
        assert _plans.array_key(buffer[:-1]) == _plans.array_key(buffer[1:])
        cupyprep.warp_affine(buffer[:-1], ms[2], shape[:2], out=buffer[1:], **kw)
        np.testing.assert_array_equal(kernels.get(buffer)[1:], want[2])
        assert len(lookups) == 2 and len(_warping._PLANS) == plans_before
        lookups.clear()
        _plans.clear_all()
    cupyprep.warp_affine(kernels.put(images[1]), ms[1], shape[:2], out=kernels.put(images[2]), **kw)
    x = kernels.put(images[2])
    cupyprep.warp_affine(kernels.put(images[0]), ms[0], shape[:2], out=x, **kw)  # the plan again
    assert len(lookups) == 1
    np.testing.assert_array_equal(kernels.get(x), want[0])


def test_the_image_alignment_and_strides_are_part_of_the_key(kernels, launches):
    """The staged kernel reads word-aligned sources only: an image whose first byte is off a
    word (the same shape and strides) gets its own plan, of the dense kernel, and each
    geometry's replays launch their own kernel."""
    rng = np.random.default_rng(14)
    shape = (10, 16, 4)  # rows of 64 bytes
    size = int(np.prod(shape))
    kw = dict(border_value=(1, 2, 3, 4))
    staged = warp_spec.SPEC.staged_expr(4, False)

    def at(offset, image):
        flat = np.zeros(size + 8, np.uint8)
        flat[offset:offset + size] = image.reshape(-1)
        return kernels.put(flat)[offset:offset + size].reshape(shape)

    images = [random_image(rng, shape, np.uint8) for _ in range(4)]
    ms = matrices(rng, shape, False, 4)
    for round_ in range(2):
        for offset, k in ((0, 0), (1, 1), (4, 2), (3, 3)):
            x = at(offset, images[k])
            assert (_plans.address(x) % 4 == 0) == (offset % 4 == 0)
            before = len(launches)
            got = kernels.get(cupyprep.warp_affine(x, ms[k], shape[:2], **kw))
            np.testing.assert_array_equal(got, general(kernels, False, x, ms[k], shape[:2], **kw))
            launched = launches[before]
            assert (launched == staged) == (offset % 4 == 0), f"offset {offset}: {launched}"
    assert len(_warping._PLANS) == 2
    # other strides (every other column of a wider image): another plan, the strided kernel
    wide = kernels.put(random_image(rng, (10, 32, 4), np.uint8))
    got = kernels.get(cupyprep.warp_affine(wide[:, ::2], ms[0], shape[:2], **kw))
    np.testing.assert_array_equal(got, general(kernels, False, wide[:, ::2], ms[0], shape[:2], **kw))
    assert len(_warping._PLANS) == 3


def test_values_of_other_types_or_options_get_their_own_plan(kernels):
    image, m = image_and_matrix(kernels, 15)
    cupyprep.warp_affine(image, m, SIZE)
    with pytest.raises(TypeError, match="size"):  # equal to SIZE, refused as the first call would
        cupyprep.warp_affine(image, m, (11.0, 14))
    with pytest.raises(TypeError, match="inverse_map"):
        cupyprep.warp_affine(image, m, SIZE, inverse_map=2)
    with pytest.raises(ValueError, match="M: expected shape"):
        cupyprep.warp_affine(image, np.vstack([m, [0.0, 0.0, 1.0]]), SIZE)
    assert len(_warping._PLANS) == 1
    cupyprep.warp_affine(image, m, list(SIZE))
    cupyprep.warp_affine(image, m, SIZE, border_value=0)  # the default: the first plan
    cupyprep.warp_affine(image, m, SIZE, border_value=0.0)
    cupyprep.warp_perspective(image, np.vstack([m, [0.0, 0.0, 1.0]]), SIZE)
    assert len(_warping._PLANS) == 4


def test_a_border_value_given_as_an_array_gets_no_plan(kernels):
    image, m = image_and_matrix(kernels, 21, zoom=1.5)  # a zoom: the border shows
    got = [kernels.get(cupyprep.warp_affine(image, m, SIZE, border_value=np.array(v)))
           for v in ([10, 20, 30], [200, 100, 0])]
    assert len(_warping._PLANS) == 0
    np.testing.assert_array_equal(got[1], general(kernels, False, image, m, SIZE, border_value=(200, 100, 0)))
    assert not np.array_equal(got[0], got[1])


def test_a_warp_that_reads_the_interpolation_tables_stores_no_plan(kernels):
    """Two-channel linear warps (OpenCV's fixed-point remap) read tables that
    device_constant hands out per call (ordering other streams after their upload)."""
    rng = np.random.default_rng(16)
    image = kernels.put(random_image(rng, (8, 9, 2), np.uint8))
    ms = matrices(rng, (8, 9), False, 2)
    for m in ms:
        cupyprep.warp_affine(image, m, SIZE)
    assert len(_warping._PLANS) == 0
    cupyprep.warp_affine(image, ms[0], SIZE, interpolation="nearest")
    assert len(_warping._PLANS) == 1


@pytest.mark.parametrize("perspective", [False, True])
def test_a_repeated_list_launches_its_plan(kernels, monkeypatch, perspective):
    """A list of images of mixed sizes (HW or HWC, uint8 or float32), one matrix for all
    or one per image: the later calls (new images of the same sizes, new matrices) replay
    the first call's plan and give the general path's results."""
    rng = np.random.default_rng([21, perspective])
    for dims, dtype in (((8, 9, 3), np.uint8), ((6, 13, 3), np.float32), ((7, 5), np.uint8),
                        ((9, 6, 4), np.float32)):
        shapes = [dims, (dims[0] + 3, dims[1] - 2, *dims[2:]), (dims[0] - 1, dims[1] + 4, *dims[2:])]
        for per_image in (False, True):
            lists = [[kernels.put(random_image(rng, s, dtype)) for s in shapes] for _ in range(3)]
            ms = [np.stack(matrices(rng, dims, perspective)) if per_image else matrices(rng, dims, perspective, 1)[0]
                  for _ in range(3)]
            got = [kernels.get(warp(perspective)(lists[0], ms[0], SIZE, interpolation="nearest"))]
            assert len(_warping._PLANS) == 1
            counted = guards(monkeypatch)
            for images, m in zip(lists[1:], ms[1:]):
                got.append(kernels.get(warp(perspective)(images, m, SIZE, interpolation="nearest")))
            if per_image:  # (per-image matrices are checked and uploaded at every call, as a batch's are)
                counted = [c for i, c in enumerate(counted) if i not in (3, 5)]
            assert all(calls == [] for calls in counted), f"{dims} {dtype}: a replay checked or looked up"
            monkeypatch.undo()
            for images, m, result in zip(lists, ms, got):
                np.testing.assert_array_equal(
                    result, general(kernels, perspective, images, m, SIZE, interpolation="nearest"),
                    err_msg=f"{dims} {dtype} per_image={per_image}")
            _plans.clear_all()


def test_a_list_plan_writes_out_and_an_out_holding_an_image_is_staged(kernels):
    rng = np.random.default_rng(22)
    m = matrices(rng, (8, 9), False, 1)[0]
    frames = random_image(rng, (2, 11, 14, 3), np.uint8)
    separate = kernels.poisoned((2, 11, 14, 3), np.uint8)
    got = cupyprep.warp_affine([kernels.put(f) for f in frames], m, SIZE, out=separate)
    assert got is separate and len(_warping._PLANS) == 1
    expected = general(kernels, False, [kernels.put(f) for f in frames], m, SIZE)
    np.testing.assert_array_equal(kernels.get(separate), expected)
    buf = kernels.put(frames)  # the same geometry; the images lie in the out itself
    cupyprep.warp_affine([buf[0], buf[1]], m, SIZE, out=buf)
    np.testing.assert_array_equal(kernels.get(buf), expected)


def test_long_lists_and_augmentations_take_the_general_path(kernels):
    rng = np.random.default_rng(17)
    images = [kernels.put(random_image(rng, (5 + i % 3, 6, 3), np.uint8)) for i in range(65)]
    m = matrices(rng, (8, 9), False, 1)[0]
    batch = kernels.put(random_image(rng, (2, 8, 9, 3), np.uint8))
    for seed in range(2):
        cupyprep.warp_affine(images, m, SIZE)  # past the records that go by value: uploaded
        cupyprep.random_affine(batch, 10.0, seed=seed)  # its own checks, its matrices on the device
    assert len(_warping._PLANS) == 0
    cupyprep.warp_affine(images[:64], m, SIZE)
    assert len(_warping._PLANS) == 1


def test_the_cpu_backend_stores_no_plan():
    image = np.zeros((8, 9, 3), np.uint8)
    m = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]])
    cupyprep.warp_affine(image, m, SIZE)
    cupyprep.warp_affine(image, m, SIZE)
    assert len(_warping._PLANS) == 0


def test_a_plan_keeps_no_array_alive(kernels):
    rng = np.random.default_rng(18)
    image = kernels.put(random_image(rng, (2, 8, 9, 3), np.uint8))
    ms = np.stack(matrices(rng, (8, 9), False, 2))
    out = kernels.poisoned((2,) + SIZE + (3,), np.uint8)
    warped = cupyprep.warp_affine(image, ms, SIZE)
    cupyprep.warp_affine(image, ms[0], SIZE, out=out)
    assert len(_warping._PLANS) == 2
    refs = [weakref.ref(a) for a in (image, ms, out, warped)]
    del image, ms, out, warped
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_a_plan_follows_the_tuning_in_force(kernels, launches, monkeypatch):
    from conftest import tune

    rng = np.random.default_rng(19)
    image = kernels.put(random_image(rng, (8, 12, 4), np.float32))
    m = matrices(rng, (8, 12), False, 1)[0]
    cupyprep.warp_affine(image, m, SIZE)
    tune(monkeypatch, warp_spec, dense=False)
    cupyprep.warp_affine(image, m, SIZE)
    assert launches[0].startswith("cupyprep_warp_affine_linear<float, 4, true, ")
    assert launches[1] == "cupyprep_warp_affine_linear<float, 4, false, 1, false>"


# --- on a GPU: torch and CuPy images, device matrices ------------------------------------------
@pytest.mark.gpu
def test_torch_replays_make_no_cupy_view_and_equal_the_general_path(monkeypatch):
    torch = pytest.importorskip("torch")
    from cupyprep import _arrays

    rng = np.random.default_rng(20)
    img = torch.from_numpy(random_image(rng, (512, 512, 3), np.uint8)).cuda()
    ms = [cupyprep.get_rotation_matrix_2d((255.5, 255.5), a, 1.0) for a in (30.0, -12.5, 71.0)]
    out = torch.empty_like(img)
    cupyprep.warp_affine(img, ms[0], (512, 512), out=out)
    views = counting(monkeypatch, _arrays, "from_torch")
    counted = guards(monkeypatch)
    got = [cupyprep.warp_affine(img, m, (512, 512), out=out).clone() for m in ms[1:]]
    assert views == [] and all(c == [] for c in counted), "the replay made a CuPy view or looked up again"
    monkeypatch.undo()
    for m, g in zip(ms[1:], got):
        _plans.clear_all()
        assert torch.equal(g, cupyprep.warp_affine(img, m, (512, 512)))
    # device matrices (torch and CuPy), a batch, with and without inverse_map
    import cupy

    batch = torch.from_numpy(random_image(rng, (3, 64, 80, 4), np.uint8)).cuda()
    host = np.stack([cupyprep.get_rotation_matrix_2d((40.0, 32.0), a, 0.9) for a in (5.0, 50.0, -33.0)])
    for inverse_map in (False, True):
        for form in (lambda a: torch.from_numpy(a).cuda(), lambda a: torch.from_numpy(a[0]).cuda()):
            first = cupyprep.warp_affine(batch, form(host), (64, 80), inverse_map=inverse_map)
            second = cupyprep.warp_affine(batch, form(host[::-1].copy()), (64, 80), inverse_map=inverse_map)
            _plans.clear_all()
            assert torch.equal(second, cupyprep.warp_affine(batch, form(host[::-1].copy()), (64, 80),
                                                            inverse_map=inverse_map))
            assert torch.equal(first, cupyprep.warp_affine(batch, form(host), (64, 80),
                                                           inverse_map=inverse_map))
    cbatch = cupy.asarray(batch.cpu().numpy())
    cupyprep.warp_perspective(cbatch, cupy.asarray(np.eye(3)), (64, 80))
    h = cupy.asarray(np.array([[1.0, 0.05, 2.0], [0.02, 0.95, -1.0], [1e-3, -5e-4, 1.0]]))
    got = cupyprep.warp_perspective(cbatch, h, (64, 80))
    _plans.clear_all()
    assert bool((got == cupyprep.warp_perspective(cbatch, h, (64, 80))).all())
    with pytest.raises(ValueError, match="singular perspective"):
        cupyprep.warp_perspective(cbatch, cupy.zeros((3, 3)), (64, 80))
