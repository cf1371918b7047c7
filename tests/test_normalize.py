"""normalize: arithmetic against float64 NumPy, layouts, dtypes; kernels against the CPU
backend (the same float32 operation order, so equal bits)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cupyprep
from conftest import assert_close, photo, random_image
from cupyprep import cpu

IN_DTYPES = [np.uint8, np.uint16, np.float16, np.float32]
OUT_DTYPES = ["float32", "float16", "uint8"]


def reference64(img, mean, std, scale, swap_rb, channels_last, dtype):
    """The formula in float64, cast like the op: what the docstring promises."""
    x = img.astype(np.float64)
    if x.ndim == 2:
        x = x[:, :, None]
    if swap_rb and x.shape[-1] >= 3:
        x = x[..., [2, 1, 0] + list(range(3, x.shape[-1]))]
    y = (x * scale - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)
    if img.ndim == 2:
        y = y[:, :, 0]
    elif not channels_last:
        y = np.moveaxis(y, -1, -3)
    if np.dtype(dtype) == np.uint8:
        return np.clip(np.rint(y), 0, 255)
    return y


# --- CPU backend (CI) -----------------------------------------------------------------------
def test_cpu_hand_worked():
    img = np.array([[[10, 20, 30]]], np.uint8)  # one BGR pixel
    out = cupyprep.normalize(img, mean=(1, 2, 3), std=(2, 4, 8), scale=0.5, swap_rb=True)
    # RGB = (30, 20, 10); (30*0.5-1)/2 = 7, (20*0.5-2)/4 = 2, (10*0.5-3)/8 = 0.25
    np.testing.assert_array_equal(out, np.array([[[7.0]], [[2.0]], [[0.25]]], np.float32))
    assert out.shape == (3, 1, 1) and out.dtype == np.float32


# random statistics (std up to 2 at scale 1/255, [0, 1]-sized ones on uint16 at scale 0.5)
# are what the units check warns about; the arithmetic is what this test checks
@pytest.mark.filterwarnings("ignore::cupyprep.UnitsWarning")
@pytest.mark.parametrize("in_dtype", IN_DTYPES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("channels", [None, 1, 3, 4])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_cpu_against_float64(in_dtype, out_dtype, channels, layout):
    rng = np.random.default_rng(0)
    c = channels or 1
    img = random_image(rng, (2, 7, 9, c) if channels else (7, 9), in_dtype)
    scale = 1 / 255 if in_dtype == np.uint8 else 0.5
    mean = tuple(rng.uniform(-0.5, 0.5, c))
    std = tuple(rng.uniform(0.2, 2.0, c))
    if out_dtype == "uint8":  # a range where saturation and rounding both happen
        mean, std, scale = tuple(-v * 100 for v in mean), (0.5,) * c, 100.0 if in_dtype != np.uint8 else 1.5
    lay = ("N" + layout) if channels else layout
    res = cupyprep.normalize(img, mean, std, scale=scale, swap_rb=c >= 3, layout=lay, dtype=out_dtype)
    ref = reference64(img, mean, std, scale, c >= 3, layout == "HWC", out_dtype)
    assert res.dtype == np.dtype(out_dtype) and res.shape == ref.shape
    if out_dtype == "uint8":
        # round half to even, then saturate: exact, except within 1e-4 of a .5 tie, where
        # float32 arithmetic may land on the other side than float64 (values that round
        # into [0, 255] come from operands under 2^8: three roundings of at most 2^-16,
        # times 1 / std = 2, stay under 1e-4); there at most 1 apart
        y = reference64(img, mean, std, scale, c >= 3, layout == "HWC", "float32")
        tie = np.abs(y - np.floor(y) - 0.5) < 1e-4
        assert tie.mean() < 0.01  # the exemption leaves nearly every element checked exactly
        np.testing.assert_array_equal(res[~tie], ref[~tie])
        assert np.abs(res[tie].astype(np.int64) - ref[tie]).max(initial=0) <= 1
    else:
        # three float32 roundings (or one float16) relative to the largest magnitude
        rel = 1e-6 if out_dtype == "float32" else 2 ** -10
        assert_close(res, ref, atol=rel * max(1.0, np.abs(ref).max()),
                     reason="float32 (or float16) rounding vs float64")


def test_cpu_defaults_and_hw():
    img = random_image(np.random.default_rng(1), (5, 6, 3), np.uint8)
    np.testing.assert_array_equal(cupyprep.normalize(img), img.transpose(2, 0, 1).astype(np.float32))
    gray = img[:, :, 0]
    # an HW image stays HW: (x - 10) * (1 / 2), each step exact in float32
    res = cupyprep.normalize(gray, 10, 2)
    assert res.shape == (5, 6) and res.dtype == np.float32
    np.testing.assert_array_equal(res, (gray.astype(np.float32) - 10) / 2)


# uint8 output rounds half to even, then saturates (normalize's docstring). One row of four
# BGR pixels, swap_rb off, scale 0.5, each value exact in float32 (x * 0.5, small integer
# means, 1 / std of 1 and 4):
#   channel 0, mean 0, std 1:    x = 1, 3, 5, 7       -> 0.5, 1.5, 2.5, 3.5  -> 0, 2, 2, 4
#   channel 1, mean 3, std 1:    x = 0, 1, 11, 13     -> -3, -2.5, 2.5, 3.5  -> 0, 0, 2, 4
#   channel 2, mean 0, std 0.25: x = 127, 128, 150, 255 -> 254, 256, 300, 510 -> 254, 255, 255, 255
ROUNDING_IMG = np.array([[[1, 0, 127], [3, 1, 128], [5, 11, 150], [7, 13, 255]]], np.uint8)
ROUNDING_ARGS = dict(mean=(0, 3, 0), std=(1, 1, 0.25), scale=0.5, layout="HWC", dtype="uint8")
ROUNDING_OUT = np.array([[[0, 0, 254], [2, 0, 255], [2, 2, 255], [4, 4, 255]]], np.uint8)


def test_cpu_uint8_rounds_half_to_even_and_saturates():
    np.testing.assert_array_equal(cupyprep.normalize(ROUNDING_IMG, **ROUNDING_ARGS), ROUNDING_OUT)


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(mean=(1, 2)), ValueError, ["mean", "3"]),
        (dict(std=(1, 2, 3, 4)), ValueError, ["std", "3", "4"]),
        (dict(std=(1, 0, 1)), ValueError, ["std", "non-zero"]),
        (dict(mean="abc"), TypeError, ["mean"]),
        (dict(dtype="int32"), ValueError, ["dtype", "int32"]),
        (dict(dtype="float64"), ValueError, ["dtype"]),
        (dict(layout="CWH"), ValueError, ["layout"]),
        (dict(layout="NCHW"), ValueError, ["layout", "NCHW"]),
        (dict(img=np.zeros((4, 4, 5), np.uint8)), ValueError, ["img", "channels", "5"]),
        (dict(img=np.zeros((4, 4, 3), np.int8)), TypeError, ["img", "int8"]),
        (dict(img="image"), TypeError, ["img", "str"]),
        (dict(scale="1/255"), TypeError, ["scale"]),
        (dict(out=np.zeros((3, 4, 5), np.float32)), ValueError,
         ["out", "shape (3, 4, 4)", "dtype float32", "shape (3, 4, 5)"]),
        (dict(out=np.zeros((3, 4, 4), np.float16)), ValueError,
         ["out", "shape (3, 4, 4)", "dtype float32", "dtype float16"]),
        (dict(out=np.zeros((4, 4, 3), np.uint8), layout="HWC", dtype="float16"), ValueError,
         ["out", "shape (4, 4, 3)", "dtype float16", "dtype uint8"]),
        (dict(out=[[0.0]]), TypeError, ["out", "expected a numpy.ndarray", "builtins.list"]),
    ],
)
def test_bad_input(kwargs, exc, words):
    img = kwargs.pop("img", np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(exc) as info:
        cupyprep.normalize(img, **kwargs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# --- kernels ------------------------------------------------------------------------------
def check_kernel(kernels, img, mean, std, scale, swap_rb, layout, dtype):
    channels_last = layout in ("HWC", "NHWC")
    ref = cpu.normalize(img, mean, std, scale, swap_rb, channels_last, dtype)
    out = kernels.poisoned(ref.shape, dtype)
    res = cupyprep.normalize(kernels.put(img), mean, std, scale=scale, swap_rb=swap_rb,
                             layout=layout, dtype=dtype, out=out)
    assert res is out
    got = kernels.get(res)
    np.testing.assert_array_equal(got, ref)  # same float32 operations, same bits
    ref64 = reference64(img, mean, std, scale, swap_rb, channels_last, dtype)
    if np.dtype(dtype) == np.float32 and ref64.size:
        assert_close(got, ref64, atol=1e-6 * max(1.0, np.abs(ref64).max()),
                     reason="float32 vs float64 arithmetic")


@pytest.mark.parametrize("in_dtype", IN_DTYPES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_matches_cpu(kernels, in_dtype, out_dtype, channels):
    rng = np.random.default_rng(channels)
    img = random_image(rng, (2, 5, 7, channels), in_dtype)
    mean = tuple(rng.uniform(-0.5, 0.5, channels))
    std = tuple(rng.uniform(0.2, 2.0, channels))
    scale = 1 / 255 if out_dtype != "uint8" else 40.0
    for layout in ("NCHW", "NHWC"):
        check_kernel(kernels, img, mean, std, scale, channels >= 3, layout, out_dtype)


def test_kernel_uint8_rounds_half_to_even_and_saturates(kernels):
    out = kernels.poisoned(ROUNDING_OUT.shape, np.uint8)
    res = cupyprep.normalize(kernels.put(ROUNDING_IMG), out=out, **ROUNDING_ARGS)
    assert res is out
    np.testing.assert_array_equal(kernels.get(res), ROUNDING_OUT)


def test_kernel_shapes_and_views(kernels):
    rng = np.random.default_rng(9)
    check_kernel(kernels, random_image(rng, (1, 1, 3), np.uint8), (0.5,) * 3, (0.25,) * 3, 1 / 255, True, "CHW", "float32")
    check_kernel(kernels, random_image(rng, (1, 9), np.uint8), (3.0,), (2.0,), 1.0, False, "CHW", "float32")
    check_kernel(kernels, np.zeros((0, 4, 4, 3), np.uint8), (0.0,) * 3, (1.0,) * 3, 1.0, True, "NCHW", "float16")
    img = photo("astronaut")[::7, ::5]  # a strided view, read in place
    ref = cpu.normalize(img, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, 1 / 255, True, False, "float16")
    view = kernels.put(photo("astronaut"))[::7, ::5]
    got = cupyprep.normalize(view, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255,
                             swap_rb=True, dtype="float16")
    np.testing.assert_array_equal(kernels.get(got), ref)


@pytest.mark.parametrize("in_dtype", IN_DTYPES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_kernel_dense_and_pixel_paths(kernels, launched, monkeypatch, in_dtype, out_dtype, channels):
    """Images whose pixels are contiguous, into an output whose pixels are contiguous: the
    dense kernel (cupyprep_normalize_dense: pixels indexed within their image), in both
    layouts, for batches, single images, a batch's last images, an image starting one
    element into its buffer and an output starting one element into its buffer (NHWC
    pixels of 2 and 4 channels: one store each where aligned, element by element there).
    Otherwise (every other column; the channels reversed in place; an output with a gap
    after each row, NCHW, or pixel, NHWC): the pixel kernel. Both with the CPU backend's
    bits."""
    from cupyprep import _plans

    # every call chooses its kernel (no launch plan replays a repeated geometry)
    monkeypatch.setattr(sys.modules["cupyprep.normalize"], "_PLANS", _plans.PlanCache(maxsize=0))
    rng = np.random.default_rng(20 + channels)
    mean = tuple(rng.uniform(-0.5, 0.5, channels))
    std = tuple(rng.uniform(0.2, 2.0, channels))
    scale = 1 / 255 if out_dtype != "uint8" else 40.0
    swap = channels >= 3
    osz = np.dtype(out_dtype).itemsize

    def kinds():
        got = {e.split("<")[0] for f, e in launched if f == "normalize.cu"}
        launched.clear()
        return got

    def same(arg, img, layout):
        ref = cpu.normalize(img, mean, std, scale, swap, layout.endswith("HWC"), out_dtype)
        got = cupyprep.normalize(arg, mean, std, scale=scale, swap_rb=swap, layout=layout,
                                 dtype=out_dtype)
        np.testing.assert_array_equal(kernels.get(got), ref)

    pixels = {"cupyprep_normalize"}
    batch = random_image(rng, (3, 5, 7, channels), in_dtype)
    flat = np.zeros(1 + batch[0].size, in_dtype)
    flat[1:] = batch[0].ravel()
    for layout in ("NCHW", "NHWC"):
        dense = {"cupyprep_normalize_dense"}
        check_kernel(kernels, batch, mean, std, scale, swap, layout, out_dtype)
        assert kinds() == dense
        check_kernel(kernels, batch[0], mean, std, scale, swap, layout[1:], out_dtype)
        assert kinds() == dense
        same(kernels.put(batch)[1:], batch[1:], layout)
        assert kinds() == dense
        same(kernels.put(flat)[1:].reshape(batch[0].shape), batch[0], layout[1:])
        assert kinds() == dense
        same(kernels.put(batch)[:, :, ::2], batch[:, :, ::2], layout)
        assert kinds() == pixels
        if channels > 1:
            same(kernels.put(batch)[..., ::-1], batch[..., ::-1], layout)
            assert kinds() == pixels
        ref = cpu.normalize(batch, mean, std, scale, swap, layout == "NHWC", out_dtype)
        wide = kernels.poisoned(ref.shape[:-1] + (ref.shape[-1] + 16 // osz,), out_dtype)
        view = wide[..., :ref.shape[-1]]
        res = cupyprep.normalize(kernels.put(batch), mean, std, scale=scale, swap_rb=swap,
                                 layout=layout, dtype=out_dtype, out=view)
        assert res is view and kinds() == pixels
        got = kernels.get(wide)
        np.testing.assert_array_equal(got[..., :ref.shape[-1]], ref)
        gap = got[..., ref.shape[-1]:]
        np.testing.assert_array_equal(gap, kernels.get(kernels.poisoned(gap.shape, out_dtype)))
        # an output one element into its buffer: NHWC pixels of 2 or 4 channels are then
        # not aligned to their size and go element by element (one store each otherwise)
        buf = kernels.poisoned((1 + ref.size,), out_dtype)
        view = buf[1:].reshape(ref.shape)
        res = cupyprep.normalize(kernels.put(batch), mean, std, scale=scale, swap_rb=swap,
                                 layout=layout, dtype=out_dtype, out=view)
        assert res is view and kinds() == dense
        got = kernels.get(buf)
        np.testing.assert_array_equal(got[1:].reshape(ref.shape), ref)
        np.testing.assert_array_equal(got[:1], kernels.get(kernels.poisoned((1,), out_dtype)))


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_dense_kernel_steps_over_images_larger_than_its_grid(kernels, launched, monkeypatch, channels):
    """The dense kernel's threads step over an image by the grid's size: with the grid
    held to 2 blocks, 2 images of 61 x 53 pixels (7 steps, the last one partial) come out
    as the CPU backend's, in both layouts and every output dtype."""
    module = sys.modules["cupyprep.normalize"]  # the module (cupyprep.normalize is the op)

    def two_blocks(fn, n, h, w, args, block_x, block_y=1):
        fn((2, 1, n), (block_x, block_y, 1), args)

    monkeypatch.setattr(module, "launch_3d", two_blocks)
    rng = np.random.default_rng(30 + channels)
    batch = random_image(rng, (2, 61, 53, channels), np.uint8)
    mean = tuple(rng.uniform(0.2, 0.6, channels))
    std = tuple(rng.uniform(0.2, 0.3, channels))
    for layout in ("NCHW", "NHWC"):
        for dtype in ("float32", "float16", "uint8"):
            check_kernel(kernels, batch, mean, std, 1 / 255 if dtype != "uint8" else 40.0,
                         channels >= 3, layout, dtype)
            assert {e.split("<")[0] for f, e in launched if f == "normalize.cu"} == {
                "cupyprep_normalize_dense"}
            launched.clear()


def test_dense_kernel_takes_images_under_2_to_the_30_elements():
    """The dense kernel indexes an image's pixels in int32 and adds the grid's stride:
    images of 2^30 elements or more take the pixel kernel."""
    from cupyprep._validate import ImageGeometry

    dense = sys.modules["cupyprep.normalize"]._dense  # the module (cupyprep.normalize is the op)

    def fits(h, w, c):
        geo = ImageGeometry(2, c, h, w, (h * w * c, 1, w * c, c), True, True, True)
        out = ImageGeometry(2, c, h, w, (h * w * c, h * w, w, 1), True, True, False)
        return dense(geo, out, False)

    assert fits(1 << 14, 1 << 14, 3)  # 0.75 * 2^30 elements
    assert not fits(1 << 14, 1 << 14, 4)  # 2^30
    assert fits(1 << 14, (1 << 16) - 1, 1)


@pytest.mark.gpu
def test_gpu_torch_in_and_out(torch_cuda):
    torch = torch_cuda
    img = random_image(np.random.default_rng(3), (4, 32, 48, 3), np.uint8)
    t = torch.from_numpy(img).cuda()
    out = torch.empty((4, 3, 32, 48), dtype=torch.float16, device="cuda")
    res = cupyprep.normalize(t, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255,
                             swap_rb=True, layout="NCHW", dtype="float16", out=out)
    assert res is out and res.data_ptr() == out.data_ptr()
    ref = cpu.normalize(img, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, 1 / 255, True, False, "float16")
    np.testing.assert_array_equal(res.cpu().numpy(), ref)


# --- denormalize ------------------------------------------------------------------------------
DENORM_CASES = [  # normalize's arguments, and the layout it wrote
    dict(mean=cupyprep.IMAGENET_MEAN, std=cupyprep.IMAGENET_STD, scale=1 / 255, swap_rb=True, layout="CHW"),
    dict(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), swap_rb=False, layout="HWC"),
    dict(mean=0.5, std=0.25, scale=1 / 255, swap_rb=True, layout="NCHW"),
]


@pytest.mark.parametrize("case", DENORM_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cpu_denormalize_round_trip_is_exact(case, dtype):
    """A photograph (and a batch with an odd size, and 1 x 1) normalized and denormalized
    with the same arguments comes back unchanged, bit for bit: the normalized values stay
    below 2.7 in magnitude, so float16's rounding (2^-11 of that) times std / scale (at most
    58.4 here) moves a pixel by under 0.08, and float32's by far less, never to the next
    rounding midpoint of an integer."""
    img = photo("astronaut")[:37, :53]
    batch = np.stack([img, img[::-1, ::-1]])
    for x in (img, batch, img[:1, :1]):
        if case["layout"].startswith("N") and x.ndim == 3:
            x = x[None]
        y = cupyprep.normalize(x, dtype=dtype, **case)
        back = cupyprep.denormalize(y, **case)
        assert back.dtype == np.uint8 and back.shape == x.shape
        np.testing.assert_array_equal(back, x)


def test_cpu_denormalize_hand_worked_and_float_out():
    # normalized RGB (7, 2, 0.25) with mean (1, 2, 3), std (2, 4, 8), scale 0.5 is BGR (10, 20, 30)
    y = np.array([[[7.0]], [[2.0]], [[0.25]]], np.float32)
    args = dict(mean=(1, 2, 3), std=(2, 4, 8), scale=0.5, swap_rb=True)
    np.testing.assert_array_equal(cupyprep.denormalize(y, **args), np.array([[[10, 20, 30]]], np.uint8))
    f = cupyprep.denormalize(y, **args, dtype="float32")
    assert f.dtype == np.float32 and f.shape == (1, 1, 3)
    np.testing.assert_array_equal(f, np.array([[[10.0, 20.0, 30.0]]], np.float32))
    gray = cupyprep.denormalize(np.full((2, 3), 0.5, np.float32), 1.0, 2.0, scale=0.5)
    assert gray.shape == (2, 3) and (gray == 4).all()  # (0.5 * 2 + 1) / 0.5
    sat = cupyprep.denormalize(np.array([[[-9.0, 9.0, 0.3]]], np.float32), layout="HWC", scale=1 / 255)
    np.testing.assert_array_equal(sat, [[[0, 255, 76]]])  # saturated; 76.5 -> 76 (half to even)


def test_cpu_denormalize_torch():
    torch = pytest.importorskip("torch")
    img = photo("astronaut")[:20, :30]
    y = cupyprep.normalize(torch.from_numpy(img), cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255)
    back = cupyprep.denormalize(y, cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD, scale=1 / 255)
    assert isinstance(back, torch.Tensor)
    np.testing.assert_array_equal(back.numpy(), img)


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(layout="CWH"), ValueError, ["layout", "CWH"]),
        (dict(layout="NCHW"), ValueError, ["img", "'NCHW'", "4-D"]),
        (dict(std=(1, 0, 1)), ValueError, ["std", "non-zero"]),
        (dict(scale=0), ValueError, ["scale", "non-zero"]),
        (dict(mean=(1, 2)), ValueError, ["mean", "3"]),
        (dict(dtype="int8"), ValueError, ["dtype", "int8"]),
        (dict(img=np.zeros((5, 4, 4), np.float32)), ValueError, ["img", "1 to 4 channels", "got 5"]),
        (dict(img=np.zeros((3, 4, 4), np.float64)), TypeError, ["img", "float64"]),
        (dict(out=np.zeros((3, 4, 4), np.uint8)), ValueError, ["out", "shape (4, 4, 3)"]),
    ],
)
def test_denormalize_bad_input(kwargs, exc, words):
    args = dict(img=np.zeros((3, 4, 4), np.float32))
    args.update(kwargs)
    with pytest.raises(exc) as info:
        cupyprep.denormalize(args.pop("img"), **args)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("case", DENORM_CASES)
@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
def test_kernel_denormalize_matches_cpu(kernels, case, out_dtype):
    """The kernels (channel-first input read in place through strides) against the CPU
    backend: equal bits; and a poisoned out= is fully written."""
    rng = np.random.default_rng(3)
    shape = (2, 3, 9, 13) if case["layout"] in ("NCHW", "CHW") else (2, 9, 13, 3)
    y = rng.normal(0, 1.5, shape).astype(np.float32)
    if case["layout"] in ("CHW", "HWC"):
        y = y[0]
    with pytest.MonkeyPatch.context() as mp:  # the CPU backend's result, outside the emulator
        mp.setattr("cupyprep._kernels.emulating", lambda: False)
        ref = cupyprep.denormalize(y, **case, dtype=out_dtype)
    out = kernels.poisoned(ref.shape, out_dtype)
    assert cupyprep.denormalize(kernels.put(y), **case, dtype=out_dtype, out=out) is out
    np.testing.assert_array_equal(kernels.get(out), ref)


def test_kernel_denormalize_round_trip(kernels):
    img = photo("astronaut")[:31, :45]
    args = dict(mean=cupyprep.IMAGENET_MEAN, std=cupyprep.IMAGENET_STD, scale=1 / 255, swap_rb=True)
    y = cupyprep.normalize(kernels.put(img), **args)
    np.testing.assert_array_equal(kernels.get(cupyprep.denormalize(y, **args)), img)
    empty = kernels.put(np.zeros((0, 3, 4, 5), np.float32))
    assert kernels.get(cupyprep.denormalize(empty, layout="NCHW")).shape == (0, 4, 5, 3)


@pytest.mark.gpu
def test_gpu_denormalize_torch_round_trip(torch_cuda):
    """A torch CUDA batch through normalize (NCHW float16) and back: the frames, bit for bit."""
    torch = torch_cuda
    frames = np.stack([photo("astronaut")[:48, :64], photo("coffee")[:48, :64]])
    args = dict(mean=cupyprep.IMAGENET_MEAN, std=cupyprep.IMAGENET_STD, scale=1 / 255, swap_rb=True)
    y = cupyprep.normalize(torch.from_numpy(frames).cuda(), layout="NCHW", dtype="float16", **args)
    back = cupyprep.denormalize(y, layout="NCHW", **args)
    assert isinstance(back, torch.Tensor) and back.is_cuda and back.shape == (2, 48, 64, 3)
    np.testing.assert_array_equal(back.cpu().numpy(), frames)
    y2 = cupyprep.normalize(torch.from_numpy(frames[::-1].copy()).cuda(), layout="NCHW", dtype="float16", **args)
    again = cupyprep.denormalize(y2, layout="NCHW", **args)  # the stored plan, on a tensor
    np.testing.assert_array_equal(again.cpu().numpy(), frames[::-1])
    out = torch.full((2, 48, 64, 3), 7, dtype=torch.uint8, device="cuda")
    assert cupyprep.denormalize(y, layout="NCHW", out=out, **args) is out
    np.testing.assert_array_equal(out.cpu().numpy(), frames)
