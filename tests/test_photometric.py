"""color_jitter and hsv_gain: the parameters drawn, the CPU backend against Ultralytics'
recipe (NumPy + OpenCV, bit for bit) and torchvision's functional ops (where torchvision
imports), and the kernels against the CPU backend with the same parameters."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import photo, torch_graphs_need_caching

import cupyprep
from cupyprep import cpu

cv2 = pytest.importorskip("cv2")
OPS = ("brightness", "contrast", "saturation", "hue")


def ultralytics_hsv(img, r):
    """Ultralytics' augment_hsv with the gains r given (OpenCV's own code: IPP off, which
    for these codes gives IPP's results too)."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        hue, sat, val = cv2.split(cv2.cvtColor(img, cv2.COLOR_BGR2HSV))
        x = np.arange(0, 256, dtype=r.dtype)
        lut_hue = ((x * r[0]) % 180).astype(np.uint8)
        lut_sat = np.clip(x * r[1], 0, 255).astype(np.uint8)
        lut_val = np.clip(x * r[2], 0, 255).astype(np.uint8)
        im_hsv = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
        return cv2.cvtColor(im_hsv, cv2.COLOR_HSV2BGR)
    finally:
        cv2.ipp.setUseIPP(before)


def photo_batch(n=3, h=37, w=70):
    """Crops of real photographs (odd sizes; 70 columns: a vector block and a tail)."""
    imgs = [photo("astronaut"), photo("coffee"), photo("chelsea")]
    return np.stack([imgs[i % 3][10 * i:10 * i + h, 5 * i:5 * i + w] for i in range(n)])


# --- hsv_gain: CPU backend ------------------------------------------------------------------
def test_cpu_hsv_gain_is_ultralytics():
    batch = photo_batch()
    out, gains = cupyprep.hsv_gain(batch, 0.5, 0.7, 0.4, seed=3)
    assert gains.shape == (3, 3) and gains.dtype == np.float64
    assert (np.abs(gains - 1) <= np.array([0.5, 0.7, 0.4])).all()
    assert out.shape == batch.shape and out.dtype == np.uint8
    for got, img, r in zip(out, batch, gains):
        np.testing.assert_array_equal(got, ultralytics_hsv(img, r))
    again, gains2 = cupyprep.hsv_gain(batch, 0.5, 0.7, 0.4, seed=3)
    np.testing.assert_array_equal(gains2, gains)  # the seed decides
    np.testing.assert_array_equal(again, out)
    _, other = cupyprep.hsv_gain(batch, 0.5, 0.7, 0.4, seed=4)
    assert not np.array_equal(other, gains)


def test_cpu_hsv_gain_zero_gains_round_trip_and_rgb():
    batch = photo_batch(2)
    out, gains = cupyprep.hsv_gain(batch, 0, 0, 0, seed=0)
    assert (gains == 1).all()
    for got, img in zip(out, batch):  # unit gains: OpenCV's HSV round trip, no more
        np.testing.assert_array_equal(got, ultralytics_hsv(img, np.ones(3)))
    rgb, g = cupyprep.hsv_gain(batch[..., ::-1], 0.3, 0.3, 0.3, order="rgb", seed=1)
    ref, g_bgr = cupyprep.hsv_gain(batch, 0.3, 0.3, 0.3, seed=1)
    np.testing.assert_array_equal(g, g_bgr)
    np.testing.assert_array_equal(rgb[..., ::-1], ref)


def test_hsv_gain_torch_cpu():
    torch = pytest.importorskip("torch")
    batch = photo_batch(2)
    out, gains = cupyprep.hsv_gain(torch.from_numpy(batch), seed=0)
    assert isinstance(out, torch.Tensor) and isinstance(gains, torch.Tensor)
    for got, img, r in zip(out.numpy(), batch, gains.numpy()):
        np.testing.assert_array_equal(got, ultralytics_hsv(img, r))


# --- color_jitter: CPU backend ------------------------------------------------------------------
def torchvision_jitter(img, factors, order, layout_hwc=True):
    """torchvision's functional ops on one HWC RGB image, in ``order``, with ``factors``."""
    tv = pytest.importorskip("torchvision.transforms.v2.functional")
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
    fns = (tv.adjust_brightness, tv.adjust_contrast, tv.adjust_saturation, tv.adjust_hue)
    for op in order:
        x = fns[op](x, float(factors[op]))
    return x.numpy().transpose(1, 2, 0)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("op, factor", [(0, 1.3), (0, 0.6), (1, 1.37), (1, 0.63), (2, 1.31), (2, 0.7),
                                        (3, 0.07), (3, -0.09), (3, 0.5)])
@pytest.mark.torchvision
def test_cpu_color_jitter_each_operation_is_torchvision(dtype, op, factor):
    """Each operation alone against torchvision's functional op. torchvision computes
    ``x f + y (1 - f)`` and its grayscale with ``add_(..., alpha=)``, which its CPU kernels
    fuse into multiply-adds; ours rounds each product: float32 within 1e-7, and a uint8 blend
    whose exact value is an integer (x - gray a multiple of 100 with f = 1.31, say) lands
    an ulp below it in one of the two and truncates to 1 apart (saturation only, and under
    3% of the pixels of these photographs)."""
    batch = photo_batch(4)
    x = batch if dtype == np.uint8 else (batch / np.float32(255)).astype(np.float32)
    factors = np.array([[1.0, 1.0, 1.0, 0.0]] * 4)
    factors[:, op] = factor
    order = np.array([[op] + [k for k in range(4) if k != op]] * 4)
    ours = cpu.color_jitter(x, factors, order, 1 << op, "rgb", True)
    for got, img in zip(ours, x):
        ref = torchvision_jitter(img, factors[0], [op])
        diff = np.abs(got.astype(np.float64) - ref)
        if dtype == np.uint8:
            assert diff.max() <= 1 and (diff > 0).mean() < 0.03
        else:
            assert diff.max() <= 1e-7


@pytest.mark.torchvision
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_cpu_color_jitter_follows_torchvision(dtype):
    """The CPU backend with its drawn parameters (four operations in a per-image order)
    against torchvision's functional ops in that order: the 1-apart pixels of a saturation
    step (above) go through the later steps, scaled by their factors (up to 1.4 each) and
    truncated again: uint8 within 3 on under 5% of pixels; float32 within 2e-6."""
    batch = photo_batch(4)
    x = batch if dtype == np.uint8 else (batch / np.float32(255)).astype(np.float32)
    out, params = cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, seed=7)
    assert params.factors.shape == (4, 4) and params.order.shape == (4, 4)
    assert (np.sort(params.order, axis=1) == np.arange(4)).all()
    assert len({tuple(o) for o in params.order}) > 1  # a permutation per image
    for got, img, f, o in zip(out, x, params.factors, params.order):
        ref = torchvision_jitter(img, f, o)
        diff = np.abs(got.astype(np.float64) - ref)
        if dtype == np.uint8:
            assert diff.max() <= 3 and (diff > 0).mean() < 0.05, (diff.max(), (diff > 0).mean())
        else:
            assert diff.max() <= 2e-6


def test_cpu_color_jitter_ranges_and_neutral_ops():
    batch = photo_batch(5)
    out, p = cupyprep.color_jitter(batch, brightness=(0.5, 0.6), hue=(-0.2, -0.1), seed=0)
    assert out.shape == batch.shape and out.dtype == np.uint8
    f = np.asarray(p.factors)
    assert ((f[:, 0] >= 0.5) & (f[:, 0] <= 0.6)).all() and ((f[:, 3] >= -0.2) & (f[:, 3] <= -0.1)).all()
    assert (f[:, 1] == 1).all() and (f[:, 2] == 1).all()  # contrast, saturation: off
    same, p0 = cupyprep.color_jitter(batch, seed=0)  # everything off: the image itself
    np.testing.assert_array_equal(same, batch)
    assert (p0.factors == np.array([1.0, 1.0, 1.0, 0.0])).all()
    nchw, _ = cupyprep.color_jitter(batch.transpose(0, 3, 1, 2), 0.3, 0.3, 0.3, 0.3, layout="NCHW", seed=2)
    nhwc, _ = cupyprep.color_jitter(batch, 0.3, 0.3, 0.3, 0.3, seed=2)
    np.testing.assert_array_equal(nchw.transpose(0, 2, 3, 1), nhwc)
    bgr, _ = cupyprep.color_jitter(batch[..., ::-1], 0.3, 0.3, 0.3, 0.3, order="bgr", seed=2)
    np.testing.assert_array_equal(bgr[..., ::-1], nhwc)


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint16)), TypeError, ["batch", "uint16"]),
        (lambda: cupyprep.color_jitter(np.zeros((4, 4, 3), np.uint8)), ValueError, ["batch", "4-D NHWC"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 4), np.uint8)), ValueError, ["batch", "3 channels", "got 4"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), layout="NCHW"), ValueError,
         ["batch", "'NCHW'", "got 4"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), brightness=-1), ValueError, ["brightness"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), contrast=(2, 1)), ValueError,
         ["contrast", "low <= high"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), hue=0.6), ValueError, ["hue", "0.5"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), saturation="a"), TypeError, ["saturation"]),
        (lambda: cupyprep.color_jitter([np.zeros((4, 4, 3), np.uint8)]), TypeError, ["batch", "list"]),
        (lambda: cupyprep.color_jitter(np.zeros((2, 4, 4, 3), np.uint8), order="hsv"), ValueError, ["order"]),
        (lambda: cupyprep.hsv_gain(np.zeros((2, 4, 4, 3), np.float32)), TypeError, ["batch", "float32"]),
        (lambda: cupyprep.hsv_gain(np.zeros((2, 4, 4, 3), np.uint8), hgain=-0.1), ValueError, ["hgain"]),
        (lambda: cupyprep.hsv_gain(np.zeros((2, 0, 4, 3), np.uint8)), ValueError, ["batch", "non-empty"]),
        (lambda: cupyprep.hsv_gain(np.zeros((2, 4, 4, 3), np.uint8), out=np.zeros((2, 4, 4, 3), np.float32)),
         ValueError, ["out", "dtype uint8"]),
    ],
)
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value)


# --- kernels against the CPU backend ----------------------------------------------------------
@pytest.fixture
def opencv_block(monkeypatch):
    """The kernels' HSV -> BGR vector block set to this machine's OpenCV's."""
    from conftest import tune

    from cupyprep._specs import color as color_spec

    tune(monkeypatch, color_spec, hsv_vector_block=cpu.opencv_hsv_block())


def test_kernel_hsv_gain(kernels, opencv_block):
    batch = photo_batch(3, 21, 131)
    out = kernels.poisoned(batch.shape, np.uint8)
    res, gains = cupyprep.hsv_gain(kernels.put(batch), 0.5, 0.7, 0.4, seed=5, out=out)
    assert res is out
    gains = kernels.get(gains)
    for got, img, r in zip(kernels.get(out), batch, gains):
        np.testing.assert_array_equal(got, ultralytics_hsv(img, r))
    # in place, a strided view (every other row, reversed), 1 x 1 and an empty batch
    view = kernels.put(batch)[:, ::-2]
    host = batch[:, ::-2]
    res, gains = cupyprep.hsv_gain(view, 0.9, 0.9, 0.9, seed=6, out=view)
    assert res is view
    for got, img, r in zip(kernels.get(view), host, kernels.get(gains)):
        np.testing.assert_array_equal(got, ultralytics_hsv(np.ascontiguousarray(img), r))
    one = batch[:1, :1, :1]
    res, gains = cupyprep.hsv_gain(kernels.put(one), 0.5, 0.5, 0.5, seed=1)
    np.testing.assert_array_equal(kernels.get(res)[0], ultralytics_hsv(one[0], kernels.get(gains)[0]))
    res, gains = cupyprep.hsv_gain(kernels.put(np.zeros((0, 4, 4, 3), np.uint8)), seed=1)
    assert kernels.get(res).shape == (0, 4, 4, 3) and kernels.get(gains).shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("bidx_order", ["rgb", "bgr"])
def test_kernel_color_jitter(kernels, dtype, bidx_order):
    """Given the parameters drawn, the kernels equal the CPU backend bit for bit: every
    operation (a per-image order: contrast's mean taken after the operations before it),
    NHWC and NCHW, a strided view, out=, 1 x 1, empty."""
    batch = photo_batch(8, 19, 23)
    x = batch if dtype == np.uint8 else (batch / np.float32(255)).astype(np.float32)
    for layout in ("NHWC", "NCHW"):
        arg = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        out = kernels.poisoned(arg.shape, dtype)
        res, p = cupyprep.color_jitter(kernels.put(arg), 0.5, 0.5, 0.5, 0.2, order=bidx_order,
                                       layout=layout, seed=11, out=out)
        assert res is out
        factors, order = kernels.get(p.factors), kernels.get(p.order)
        assert (np.sort(order, axis=1) == np.arange(4)).all()
        ref = cpu.color_jitter(arg, factors, order, 15, bidx_order, layout == "NHWC")
        np.testing.assert_array_equal(kernels.get(out), ref)
    view = x[:, ::2, ::-3]
    res, p = cupyprep.color_jitter(kernels.put(x)[:, ::2, ::-3], (0.2, 1.8), 0, (0.0, 2.0), 0.5, seed=3)
    ref = cpu.color_jitter(view, kernels.get(p.factors), kernels.get(p.order), 1 | 4 | 8, "rgb", True)
    np.testing.assert_array_equal(kernels.get(res), ref)
    one = x[:2, :1, :1]
    res, p = cupyprep.color_jitter(kernels.put(one), 0.5, 0.5, 0.5, 0.5, seed=4)
    ref = cpu.color_jitter(one, kernels.get(p.factors), kernels.get(p.order), 15, "rgb", True)
    np.testing.assert_array_equal(kernels.get(res), ref)
    res, p = cupyprep.color_jitter(kernels.put(x[:0]), 0.5, 0.5, 0.5, 0.5, seed=4)
    assert kernels.get(res).shape == (0,) + x.shape[1:] and kernels.get(p.factors).shape == (0, 4)


def test_kernel_parameters_from_uniforms(kernels, monkeypatch):
    """The parameter kernels turn given uniforms into the factors, the order (keys sorted,
    ties by index) and the gains the NumPy formulas give, bit for bit."""
    from cupyprep import _draw_plan

    u = np.random.default_rng(3).random((4, 8))
    u[1, 4:] = 0.5  # every key equal: the index order
    u[2, 4:] = (0.3, 0.1, 0.3, 0.1)
    u[3, 4:] = (0.9, 0.7, 0.2, 0.0)
    monkeypatch.setattr(_draw_plan, "uniforms", lambda call, shape, g, s, native: kernels.put(u[:, :shape[1]].copy()))
    batch = photo_batch(4, 9, 11)
    _, p = cupyprep.color_jitter(kernels.put(batch), (0.5, 1.5), 0, 0.3, (-0.2, 0.1))
    order = kernels.get(p.order)
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order[1:], [[0, 1, 2, 3], [1, 3, 0, 2], [3, 2, 1, 0]])
    np.testing.assert_array_equal(order[0], np.argsort(u[0, 4:], kind="stable"))
    factors = kernels.get(p.factors)
    expected = np.stack([u[:, 0] * 1.0 + 0.5, np.ones(4), u[:, 2] * (1.3 - 0.7) + 0.7,
                         u[:, 3] * (0.1 - -0.2) + -0.2], 1)
    np.testing.assert_array_equal(factors, expected)
    _, gains = cupyprep.hsv_gain(kernels.put(batch), 0.015, 0.7, 0.4)
    np.testing.assert_array_equal(kernels.get(gains), (u[:, :3] * 2.0 - 1.0) * [0.015, 0.7, 0.4] + 1.0)


@pytest.mark.gpu
def test_gpu_photometric_torch_and_graph_replay(torch_cuda, opencv_block):
    """torch CUDA tensors in, torch out, parameters drawn by a torch generator on the device;
    under a CUDA graph each replay draws new parameters, and each result equals the CPU
    backend's with the parameters of that replay."""
    torch = torch_cuda
    batch = photo_batch(4, 64, 96)
    x = torch.from_numpy(batch).cuda()
    gen = torch.Generator(device="cuda").manual_seed(0)
    out, p = cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, generator=gen)
    assert out.is_cuda and p.factors.is_cuda
    ref = cpu.color_jitter(batch, p.factors.cpu().numpy(), p.order.cpu().numpy(), 15, "rgb", True)
    np.testing.assert_array_equal(out.cpu().numpy(), ref)
    aug, gains = cupyprep.hsv_gain(x, generator=gen)
    for got, img, r in zip(aug.cpu().numpy(), batch, gains.cpu().numpy()):
        np.testing.assert_array_equal(got, ultralytics_hsv(img, r))
    torch_graphs_need_caching()
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(gen)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, generator=gen)  # warm-up outside the capture
        with torch.cuda.graph(graph, stream=s):
            g_out, g_p = cupyprep.color_jitter(x, 0.4, 0.4, 0.4, 0.1, generator=gen)
            h_out, h_gains = cupyprep.hsv_gain(x, generator=gen)
    seen = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        f, o = g_p.factors.cpu().numpy(), g_p.order.cpu().numpy()
        seen.append(f.copy())
        np.testing.assert_array_equal(g_out.cpu().numpy(), cpu.color_jitter(batch, f, o, 15, "rgb", True))
        for got, img, r in zip(h_out.cpu().numpy(), batch, h_gains.cpu().numpy()):
            np.testing.assert_array_equal(got, ultralytics_hsv(img, r))
    assert not np.array_equal(seen[0], seen[1])
