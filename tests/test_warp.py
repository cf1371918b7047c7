"""warp_affine / warp_perspective, the matrix helpers, align_faces and random_affine: the CPU
backend against OpenCV, and the kernels against cv2 (IPP off)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cupyprep import _kernels, _matrix_math, _plans, _warping, augment
from cupyprep import geometry as G
from cupyprep._launch import BLOCK_3D
from cupyprep._specs import warp as warp_spec
from cupyprep._specs._common import C_TYPES
from conftest import assert_close, photo, random_image, tune

import cv2  # noqa: E402  (the reference of every test here; in the test extra)

FLAGS = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC}
BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
           "reflect": cv2.BORDER_REFLECT, "reflect101": cv2.BORDER_REFLECT_101,
           "wrap": cv2.BORDER_WRAP}
DTYPES = [np.uint8, np.uint16, np.float16, np.float32]


@pytest.fixture(autouse=True)
def no_ipp():
    """OpenCV 5.1 hands x86 warps with constant / replicate borders to Intel IPP (5.0 hands
    none), whose rounding is not OpenCV's own; the kernels and the CPU backend follow
    OpenCV's own code (test_cpu_backend_runs_opencv_without_ipp), so the references are
    computed with IPP off, as in test_resize."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    yield
    cv2.ipp.setUseIPP(before)


def rotation(rng, h, w):
    M = cv2.getRotationMatrix2D((w / 2 + rng.uniform(-2, 2), h / 2 + rng.uniform(-2, 2)),
                                rng.uniform(-180, 180), rng.uniform(0.5, 1.8))
    M[:, 2] += rng.uniform(-4, 4, 2)
    return M


def homography(rng, h, w):
    s = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    jitter = (rng.uniform(-0.3, 0.3, s.shape) * [w, h]).astype(np.float32)
    return cv2.getPerspectiveTransform(s, s + jitter)


def cv2_warp(img, M, size, interpolation, border="constant", value=0, perspective=False,
             inverse=False):
    """The reference: cv2 on one HW / HWC image (float16 through float32). ``value``: one
    number for every channel, or one per channel."""
    src = img.astype(np.float32) if img.dtype == np.float16 else img
    fn = cv2.warpPerspective if perspective else cv2.warpAffine
    flags = FLAGS[interpolation] | (cv2.WARP_INVERSE_MAP if inverse else 0)
    value = tuple(value) + (0,) * (4 - len(value)) if isinstance(value, tuple) else (value,) * 4
    res = fn(src, M, (size[1], size[0]), flags=flags, borderMode=BORDERS[border],
             borderValue=value)
    if img.ndim == 3 and res.ndim == 2:
        res = res[:, :, None]
    return res.astype(img.dtype)


# --- matrix helpers (CI) --------------------------------------------------------------------
def test_rotation_matrix_matches_cv2():
    for center, angle, scale in [((10.5, 3.0), 30.0, 1.0), ((0, 0), -123.4, 0.7), ((5, 7), 90, 2)]:
        np.testing.assert_allclose(G.get_rotation_matrix_2d(center, angle, scale),
                                   cv2.getRotationMatrix2D(center, angle, scale), rtol=0, atol=1e-12)
    batch = G.get_rotation_matrix_2d(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([10.0, 20.0]),
                                     np.array([1.0, 0.5]))
    assert batch.shape == (2, 2, 3)
    np.testing.assert_allclose(batch[0], cv2.getRotationMatrix2D((1.0, 2.0), 10.0, 1.0), atol=1e-12)
    np.testing.assert_allclose(batch[1], cv2.getRotationMatrix2D((3.0, 4.0), 20.0, 0.5), atol=1e-12)


def test_affine_and_perspective_transform_match_cv2():
    rng = np.random.default_rng(0)
    src3, dst3 = rng.uniform(0, 100, (3, 2)).astype(np.float32), rng.uniform(0, 100, (3, 2)).astype(np.float32)
    np.testing.assert_allclose(G.get_affine_transform(src3, dst3), cv2.getAffineTransform(src3, dst3), atol=1e-9)
    src4 = np.float32([[0, 0], [50, 2], [53, 40], [-1, 38]])
    dst4 = np.float32([[3, 1], [60, 0], [58, 45], [0, 50]])
    np.testing.assert_allclose(G.get_perspective_transform(src4, dst4),
                               cv2.getPerspectiveTransform(src4, dst4), rtol=1e-9, atol=1e-9)
    both = G.get_perspective_transform(np.stack([src4, dst4]), np.stack([dst4, src4]))
    np.testing.assert_allclose(both[0], cv2.getPerspectiveTransform(src4, dst4), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(both[1], cv2.getPerspectiveTransform(dst4, src4), rtol=1e-9, atol=1e-9)


def test_invert_affine_matches_cv2_bit_for_bit():
    rng = np.random.default_rng(1)
    for _ in range(10):
        M = rotation(rng, 50, 60)
        np.testing.assert_array_equal(G.invert_affine_transform(M), cv2.invertAffineTransform(M))


def test_warp_inverse_of_one_host_matrix_is_cv2s():
    """The warps and invert_affine_transform invert one host (2, 3) matrix on Python floats
    (the batched and device forms use array operations): both equal
    cv2.invertAffineTransform bit for bit, over matrices of very different magnitudes."""
    rng = np.random.default_rng(2)
    for _ in range(2000):
        M = rng.normal(size=(2, 3)) * rng.choice([1e-6, 1e-3, 1.0, 1e3, 1e6])
        want = cv2.invertAffineTransform(M)
        np.testing.assert_array_equal(_warping.inverse(M, False, False, "M"), want)
        np.testing.assert_array_equal(_warping.inverse(M[None], False, False, "M")[0], want)
        np.testing.assert_array_equal(G.invert_affine_transform(M), want)
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0]])
    with pytest.raises(ValueError, match="M: singular"):
        _warping.inverse(singular, False, False, "M")
    with pytest.raises(ValueError, match=r"^matrix: singular"):
        G.invert_affine_transform(singular)
    # in a batch the error names the first singular matrix
    batch = np.stack([np.array([[2.0, 1.0, 3.0], [0.5, 4.0, 5.0]]), singular, singular])
    with pytest.raises(ValueError, match=r"^matrix\[1\]: singular"):
        G.invert_affine_transform(batch)


def test_estimate_similarity_recovers_and_matches_skimage():
    transform = pytest.importorskip("skimage.transform")
    rng = np.random.default_rng(2)
    src = rng.uniform(0, 100, (5, 2))
    M = cv2.getRotationMatrix2D((20, 30), 37.0, 1.3)
    dst = src @ M[:, :2].T + M[:, 2]
    np.testing.assert_allclose(G.estimate_similarity(src, dst), M, atol=1e-9)
    noisy = dst + rng.normal(0, 1, dst.shape)
    if hasattr(transform.SimilarityTransform, "from_estimate"):
        t = transform.SimilarityTransform.from_estimate(src, noisy)
    else:
        t = transform.SimilarityTransform()
        t.estimate(src, noisy)
    np.testing.assert_allclose(G.estimate_similarity(src, noisy), t.params[:2], atol=1e-9)
    two = G.estimate_similarity(src[:2], dst[:2])  # two points define it exactly
    np.testing.assert_allclose(two, M, atol=1e-9)


def test_transform_points_matches_cv2():
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 50, (7, 2))
    M, H = rotation(rng, 40, 40), homography(rng, 40, 40)
    np.testing.assert_allclose(G.transform_points(pts, M), cv2.transform(pts[None], M)[0], atol=1e-9)
    np.testing.assert_allclose(G.transform_points(pts, H), cv2.perspectiveTransform(pts[None], H)[0], atol=1e-9)
    batched = G.transform_points(np.stack([pts, pts[::-1]]), np.stack([M, np.eye(3)[:2]]))
    np.testing.assert_allclose(batched[0], cv2.transform(pts[None], M)[0], atol=1e-9)
    np.testing.assert_allclose(batched[1], pts[::-1])
    homs = G.transform_points(np.stack([pts, pts[::-1]]), np.stack([H, H.T]))
    np.testing.assert_allclose(homs[0], cv2.perspectiveTransform(pts[None], H)[0], atol=1e-9)
    np.testing.assert_allclose(homs[1], cv2.perspectiveTransform(pts[None, ::-1], H.T)[0], atol=1e-9)


def test_matrix_helpers_take_torch_tensors_and_broadcast_one_set():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    quad = rng.uniform(0, 50, (4, 2))
    t = torch.from_numpy
    cases = [(G.get_affine_transform, (quad[:3], quad[:3] * 1.5 + 2)),
             (G.get_perspective_transform, (quad, quad * 0.8 + 3)),
             (G.estimate_similarity, (quad, quad * 0.7 + 3)),
             (G.transform_points, (quad, rotation(rng, 40, 40))),
             (G.invert_affine_transform, (rotation(rng, 40, 40),))]
    for fn, args in cases:
        got = fn(*[t(a) for a in args])
        assert isinstance(got, torch.Tensor), fn.__name__
        np.testing.assert_array_equal(got.numpy(), fn(*args), err_msg=fn.__name__)
    # one set of template points against a batch of sets, or a batch of one against many
    sets = rng.uniform(0, 300, (6, 5, 2))
    tmpl = np.asarray(G.ARCFACE_112)
    np.testing.assert_allclose(G.estimate_similarity(sets, tmpl),
                               np.stack([G.estimate_similarity(s, tmpl) for s in sets]), atol=1e-9)
    np.testing.assert_allclose(G.estimate_similarity(sets[:1], sets),
                               np.stack([G.estimate_similarity(sets[0], s) for s in sets]), atol=1e-9)
    with pytest.raises(ValueError, match="dst: expected 5 points like src"):
        G.estimate_similarity(sets, sets[:2])
    with pytest.raises(ValueError, match="dst: expected 5 points like src"):
        G.estimate_similarity(sets, sets[:, :4])


@pytest.mark.parametrize("call, exc, words", [
    (lambda: G.invert_affine_transform(np.zeros((2, 3))), ValueError, ["matrix", "singular"]),
    (lambda: G.invert_affine_transform(np.zeros((3, 3))), ValueError, ["matrix", "(2, 3)"]),
    (lambda: G.get_affine_transform(np.zeros((3, 2)), np.ones((3, 2))), ValueError, ["collinear"]),
    (lambda: G.get_perspective_transform(np.zeros((3, 2)), np.ones((3, 2))), ValueError, ["src", "(4, 2)"]),
    (lambda: G.estimate_similarity(np.ones((4, 2)), np.ones((4, 2))), ValueError, ["coincide"]),
    (lambda: G.transform_points(np.ones((4, 3)), np.eye(3)), ValueError, ["points", "last axis"]),
])
def test_helper_errors(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value)


# --- CPU backend (CI) -----------------------------------------------------------------------
@pytest.mark.parametrize("interpolation", list(FLAGS))
@pytest.mark.parametrize("border", list(BORDERS))
def test_cpu_is_cv2(interpolation, border):
    rng = np.random.default_rng(4)
    img = random_image(rng, (21, 30, 3), np.uint8)
    M = rotation(rng, 21, 30)
    got = G.warp_affine(img, M, (25, 19), interpolation=interpolation, border_mode=border, border_value=7)
    np.testing.assert_array_equal(got, cv2_warp(img, M, (25, 19), interpolation, border, 7))
    H = homography(rng, 21, 30)
    got = G.warp_perspective(img, H, (25, 19), interpolation=interpolation, border_mode=border, border_value=7)
    np.testing.assert_array_equal(got, cv2_warp(img, H, (25, 19), interpolation, border, 7, perspective=True))


def one_pixel_side_reference(img, M, size, perspective):
    """cv2's cubic reflect101 warp of an image with a one-pixel side, which cv2 itself never
    finishes: the same warp of the image with that axis made 5 equal pixels (reflect101
    then takes only those, as a one-pixel axis replicates)."""
    tall = np.repeat(np.repeat(img, 5 if img.shape[0] == 1 else 1, axis=0),
                     5 if img.shape[1] == 1 else 1, axis=1)
    return cv2_warp(tall, M, size, "cubic", "reflect101", 0, perspective)


@pytest.mark.parametrize("shape", [(1, 9, 3), (7, 1), (1, 1, 3)])
def test_cpu_cubic_reflect101_one_pixel_side_returns(shape):
    rng = np.random.default_rng(6)
    img = random_image(rng, shape, np.uint8)
    M = np.array([[0.8, 0.3, -2.5], [-0.2, 1.1, 3.25]])
    got = G.warp_affine(img, M, (6, 8), interpolation="cubic", border_mode="reflect101")
    np.testing.assert_array_equal(got, one_pixel_side_reference(img, M, (6, 8), False))
    H = np.vstack([M, [0.01, -0.02, 1.0]])
    got = G.warp_perspective(img, H, (6, 8), interpolation="cubic", border_mode="reflect101")
    np.testing.assert_array_equal(got, one_pixel_side_reference(img, H, (6, 8), True))


def test_cpu_backend_runs_opencv_without_ipp():
    """With IPP on (OpenCV's default), OpenCV 5.1 on x86 runs these warps in IPP: a uint8
    nearest sample at a half-pixel coordinate takes the other pixel, float32 linear
    differs by ~1e-5. The CPU backend equals cv2 with IPP off whatever the caller's
    setting, and leaves that setting as it found it."""
    rng = np.random.default_rng(5)
    cases = [(random_image(rng, (40, 50, 3), np.float32), rotation(rng, 40, 50), (40, 50)),
             (random_image(rng, (2, 2), np.uint8), np.array([[1.0, 0, 0], [0, 1, -0.5]]), (2, 2)),
             (random_image(rng, (3, 11), np.uint16), np.array([[1.0, 0.405, 0], [0, 1, 0]]),
              (3, 11))]
    for img, M, size in cases:
        for interpolation in FLAGS:
            for border in ("constant", "replicate"):
                ref = cv2_warp(img, M, size, interpolation, border)  # IPP off (fixture)
                for setting in (True, False):
                    cv2.ipp.setUseIPP(setting)
                    before = cv2.ipp.useIPP()  # always False in a build without IPP
                    got = G.warp_affine(img, M, size, interpolation=interpolation,
                                        border_mode=border)
                    assert cv2.ipp.useIPP() == before
                    np.testing.assert_array_equal(got, ref)


def test_cpu_batch_per_image_matrices_and_ragged():
    rng = np.random.default_rng(6)
    batch = random_image(rng, (3, 16, 20, 3), np.uint8)
    Ms = np.stack([rotation(rng, 16, 20) for _ in range(3)])
    got = G.warp_affine(batch, Ms, (16, 20))
    for n in range(3):
        np.testing.assert_array_equal(got[n], cv2_warp(batch[n], Ms[n], (16, 20), "linear"))
    ragged = [random_image(rng, s + (3,), np.uint8) for s in [(10, 12), (17, 9)]]
    got = G.warp_affine(ragged, Ms[:2], (8, 8))
    assert got.shape == (2, 8, 8, 3)
    for n in range(2):
        np.testing.assert_array_equal(got[n], cv2_warp(ragged[n], Ms[n], (8, 8), "linear"))
    empty = G.warp_affine(np.zeros((0, 5, 5, 3), np.uint8), np.eye(3)[:2], (4, 6))
    assert empty.shape == (0, 4, 6, 3) and empty.dtype == np.uint8


def test_cpu_torch_round_trip_and_inverse_map():
    torch = pytest.importorskip("torch")
    img = random_image(np.random.default_rng(7), (12, 14), np.float32)
    M = cv2.getRotationMatrix2D((6, 6), 20, 1.0)
    res = G.warp_affine(torch.from_numpy(img), M, (12, 14), inverse_map=True)
    assert isinstance(res, torch.Tensor)
    np.testing.assert_array_equal(res.numpy(), cv2_warp(img, M, (12, 14), "linear", inverse=True))


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(M=np.zeros((2, 3))), ValueError, ["M", "singular"]),
    (dict(M=np.eye(3)), ValueError, ["M", "(2, 3)"]),
    (dict(M=np.ones((4, 2, 3))), ValueError, ["M", "one per image"]),
    (dict(M=np.full((2, 3), np.nan)), ValueError, ["M", "finite"]),
    (dict(M="rotate"), TypeError, ["M"]),
    (dict(img=np.zeros((6, 6, 5), np.uint8)), ValueError, ["img", "channels"]),
    (dict(img=np.zeros((6, 6), np.int32)), TypeError, ["img", "int32"]),
    (dict(size=(0, 3)), ValueError, ["size"]),
    (dict(interpolation="area"), ValueError, ["interpolation", "area"]),
    (dict(border_mode="mirror"), ValueError, ["border_mode", "mirror"]),
    (dict(border_value=(1, 2)), ValueError, ["border_value"]),
    (dict(out=np.zeros((3, 3), np.uint8)), ValueError, ["out", "shape"]),
    # lists: each image against the first
    (dict(img=[np.zeros((6, 6, 3), np.uint8), np.zeros((6, 6, 3), np.float32)]), TypeError,
     ["img[1]", "uint8", "float32"]),
    (dict(img=[np.zeros((6, 6, 3), np.uint8), np.zeros((6, 6, 4), np.uint8)]), ValueError,
     ["img[1]", "3 channels"]),
    (dict(img=[np.zeros((6, 6, 1), np.uint8), np.zeros((6, 6), np.uint8)]), ValueError,
     ["img[1]", "HWC (or HW)", "img[0]"]),
    (dict(img=[np.zeros((6, 6, 3), np.uint8), np.zeros((0, 6, 3), np.uint8)]), ValueError,
     ["img[1]", "non-empty"]),
    (dict(img=[np.zeros((6, 6, 3, 1), np.uint8)]), ValueError, ["img[0]", "HWC (or HW)"]),
])
def test_bad_input(kwargs, exc, words):
    args = dict(img=np.zeros((2, 6, 6, 3), np.uint8), M=np.eye(3)[:2], size=(4, 4))
    args.update(kwargs)
    with pytest.raises(exc) as info:
        G.warp_affine(args.pop("img"), args.pop("M"), args.pop("size"), **args)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_perspective_singular_matrix():
    with pytest.raises(ValueError, match="singular"):
        G.warp_perspective(np.zeros((5, 5), np.uint8), np.zeros((3, 3)), (4, 4))


@pytest.mark.parametrize("M, exc, words", [
    (np.zeros((3, 3)), ValueError, ["M", "singular perspective"]),
    (np.eye(3)[:2], ValueError, ["M", "(3, 3) or (2, 3, 3)", "shape (2, 3)"]),
    (np.ones((4, 3, 3)), ValueError, ["M", "2 (one per image)", "got 4"]),
    (np.full((3, 3), np.inf), ValueError, ["M", "finite"]),
    ("rotate", TypeError, ["M", "(3, 3)", "'rotate'"]),
])
def test_bad_matrix_perspective(M, exc, words):
    with pytest.raises(exc) as info:
        G.warp_perspective(np.zeros((2, 6, 6, 3), np.uint8), M, (4, 4))
    for w in words:
        assert w in str(info.value), (w, str(info.value))


SINGULAR_AFFINE = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0]])


def singular_in_a_batch(put):
    """A batch of matrices, one of them singular: the error names that one, for host and
    ``put`` (device) matrices, before any launch."""
    img = put(np.zeros((3, 6, 6, 3), np.uint8))
    A = np.stack([np.eye(3)[:2], np.eye(3)[:2] * 2, SINGULAR_AFFINE])
    P = np.stack([np.eye(3), np.vstack([SINGULAR_AFFINE, [0.0, 0.0, 1.0]]), np.eye(3)])
    for m in (A, put(A)):
        with pytest.raises(ValueError, match=r"^M\[2\]: singular affine matrix"):
            G.warp_affine(img, m, (4, 4))
    for m in (P, put(P)):
        with pytest.raises(ValueError, match=r"^M\[1\]: singular perspective matrix"):
            G.warp_perspective(img, m, (4, 4))


def test_cpu_singular_matrix_in_a_batch():
    singular_in_a_batch(np.asarray)


def test_kernel_singular_matrix_in_a_batch(kernels):
    singular_in_a_batch(kernels.put)


def test_cpu_align_faces_puts_landmarks_on_template():
    img = photo("astronaut")
    lm = np.array([[[180.0, 100.0], [240.0, 110.0], [205.0, 140.0], [185.0, 170.0], [235.0, 175.0]]])
    crops, mats = G.align_faces(img[None], lm, np.array([0]))
    assert crops.shape == (1, 112, 112, 3)
    # the least-squares similarity of the landmarks onto the template (skimage's, in
    # test_estimate_similarity_recovers_and_matches_skimage)
    np.testing.assert_allclose(mats[0], G.estimate_similarity(lm[0], G.ARCFACE_112), rtol=0, atol=1e-9)
    moved = G.transform_points(lm[0], mats[0])
    assert np.abs(moved - G.ARCFACE_112).max() < 2.5  # 5 points fitted: 2.32 px off at most here
    np.testing.assert_array_equal(crops[0], cv2_warp(img, mats[0], (112, 112), "linear"))
    # another size scales the template by (width / 112, height / 112)
    crops, mats = G.align_faces(img[None], lm, np.array([0]), size=(56, 48))
    np.testing.assert_allclose(mats[0], G.estimate_similarity(lm[0], G.ARCFACE_112 * [48 / 112, 56 / 112]),
                               rtol=0, atol=1e-9)
    np.testing.assert_array_equal(crops[0], cv2_warp(img, mats[0], (56, 48), "linear"))


def test_cpu_align_faces_torch_images_give_torch_matrices():
    """Torch images in, torch crops and matrices out (random_affine does the same)."""
    torch = pytest.importorskip("torch")
    img = photo("astronaut")[::4, ::4]
    lm = np.array([[[45.0, 25.0], [60.0, 27.0], [51.0, 35.0], [46.0, 42.0], [58.0, 44.0]]])
    crops, mats = G.align_faces(torch.from_numpy(img[None].copy()), lm, np.array([0]), size=(56, 56))
    assert isinstance(crops, torch.Tensor) and isinstance(mats, torch.Tensor)
    ref_crops, ref_mats = G.align_faces(img[None], lm, np.array([0]), size=(56, 56))
    np.testing.assert_array_equal(mats.numpy(), ref_mats)
    np.testing.assert_array_equal(crops.numpy(), ref_crops)


def test_cpu_random_affine_reproducible_and_boxes_follow():
    batch = np.repeat(photo("astronaut")[None, ::8, ::8], 4, axis=0)
    a, Ma = G.random_affine(batch, 30, (0.1, 0.1), (0.8, 1.2), 10, 0.5, seed=3)
    b, Mb = G.random_affine(batch, 30, (0.1, 0.1), (0.8, 1.2), 10, 0.5, seed=3)
    np.testing.assert_array_equal(a, b)
    assert Ma.shape == (4, 2, 3) and not np.allclose(Ma[0], Ma[1])
    for n in range(4):
        np.testing.assert_array_equal(a[n], cv2_warp(batch[n], Ma[n], batch.shape[1:3], "linear"))
    corners = np.array([[[0.0, 0.0], [63.0, 63.0]]] * 4)
    moved = G.transform_points(corners, Ma)
    for n in range(4):
        np.testing.assert_allclose(moved[n], cv2.transform(corners[n][None], Ma[n])[0], atol=1e-9)


# --- kernels (emulated in CI; GPU with -m gpu) ------------------------------------------------
def assert_matches_opencv(got, ref, interpolation, dtype, scale=None):
    """Nearest and linear follow OpenCV's float warp kernels (and its fixed-point remap for 2
    channels) operation by operation: equal bit for bit (given OpenCV's AVX2 dispatch, as on
    every x86-64 CPU of the last decade). float16 is OpenCV's float32 warp rounded once
    (the reference rounds the same float32 result). Cubic uses OpenCV's weights at the same
    float32 coordinates, but not its summation order: float32 rounding, so integers may
    differ by 1 and floats by 1e-5 of the value range (seen: 6e-6). ``scale``: that range,
    the largest magnitude among the taps (image values and border value) where it exceeds
    the result's (a sum of large taps can come out small); default the result's."""
    if interpolation != "cubic":
        np.testing.assert_array_equal(got, ref)
    elif np.dtype(dtype).kind == "u":
        assert_close(got, ref, atol=1, reason="cubic summation order (see docstring)")
    else:
        scale = max(1.0, float(np.abs(ref.astype(np.float64)).max()), scale or 0.0)
        atol = 1e-5 * scale if dtype == np.float32 else 2.0 ** -10 * scale
        assert_close(got, ref, atol=atol, reason="cubic summation order (see docstring)")


def run_kernel(kernels, img, M, size, interpolation, border="constant", value=0, perspective=False):
    ref_in = img
    ref = cv2_warp(ref_in, M, size, interpolation, border, value, perspective)
    if img.ndim == 2:
        ref = ref.reshape(size)
    out = kernels.poisoned(ref.shape, img.dtype)
    fn = G.warp_perspective if perspective else G.warp_affine
    res = fn(kernels.put(img), M, size, interpolation=interpolation, border_mode=border,
             border_value=value, out=out)
    assert res is out
    return kernels.get(res), ref


@pytest.mark.parametrize("interpolation", list(FLAGS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_affine_matches_cv2(kernels, interpolation, dtype, channels):
    rng = np.random.default_rng(channels)
    for (h, w), size in [((19, 37), (23, 35)), ((1, 1), (3, 2))]:
        img = random_image(rng, (h, w, channels), dtype)
        M = rotation(rng, h, w)
        got, ref = run_kernel(kernels, img, M, size, interpolation, "constant", 3)
        assert_matches_opencv(got, ref, interpolation, dtype)


@pytest.mark.parametrize("interpolation", list(FLAGS))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("channels", [1, 2, 3])
def test_kernel_perspective_matches_cv2(kernels, interpolation, dtype, channels):
    rng = np.random.default_rng(10 + channels)
    img = random_image(rng, (21, 33, channels), dtype)
    got, ref = run_kernel(kernels, img, homography(rng, 21, 33), (22, 35), interpolation,
                          "replicate", perspective=True)
    assert_matches_opencv(got, ref, interpolation, dtype)


# Homographies (source to destination) under which some pixel's fixed-point coordinates
# depend on how the sums are associated: OpenCV's block order (X0 at the block's first
# column, then + M0 x1) against M0 x + M1 y + M2. The first makes W exactly 0 at (3, 1) of
# a 2 x 4 output (pixel (0, 0) taken); the others at columns past the first block.
BLOCK_ORDER_CASES = [
    ((2, 4), [[15 / 32, -11 / 48, 11 / 16], [5 / 32, 1 / 12, 1.0], [5 / 32, -11 / 48, 1.0]]),
    ((20, 200), [[38 / 48, -40 / 48, 1.0], [-1 / 48, 16 / 48, 20 / 48], [-2 / 48, 10 / 48, 1.0]]),
    ((20, 200), [[-46 / 48, 8 / 48, 0.0], [34 / 48, -59 / 48, 10 / 48], [10 / 48, -32 / 48, 1.0]]),
    ((20, 200), [[-39 / 48, -50 / 48, -3 / 48], [59 / 48, -46 / 48, 22 / 48], [27 / 48, -26 / 48, 1.0]]),
    # 5 rows: blocks of 204 columns (1024 // 5), where blocks of 64 would sum otherwise
    ((5, 400), [[40 / 48, 10 / 48, 36 / 48], [-41 / 48, 3 / 48, -34 / 48], [-16 / 48, -2 / 48, 1.0]]),
    ((5, 400), [[58 / 48, -52 / 48, 4 / 48], [38 / 48, 4 / 48, -21 / 48], [-41 / 48, -6 / 48, 1.0]]),
]


@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_perspective_fixed_point_block_order(kernels, interpolation):
    """2-channel perspective warps (OpenCV's fixed-point remap) sum each pixel's coordinates
    in WarpPerspectiveInvoker's order, from the first column of its block of the map
    (min(1024 / min(16, rows), cols) columns wide): equal to cv2 where that order decides."""
    rng = np.random.default_rng(110)
    host = random_image(rng, (40, 40, 2), np.uint8)
    for size, M in BLOCK_ORDER_CASES:
        M = np.array(M)
        out = kernels.poisoned(size + (2,), np.uint8)
        got = G.warp_perspective(kernels.put(host), M, size, interpolation=interpolation, out=out)
        ref = cv2_warp(host, M, size, interpolation, "constant", 0, True)
        np.testing.assert_array_equal(kernels.get(got), ref)


@pytest.mark.parametrize("border", list(BORDERS))
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_every_border_on_tiny_images(kernels, border, interpolation):
    """5x4 sources warped to 19x17 with a strong zoom-out, so most taps fall outside and
    the border decides them."""
    rng = np.random.default_rng(20)
    for channels in (1, 2, 3):
        img = random_image(rng, (5, 4, channels), np.uint8)
        value = (200, 17, 90)[:channels]  # a border value per channel
        M = cv2.getRotationMatrix2D((2.0, 2.5), rng.uniform(-180, 180), 0.35)
        M[:, 2] += (7, 8)
        got, ref = run_kernel(kernels, img, M, (19, 17), interpolation, border, value)
        np.testing.assert_array_equal(got, ref)
        H = homography(rng, 5, 4)
        got, ref = run_kernel(kernels, img, H, (19, 17), interpolation, border, value, perspective=True)
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("border", list(BORDERS))
def test_kernel_cubic_borders(kernels, border):
    rng = np.random.default_rng(21)
    img = random_image(rng, (6, 5, 3), np.float32)
    M = cv2.getRotationMatrix2D((2.0, 2.5), 33.0, 0.8)
    got, ref = run_kernel(kernels, img, M, (9, 8), "cubic", border, 0.5)
    assert_matches_opencv(got, ref, "cubic", np.float32)


@pytest.mark.parametrize("dtype", [np.uint16, np.float32])
def test_kernel_cubic_coordinates_past_the_simd_body(kernels, dtype):
    """Output columns past the last whole 16-pixel step near a perspective horizon, where w
    is small and an ulp of it moves the source coordinate by 1e-4: OpenCV's cubic warp
    computes them as its SIMD body does (its linear and nearest warps take their scalar
    formula there, which test_properties.py holds bit for bit)."""
    rng = np.random.default_rng(25)
    img = random_image(rng, (3, 13), dtype)
    H = np.array([[1.64485981, -0.86666667, 0.0], [0.1488138, 1.175, -1.125],
                  [0.0496046, -0.06666667, 1.0]])
    for width in (34, 40, 47):
        got, ref = run_kernel(kernels, img, H, (3, width), "cubic", "reflect", perspective=True)
        assert_matches_opencv(got, ref, "cubic", dtype)


# Destination corners of OpenCV's own strict warpPerspective test (test_imgwarp_strict.cpp: a
# 1023 x 3 float32 source of 0 / 255 grid lines, its corners mapped to random points inside it,
# a 309 x 2 output, replicate border), drawn as that test draws them; each one moved cubic
# results by 0.02-0.04 while the coordinates were rounded to float32 before the division.
STRICT_GRID_CORNERS = [
    [[347.3665, 2.788153], [940.0089, 0.9730256], [728.7759, 0.9598831], [340.7864, 0.08917409]],
    [[191.8292, 2.438489], [388.5363, 0.2548878], [674.5642, 2.592238], [934.3920, 2.373977]],
    [[694.5049, 1.190528], [223.0310, 0.9776586], [678.9171, 0.7394509], [214.6479, 2.325343]],
]


def test_kernel_cubic_perspective_strict_grid_lines(kernels):
    """OpenCV's cubic perspective warp takes each source coordinate as X / W with X and W
    unrounded (float32 matrix, float32 row terms, the column term and the division exact
    enough to round once): with the grid lines' slope of 255 a pixel, one float32 ulp of a
    coordinate near 1000 (6e-5) moved the result by 0.02, 2000 times the float32 bound."""
    img = np.full((3, 1023), 255, np.float32)
    img[:, 10::10] = 0
    w, h = 1023.0, 3.0
    corners = np.float32([[0, 0], [w, 0], [0, h], [w, h]])
    for dst in STRICT_GRID_CORNERS:
        H = cv2.getPerspectiveTransform(corners, np.float32(dst))
        got, ref = run_kernel(kernels, img, H, (2, 309), "cubic", "replicate", perspective=True)
        assert_matches_opencv(got, ref, "cubic", np.float32)


@pytest.mark.parametrize("border", ["reflect", "reflect101", "wrap"])
def test_kernel_cubic_far_outside(kernels, border):
    """OpenCV 5's cubic warp clamps source coordinates to [-m, 2m] per axis, m = max(side,
    16): far outside the image a periodic border then repeats one pixel instead of the
    pattern. Shift a 9x11 and a 20x40 image by up to 5 widths, both ways, at fractional
    offsets, so pixels fall on both sides of both clamps."""
    rng = np.random.default_rng(23)
    for h, w in [(9, 11), (20, 40)]:
        img = random_image(rng, (h, w, 3), np.uint8)
        for tx, ty in [(-3.3 * w, 0.25), (4.6 * w, -0.5), (0.5, -4.2 * h), (1.25, 5.1 * h)]:
            M = np.array([[0.9, 0.15, tx], [-0.1, 1.05, ty]])
            got, ref = run_kernel(kernels, img, M, (3 * h, 3 * w), "cubic", border)
            assert_matches_opencv(got, ref, "cubic", np.uint8)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_kernel_cubic_reflect101_one_pixel_side(kernels, dtype):
    """Where cv2 does not return (test_cpu_cubic_reflect101_one_pixel_side_returns), the
    kernels replicate the one-pixel axis, as the CPU backend does."""
    rng = np.random.default_rng(24)
    for shape in [(1, 9, 3), (7, 1), (1, 1, 3)]:
        img = random_image(rng, shape, dtype)
        M = np.array([[0.8, 0.3, -2.5], [-0.2, 1.1, 3.25]])
        ref = one_pixel_side_reference(img, M, (6, 8), False).reshape((6, 8) + shape[2:])
        out = kernels.poisoned(ref.shape, dtype)
        G.warp_affine(kernels.put(img), M, (6, 8), interpolation="cubic", border_mode="reflect101", out=out)
        assert_matches_opencv(kernels.get(out), ref, "cubic", dtype)


def test_kernel_gray_noncontiguous_and_photo(kernels):
    rng = np.random.default_rng(22)
    gray = random_image(rng, (30, 40), np.uint8)
    got, ref = run_kernel(kernels, gray, rotation(rng, 30, 40), (17, 21), "linear")
    np.testing.assert_array_equal(got, ref)
    img = photo("astronaut")[100:180:2, 200:290]  # strided rows
    src = kernels.put(img)[:, ::-1] if kernels.name == "gpu" else img[:, ::-1]
    M = rotation(rng, 40, 90)
    res = G.warp_affine(src, M, (41, 47))
    np.testing.assert_array_equal(kernels.get(res), cv2_warp(np.ascontiguousarray(img[:, ::-1]), M, (41, 47), "linear"))


def test_kernel_per_image_matrices_really_differ(kernels):
    """One launch, a different matrix per image: every output must equal cv2 with its own
    matrix (and the images must differ from what matrix 0 would give)."""
    rng = np.random.default_rng(23)
    one = random_image(rng, (18, 22, 3), np.uint8)
    batch = np.stack([one] * 4)
    Ms = np.stack([cv2.getRotationMatrix2D((11, 9), a, 1.0) for a in (0, 40, 90, 200)])
    out = kernels.poisoned((4, 18, 22, 3), np.uint8)
    got = kernels.get(G.warp_affine(kernels.put(batch), Ms, (18, 22), out=out))
    for n in range(4):
        np.testing.assert_array_equal(got[n], cv2_warp(one, Ms[n], (18, 22), "linear"))
        if n:
            assert (got[n] != got[0]).mean() > 0.5


def one_matrix_for_every_image(side, perspective):
    """One (2, 3) / (3, 3) matrix for every image of a batch and of a list, given on the host
    (by value) and on the images' side (read with a step of 0): each output image is its
    own source warped by that matrix."""
    rng = np.random.default_rng(41)
    M = homography(rng, 15, 19) if perspective else rotation(rng, 15, 19)
    fn = G.warp_perspective if perspective else G.warp_affine
    for dtype, c in [(np.uint8, 3), (np.float32, 1)]:
        batch = random_image(rng, (3, 15, 19, c), dtype)
        imgs = [random_image(rng, s + (c,), dtype) for s in [(9, 12), (15, 19), (4, 7)]]
        for m in (M, side.put(M)):
            for src in (batch, imgs):
                out = side.poisoned((3, 13, 17, c), dtype)
                put = side.put(src) if src is batch else [side.put(i) for i in src]
                got = side.get(fn(put, m, (13, 17), border_value=5, out=out))
                for n in range(3):
                    np.testing.assert_array_equal(
                        got[n], cv2_warp(src[n], M, (13, 17), "linear", "constant", 5, perspective),
                        err_msg=f"{np.dtype(dtype)}, image {n}")


@pytest.mark.parametrize("perspective", [False, True])
def test_cpu_one_matrix_for_every_image(perspective):
    from conftest import KernelSide

    one_matrix_for_every_image(KernelSide("cpu"), perspective)


@pytest.mark.parametrize("perspective", [False, True])
def test_kernel_one_matrix_for_every_image(kernels, perspective):
    one_matrix_for_every_image(kernels, perspective)


def test_kernel_ragged_list_and_empty(kernels):
    rng = np.random.default_rng(24)
    sizes = [(9, 13), (20, 7), (1, 1)]
    imgs = [random_image(rng, s + (3,), np.float32) for s in sizes]
    Ms = np.stack([rotation(rng, *s) for s in sizes])
    out = kernels.poisoned((3, 10, 11, 3), np.float32)
    got = kernels.get(G.warp_affine([kernels.put(i) for i in imgs], Ms, (10, 11), border_mode="reflect", out=out))
    for n in range(3):
        np.testing.assert_array_equal(got[n], cv2_warp(imgs[n], Ms[n], (10, 11), "linear", "reflect"))
    empty = G.warp_affine(kernels.put(np.zeros((0, 5, 5, 1), np.uint8)), np.eye(3)[:2], (2, 3))
    assert empty.shape == (0, 2, 3, 1)


def test_kernel_long_lists_take_one_table(kernels):
    """A list's per-image records go to the kernel by value up to 64 images, a longer
    list's as one uploaded table: each output image is its own source warped by its own
    matrix (cv2), at the boundary too, and align_faces picks faces from a long list."""
    rng = np.random.default_rng(27)
    sizes = [(4 + i % 5, 3 + i % 7) for i in range(70)]
    imgs = [random_image(rng, s + (3,), np.uint8) for s in sizes]
    imgs[3] = imgs[3][::-1]
    Ms = np.stack([rotation(rng, *s) for s in sizes])
    for n in (64, 65, 70):
        out = kernels.poisoned((n, 5, 6, 3), np.uint8)
        got = kernels.get(G.warp_affine([kernels.put(i) for i in imgs[:n]], Ms[:n], (5, 6), out=out,
                                        border_mode="reflect101"))
        for k in range(n):
            np.testing.assert_array_equal(got[k], cv2_warp(imgs[k], Ms[k], (5, 6), "linear", "reflect101"),
                                          err_msg=f"{n} images, image {k}")
    lm = np.array([[[1.0, 1.0], [3.0, 1.2], [2.0, 2.0], [1.2, 3.0], [2.9, 3.1]]] * 3)
    idx = np.array([69, 0, 66])
    crops, mats = G.align_faces([kernels.put(i) for i in imgs], lm, idx, size=(7, 6))
    crops, mats = kernels.get(crops), kernels.get(mats)
    for f, k in enumerate(idx):
        np.testing.assert_array_equal(crops[f], cv2_warp(imgs[k], mats[f], (7, 6), "linear"))


def test_kernel_align_faces(kernels):
    imgs = [photo("astronaut")[::4, ::4], photo("coffee")[::4, ::4]]
    lm = np.array([[[45.0, 25.0], [60.0, 27.0], [51.0, 35.0], [46.0, 42.0], [58.0, 43.0]],
                   [[20.0, 20.0], [40.0, 22.0], [30.0, 30.0], [22.0, 40.0], [38.0, 41.0]],
                   [[50.0, 30.0], [70.0, 25.0], [60.0, 40.0], [55.0, 50.0], [72.0, 47.0]]])
    idx = np.array([0, 1, 0])
    crops, mats = G.align_faces([kernels.put(i) for i in imgs], lm, idx, size=(56, 48))
    crops = kernels.get(crops)
    for f in range(3):
        M = kernels.get(mats[f])
        # the similarity onto the template scaled by (width / 112, height / 112)
        np.testing.assert_allclose(M, G.estimate_similarity(lm[f], G.ARCFACE_112 * [48 / 112, 56 / 112]),
                                   rtol=0, atol=1e-9)
        np.testing.assert_array_equal(crops[f], cv2_warp(imgs[idx[f]], M, (56, 48), "linear"))


def test_kernel_random_affine_matches_its_matrices(kernels):
    batch = random_image(np.random.default_rng(25), (3, 16, 24, 3), np.uint8)
    warped, mats = G.random_affine(kernels.put(batch), 45, (0.2, 0.1), (0.7, 1.3), 15, 0.5, seed=1)
    warped, mats = kernels.get(warped), kernels.get(mats)
    assert not np.allclose(mats[0], mats[1])
    for n in range(3):
        np.testing.assert_array_equal(warped[n], cv2_warp(batch[n], mats[n], (16, 24), "linear"))


def random_affine_ranges(side):
    """What each of random_affine's ranges does to its matrices and images (200 draws)."""
    h, w = 12, 17
    batch = random_image(np.random.default_rng(50), (200, h, w, 1), np.uint8)
    put = side.put(batch)

    def draw(*args, seed=1):
        warped, mats = G.random_affine(put, *args, seed=seed)
        return side.get(warped), side.get(mats)

    warped, mats = draw(0.0, (0.0, 0.0), (1.0, 1.0), 0.0, 0.0)  # nothing drawn: the identity
    np.testing.assert_array_equal(mats, np.broadcast_to(np.eye(3)[:2], mats.shape))
    np.testing.assert_array_equal(warped, batch)
    warped, mats = draw((35.0, 35.0), (0.0, 0.0), (0.8, 0.8), 0.0, 0.0)  # cv2's rotation about the center
    want = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), 35.0, 0.8)
    np.testing.assert_allclose(mats, np.broadcast_to(want, mats.shape), rtol=0, atol=1e-12)
    warped, mats = draw(0.0, (0.0, 0.0), (1.0, 1.0), 0.0, 1.0)  # always flipped: x -> w - 1 - x
    np.testing.assert_array_equal(mats, np.broadcast_to([[-1.0, 0.0, w - 1], [0.0, 1.0, 0.0]], mats.shape))
    np.testing.assert_array_equal(warped, batch[:, :, ::-1])
    warped, mats = draw(0.0, (0.0, 0.0), (1.0, 1.0), (20.0, 20.0), 0.0)  # x-shear about the center
    t = np.tan(np.radians(20.0))
    np.testing.assert_allclose(mats, np.broadcast_to([[1.0, t, -t * (h - 1) / 2], [0.0, 1.0, 0.0]], mats.shape),
                               rtol=0, atol=1e-12)
    warped, mats = draw(0.0, (0.25, 0.5), (1.0, 1.0), 0.0, 0.0)  # shifts up to (w / 4, h / 2)
    np.testing.assert_array_equal(mats[:, :, :2], np.broadcast_to(np.eye(2), (200, 2, 2)))
    for axis, bound in ((0, 0.25 * w), (1, 0.5 * h)):
        shift = mats[:, axis, 2]
        assert np.abs(shift).max() <= bound and shift.max() > 0.9 * bound and shift.min() < -0.9 * bound
    # rotation, scale and flip together: each draw's angle, scale and flip read back from
    # its matrix (no shear: column 1 is s (sin a, cos a), and det = s^2 * flip)
    warped, mats = draw((-30.0, 50.0), (0.0, 0.0), (0.7, 1.3), 0.0, 0.3)
    angle = np.degrees(np.arctan2(mats[:, 0, 1], mats[:, 1, 1]))
    scale = np.hypot(mats[:, 0, 1], mats[:, 1, 1])
    flipped = np.linalg.det(mats[:, :, :2]) < 0
    assert -30 - 1e-9 <= angle.min() < -25 and 45 < angle.max() <= 50 + 1e-9
    assert 0.7 - 1e-12 <= scale.min() < 0.75 and 1.25 < scale.max() <= 1.3 + 1e-12
    assert 0.2 < flipped.mean() < 0.4  # 60 of 200 expected, 6.5 standard deviation
    assert not np.array_equal(draw(30.0, seed=2)[1], draw(30.0, seed=3)[1])


def test_cpu_random_affine_ranges():
    from conftest import KernelSide

    random_affine_ranges(KernelSide("cpu"))


def test_kernel_random_affine_ranges(kernels):
    random_affine_ranges(kernels)


def test_cpu_random_affine_numpy_generator():
    """A numpy Generator is drawn from as the one random_affine makes from a seed."""
    batch = random_image(np.random.default_rng(51), (3, 10, 14, 3), np.uint8)
    args = (30.0, (0.1, 0.2), (0.8, 1.2), 10.0, 0.5)
    a, Ma = G.random_affine(batch, *args, generator=np.random.default_rng(5))
    b, Mb = G.random_affine(batch, *args, seed=5)
    np.testing.assert_array_equal(Ma, Mb)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(Ma, G.random_affine(batch, *args, seed=6)[1])


@pytest.mark.gpu
def test_gpu_random_affine_cupy_generators():
    """A cupy Generator or RandomState is drawn from on the device: the matrices are the
    formula of the uniforms a twin of it draws."""
    cupy = pytest.importorskip("cupy")
    batch = cupy.asarray(random_image(np.random.default_rng(52), (5, 12, 17, 3), np.uint8))
    args = (30.0, (0.1, 0.2), (0.8, 1.2), 10.0, 0.5)
    terms = augment._affine_terms((-30.0, 30.0), (0.8, 1.2), (-10.0, 10.0), (0.1, 0.2), 17, 12, 0.5)
    a, Ma = G.random_affine(batch, *args, generator=cupy.random.default_rng(7))
    b, Mb = G.random_affine(batch, *args, seed=7)
    np.testing.assert_array_equal(Ma.get(), Mb.get())
    np.testing.assert_array_equal(a.get(), b.get())
    for gen, twin in [(cupy.random.default_rng(3), cupy.random.default_rng(3).random((5, 6))),
                      (cupy.random.RandomState(3), cupy.random.RandomState(3).random_sample((5, 6)))]:
        warped, mats = G.random_affine(batch, *args, generator=gen)
        # the device's cos / sin / tan against NumPy's: see the test of the CPU formula
        np.testing.assert_allclose(mats.get(), augment._affine_from_uniforms(twin.get(), terms), rtol=1e-14, atol=1e-12)
        for n in range(5):
            np.testing.assert_array_equal(warped[n].get(), cv2_warp(batch[n].get(), mats[n].get(), (12, 17), "linear"))


def test_kernel_random_affine_matrices_follow_the_cpu_formula(kernels):
    """The device builds random_affine's matrices in one kernel; given the same uniforms
    they are the CPU path's NumPy formula. Only the angle's cos / sin and the shear's tan
    may differ (CUDA's libdevice, the C library, NumPy: each within 1-2 units in the last
    place, hence rtol 1e-14 and not equality); the inverse uses basic operations only and
    equals the CPU formula's inverse of the kernel's matrices bit for bit."""
    from cupyprep import _arrays

    rng = np.random.default_rng(31)
    u = rng.random((37, 6))
    u[0] = 0.0  # every range's low end, no flip
    u[1] = np.nextafter(1.0, 0.0)  # the high ends
    u[2, 5], u[3, 5] = 0.5, np.nextafter(0.5, 0.0)  # flip_p 0.5: no flip at 0.5, flip below
    w, h = 37, 23
    terms = augment._affine_terms((-170.0, 25.0), (0.5, 1.7), (-20.0, 35.0), (0.3, 0.2), w, h, 0.5)
    call = _arrays.prepare(kernels.put(np.zeros((37, h, w, 3), np.uint8)), "batch")
    with call.launch():
        mats, inv = augment._affine_on_device(call.xp, kernels.put(u), terms)
    mats, inv = kernels.get(mats), kernels.get(inv)
    want = augment._affine_from_uniforms(u, terms)
    np.testing.assert_allclose(mats, want, rtol=1e-14, atol=1e-12)
    np.testing.assert_array_equal(inv, _matrix_math.invert_affine(mats, np))
    assert (mats[2, 0, 0] > 0) == (want[2, 0, 0] > 0) and mats[3, 0, 0] * want[3, 0, 0] > 0
    empty, empty_inv = augment._affine_on_device(call.xp, kernels.put(u[:0]), terms)
    assert empty.shape == empty_inv.shape == (0, 2, 3)


def test_kernel_similarity_follows_the_cpu_formula(kernels):
    """align_faces' (and CuPy estimate_similarity's) one-kernel Umeyama fit equals the NumPy
    formula up to summation order (atol 1e-9 on coordinates of a few hundred pixels), for
    batched and broadcast point sets; coinciding points are refused."""
    from cupyprep import _arrays

    rng = np.random.default_rng(32)
    src = rng.uniform(0, 300, (9, 5, 2))
    dst = src @ np.array([[0.8, 0.3], [-0.3, 0.8]]) + rng.normal(0, 2, src.shape) + 17
    tmpl = np.asarray(G.ARCFACE_112)
    call = _arrays.prepare(kernels.put(np.zeros((1, 4, 4, 3), np.uint8)), "images")
    with call.launch():
        for s, d in ((src, dst), (src, tmpl), (tmpl, dst), (src[:1], dst), (src[3], dst[3]),
                     (src[:, :2], dst[:, :2])):
            got = kernels.get(_matrix_math.similarity_on_device(call.xp, kernels.put(s), kernels.put(d)))
            np.testing.assert_allclose(got, G.estimate_similarity(s, d), rtol=0, atol=1e-9)
        assert kernels.get(_matrix_math.similarity_on_device(call.xp, kernels.put(src[:0]), kernels.put(tmpl))).shape == (0, 2, 3)
        same = src.copy()
        same[4] = same[4, :1]  # set 4: every point the same
        with pytest.raises(ValueError, match="coincide"):
            _matrix_math.similarity_on_device(call.xp, kernels.put(same), kernels.put(dst))
        with pytest.raises(ValueError):
            _matrix_math.similarity_on_device(call.xp, kernels.put(src[:3]), kernels.put(dst[:4]))
        mats, inv = _matrix_math.similarity_on_device(call.xp, kernels.put(src), kernels.put(dst), inverse=True)
        # the inverse is invert_affine_transform's formula, bit for bit
        np.testing.assert_array_equal(kernels.get(inv), _matrix_math.invert_affine(kernels.get(mats), np))
        flat = dst.copy()
        flat[6] = 5.0  # set 6's destination points coincide: a = b = 0
        with pytest.raises(ValueError, match="landmarks: a fitted similarity is singular"):
            _matrix_math.similarity_on_device(call.xp, kernels.put(src), kernels.put(flat), "landmarks", inverse=True)


def coinciding_landmarks():
    """Two faces' ARCFACE landmarks, the second with all five points at one place."""
    lm = np.repeat(np.asarray(G.ARCFACE_112)[None], 2, axis=0) + 10
    lm[1] = 40.0
    return lm


def test_kernel_align_faces_refuses_coinciding_landmarks(kernels):
    """The kernel path: the fit and its checks in one launch."""
    img = np.zeros((1, 64, 64, 3), np.uint8)
    with pytest.raises(ValueError, match="landmarks: all points coincide"):
        G.align_faces(kernels.put(img), kernels.put(coinciding_landmarks()), np.array([0, 0]))


def test_cpu_align_faces_refuses_coinciding_landmarks():
    with pytest.raises(ValueError, match="landmarks: all points coincide"):
        G.align_faces(np.zeros((1, 64, 64, 3), np.uint8), coinciding_landmarks(), np.array([0, 0]))


def _align_to_a_point(put):
    """A template whose points coincide makes every fit singular: each path says so in the
    same words (and suggests nothing align_faces does not take)."""
    with pytest.raises(ValueError, match=r"^landmarks: a fitted similarity is singular \(determinant 0; do "
                                         r"the destination points coincide\?\)$"):
        G.align_faces(put(np.zeros((1, 64, 64, 3), np.uint8)), put(coinciding_landmarks()[:1]),
                      np.array([0]), template=np.full((5, 2), 30.0))


def test_kernel_align_faces_singular_fit_names_landmarks(kernels):
    _align_to_a_point(kernels.put)


def test_cpu_align_faces_singular_fit_names_landmarks():
    _align_to_a_point(np.asarray)


def test_kernel_random_affine_empty_batch(kernels):
    warped, mats = G.random_affine(kernels.put(np.zeros((0, 9, 7, 3), np.uint8)), 30, seed=0)
    assert kernels.get(warped).shape == (0, 9, 7, 3) and kernels.get(mats).shape == (0, 2, 3)


# --- dense variants: word loads and stores, several pixels per thread -------------------------
# Nearest and linear on dense pixels (channels adjacent, pixels CN apart, in the source and
# the output) take variants with compile-time strides that make PX pixels per thread and,
# for uint8, read tap pairs as aligned 32-bit words and write whole words where they can.
# Every edge where those fall back to bytes is compared with cv2 here: rows whose bytes end
# mid-word (widths 1..9, 511), rows that do not start on a word (sliced sources and
# outputs), images that fill their allocation exactly (the emulator's AddressSanitizer
# then reports any read past the first or last row), the last group of a row.
DENSE_WIDTHS = list(range(1, 10)) + [511]


def edge_matrices(rng, h, w):
    """Per image, source-to-destination matrices whose taps visit every column and row of an
    h x w image, the last ones included: fractional shifts both ways, a rotation, a zoom-in
    and a zoom-out."""
    shifts = [np.array([[1.0, 0.0, tx], [0.0, 1.0, ty]])
              for tx, ty in [(0.3, 0.6), (-0.45, -0.2), (1.7, -1.25)]]
    return np.stack(shifts + [rotation(rng, h, w),
                              cv2.getRotationMatrix2D((w / 2, h / 2), 7.0, 1.6),
                              cv2.getRotationMatrix2D((w / 3, h / 2), -20.0, 0.6)])


@pytest.fixture
def warp_variants(monkeypatch):
    """The warp kernel name expressions launched during the test, in order (every call
    takes the general path: a launch plan's replay looks no kernel up)."""
    monkeypatch.setattr(_warping, "_PLANS", _plans.PlanCache(maxsize=0))
    seen = []
    get_function = _kernels.get_function
    files = {f for f, _ in _kernels.variants("warp")}

    def spy(filename, expr):
        if filename in files:
            seen.append(expr)
        return get_function(filename, expr)

    monkeypatch.setattr(_kernels, "get_function", spy)
    return seen


@pytest.fixture
def dense_warps(monkeypatch):
    """The dense kernels for every dense warp: the staged kernel (WarpSpec.staged, its
    own tests below) would otherwise take uint8 linear 3- and 4-channel warps with a
    constant border whose sources are word-aligned."""
    tune(monkeypatch, warp_spec, staged=False)


def check_batch(kernels, src, host, Ms, size, interpolation, border="constant", value=0,
                out=None, perspective=False):
    """Warp the batch `src` (on the kernels' side; `host` is its NumPy copy) into `out` (a
    poisoned batch by default) and compare every image with cv2."""
    n, c = host.shape[0], host.shape[3]
    if out is None:
        out = kernels.poisoned((n,) + tuple(size) + (c,), host.dtype)
    fn = G.warp_perspective if perspective else G.warp_affine
    res = fn(src, Ms, size, interpolation=interpolation, border_mode=border, border_value=value,
             out=out)
    assert res is out
    got = kernels.get(res)
    for k in range(n):
        ref = cv2_warp(host[k], Ms[k], size, interpolation, border, value, perspective)
        assert_matches_opencv(got[k], ref, interpolation, host.dtype)
    return got


@pytest.mark.parametrize("block_x", [32, 4])
@pytest.mark.parametrize("pixels", [1, 2, 4])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_dense_uint8_row_edges(kernels, dense_warps, monkeypatch, warp_variants, interpolation,
                                      channels, pixels, block_x):
    """Tight (N, h, w, C) batches of every width 1..9 and 511 (odd heights), output widths
    1..9 and 511 as well, one matrix per image; one-row and 2-D blocks."""
    tune(monkeypatch, warp_spec, pixels_per_thread=pixels, block_x=block_x)
    rng = np.random.default_rng(40 + channels)
    for w in DENSE_WIDTHS:
        h = 3 if w > 100 else 2 * (w % 4) + 1
        host = random_image(rng, (6, h, w, channels), np.uint8)
        Ms = edge_matrices(rng, h, w)
        for size in [(h, w), (h + 2, DENSE_WIDTHS[(w + 3) % len(DENSE_WIDTHS)])]:
            check_batch(kernels, kernels.put(host), host, Ms, size, interpolation, "constant", 9)
    dense = f"cupyprep_warp_affine_{interpolation}<unsigned char, {channels}, true, {pixels}, false>"
    assert set(warp_variants) == {dense}


@pytest.mark.parametrize("border", list(BORDERS))
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_dense_unaligned_sources(kernels, dense_warps, warp_variants, border, channels):
    """Sources whose rows start at every byte offset from a word: views into a flat buffer
    at offsets 1..3 (rows still dense), and windows of wider images (row strides that are
    not multiples of 4 either), each ending exactly where the buffer ends."""
    rng = np.random.default_rng(50 + channels)
    for w in (5, 7, 8, 511):
        h = 5 if w < 100 else 3
        Ms = edge_matrices(rng, h, w)
        n, count = len(Ms), len(Ms) * h * w * channels
        for offset in (1, 2, 3):
            flat = random_image(rng, (offset + count,), np.uint8)
            host = flat[offset:].reshape(n, h, w, channels)
            src = kernels.put(flat)[offset:].reshape(n, h, w, channels)
            check_batch(kernels, src, host, Ms, (h + 1, w + 1), "linear", border, 200)
        for dy, dx in ((0, 1), (1, 1), (2, 3)):
            wide = random_image(rng, (n, h + dy, w + dx, channels), np.uint8)
            host = wide[:, dy:, dx:]
            check_batch(kernels, kernels.put(wide)[:, dy:, dx:], host, Ms, (h, w), "linear",
                        border, 200)
            check_batch(kernels, kernels.put(wide)[:, dy:, dx:], host, Ms, (h, w), "nearest",
                        border, 200)
    assert {e.split("<")[1] for e in warp_variants} == {
        f"unsigned char, {channels}, true, {warp_spec.SPEC.pixels(i, np.uint8, channels, border)}, false>"
        for i in ("nearest", "linear")}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_dense_cubic(kernels, monkeypatch, warp_variants, dtype, channels):
    """Cubic's dense variants (uint8, uint16 and float16 read each window row from the
    aligned 32-bit words that cover it, float32 of 1 or 3 channels from the aligned 8-byte
    words, where the window ends far enough inside its row; 8- and 16-byte pixels go as
    one word where aligned) equal the generic kernel bit for bit and cv2 within cubic's
    tolerance: tight sources, sources off a word, one of them ending where its buffer ends
    (so a read past a row's last tap would show under the emulator's AddressSanitizer),
    windows of wider images, widths around the window's reach, zoomed so that most windows
    are inside."""
    rng = np.random.default_rng(100 + channels)
    size = np.dtype(dtype).itemsize
    for w in (4, 5, 6, 9, 33):
        h = 7 if w < 30 else 5
        Ms = np.concatenate([edge_matrices(rng, h, w), [cv2.getRotationMatrix2D((w / 2, h / 2), 3.0, 2.5)]])
        n = len(Ms)
        host = random_image(rng, (n, h, w, channels), dtype)
        flat = random_image(rng, (3 + host.size,), dtype)
        wide = random_image(rng, (n, h + 1, w + 2, channels), dtype)
        sources = [(kernels.put(host), host), (kernels.put(wide)[:, 1:, 2:], wide[:, 1:, 2:])]
        # rows 1 to 3 bytes off a word (float32: 4 bytes off an 8-byte word)
        for offset in range(1, max(2, 4 // size)):
            sources.append((kernels.put(flat)[offset:offset + host.size].reshape(host.shape),
                            flat[offset:offset + host.size].reshape(host.shape)))
        # the buffer's last element is the image's last (3 elements in: off a word)
        sources.append((kernels.put(flat)[3:].reshape(host.shape), flat[3:].reshape(host.shape)))
        for src, ref in sources:
            for border in ("constant", "reflect101"):
                dense = check_batch(kernels, src, ref, Ms, (h + 2, w + 1), "cubic", border, 7)
                tune(monkeypatch, warp_spec, dense=False)
                generic = check_batch(kernels, src, ref, Ms, (h + 2, w + 1), "cubic", border, 7)
                tune(monkeypatch, warp_spec, dense=True)
                np.testing.assert_array_equal(dense.view(np.uint8), generic.view(np.uint8))
    ctype = C_TYPES[np.dtype(dtype)]
    dense = {f"cupyprep_warp_affine_cubic<{ctype}, {channels}, true, "
             f"{warp_spec.SPEC.pixels('cubic', dtype, channels, b)}, false>" for b in ("constant", "reflect101")}
    assert set(warp_variants) == dense | {f"cupyprep_warp_affine_cubic<{ctype}, {channels}, false, 1, false>"}


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_kernel_dense_cubic_tall(kernels, monkeypatch, warp_variants, dtype):
    """Cubic outputs taller than a block's rows (uint8 makes one pixel a thread and twice
    the default rows a thread, float32 two pixels and the default rows): heights around
    one and two block tiles, so threads start and stop inside their rows, equal to the
    generic kernel bit for bit and to cv2 within cubic's tolerance."""
    rng = np.random.default_rng(140)
    px = warp_spec.SPEC.pixels("cubic", dtype, 3)
    tile = warp_spec.SPEC.rows("cubic", px) * (BLOCK_3D // warp_spec.SPEC.block_x)
    h, w = tile + 5, 11
    host = random_image(rng, (2, h, w, 3), dtype)
    Ms = np.stack([rotation(rng, h, w), cv2.getRotationMatrix2D((w / 2, h / 2), 7.0, 1.1)])
    for size in [(tile - 1, w), (2 * tile + 3, w + 2)]:
        dense = check_batch(kernels, kernels.put(host), host, Ms, size, "cubic", "constant", 7)
        tune(monkeypatch, warp_spec, dense=False)
        generic = check_batch(kernels, kernels.put(host), host, Ms, size, "cubic", "constant", 7)
        tune(monkeypatch, warp_spec, dense=True)
        np.testing.assert_array_equal(dense.view(np.uint8), generic.view(np.uint8))
    ctype = C_TYPES[np.dtype(dtype)]
    assert f"cupyprep_warp_affine_cubic<{ctype}, 3, true, {px}, false>" in warp_variants


@pytest.mark.parametrize("block_x", [16, 4])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_dense_uint8_tall_interiors(kernels, dense_warps, monkeypatch, warp_variants, channels,
                                           block_x):
    """Outputs taller than a block's rows, so whole warps take the interior path (word
    loads of the taps, the third word only where a pixel's taps reach it) next to warps at
    a border, outside a zoomed-out image or at the output's last rows: tight sources,
    sources one byte off a word, and windows of wider images (row strides not a multiple
    of 4)."""
    tune(monkeypatch, warp_spec, block_x=block_x)
    rng = np.random.default_rng(90 + channels)
    tile = warp_spec.SPEC.rows_per_thread * (BLOCK_3D // block_x)  # output rows of a block
    h, w = tile + 9, 45
    Ms = edge_matrices(rng, h, w)
    n = len(Ms)
    host = random_image(rng, (n, h, w, channels), np.uint8)
    flat = random_image(rng, (1 + host.size,), np.uint8)
    shifted = flat[1:].reshape(host.shape)
    wide = random_image(rng, (n, h + 1, w + 1, channels), np.uint8)
    sources = [(kernels.put(host), host),
               (kernels.put(flat)[1:].reshape(host.shape), shifted),
               (kernels.put(wide)[:, 1:, 1:], wide[:, 1:, 1:])]
    for src, ref in sources:
        for size in [(h, w), (2 * tile + 3, w + 6)]:
            check_batch(kernels, src, ref, Ms, size, "linear", "constant", 9)
        check_batch(kernels, src, ref, Ms, (h, w), "linear", "reflect101")
    assert set(warp_variants) == {f"cupyprep_warp_affine_linear<unsigned char, {channels}, "
                                  f"true, {warp_spec.SPEC.pixels('linear', np.uint8, channels, b)}, false>"
                                  for b in ("constant", "reflect101")}


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_dense_output_views(kernels, dense_warps, warp_variants, channels):
    """``out=`` views: a window of a wider buffer (dense pixels, rows that start off a word:
    the kernel falls back to bytes there, and must leave the bytes around the window alone),
    and views that are not dense (reversed channels, every other pixel), which take the
    generic kernel. One matrix per image."""
    rng = np.random.default_rng(60 + channels)
    for h, w in [(7, 9), (5, 511), (9, 6)]:
        host = random_image(rng, (6, h, w, channels), np.uint8)
        Ms = edge_matrices(rng, h, w)
        for dx in (0, 1, 2, 3):
            big = kernels.poisoned((6, h, w + dx + 1, channels), np.uint8)
            out = big[:, :, dx:dx + w]
            check_batch(kernels, kernels.put(host), host, Ms, (h, w), "linear", "reflect101",
                        out=out)
            rest = np.delete(kernels.get(big), np.arange(dx, dx + w), axis=2)
            assert (rest == kernels.get(kernels.poisoned(rest.shape, np.uint8))).all()
        views = [kernels.poisoned((6, h, 2 * w, channels), np.uint8)[:, :, ::2]]
        if channels > 1:
            views.append(kernels.poisoned((6, h, w, channels), np.uint8)[..., ::-1])
        for out in views:
            check_batch(kernels, kernels.put(host), host, Ms, (h, w), "linear", "constant", 4,
                        out=out)
    dense = {f"cupyprep_warp_affine_linear<unsigned char, {channels}, true, "
             f"{warp_spec.SPEC.pixels('linear', np.uint8, channels, b)}, false>"
             for b in ("constant", "reflect101")}
    generic = f"cupyprep_warp_affine_linear<unsigned char, {channels}, false, 1, false>"
    assert sum(warp_variants.count(e) for e in dense) == 12
    assert warp_variants.count(generic) == len(warp_variants) - 12 > 0


def picked_pixels(name, border="constant"):
    """The pixels a thread that geometry picks for the dense warp kernel ``name``
    (``cupyprep_warp_<op>_<interpolation><type, channels, ...>``) under ``border``."""
    kernel = name.split("<")[0].rsplit("_", 1)[1]
    ctype, channels = name.split("<")[1].split(", ")[:2]
    dtype = next(d for d, c in C_TYPES.items() if c == ctype)
    return warp_spec.SPEC.pixels(kernel, dtype, int(channels), border)


def test_warp_pixels_per_thread():
    """The dense warps' pixels a thread, as measured fastest on W5's rotations
    (docs/performance-history): 4 for nearest and linear, fewer for wide pixels (nearest: 2 of 8
    bytes, 1 of 12 or 16; linear: 2 of 8 or 16) and for cubic (uint8 1, float32 2, 2-byte
    elements 1 of 3 or 4 channels, else 2); with another border, fewer for the kinds listed
    in WarpSpec.pixels_by_border; twice the rows a thread for cubic at one pixel. Every count
    picked is a registered variant."""
    px = warp_spec.SPEC.pixels
    assert [px("linear", np.uint8, c) for c in (1, 3, 4)] == [4, 4, 4]
    assert [px("nearest", np.uint8, c) for c in (1, 3, 4)] == [4, 4, 4]
    assert [px("linear", np.float32, c) for c in (1, 3, 4)] == [4, 4, 2]
    assert [px("nearest", np.float32, c) for c in (1, 3, 4)] == [4, 1, 1]
    assert [px("nearest", np.float16, c) for c in (1, 3, 4)] == [4, 4, 2]
    assert [px("linear", np.uint16, c) for c in (1, 3, 4)] == [4, 4, 2]
    assert [px("cubic", np.uint8, c) for c in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert [px("cubic", d, c) for d in (np.uint16, np.float16) for c in (1, 2, 3, 4)] == [2, 2, 1, 1] * 2
    assert [px("cubic", np.float32, c) for c in (1, 2, 3, 4)] == [2, 2, 2, 2]
    # other borders, whose pass over the pixels outside favours fewer pixels for some kinds
    assert [px("linear", np.uint8, c, "replicate") for c in (1, 3, 4)] == [4, 2, 2]
    assert [px("linear", np.uint8, c, "reflect101") for c in (1, 3, 4)] == [4, 4, 2]
    assert [px("nearest", np.uint8, c, "wrap") for c in (1, 3, 4)] == [4, 4, 2]
    assert [px("linear", np.uint16, c, "replicate") for c in (1, 3, 4)] == [2, 1, 2]
    assert [px("linear", np.float16, c, "reflect") for c in (1, 3, 4)] == [2, 4, 2]
    assert [px("nearest", np.float16, c, "reflect101") for c in (1, 3, 4)] == [2, 1, 2]
    assert [px("nearest", np.uint16, c, "reflect101") for c in (1, 3, 4)] == [2, 4, 2]
    assert [px("linear", np.float32, c, "wrap") for c in (1, 3, 4)] == [2, 2, 2]
    assert [px("nearest", np.float32, c, "replicate") for c in (1, 3, 4)] == [4, 1, 1]
    assert px("cubic", np.uint8, 3, "replicate") == 1
    assert [px("cubic", np.float32, c, "reflect101") for c in (1, 2, 3, 4)] == [2, 2, 1, 1]
    # rows a thread: twice the default for cubic at one pixel a row
    rows = warp_spec.SPEC.rows_per_thread
    assert [warp_spec.SPEC.rows(i, p) for i, p in (("cubic", 1), ("cubic", 2), ("linear", 1), ("nearest", 4))] == \
        [2 * rows, rows, rows, rows]
    # every count picked is a registered variant (warmup and the NVRTC check compile those)
    registered = {e for _, e in _kernels.variants("warp")}
    for op in ("affine", "perspective"):
        for i in ("nearest", "linear", "cubic"):
            for d in warp_spec.DTYPES:
                for c in (1, 3, 4):
                    for b in G.BORDER_MODES:
                        for listed in (False, True):
                            assert warp_spec.SPEC.expr(op, i, d, c, True, px(i, d, c, b), listed) in registered


@pytest.mark.parametrize("dtype", [np.uint16, np.float16, np.float32])
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_dense_other_types(kernels, warp_variants, dtype, interpolation):
    """The dense variants of the other types (compile-time strides, 4 pixels per thread or
    fewer for wide pixels, a group's pixels stored as 16- or 8-byte words where aligned),
    affine and perspective, every channel count they serve."""
    rng = np.random.default_rng(70)
    for channels in (1, 3, 4):
        for h, w in [(5, 7), (3, 511)]:
            host = random_image(rng, (6, h, w, channels), dtype)
            src = kernels.put(host)
            check_batch(kernels, src, host, edge_matrices(rng, h, w), (h + 1, w), interpolation,
                        "wrap")
            Hs = np.stack([homography(rng, h, w) for _ in range(6)])
            check_batch(kernels, src, host, Hs, (h, w + 2), interpolation, "constant", 0.5,
                        perspective=True)
    ctype = C_TYPES[np.dtype(dtype)]
    assert set(warp_variants) == {f"cupyprep_warp_{op}_{interpolation}<{ctype}, {c}, true, "
                                  f"{warp_spec.SPEC.pixels(interpolation, dtype, c, border)}, false>"
                                  for op, border in (("affine", "wrap"), ("perspective", "constant"))
                                  for c in (1, 3, 4)}


@pytest.mark.parametrize("dtype", [np.uint16, np.float16, np.float32])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_dense_other_types_output_alignments(kernels, dense_warps, warp_variants, dtype, channels):
    """A dense group of pixels (4, or 1 or 2 of the widest) goes as 16- or 8-byte words
    only where its first element is aligned to the word: outputs that are windows of a
    flat buffer starting 0 to 4 elements in (so groups fall on 16, 8, 4 or 2 bytes), with
    rows whose pitch is not a multiple of the word and widths that leave a last group
    short. Every result equals cv2's and the elements around the window keep their poison
    (compared as bytes)."""
    rng = np.random.default_rng(80 + channels)
    n, h, w, pitch = 6, 5, 13, 15
    host = random_image(rng, (n, h, w, channels), dtype)
    Ms = edge_matrices(rng, h, w)
    size = n * h * pitch * channels
    for start in (0, 1, 2, 3, 4):
        flat = kernels.poisoned((size + 8,), dtype)
        out = flat[start:start + size].reshape(n, h, pitch, channels)[:, :, 1:w + 1]
        for interpolation in ("nearest", "linear"):
            check_batch(kernels, kernels.put(host), host, Ms, (h, w), interpolation, "reflect101",
                        out=out)
        got = kernels.get(flat).reshape(-1).view(np.uint8)
        poison = kernels.get(kernels.poisoned((size + 8,), dtype)).view(np.uint8)
        inside = np.zeros(size + 8, bool)
        inside[start:start + size].reshape(n, h, pitch, channels)[:, :, 1:w + 1] = True
        outside = np.repeat(~inside, np.dtype(dtype).itemsize)
        np.testing.assert_array_equal(got[outside], poison[outside])
    assert len(warp_variants) == 10 and all(
        e.endswith(f"<{C_TYPES[np.dtype(dtype)]}, {channels}, true, "
                   f"{picked_pixels(e, 'reflect101')}, false>")
        for e in warp_variants)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_kernel_dense_source_words(kernels, dense_warps, warp_variants, dtype, channels):
    """The dense nearest / linear variants read sources as words: 8- and 16-byte pixels (4
    channels of 2-byte elements, 4 of float32) as one aligned word where the image's start
    and row pitch allow it, a tap pair of 2-byte elements as the aligned 32-bit words that
    cover it (one element past the pair where it starts off a word, so the pair must end a
    pixel inside its row), a float32 pair of 3 or 4 channels
    (the latter where not aligned for whole words) as aligned 8-byte words, each pair 4
    bytes off or not (the selection of its elements differs); uint8 of 3 or 4 channels
    takes its interior fast path. Sources: tight; starting 1 to 3
    elements into a buffer whose end is the image's last element (a read past it shows
    under the emulator's AddressSanitizer); windows of wider images; rows whose pitch is not
    a multiple of the pixel. Widths around the reach; every border. All equal to cv2."""
    rng = np.random.default_rng(130 + channels)
    borders = list(BORDERS)
    used = set()
    for w in (2, 3, 4, 5, 33):
        h = 5
        # the last image's taps visit every column and row (edge_matrices' first shift)
        edge = edge_matrices(rng, h, w)
        Ms = np.concatenate([[cv2.getRotationMatrix2D((w / 2, h / 2), 4.0, 2.5)], edge[1:], edge[:1]])
        n = len(Ms)
        host = random_image(rng, (n, h, w, channels), dtype)
        flat = random_image(rng, (3 + host.size,), dtype)
        wide = random_image(rng, (n, h + 1, w + 2, channels), dtype)
        pitch = w * channels + 1
        rows = random_image(rng, (n * h * pitch,), dtype)
        pitched = kernels.put(rows).reshape(n, h, pitch)[:, :, :w * channels].reshape(host.shape)
        assert pitched.strides[1] == pitch * np.dtype(dtype).itemsize
        sources = [(kernels.put(host), host), (kernels.put(wide)[:, 1:, 2:], wide[:, 1:, 2:]),
                   (pitched, rows.reshape(n, h, pitch)[:, :, :w * channels].reshape(host.shape))]
        for offset in (1, 2, 3):
            sources.append((kernels.put(flat)[offset:offset + host.size].reshape(host.shape),
                            flat[offset:offset + host.size].reshape(host.shape)))
        sources.append((kernels.put(flat)[3:].reshape(host.shape), flat[3:].reshape(host.shape)))
        for k, (src, ref) in enumerate(sources):
            for i, interpolation in enumerate(("nearest", "linear")):
                border = borders[(k + 2 * i + w) % len(borders)]
                check_batch(kernels, src, ref, Ms, (h + 1, w + 2), interpolation, border, 7)
                used.add((interpolation, border))
    ctype = C_TYPES[np.dtype(dtype)]
    assert set(warp_variants) == {f"cupyprep_warp_affine_{i}<{ctype}, {channels}, true, "
                                  f"{warp_spec.SPEC.pixels(i, dtype, channels, b)}, false>"
                                  for i, b in used}


@pytest.mark.parametrize("value", [0, 255])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_dense_uint8_halves_extremes_and_far_coordinates(kernels, dense_warps, warp_variants,
                                                                 interpolation, channels, value):
    """The dense uint8 interior path converts through float bit patterns (bytes under a 2^23
    exponent, floor and rint by adding 2^23 or 1.5 * 2^23, cvRound by 1.5 * 2^23). Its
    edge cases against cv2: half-pixel shifts (fractions of exactly 0.5, so blends of
    neighbours that differ by an odd amount are ties that round half to even; nearest
    ties on the coordinate itself), sources of only 0 and 255 (blends at the ends of the
    range, where rounding must not wrap) and of neighbours 0 / 1 and 254 / 255, the
    border value at both ends, and zoom-outs that send coordinates past 2^22 (and 2^24),
    where the fast path must not be taken."""
    rng = np.random.default_rng(90 + channels)
    h, w = 9, 37
    base = rng.integers(0, 2, (h, w, channels)).astype(np.uint8)
    host = np.stack([base * 255, base + 254, base, random_image(rng, (h, w, channels), np.uint8)])
    shifts = [(0.5, 0.0), (0.0, 0.5), (0.5, 0.5), (-0.5, 1.5), (2.5, -3.5)]
    Ms = [np.array([[1.0, 0.0, tx], [0.0, 1.0, ty]]) for tx, ty in shifts]
    # destination x maps to source x / s: near 2^22 and past it within the output
    # (constant border only there: cv2's reflections step back one period at a time)
    zooms = [np.array([[s, 0.0, 0.0], [0.0, s, 0.0]]) for s in (2.0**-17, 2.0**-20, 2.0**-23)]
    Ms.append(rotation(rng, h, w))
    for mats, border in ((Ms + zooms, "constant"), (Ms, "reflect101")):
        batch = np.repeat(host, len(mats), axis=0)
        check_batch(kernels, kernels.put(batch), batch, np.stack(mats * len(host)), (h + 2, w + 3),
                    interpolation, border, value)
    assert set(warp_variants) == {f"cupyprep_warp_affine_{interpolation}<unsigned char, "
                                  f"{channels}, true, "
                                  f"{warp_spec.SPEC.pixels(interpolation, np.uint8, channels, b)}, false>"
                                  for b in ("constant", "reflect101")}


def dense_list(kernels, rng, channels, dtype):
    """A list of dense images of different sizes (kernel side, host copies): tight ones at
    widths 1..9 and 511, one that starts one element into its buffer (off a word for
    uint8), a window of a wider image (strided rows) and a 1 x 1 one; HW images for one
    channel."""
    shape = (lambda h, w: (h, w)) if channels == 1 else (lambda h, w: (h, w, channels))
    hosts, srcs = [], []
    for w in DENSE_WIDTHS:
        host = random_image(rng, shape(2 * (w % 4) + 3 if w < 100 else 3, w), dtype)
        hosts.append(host)
        srcs.append(kernels.put(host))
    flat = random_image(rng, (1 + 5 * 7 * channels,), dtype)
    hosts.append(flat[1:].reshape(shape(5, 7)))
    srcs.append(kernels.put(flat)[1:].reshape(shape(5, 7)))
    wide = random_image(rng, shape(8, 11), dtype)
    hosts.append(wide[1:, 2:])
    srcs.append(kernels.put(wide)[1:, 2:])
    hosts.append(random_image(rng, shape(1, 1), dtype))
    srcs.append(kernels.put(hosts[-1]))
    return hosts, srcs


@pytest.mark.parametrize("border", ["constant", "reflect101"])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_kernel_dense_lists(kernels, dense_warps, warp_variants, interpolation, channels, border):
    """A list of dense uint8 images takes the dense variant for lists (word loads per
    image, each with its own size, row stride and alignment), affine and perspective: each
    output equal to cv2 on its own source with its own matrix. A list with one image that
    is not dense (every other pixel) takes the generic variant, with the same results."""
    rng = np.random.default_rng(110 + channels)
    hosts, srcs = dense_list(kernels, rng, channels, np.uint8)
    Ms = np.stack([edge_matrices(rng, *h.shape[:2])[k % 6] for k, h in enumerate(hosts)])
    Hs = np.stack([homography(rng, *h.shape[:2]) for h in hosts])
    size = (9, 13)
    for fn, mats, perspective in ((G.warp_affine, Ms, False), (G.warp_perspective, Hs, True)):
        out = kernels.poisoned((len(hosts),) + size + ((channels,) if channels > 1 else ()), np.uint8)
        got = kernels.get(fn(srcs, mats, size, interpolation=interpolation, border_mode=border,
                             border_value=200, out=out))
        for k, host in enumerate(hosts):
            ref = cv2_warp(host, mats[k], size, interpolation, border, 200, perspective)
            np.testing.assert_array_equal(got[k], ref, err_msg=f"image {k} {host.shape}")
    t = "unsigned char"
    px = warp_spec.SPEC.pixels(interpolation, np.uint8, channels, border)
    assert warp_variants == [f"cupyprep_warp_{op}_{interpolation}<{t}, {channels}, true, {px}, true>"
                             for op in ("affine", "perspective")]
    strided = kernels.put(random_image(rng, (6, 18) + ((channels,) if channels > 1 else ()), np.uint8))
    mixed = srcs[:3] + [strided[:, ::2]]
    got = kernels.get(G.warp_affine(mixed, Ms[:4], size, interpolation=interpolation,
                                    border_mode=border, border_value=200))
    for k, src in enumerate(mixed):
        ref = cv2_warp(np.ascontiguousarray(kernels.get(src)), Ms[k], size, interpolation, border, 200)
        np.testing.assert_array_equal(got[k], ref, err_msg=f"image {k}")
    assert warp_variants[-1] == f"cupyprep_warp_affine_{interpolation}<{t}, {channels}, false, 1, false>"


@pytest.mark.parametrize("dtype", [np.uint16, np.float16, np.float32])
def test_kernel_dense_lists_other_types(kernels, dense_warps, warp_variants, dtype):
    """The dense list variants of the other types (compile-time strides, element loads),
    linear and nearest, 1, 3 and 4 channels; a 70-image list (records in one uploaded
    table) and align_faces picking faces from it by index."""
    rng = np.random.default_rng(120)
    for channels in (1, 3, 4):
        hosts, srcs = dense_list(kernels, rng, channels, dtype)
        Ms = np.stack([rotation(rng, *h.shape[:2]) for h in hosts])
        for interpolation in ("nearest", "linear"):
            got = kernels.get(G.warp_affine(srcs, Ms, (6, 10), interpolation=interpolation,
                                            border_mode="replicate"))
            for k, host in enumerate(hosts):
                assert_matches_opencv(got[k], cv2_warp(host, Ms[k], (6, 10), interpolation,
                                                       "replicate"), interpolation, dtype)
    assert all(e.endswith(f", true, {picked_pixels(e, 'replicate')}, true>") for e in warp_variants)
    sizes = [(4 + i % 5, 3 + i % 7) for i in range(70)]
    hosts = [random_image(rng, s + (3,), dtype) for s in sizes]
    Ms = np.stack([rotation(rng, *s) for s in sizes])
    got = kernels.get(G.warp_affine([kernels.put(h) for h in hosts], Ms, (5, 6)))
    for k, host in enumerate(hosts):
        assert_matches_opencv(got[k], cv2_warp(host, Ms[k], (5, 6), "linear"), "linear", dtype)
    lm = np.array([[[1.0, 1.0], [3.0, 1.2], [2.0, 2.0], [1.2, 3.0], [2.9, 3.1]]] * 2)
    crops, mats = G.align_faces([kernels.put(h) for h in hosts], lm, np.array([69, 2]), size=(7, 6))
    crops, mats = kernels.get(crops), kernels.get(mats)
    for f, k in enumerate([69, 2]):
        assert_matches_opencv(crops[f], cv2_warp(hosts[k], mats[f], (7, 6), "linear"), "linear", dtype)
    assert warp_variants[-1].endswith(f", 3, true, {picked_pixels(warp_variants[-1])}, true>")


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("border", list(BORDERS))
def test_kernel_dense_and_generic_agree(kernels, dense_warps, monkeypatch, dense, border):
    """The same batch through the dense variant and (with the dense variants switched off)
    the generic one: both equal cv2, image by image, with every border."""
    tune(monkeypatch, warp_spec, dense=dense)
    rng = np.random.default_rng(80)
    for channels in (1, 3, 4):
        host = random_image(rng, (6, 11, 13, channels), np.uint8)
        Ms = edge_matrices(rng, 11, 13)
        for interpolation in ("nearest", "linear"):
            check_batch(kernels, kernels.put(host), host, Ms, (12, 15), interpolation, border, 77)


@pytest.mark.gpu
def test_gpu_torch_random_affine_zero_copy():
    torch = pytest.importorskip("torch")
    batch = torch.randint(0, 256, (8, 64, 64, 3), dtype=torch.uint8, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    warped, mats = G.random_affine(batch, 20, (0.1, 0.1), (0.9, 1.1), generator=g)
    assert warped.device.type == "cuda" and mats.device.type == "cuda" and mats.shape == (8, 2, 3)
    host = batch.cpu().numpy()
    for n in range(8):
        np.testing.assert_array_equal(warped[n].cpu().numpy(),
                                      cv2_warp(host[n], mats[n].cpu().numpy(), (64, 64), "linear"))


@pytest.mark.gpu
def test_gpu_torch_ragged_lists():
    """Ragged lists of torch CUDA images (two of them non-contiguous views: padded rows,
    3 of 4 channels) through warp_affine and align_faces: equal to cv2, returned as torch
    tensors on the device."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(26)
    host = [random_image(rng, s + (3,), np.uint8) for s in [(31, 40), (17, 23), (40, 52)]]
    tensors = [torch.from_numpy(np.pad(host[0], ((0, 0), (0, 0), (0, 1)))).cuda()[:, :, :3],
               torch.from_numpy(np.pad(host[1], ((0, 0), (0, 5), (0, 0)))).cuda()[:, :23],
               torch.from_numpy(host[2]).cuda()]
    assert not tensors[0].is_contiguous() and not tensors[1].is_contiguous()
    Ms = np.stack([rotation(rng, *h.shape[:2]) for h in host])
    got = G.warp_affine(tensors, Ms, (20, 24), border_mode="replicate")
    assert isinstance(got, torch.Tensor) and got.device.type == "cuda"
    for n in range(3):
        np.testing.assert_array_equal(got[n].cpu().numpy(),
                                      cv2_warp(host[n], Ms[n], (20, 24), "linear", "replicate"))
    lm = np.array([[[12.0, 10.0], [24.0, 11.0], [18.0, 16.0], [13.0, 22.0], [23.0, 23.0]]] * 2)
    crops, mats = G.align_faces(tensors, lm, np.array([2, 1]), size=(28, 24))
    assert isinstance(crops, torch.Tensor) and crops.device.type == "cuda"
    assert isinstance(mats, torch.Tensor) and mats.device == crops.device  # the images' kind
    mats = mats.cpu().numpy()
    for f, k in enumerate([2, 1]):
        np.testing.assert_array_equal(crops[f].cpu().numpy(),
                                      cv2_warp(host[k], mats[f], (28, 24), "linear"))


@pytest.mark.gpu
@pytest.mark.parametrize("channels", [3, 4])
def test_gpu_dense_uint8_offsets_past_int32(channels):
    """A dense uint8 image whose rows lie 2^31 bytes apart: its byte offsets do not fit the
    fast path's 32-bit arithmetic, so every pixel takes warp_linear / warp_nearest (64-bit
    offsets). Equal to cv2 for nearest and linear, constant and replicate borders."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(27)
    host = random_image(rng, (1, 2, 8, channels), np.uint8)
    row = 2**31
    base = cupy.zeros(row + 64, cupy.uint8)
    base[:8 * channels] = cupy.asarray(host[0, 0].ravel())
    base[row:row + 8 * channels] = cupy.asarray(host[0, 1].ravel())
    src = cupy.lib.stride_tricks.as_strided(base, (1, 2, 8, channels), (row + 64, row, channels, 1))
    np.testing.assert_array_equal(src.get(), host)
    M = np.array([[[0.9, 0.2, 0.4], [-0.1, 0.8, 0.3]]])
    for interpolation in ("nearest", "linear"):
        for border in ("constant", "replicate"):
            out = cupy.full((1, 3, 9, channels), 7, cupy.uint8)
            res = G.warp_affine(src, M, (3, 9), interpolation=interpolation, border_mode=border,
                                border_value=99, out=out)
            np.testing.assert_array_equal(res.get()[0], cv2_warp(host[0], M[0], (3, 9), interpolation,
                                                                 border, 99))
    del base, src


def cv2compat_warps(side):
    """cv2compat's warps take cv2's flags (every interpolation, with and without
    WARP_INVERSE_MAP) and border constants, and give cv2's results."""
    from cupyprep import cv2compat

    rng = np.random.default_rng(30)
    img = random_image(rng, (20, 25, 3), np.uint8)
    M, H = rotation(rng, 20, 25), homography(rng, 20, 25)
    src = side.put(img)
    for interpolation, flag in FLAGS.items():
        for inverse in (0, cv2.WARP_INVERSE_MAP):
            for border in BORDERS.values():
                for fn, ref_fn, m in ((cv2compat.warpAffine, cv2.warpAffine, M),
                                      (cv2compat.warpPerspective, cv2.warpPerspective, H)):
                    got = side.get(fn(src, m, (30, 18), flags=flag | inverse, borderMode=border,
                                      borderValue=(1, 2, 3)))
                    ref = ref_fn(img, m, (30, 18), flags=flag | inverse, borderMode=border,
                                 borderValue=(1, 2, 3))
                    assert_matches_opencv(got, ref, interpolation, np.uint8)
    assert cv2compat.WARP_INVERSE_MAP == cv2.WARP_INVERSE_MAP
    for name, value in BORDERS.items():
        assert getattr(cv2compat, {"reflect101": "BORDER_REFLECT_101"}.get(name, "BORDER_" + name.upper())) == value
    for name, value in FLAGS.items():
        assert getattr(cv2compat, "INTER_" + name.upper()) == value


def test_cpu_cv2compat_warps_match_cv2():
    from conftest import KernelSide

    cv2compat_warps(KernelSide("cpu"))


def test_kernel_cv2compat_warps_match_cv2(kernels):
    cv2compat_warps(kernels)


@pytest.mark.parametrize("kwargs, words", [
    (dict(flags=cv2.INTER_AREA), ["flags", "INTER_NEAREST, INTER_LINEAR or INTER_CUBIC", str(cv2.INTER_AREA)]),
    (dict(flags=cv2.INTER_LANCZOS4 | cv2.WARP_INVERSE_MAP), ["flags", str(cv2.INTER_LANCZOS4 | cv2.WARP_INVERSE_MAP)]),
    (dict(borderMode=cv2.BORDER_TRANSPARENT), ["borderMode", "BORDER_WRAP", str(cv2.BORDER_TRANSPARENT)]),
    (dict(borderMode=99), ["borderMode", "99"]),
])
def test_cv2compat_warp_flag_errors(kwargs, words):
    from cupyprep import cv2compat

    img = np.zeros((6, 7, 3), np.uint8)
    for fn, m in ((cv2compat.warpAffine, np.eye(3)[:2]), (cv2compat.warpPerspective, np.eye(3))):
        with pytest.raises(ValueError) as info:
            fn(img, m, (5, 4), **kwargs)
        for w in words:
            assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize("value", [255, 9.5, (4,), [1, 2]])
def test_cv2compat_border_value_is_a_scalar_like_cv2(value):
    """cv2 makes borderValue an OpenCV Scalar: a number v is (v, 0, 0, 0), so it sets only
    the first channel's border."""
    from cupyprep import cv2compat

    img = random_image(np.random.default_rng(31), (6, 7, 3), np.uint8)
    M = np.float32([[1, 0, 3.5], [0, 1, -2.25]])
    for src in (img, img[..., 0]):
        np.testing.assert_array_equal(cv2compat.warpAffine(src, M, (9, 8), borderValue=value),
                                      cv2.warpAffine(src, M, (9, 8), borderValue=value))


# --- the staged kernel (WarpSpec.staged: uint8 linear, 3 or 4 channels, constant) -----
STAGED = "cupyprep_warp_affine_linear_staged<unsigned char, {c}, {listed}, " + str(warp_spec.SPEC.staged_blocks) + ">"


def staged_matrices(rng, h, w):
    """Source-to-destination matrices that send the staged kernel down each of its paths:
    rotations at scales where a 64-square tile's box fits (0.9, 1.6), where its quarters'
    do (0.5), where only sixteenths' do (0.2) and where none does (0.04: pixel by pixel), a
    shear with a flip, a translation by fractions and one far outside (every tile filled)."""
    mats = []
    for scale in (0.9, 1.6, 0.5, 0.2, 0.04):
        M = cv2.getRotationMatrix2D((w / 2 + rng.uniform(-2, 2), h / 2 + rng.uniform(-2, 2)),
                                    rng.uniform(-180, 180), scale)
        M[:, 2] += rng.uniform(-3, 3, 2)
        mats.append(M)
    mats.append(np.array([[-1.1, 0.4, w + 0.3], [0.25, 0.95, -1.7]]))
    mats.append(np.array([[1.0, 0.0, 0.37], [0.0, 1.0, -0.61]]))
    mats.append(np.array([[1.0, 0.0, 5.0 * w], [0.0, 1.0, 0.0]]))
    return np.stack(mats)


def address(a):
    """The first byte's address of a NumPy (emulated) or CuPy array."""
    return a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]


@pytest.mark.parametrize("channels", [3, 4])
def test_kernel_staged_matches_cv2(kernels, monkeypatch, warp_variants, channels):
    """The staged kernel equals cv2.warpAffine bit for bit: sources smaller and larger than
    a tile (1 x 4 to 130 x 144), of rows that are 16-byte multiples (144 pixels, aligned as
    W5's sources are) and not, outputs of one pixel, of odd widths (past
    OpenCV's 16-pixel SIMD body, where its scalar tail's formula applies), of several tiles,
    and of rows that are 16-byte multiples (where filled tiles, and whole tiles' rows through
    shared memory, go as 16-byte stores; with a source larger than the output, tiles whose
    box lies inside the image too), every
    path of the kernel (staged_matrices), border values 0, 9 and one per channel; outputs
    poisoned, one matrix per image."""
    tune(monkeypatch, warp_spec, staged=True)
    rng = np.random.default_rng(150 + channels)
    shapes = [((67, 132), (70, 131)), ((67, 144), (70, 131)), ((130, 68), (129, 140)),
              ((5, 4), (9, 7)), ((1, 4), (1, 1)), ((2, 8), (3, 70)), ((60, 68), (96, 128)),
              ((140, 144), (128, 128))]
    for (h, w), size in shapes:
        Ms = staged_matrices(rng, h, w)
        host = random_image(rng, (len(Ms), h, w, channels), np.uint8)
        src = kernels.put(host)
        if w == 144:  # rows of 432 or 576 bytes, starting on 16 bytes as W5's do
            assert address(src) % 16 == 0
        for value in (0, 9, tuple(range(200, 200 + channels))):
            out = kernels.poisoned((len(Ms),) + size + (channels,), np.uint8)
            if size[1] == 128:  # rows of 384 or 512 bytes: the 16-byte stores are taken
                assert address(out) % 16 == 0
            check_batch(kernels, src, host, Ms, size, "linear", "constant", value, out=out)
    # a window 137 pixels wide of rows that start on 16 bytes: for 4 channels the copy reads
    # a group of pixels as one 16-byte word (where a source's first byte and row stride are
    # multiples of 16), the group across the image's right edge redone pixel by pixel; for
    # 3 channels, word loads
    wide = random_image(rng, (len(Ms), 40, 144, channels), np.uint8)
    view = kernels.put(wide)[:, 3:, :137]
    assert address(view) % 16 == 0 and view.strides[1] % 16 == 0
    check_batch(kernels, view, wide[:, 3:, :137], staged_matrices(rng, 37, 137), (45, 150),
                "linear", "constant", (7, 8, 9, 10)[:channels])
    assert set(warp_variants) == {STAGED.format(c=channels, listed="false")}


@pytest.mark.parametrize("channels", [3, 4])
def test_kernel_staged_lists_and_views(kernels, monkeypatch, warp_variants, channels):
    """A list of word-aligned images of mixed sizes takes the staged kernel's list variant;
    windows of a wider batch give cv2's results too: for 4 channels through the staged
    kernel with word loads (rows of 52 bytes, not 16-byte multiples), for 3 channels
    through the dense kernel (rows of 39 bytes, or a start 3 bytes in: off a word); a
    4-channel output whose rows start off a word is written byte by byte, leaving the byte
    before it alone."""
    tune(monkeypatch, warp_spec, staged=True)
    rng = np.random.default_rng(160 + channels)
    hosts = [random_image(rng, (h, w, channels), np.uint8) for h, w in ((40, 36), (7, 4), (90, 100))]
    Ms = np.stack([staged_matrices(rng, *h.shape[:2])[k] for k, h in enumerate(hosts)])
    size = (33, 75)
    out = kernels.poisoned((len(hosts),) + size + (channels,), np.uint8)
    got = kernels.get(G.warp_affine([kernels.put(h) for h in hosts], Ms, size, border_value=5, out=out))
    for k, host in enumerate(hosts):
        np.testing.assert_array_equal(got[k], cv2_warp(host, Ms[k], size, "linear", "constant", 5))
    assert warp_variants == [STAGED.format(c=channels, listed="true")]
    wide = random_image(rng, (3, 21, 13, channels), np.uint8)  # row strides of 13 pixels
    Ms = staged_matrices(rng, 20, 12)[:3]
    check_batch(kernels, kernels.put(wide)[:, 1:, :12], wide[:, 1:, :12], Ms, (22, 19), "linear")
    check_batch(kernels, kernels.put(wide)[:, :, 1:], wide[:, :, 1:], Ms, (22, 19), "linear")
    # 4 channels: rows of 52 bytes (words, not 16-byte multiples); 3 channels: 39, and a
    # start 3 bytes in, both off a word
    dense = f"cupyprep_warp_affine_linear<unsigned char, 3, true, {warp_spec.SPEC.pixels('linear', np.uint8, 3)}, false>"
    expected = STAGED.format(c=channels, listed="false") if channels == 4 else dense
    assert warp_variants[1:] == [expected, expected]
    if channels == 4:
        host = random_image(rng, (3, 20, 12, 4), np.uint8)
        flat = kernels.poisoned((1 + 3 * 22 * 19 * 4,), np.uint8)
        out = flat[1:].reshape(3, 22, 19, 4)  # rows one byte off a word
        check_batch(kernels, kernels.put(host), host, Ms, (22, 19), "linear", out=out)
        assert kernels.get(flat)[0] == kernels.get(kernels.poisoned((1,), np.uint8))[0]


@pytest.mark.parametrize("group, single_waves, most_blocks", [
    (2, 1.0, None), (3, 0.5, None), (4, 0.0, None), (4, 1.5, None), (8, 0.25, None), (1, 1.0, 5),
    (2, 1.0, 1), (3, 0.25, 4), (8, 0.0, 3)])
def test_kernel_staged_splits_and_loops_over_tiles(kernels, monkeypatch, warp_variants, group,
                                                   single_waves, most_blocks):
    """The staged kernel's blocks make `group` tiles each in turn, then one each for the
    launch's last waves (here 2 multiprocessors' worth: 8 blocks): with 9 tiles an image, a
    block's tiles cross rows and images; and a grid smaller than the work (`most_blocks`)
    makes each block loop over several items, grouped and single. Tiles staged, filled and
    split, and the result is still cv2's."""
    tune(monkeypatch, warp_spec, staged=True, staged_group=group, staged_single_waves=single_waves)
    monkeypatch.setattr(_kernels, "multiprocessors", lambda: 2)  # the GPU's too
    launch = _warping.staged_launch
    launches = []

    def capped(dh, dw, n_out):
        grid, split = launch(dh, dw, n_out)
        launches.append((grid, int(split[0]), int(split[1])))
        return (grid if most_blocks is None else min(grid, most_blocks)), split

    monkeypatch.setattr(_warping, "staged_launch", capped)
    rng = np.random.default_rng(175)
    host = random_image(rng, (8, 67, 132, 3), np.uint8)
    Ms = staged_matrices(rng, 67, 132)
    check_batch(kernels, kernels.put(host), host, Ms, (129, 140), "linear", "constant", (7, 8, 9))
    assert warp_variants == [STAGED.format(c=3, listed="false")]
    # 72 tiles: singles at the end (a whole number of them after the grouped blocks)
    singles = min(72, math.ceil(single_waves * 2 * warp_spec.SPEC.staged_blocks))
    grouped = (72 - singles) // group
    assert launches == [(72 - (group - 1) * grouped, group, grouped)]


def test_kernel_staged_agrees_with_dense_on_any_matrix(kernels, monkeypatch, warp_variants):
    """Device matrices are not read on the host: non-finite and huge ones reach the kernel.
    The staged kernel gives the dense kernel's results for them (and for random ones), byte
    for byte: tiles with a NaN, an infinity or coordinates past 2^21 go pixel by pixel."""
    rng = np.random.default_rng(170)
    h, w = 30, 44
    host = random_image(rng, (8, h, w, 3), np.uint8)
    inv = rng.uniform(-2, 2, (8, 2, 3)) + np.array([[1.0, 0, 0], [0, 1.0, 0]])
    inv[0, 0, 1] = np.nan
    inv[1, 1, 2] = np.inf
    inv[2] = [[3e6, 0, 0], [0, 1, 0]]
    inv[3] = [[1, 0, -2.5e6], [0, 1, 0]]
    inv[4] = [[0.01, 0, 20], [0, 0.01, 10]]
    results = {}
    for staged in (True, False):
        tune(monkeypatch, warp_spec, staged=staged)
        out = kernels.poisoned((8, 37, 71, 3), np.uint8)
        mats = kernels.put(inv) if kernels.name == "gpu" else inv
        if kernels.name != "gpu":  # NumPy matrices are checked for finite values: go by hand
            monkeypatch.setattr(_warping, "check_matrices", lambda name, m, rows, count, call: m)
        results[staged] = kernels.get(G.warp_affine(kernels.put(host), mats, (37, 71),
                                                    inverse_map=True, out=out))
    np.testing.assert_array_equal(results[True], results[False])
    assert warp_variants[0] == STAGED.format(c=3, listed="false")
    assert warp_variants[1].startswith("cupyprep_warp_affine_linear<unsigned char, 3, true,")
