"""resize(antialias=True): torchvision's antialiased resize. The CPU backend against PyTorch's
own CPU kernels (what torchvision.transforms.v2.functional.resize calls), the kernels against
the CPU backend, and preprocess against torchvision's Resize + CenterCrop chain."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, photo, random_image

import cupyprep
from cupyprep import cpu

torch = pytest.importorskip("torch")

MODES = {"linear": "bilinear", "cubic": "bicubic"}
SIZES = [((23, 31), (9, 12)), ((23, 31), (40, 7)), ((17, 5), (17, 3)), ((6, 40), (2, 40)),
         ((1, 1), (3, 2)), ((9, 9), (1, 1)), ((64, 48), (64, 48))]


def torchvision_resize(img, size, mode):
    """torchvision.transforms.v2.functional.resize(antialias=True) of one HWC numpy image,
    as HWC numpy: torchvision itself where it imports, else its recipe (PyTorch's
    interpolate; uint8 natively, as torchvision runs it on an x86 CPU with AVX2, other
    integers through float32, rounded)."""
    t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)
    try:
        from torchvision.transforms.v2 import InterpolationMode
        from torchvision.transforms.v2 import functional as F

        res = F.resize(t, list(size), interpolation=InterpolationMode(MODES[mode]), antialias=True)
    except ImportError:
        if tuple(size) == tuple(t.shape[1:]):
            res = t
        else:
            x = t if t.dtype in (torch.uint8, torch.float32) else t.float()
            res = torch.nn.functional.interpolate(x[None], size=list(size), mode=MODES[mode],
                                                  align_corners=False, antialias=True)[0]
            if res.dtype != t.dtype:
                res = res.round() if t.dtype == torch.uint16 else res
                res = res.to(t.dtype)
    return res.permute(1, 2, 0).numpy()


# --- CPU backend (CI) ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("src,dst", SIZES)
def test_cpu_uint8_equals_torchvision(mode, src, dst):
    img = random_image(np.random.default_rng(0), src + (3,), np.uint8)
    res = cupyprep.resize(img, dst, interpolation=mode, antialias=True)
    np.testing.assert_array_equal(res, torchvision_resize(img, dst, mode))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("src,dst", SIZES)
def test_cpu_float32_matches_torchvision(mode, src, dst):
    img = random_image(np.random.default_rng(1), src + (2,), np.float32)
    res = cupyprep.resize(img, dst, interpolation=mode, antialias=True)
    # PyTorch's compiled float kernels may fuse a multiply-add the NumPy backend rounds
    # twice, in the weights and in the sums: a few float32 ulp of values in [-1, 2]
    assert_close(res, torchvision_resize(img, dst, mode), atol=2e-6, reason="PyTorch's FMA")


@pytest.mark.parametrize("mode", list(MODES))
def test_cpu_photograph(mode):
    img = photo()  # 512 x 512 x 3
    for dst in [(224, 224), (100, 333), (700, 130)]:
        np.testing.assert_array_equal(cupyprep.resize(img, dst, interpolation=mode, antialias=True),
                                      torchvision_resize(img, dst, mode))
        f = img.astype(np.float32) / 255
        assert_close(cupyprep.resize(f, dst, interpolation=mode, antialias=True),
                     torchvision_resize(f, dst, mode), atol=2e-6, reason="PyTorch's FMA")


def test_cpu_uint16_and_float16():
    """uint16 and float16 compute in float32 and round once: uint16 half to even (where
    torchvision truncates), float16 to nearest."""
    rng = np.random.default_rng(2)
    img = random_image(rng, (30, 41, 3), np.uint16)
    res = cupyprep.resize(img, (11, 13), antialias=True, interpolation="cubic")
    f = torchvision_resize(img.astype(np.float32), (11, 13), "cubic")
    np.testing.assert_array_equal(res, np.clip(np.rint(f), 0, 65535).astype(np.uint16))
    h = random_image(rng, (30, 41, 3), np.float16)
    res = cupyprep.resize(h, (11, 13), antialias=True)
    ref = torchvision_resize(h.astype(np.float32), (11, 13), "linear").astype(np.float16)
    assert_close(res, ref, np.float16)


def test_cpu_weights_hand_worked():
    """A 4 -> 2 linear shrink: scale 2, support 2. Output 0, centred at 1, reads sources
    [trunc(1 - 2 + 0.5), trunc(1 + 2 + 0.5)) = [0, 3), at (j - 1 + 0.5) / 2 = -0.25, 0.25,
    0.75: triangle weights 0.75, 0.75, 0.25, normalized 3/7, 3/7, 1/7; output 1, centred at
    3, reads [1, 4): 1/7, 3/7, 3/7."""
    start, count, w, _ = cpu.antialias.axis_table(4, 2, "linear", False)
    assert list(start) == [0, 1] and list(count) == [3, 3]
    np.testing.assert_allclose(w[0, :3], np.array([3, 3, 1]) / 7, rtol=1e-6)
    np.testing.assert_allclose(w[1, :3], np.array([1, 3, 3]) / 7, rtol=1e-6)
    row = np.array([[0.0, 7.0, 14.0, 21.0]], np.float32)[:, :, None]
    res = cupyprep.resize(row, (1, 2), antialias=True)
    np.testing.assert_allclose(res[0, :, 0], [3 / 7 * 7 + 1 / 7 * 14, 1 / 7 * 7 + 3 / 7 * 14 + 3 / 7 * 21],
                               rtol=1e-6)


def test_cpu_layouts_and_channels():
    rng = np.random.default_rng(3)
    batch = random_image(rng, (2, 19, 23, 3), np.uint8)
    res = cupyprep.resize(batch, (8, 10), antialias=True, layout="NHWC")
    for n in range(2):
        np.testing.assert_array_equal(res[n], torchvision_resize(batch[n], (8, 10), "linear"))
    nchw = cupyprep.resize(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)), (8, 10),
                           antialias=True, layout="NCHW")
    np.testing.assert_array_equal(nchw, res.transpose(0, 3, 1, 2))
    gray = cupyprep.resize(batch[0, :, :, 1], (8, 10), antialias=True)
    np.testing.assert_array_equal(gray, res[0, :, :, 1])
    wide = random_image(rng, (19, 23, 6), np.uint8)
    np.testing.assert_array_equal(cupyprep.resize(wide, (8, 10), antialias=True),
                                  torchvision_resize(wide, (8, 10), "linear"))
    empty = cupyprep.resize(batch[:0], (8, 10), antialias=True, layout="NHWC")
    assert empty.shape == (0, 8, 10, 3) and empty.dtype == np.uint8
    t = cupyprep.resize(torch.from_numpy(batch[0]), (8, 10), antialias=True)
    assert isinstance(t, torch.Tensor)
    np.testing.assert_array_equal(t.numpy(), res[0])


@pytest.mark.parametrize("kwargs,exc,words", [
    ({"interpolation": "nearest"}, ValueError, "antialias=True takes"),
    ({"interpolation": "area"}, ValueError, "antialias=True takes"),
    ({"antialias": 1}, TypeError, "antialias: expected True or False"),
])
def test_bad_input(kwargs, exc, words):
    kwargs = {"antialias": True, **kwargs}
    with pytest.raises(exc, match=words):
        cupyprep.resize(np.zeros((8, 8, 3), np.uint8), (4, 4), **kwargs)
    with pytest.raises(TypeError, match="img: expected dtype"):
        cupyprep.resize(np.zeros((8, 8, 3), np.int32), (4, 4), antialias=True)


# --- preprocess: torchvision's classification chain ----------------------------------------
def torchvision_chain(img, resize_size, crop):
    """Resize(resize_size, antialias=True) + CenterCrop(crop) on one HWC uint8 image."""
    h, w = img.shape[:2]
    if w <= h:
        size = (int(resize_size * h / w), resize_size)
    else:
        size = (resize_size, int(resize_size * w / h))
    r = torchvision_resize(img, size, "linear")
    top, left = round((size[0] - crop) / 2.0), round((size[1] - crop) / 2.0)
    return r[top:top + crop, left:left + crop]


def test_cpu_preprocess_equals_torchvision_chain():
    img = photo()[:300, :451]
    res, meta = cupyprep.preprocess(img[None], (224, 224), mode="center_crop", resize_size=256,
                                    antialias=True, dtype="uint8", scale=1.0, swap_rb=False,
                                    layout="NHWC")
    np.testing.assert_array_equal(res[0], torchvision_chain(img, 256, 224))
    assert tuple(meta.resized_size[0]) == (256, 384)
    mean, std = cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD
    norm, _ = cupyprep.preprocess(img, (224, 224), mode="center_crop", resize_size=256,
                                  antialias=True, mean=mean, std=std, swap_rb=False)
    ref = (torchvision_chain(img, 256, 224).astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)
    assert_close(norm[0], ref.transpose(2, 0, 1), atol=1e-6,
                 reason="x * (1/255) and * (1/std) against torchvision's / 255 and / std")
    with pytest.raises(ValueError, match="antialias=True takes"):
        cupyprep.preprocess(img, (224, 224), antialias=True, interpolation="area")


# --- kernels (emulated on the CPU in CI; on a GPU with -m gpu) ------------------------------
def check_kernel(kernels, img, size, mode="linear", layout="HWC"):
    ref = cpu.resize_antialias(img, size, mode, cupyprep._validate.image_layout("img", img, layout))
    out = kernels.poisoned(ref.shape, img.dtype)
    res = cupyprep.resize(kernels.put(img), size, interpolation=mode, antialias=True,
                          layout=layout, out=out)
    assert res is out
    # the kernels sum the same float32 products in the same order as the CPU backend
    assert_close(kernels.get(res), ref)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32])
def test_kernel_matches_cpu(kernels, dtype):
    rng = np.random.default_rng(4)
    img = random_image(rng, (2, 21, 30, 3), dtype)
    check_kernel(kernels, img, (8, 11), "linear", "NHWC")   # both axes shrink
    check_kernel(kernels, img, (21, 7), "cubic", "NHWC")    # x only
    check_kernel(kernels, img, (45, 30), "linear", "NHWC")  # y only, enlarged


@pytest.mark.parametrize("mode", list(MODES))
def test_kernel_odd_sizes_and_views(kernels, mode):
    rng = np.random.default_rng(5)
    for src, dst in SIZES:
        check_kernel(kernels, random_image(rng, src + (3,), np.uint8), dst, mode)
    base = random_image(rng, (30, 50, 4), np.uint8)
    view = base[3:28:2, 45:5:-3, :3]  # negative and uneven strides, read in place
    check_kernel(kernels, view, (5, 6), mode)
    check_kernel(kernels, np.ascontiguousarray(base.transpose(2, 0, 1)), (9, 13), mode, "CHW")
    check_kernel(kernels, base[:, :, 0], (9, 13), mode)
    check_kernel(kernels, random_image(rng, (11, 13, 6), np.float32), (5, 4), mode)
    check_kernel(kernels, random_image(rng, (0, 11, 13, 3), np.uint8), (5, 4), mode, "NHWC")


def test_kernel_photograph(kernels):
    img = photo()
    if kernels.name == "emulated":
        img = img[100:181, 200:301]  # fewer threads on the emulator, the same content
    check_kernel(kernels, img, (img.shape[0] * 7 // 16, img.shape[1] * 7 // 16), "linear")
    check_kernel(kernels, img, (img.shape[0] // 3, img.shape[1] // 2), "cubic")


def test_kernel_preprocess_chain(kernels):
    rng = np.random.default_rng(6)
    frames = [random_image(rng, (61, 83, 3), np.uint8), random_image(rng, (70, 50, 3), np.uint8)]
    kwargs = {"mode": "center_crop", "resize_size": 40, "antialias": True, "dtype": "uint8",
              "scale": 1.0, "swap_rb": False, "layout": "NHWC"}
    res, _ = cupyprep.preprocess([kernels.put(f) for f in frames], (32, 32), **kwargs)
    for n, f in enumerate(frames):
        np.testing.assert_array_equal(kernels.get(res)[n], torchvision_chain(f, 40, 32))
    batch = np.stack([frames[0], frames[0][::-1]])
    res, _ = cupyprep.preprocess(kernels.put(batch), (32, 32), **kwargs)
    ref, _ = cupyprep.preprocess(batch, (32, 32), **kwargs)
    np.testing.assert_array_equal(kernels.get(res), ref)


# --- against torchvision on the GPU ---------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("mode", list(MODES))
def test_gpu_matches_torchvision(torch_cuda, mode):
    """uint8: equal to torchvision on the CPU (PyTorch's fixed point). torchvision on a CUDA
    tensor computes in float32 and rounds: bilinear differs from the kernels by at most 1;
    bicubic more where the horizontal pass overshoots [0, 255], which PyTorch's CPU code
    clamps in its uint8 intermediate and its GPU code does not (torchvision's own CPU / GPU
    difference; measured on the CPU's float path: up to 23 on random images, 16 on
    photographs, mean under 0.21). Prints the measured max and mean difference."""
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision.transforms.v2 import InterpolationMode

    interp = InterpolationMode(MODES[mode])
    host = photo()
    img = torch_cuda.from_numpy(host).cuda()
    for dst in [(224, 224), (100, 333), (700, 130)]:
        ours = cupyprep.resize(img, dst, interpolation=mode, antialias=True)
        cpu_ref = torch.nn.functional.interpolate(
            torch.from_numpy(host).permute(2, 0, 1)[None], size=list(dst), mode=MODES[mode],
            align_corners=False, antialias=True)[0].permute(1, 2, 0)
        np.testing.assert_array_equal(ours.cpu().numpy(), cpu_ref.numpy())
        theirs = F.resize(img.permute(2, 0, 1), list(dst), interpolation=interp,
                          antialias=True).permute(1, 2, 0)
        diff = (ours.int() - theirs.int()).abs()
        print(f"{mode} {dst}: uint8 against torchvision on the GPU: max {int(diff.max())} "
              f"mean {float(diff.float().mean()):.5f}")
        if mode == "linear":
            assert int(diff.max()) <= 1
        f = img.float() / 255
        ours = cupyprep.resize(f, dst, interpolation=mode, antialias=True)
        theirs = F.resize(f.permute(2, 0, 1), list(dst), interpolation=interp,
                          antialias=True).permute(1, 2, 0)
        err = float((ours - theirs).abs().max())
        print(f"{mode} {dst}: float32 against torchvision on the GPU: max {err:.3g}")
        # torchvision's CUDA kernel computes its weights and sums them in another order:
        # measured 1.01e-5 for bicubic on an H200 (a 700-row downscale sums ~12 taps an axis
        # with weights up to 1.3 in magnitude), under 1e-5 for bilinear
        assert err <= (1e-5 if mode == "linear" else 2e-5)
