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
