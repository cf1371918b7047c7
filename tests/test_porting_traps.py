"""The traps a user porting OpenCV / torchvision / Ultralytics code falls into, each pinned
(docs/porting.md lists them)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import cupyprep
from conftest import photo

cv2 = pytest.importorskip("cv2")

FLAGS = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA,
         "cubic": cv2.INTER_CUBIC}


def set_ipp(enabled):
    """Set this thread's IPP switch; returns what it reads back (False in a build without
    IPP)."""
    cv2.ipp.setUseIPP(enabled)
    return cv2.ipp.useIPP()


@pytest.fixture
def ipp_restored():
    before = cv2.ipp.useIPP()
    yield
    cv2.ipp.setUseIPP(before)


def own_code(fn, *args, **kwargs):
    """``fn`` run with IPP off (OpenCV's own code), the setting put back."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        return fn(*args, **kwargs)
    finally:
        cv2.ipp.setUseIPP(before)


# --- 1. the CPU backend computes what the kernels compute: OpenCV's own code, IPP off --------
def _as(img, dtype):
    if dtype == np.uint16:
        return img.astype(np.uint16) * 257
    return img.astype(dtype) * (np.float32(1 / 255) if dtype == np.float32 else 1)


@pytest.mark.parametrize("dtype, mode", [(np.uint8, "cubic"), (np.uint16, "linear"),
                                         (np.float32, "linear"), (np.float32, "cubic")])
def test_cpu_resize_is_opencvs_own_code_whatever_the_ipp_setting(ipp_restored, dtype, mode):
    """Stock cv2 (IPP on, its default on x86) differs here from OpenCV's own code, which
    the kernels reproduce; the CPU backend gives OpenCV's own code's result under either
    setting and leaves the caller's setting as it was."""
    img = _as(photo("astronaut"), dtype)
    size = (300, 437)
    ref = own_code(cv2.resize, img, size[::-1], interpolation=FLAGS[mode])
    if set_ipp(True):  # a build with IPP: the case must be one where IPP differs
        assert (cv2.resize(img, size[::-1], interpolation=FLAGS[mode]) != ref).any()
    for setting in (True, False):
        before = set_ipp(setting)
        got = cupyprep.resize(img, size, interpolation=mode)
        assert cv2.ipp.useIPP() == before
        np.testing.assert_array_equal(got, ref)
        got = cupyprep.cv2compat.resize(img, size[::-1], interpolation=FLAGS[mode])
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype, mode", [(np.float32, "linear"), (np.float32, "cubic"), (np.uint16, "linear")])
def test_kernel_resize_equals_the_cpu_backend_with_ipp_on(kernels, ipp_restored, dtype, mode):
    """The same image as NumPy (the CPU backend) and on the kernel side: within
    test_resize.assert_matches_opencv's bound of each other (OpenCV's CPU-dependent FMA
    choice), which IPP's differences (~4e-5 of the range for float32, up to 3 for uint16)
    exceed."""
    from test_resize import assert_matches_opencv

    from cupyprep import _validate
    from cupyprep.cpu import resize as cpu_resize

    img = _as(photo("astronaut")[:200, :300], dtype)
    size = (121, 173)
    set_ipp(True)
    ref = cpu_resize(img, size, mode, _validate.image_layout("img", img, "HWC"))
    got = kernels.get(cupyprep.resize(kernels.put(img), size, interpolation=mode))
    assert_matches_opencv(got, ref, mode)


def test_cpu_preprocess_and_gray_are_opencvs_own_code(ipp_restored):
    img = photo("astronaut")
    set_ipp(True)
    batch, meta = cupyprep.preprocess(img, (320, 320), interpolation="cubic", scale=1.0,
                                      swap_rb=False, layout="NHWC", dtype="uint8")
    nh, nw = (int(v) for v in meta.resized_size[0])
    resized = own_code(cv2.resize, img, (nw, nh), interpolation=cv2.INTER_CUBIC)
    oy, ox = (int(v) for v in meta.offset[0])
    np.testing.assert_array_equal(batch[0, oy:oy + nh, ox:ox + nw], resized)
    f32 = img.astype(np.float32)
    ref = own_code(cv2.cvtColor, f32, cv2.COLOR_RGB2GRAY)
    np.testing.assert_array_equal(cupyprep.to_gray(f32, order="rgb"), ref)


def test_without_ipp_is_per_thread(ipp_restored):
    """The switch is per thread: while one thread runs with IPP off, another's stays on."""
    from cupyprep.cpu import without_ipp

    if not set_ipp(True):
        pytest.skip("OpenCV built without IPP")
    inside, seen = threading.Event(), threading.Event()
    other = []

    def look():
        inside.wait(10)
        other.append(cv2.ipp.useIPP())
        seen.set()

    t = threading.Thread(target=look)
    t.start()
    with without_ipp(cv2):
        assert not cv2.ipp.useIPP()
        inside.set()
        seen.wait(10)
    t.join()
    assert other == [True] and cv2.ipp.useIPP()


# --- 2. errors name the type the user passed ---------------------------------------------------
def _torch_cases(torch, device):
    def t(shape, dtype):
        return torch.zeros(shape, dtype=dtype, device=device)

    return [
        (lambda: cupyprep.preprocess(t((20, 30, 3), torch.int32), (16, 16)), TypeError,
         "images", "torch.int32"),
        (lambda: cupyprep.preprocess([t((20, 30, 3), torch.uint8), t((20, 30, 3), torch.float32)],
                                     (16, 16)), TypeError, "images[1]", "torch.float32"),
        (lambda: cupyprep.resize(t((20, 30, 3), torch.int32), (16, 16)), TypeError, "img",
         "torch.int32"),
        (lambda: cupyprep.normalize(t((20, 30, 3), torch.float64)), TypeError, "img", "torch.float64"),
        (lambda: cupyprep.normalize(t((2, 20, 30, 7), torch.uint8)), ValueError, "img", "torch.uint8"),
        (lambda: cupyprep.nms(t((3, 5), torch.float32), t((3,), torch.float32), 0.5), ValueError,
         "boxes", "torch.float32"),
        (lambda: cupyprep.nms(t((3, 4), torch.float32), t((4,), torch.float32), 0.5), ValueError,
         "scores", "torch.float32"),
        (lambda: cupyprep.decode_yolo(t((1, 10, 7), torch.float64)), TypeError, "pred", "torch.float64"),
    ]


def _check_named(call, exc, arg, dtype, device):
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(arg + ":"), msg
    assert "torch.Tensor" in msg and dtype in msg and f"on {device}" in msg, msg
    assert "numpy.ndarray" not in msg and "cupy.ndarray" not in msg, msg


@pytest.mark.parametrize("case", range(8))
def test_errors_name_torch_tensors(case):
    torch = pytest.importorskip("torch")
    _check_named(*_torch_cases(torch, "cpu")[case], "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(8))
def test_errors_name_torch_cuda_tensors(torch_cuda, case):
    _check_named(*_torch_cases(torch_cuda, "cuda:0")[case], "cuda:0")


def test_errors_still_name_numpy_arrays():
    with pytest.raises(TypeError, match=r"got numpy.ndarray of shape \(20, 30, 3\) and dtype int32"):
        cupyprep.preprocess(np.zeros((20, 30, 3), np.int32), (16, 16))


# --- 3. warmup() without a GPU says so ----------------------------------------------------------
def _warmup_error():
    with pytest.raises(cupyprep.GPUUnavailableError) as info:
        cupyprep.warmup("color")
    return str(info.value)


def test_warmup_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import cupy fails
    msg = _warmup_error()
    assert "needs a GPU" in msg and "CuPy is not installed" in msg, msg
    assert 'pip install "cupyprep[cuda13]"' in msg and '"cupyprep[cuda12]"' in msg, msg


def test_warmup_without_a_device_says_so(monkeypatch):
    cupy = pytest.importorskip("cupy")

    def no_device():
        raise cupy.cuda.runtime.CUDARuntimeError(100)  # cudaErrorNoDevice

    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", no_device)
    msg = _warmup_error()
    assert "needs a GPU: no CUDA device can be used" in msg and "cudaErrorNoDevice" in msg, msg
    assert 'pip install "cupyprep[cuda13]"' in msg, msg
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 0)
    assert "CUDA reports no device" in _warmup_error()


def test_warmup_on_this_machine_without_a_gpu():
    from conftest import cuda_available

    if cuda_available():
        pytest.skip("a CUDA device is present (test_kernels_compile warms up on it)")
    assert "needs a GPU" in _warmup_error()


def test_warmup_under_the_emulator_needs_no_gpu(monkeypatch):
    from cupyprep.testing import emulate

    monkeypatch.setitem(__import__("sys").modules, "cupy", None)
    with emulate():
        assert cupyprep.warmup("color") > 0


# --- 6. show() of an NHWC batch points to layout="NHWC" -----------------------------------------
def test_show_points_to_the_layout():
    nhwc = np.zeros((2, 16, 20, 3), np.float32)
    with pytest.raises(ValueError) as info:
        cupyprep.show(nhwc)
    msg = str(info.value)
    assert "layout='NHWC'" in msg and "axis 1" in msg and "got 16" in msg, msg
    assert cupyprep.show(nhwc, layout="NHWC").array.shape == (16, 2 * 20 + 4, 3)
    with pytest.raises(ValueError, match="pass layout='NCHW'"):
        cupyprep.show(nhwc.transpose(0, 3, 1, 2), layout="NHWC")
    with pytest.raises(ValueError, match="pass layout='NHWC'"):
        cupyprep.show(nhwc[0])  # one HWC image
    with pytest.raises(ValueError) as info:  # neither order fits: no hint
        cupyprep.show(np.zeros((2, 5, 6, 7), np.float32))
    assert "pass layout" not in str(info.value)


# --- 7. roi_align with NHWC features; nms thresholds ----------------------------------------------
def _roi_case():
    rng = np.random.default_rng(8)
    feat = rng.standard_normal((2, 5, 13, 17)).astype(np.float32)
    xy = rng.uniform(-3, 50, (9, 2))
    wh = rng.uniform(0.5, 30, (9, 2))
    rois = np.concatenate([rng.integers(0, 2, (9, 1)), xy, xy + wh], 1).astype(np.float32)
    return feat, rois


def test_cpu_roi_align_nhwc():
    feat, rois = _roi_case()
    ref = cupyprep.roi_align(feat, rois, (3, 4), 0.25, 2, aligned=True)
    nhwc = np.ascontiguousarray(feat.transpose(0, 2, 3, 1))
    got = cupyprep.roi_align(nhwc, rois, (3, 4), 0.25, 2, aligned=True, layout="NHWC")
    assert got.shape == (9, 3, 4, 5) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, ref.transpose(0, 2, 3, 1))
    with pytest.raises(ValueError, match=r"features: expected an \(N, H, W, C\) array \(layout='NHWC'\)"):
        cupyprep.roi_align(nhwc[0], rois, 2, layout="NHWC")
    with pytest.raises(ValueError, match="layout: expected one of"):
        cupyprep.roi_align(nhwc, rois, 2, layout="HWC")


def test_kernel_roi_align_nhwc(kernels, poisoned_outputs):
    feat, rois = _roi_case()
    ref = cupyprep.cpu.detection.roi_align(feat, rois, (3, 4), 0.25, 2, True).transpose(0, 2, 3, 1)
    nhwc = feat.transpose(0, 2, 3, 1)
    for features in (np.ascontiguousarray(nhwc), nhwc):  # dense and a strided view
        got = cupyprep.roi_align(kernels.put(features), kernels.put(rois), (3, 4), 0.25, 2, aligned=True,
                                 layout="NHWC")
        assert got.shape == (9, 3, 4, 5)
        np.testing.assert_array_equal(kernels.get(got), ref)


def _nms_case():
    rng = np.random.default_rng(3)
    c = rng.uniform(0, 60, (40, 2))
    s = rng.uniform(5, 25, (40, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], 1).astype(np.float32)
    scores = ((rng.permutation(40) + 1) / 41).astype(np.float32)
    return boxes, scores, (np.arange(40) % 3).astype(np.int64)


@pytest.mark.parametrize("call", ["nms", "batched_nms", "multiclass_nms"])
def test_nms_nan_threshold_raises(call):
    boxes, scores, idxs = _nms_case()
    fn = {"nms": lambda t: cupyprep.nms(boxes, scores, t),
          "batched_nms": lambda t: cupyprep.batched_nms(boxes, scores, idxs, t),
          "multiclass_nms": lambda t: cupyprep.multiclass_nms(boxes, scores, iou_threshold=t)}[call]
    for nan in (float("nan"), np.float32("nan")):
        with pytest.raises(ValueError, match="iou_threshold: expected a number .* got NaN"):
            fn(nan)


def _outside(side, boxes, scores, idxs):
    """nms / batched_nms / multiclass_nms at thresholds outside [0, 1], on ``side``."""
    put = side.put if side else np.asarray
    get = side.get if side else np.asarray
    b, s, i = put(boxes), put(scores), put(idxs)
    out = {}
    for thr in (1.0, 1.5, np.inf, -0.5, -np.inf):
        det = cupyprep.multiclass_nms(b, put(np.eye(3, dtype=np.float32)[idxs] * scores[:, None]),
                                      iou_threshold=thr, score_threshold=0.0, max_detections=40)
        out[thr] = (get(cupyprep.nms(b, s, thr)), get(cupyprep.batched_nms(b, s, i, thr)),
                    int(get(det.counts)[0]), get(det.indices)[0])
    return out


def test_cpu_nms_thresholds_outside_unit_interval():
    """As torchvision: IoU > threshold suppresses, whatever the threshold; at 1 or above
    nothing, below 0 everything but the best box of each category."""
    boxes, scores, idxs = _nms_case()
    order = np.argsort(-scores, kind="stable")
    best = [int(order[idxs[order] == c][0]) for c in range(3)]
    for thr, (keep, kept_b, count, kept_m) in _outside(None, boxes, scores, idxs).items():
        if thr >= 1:
            np.testing.assert_array_equal(keep, order)
            np.testing.assert_array_equal(kept_b, order)
            assert count == 40
        else:
            np.testing.assert_array_equal(keep, order[:1])
            np.testing.assert_array_equal(kept_b, sorted(best, key=lambda j: -scores[j]))
            assert count == 3 and sorted(kept_m[:3]) == sorted(best)


def test_kernel_nms_thresholds_outside_unit_interval(kernels):
    boxes, scores, idxs = _nms_case()
    ref = _outside(None, boxes, scores, idxs)
    got = _outside(kernels, boxes, scores, idxs)
    for thr in ref:
        for r, g in zip(ref[thr], got[thr]):
            np.testing.assert_array_equal(g, r)


# --- 4. decode_yolo reads YOLOv8 / YOLO11's channels-first output --------------------------------
def _yolo_heads(rng, classes, n, objectness):
    extra = 5 if objectness else 4
    rows = rng.random((2, n, extra + classes), dtype=np.float32)
    rows[..., :4] *= 64
    return rows, np.ascontiguousarray(rows.swapaxes(1, 2))


@pytest.mark.parametrize("objectness", [False, True])
def test_cpu_decode_yolo_layouts_agree(objectness):
    rows, channels = _yolo_heads(np.random.default_rng(4), 80, 300, objectness)
    ref_b, ref_s = cupyprep.decode_yolo(rows, objectness=objectness, layout="rows")
    assert ref_b.shape == (2, 300, 4) and ref_s.shape == (2, 300, 80)
    for pred, layout in ((rows, "auto"), (channels, "auto"), (channels, "channels"), (channels[0], "auto"),
                         (rows.swapaxes(1, 2), "channels")):
        b, s = cupyprep.decode_yolo(pred, objectness=objectness, layout=layout)
        one = pred.ndim == 2
        np.testing.assert_array_equal(b, ref_b[0] if one else ref_b)
        np.testing.assert_array_equal(s, ref_s[0] if one else ref_s)


def test_decode_yolo_auto_rule_and_errors():
    rng = np.random.default_rng(5)
    few = rng.random((1, 20, 85), dtype=np.float32)  # rows: 20 candidates of 80 classes
    b, _ = cupyprep.decode_yolo(few, layout="auto")
    assert b.shape == (1, 85, 4)  # fewer candidates than channels: auto reads channels first
    b, s = cupyprep.decode_yolo(few, layout="rows")
    assert b.shape == (1, 20, 4) and s.shape == (1, 20, 80)
    square = rng.random((1, 9, 9), dtype=np.float32)  # A == B: rows
    assert cupyprep.decode_yolo(square)[1].shape == (1, 9, 4)
    with pytest.raises(ValueError, match=r"pred: expected shape \(\.\.\., 5 \+ C, N\) with C >= 1"):
        cupyprep.decode_yolo(np.zeros((1, 5, 30), np.float32), layout="channels")
    with pytest.raises(ValueError, match="layout: expected one of"):
        cupyprep.decode_yolo(square, layout="NCHW")


def test_kernel_decode_yolo_layouts_agree(kernels, poisoned_outputs):
    rows, channels = _yolo_heads(np.random.default_rng(6), 3, 40, False)
    ref_b, ref_s = cupyprep.cpu.detection.decode_yolo(rows, False)
    for pred, layout in ((channels, "auto"), (channels, "channels"), (rows, "auto")):
        b, s = cupyprep.decode_yolo(kernels.put(pred), objectness=False, layout=layout)
        np.testing.assert_array_equal(kernels.get(b), ref_b)
        np.testing.assert_array_equal(kernels.get(s), ref_s)


# --- 5. mean / std units --------------------------------------------------------------------------
MMDET_MEAN, MMDET_STD = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)


def _units_warnings(fn):
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if issubclass(w.category, cupyprep.UnitsWarning)]


def test_units_0_255_statistics_at_scale_1_255_warn():
    img = photo("astronaut")[:40, :60]
    said = _units_warnings(lambda: cupyprep.preprocess(img, (32, 32), mean=MMDET_MEAN, std=MMDET_STD))
    assert len(said) == 1 and "scale=1.0" in said[0] and "preprocess's default" in said[0], said
    said = _units_warnings(lambda: cupyprep.normalize(img, MMDET_MEAN, MMDET_STD, scale=1 / 255))
    assert len(said) == 1 and "scale=1.0" in said[0], said
    said = _units_warnings(lambda: cupyprep.preprocess(img.astype(np.float32), (32, 32), std=MMDET_STD))
    assert len(said) == 1, said  # std alone, float pixels scaled by 1/255
    said = _units_warnings(lambda: cupyprep.show(np.zeros((1, 3, 8, 8), np.float32), mean=MMDET_MEAN,
                                                 std=MMDET_STD))
    assert len(said) == 1 and "show" in said[0], said


def test_units_0_1_statistics_on_integer_pixels_at_scale_1_warn():
    img = photo("astronaut")[:40, :60]
    mean, std = cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD
    said = _units_warnings(lambda: cupyprep.normalize(img, mean, std))
    assert len(said) == 1 and "scale=0.00392157 (1/255)" in said[0] and "normalize's default" in said[0], said
    said = _units_warnings(lambda: cupyprep.preprocess(img.astype(np.uint16), (32, 32), mean=mean, std=std,
                                                       scale=1.0))
    assert len(said) == 1 and "1/65535" in said[0], said


def test_units_that_agree_do_not_warn():
    img = photo("astronaut")[:40, :60]
    mean, std = cupyprep.IMAGENET_MEAN, cupyprep.IMAGENET_STD
    for fn in (lambda: cupyprep.preprocess(img, (32, 32), mean=MMDET_MEAN, std=MMDET_STD, scale=1.0),
               lambda: cupyprep.preprocess(img, (32, 32), mean=mean, std=std),
               lambda: cupyprep.preprocess(img, (32, 32)),
               lambda: cupyprep.normalize(img, mean, std, scale=1 / 255),
               lambda: cupyprep.normalize(img, MMDET_MEAN, MMDET_STD),
               lambda: cupyprep.normalize(img),
               lambda: cupyprep.normalize(img, 0.0, 1.0),  # the identity, spelled out
               lambda: cupyprep.normalize(img.astype(np.float32) / 255, mean, std),  # [0, 1] floats
               lambda: cupyprep.normalize(img.astype(np.float32), MMDET_MEAN, MMDET_STD)):
        assert _units_warnings(fn) == []


def test_units_warning_changes_no_result():
    img = photo("astronaut")[:40, :60]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cupyprep.UnitsWarning)
        got = cupyprep.normalize(img, MMDET_MEAN, MMDET_STD, scale=1 / 255)
    ref = (img.astype(np.float32) * np.float32(1 / 255) - np.float32(MMDET_MEAN)) * \
        (1 / np.asarray(MMDET_STD)).astype(np.float32)
    np.testing.assert_array_equal(got, np.moveaxis(ref, -1, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cupyprep.UnitsWarning)
        with pytest.raises(cupyprep.UnitsWarning):
            cupyprep.preprocess(img, (32, 32), mean=MMDET_MEAN, std=MMDET_STD)


# --- docs/porting.md's side-by-side snippets ---------------------------------------------------------
def _five_call_chain(frame, size=640):
    """The CPU chain docs/porting.md starts from (IPP off, as the CPU backend runs)."""
    h, w = frame.shape[:2]
    r = min(size / h, size / w)
    nh, nw = round(h * r), round(w * r)
    img = own_code(cv2.resize, frame, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, left = (size - nh) // 2, (size - nw) // 2
    img = cv2.copyMakeBorder(img, top, size - nh - top, left, size - nw - left, cv2.BORDER_CONSTANT,
                             value=(114, 114, 114))
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    x = img.astype(np.float32) / 255
    return x.transpose(2, 0, 1)[None]


@pytest.mark.parametrize("shape", [(512, 512), (300, 451), (451, 300), (61, 640)])
def test_porting_five_calls_are_one_preprocess(shape):
    frame = np.ascontiguousarray(photo("astronaut")[: shape[0], : shape[1], ::-1])  # BGR
    ref = _five_call_chain(frame)
    batch, _ = cupyprep.preprocess(frame, (640, 640))
    assert batch.shape == ref.shape == (1, 3, 640, 640)
    # the chain divides by 255, preprocess multiplies by float32(1 / 255): half the uint8
    # values land one float32 ulp apart (at most 2**-24 below 1)
    assert np.abs(batch - ref).max() <= 2.0 ** -24
    np.testing.assert_array_equal(np.rint(batch * 255), np.rint(ref * 255))


def _ultralytics_letterbox_geometry(h0, w0, H, W):
    """Ultralytics' LetterBox (auto=False, center=True): r, the resized size, and the left /
    top padding it gives copyMakeBorder."""
    r = min(H / h0, W / w0)
    nw, nh = round(w0 * r), round(h0 * r)
    dw, dh = (W - nw) / 2, (H - nh) / 2
    return r, (nh, nw), (round(dw - 0.1), round(dh - 0.1))


def _ultralytics_scale_boxes(net_hw, boxes, orig_hw, ratio_pad=None):
    """Ultralytics' scale_boxes: one gain for both axes, padding recomputed from it unless
    given (ratio_pad), then clipped."""
    if ratio_pad is None:
        gain = min(net_hw[0] / orig_hw[0], net_hw[1] / orig_hw[1])
        pad = (round((net_hw[1] - orig_hw[1] * gain) / 2 - 0.1), round((net_hw[0] - orig_hw[0] * gain) / 2 - 0.1))
    else:
        gain, pad = ratio_pad[0][0], ratio_pad[1]
    out = boxes.astype(np.float64) - [pad[0], pad[1], pad[0], pad[1]]
    out /= gain
    return np.clip(out, 0, [orig_hw[1], orig_hw[0], orig_hw[1], orig_hw[0]])


def test_porting_ultralytics_letterbox_and_scale_boxes():
    """preprocess places the image where LetterBox does; meta.to_original maps it back with
    the per-axis scale of the resize done, Ultralytics' scale_boxes with one gain: at most
    half a network pixel apart with LetterBox's own padding (its validation passes
    ratio_pad), under one where scale_boxes recomputes the padding (its prediction path),
    which then differs from LetterBox's by a pixel for some sizes."""
    rng = np.random.default_rng(9)
    H = W = 640
    worst_given = worst_recomputed = 0.0
    pad_differs = 0
    sizes = [(1000, 1333), (3603, 3998), (1080, 1920)] + [tuple(int(v) for v in rng.integers(50, 4000, 2))
                                                           for _ in range(300)]
    for h0, w0 in sizes:
        img = np.zeros((h0, w0, 3), np.uint8)
        from cupyprep.preprocess import plan

        nh, nw, oy, ox = plan(h0, w0, (H, W), "letterbox")
        r, resized, (left, top) = _ultralytics_letterbox_geometry(h0, w0, H, W)
        assert (nh, nw, oy, ox) == (*resized, top, left), (h0, w0)
        meta = cupyprep.PreprocessMeta(np.array([[h0, w0]]), np.array([[nh, nw]]), np.array([[oy, ox]]),
                                       (H, W))
        if (h0, w0) == (1000, 1333):
            _, real_meta = cupyprep.preprocess(img, (H, W))
            np.testing.assert_array_equal(real_meta.offset, meta.offset)
        net = np.array([[left, top, left + nw, top + nh], [left + nw / 2, top + nh / 3, left + nw, top + nh]])
        ours = meta.to_original(net[None])[0]
        np.testing.assert_allclose(ours[0], [0, 0, w0, h0], atol=1e-9)  # the image's corners, exactly
        given = _ultralytics_scale_boxes((H, W), net, (h0, w0), ((r, r), (left, top)))
        recomputed = _ultralytics_scale_boxes((H, W), net, (h0, w0))
        worst_given = max(worst_given, np.abs(ours - given).max() * r)
        worst_recomputed = max(worst_recomputed, np.abs(ours - recomputed).max() * r)
        pad_differs += not np.allclose(recomputed, given)
    assert worst_given <= 0.5 + 1e-9 and 0.1 < worst_recomputed < 1.0 and pad_differs > 0


@pytest.mark.gpu
def test_gpu_torch_roi_align_nhwc_and_decode_yolo_channels(torch_cuda):
    """The torch CUDA paths of two fixed traps: NHWC features (a permuted view) give
    (K, PH, PW, C) torch tensors equal to the CPU backend's; YOLOv8's (B, 84, N) head
    decodes as its transposed rows do."""
    torch = torch_cuda
    feat, rois = _roi_case()
    ref = cupyprep.roi_align(feat, rois, (3, 4), 0.25, 2, aligned=True).transpose(0, 2, 3, 1)
    nhwc = torch.from_numpy(feat).cuda().permute(0, 2, 3, 1)
    got = cupyprep.roi_align(nhwc, torch.from_numpy(rois).cuda(), (3, 4), 0.25, 2, aligned=True,
                             layout="NHWC")
    assert isinstance(got, torch.Tensor) and got.is_cuda and tuple(got.shape) == (9, 3, 4, 5)
    np.testing.assert_array_equal(got.cpu().numpy(), ref)
    head = torch.rand((2, 4 + 80, 300), device="cuda")
    b, s = cupyprep.decode_yolo(head, objectness=False)
    b_rows, s_rows = cupyprep.decode_yolo(head.transpose(1, 2), objectness=False, layout="rows")
    assert tuple(b.shape) == (2, 300, 4) and tuple(s.shape) == (2, 300, 80)
    assert torch.equal(b, b_rows) and torch.equal(s, s_rows)
    ref_b, ref_s = cupyprep.decode_yolo(head.cpu().numpy(), objectness=False)
    np.testing.assert_array_equal(b.cpu().numpy(), ref_b)
    np.testing.assert_array_equal(s.cpu().numpy(), ref_s)
