"""Loader faults: every kind of bad source element either raises an error naming its
position (and path) or, with ``on_error="skip"``, is left out and reported; no element is
lost, repeated or reordered (10,000 elements with faults planted at random); the threads
are gone after breaking out, ``close()``, a KeyboardInterrupt or garbage collection."""
from __future__ import annotations

import _thread
import gc
import threading
import time

import numpy as np
import pytest

import cupyprep
from cupyprep.pipeline import Loader, Skipped

cv2 = pytest.importorskip("cv2")

SIZE = (8, 8)


def frame(value=0, shape=(6, 5, 3), dtype=np.uint8):
    return np.full(shape, value, dtype)


def png_bytes(value=0, shape=(6, 5, 3)):
    return cv2.imencode(".png", frame(value, shape))[1].tobytes()


def loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("cupyprep-")]


def assert_no_loader_threads(before, timeout=5.0):
    """Every thread a Loader started has ended (``before``: those alive beforehand)."""
    deadline = time.monotonic() + timeout
    while True:
        extra = [t for t in loader_threads() if t not in before]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert not extra, f"threads still running: {[t.name for t in extra]}"


@pytest.fixture
def files(tmp_path):
    """A good image, a missing path, an empty file, a truncated PNG, a text file."""
    good = tmp_path / "good.png"
    good.write_bytes(png_bytes(7))
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(png_bytes(9, (40, 40, 3))[:60])
    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    return {"good": str(good), "missing": str(tmp_path / "missing.png"), "empty": str(empty),
            "truncated": str(truncated), "text": str(text), "directory": str(tmp_path)}


def run(source, **kw):
    kw.setdefault("batch_size", 2)
    with Loader(source, SIZE, device="cpu", **kw) as loader:
        batches = list(loader)
        return batches, loader.skipped


# --- one fault at a time: the error names the element -------------------------------------------
@pytest.mark.parametrize("kind, exc, words", [
    ("missing", FileNotFoundError, ["source element 1", "no such file", "missing.png"]),
    ("empty", ValueError, ["source element 1", "empty file (0 bytes)", "empty.png"]),
    ("truncated", ValueError, ["source element 1", "could not decode", "truncated.png", "60 bytes"]),
    ("text", ValueError, ["source element 1", "could not decode", "notes.jpg"]),
    ("directory", IsADirectoryError, ["source element 1", "the directory"]),
])
def test_bad_files_raise_naming_position_and_path(files, kind, exc, words):
    source = [files["good"], files[kind], files["good"]]
    with pytest.raises(exc) as info:
        run(source, batch_size=1)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("bad, exc, words", [
    (b"", ValueError, ["source element 3", "0 bytes"]),
    (b"\x89PNG garbage", ValueError, ["source element 3", "could not decode 12 bytes"]),
    (frame(dtype=np.float32), TypeError, ["source element 3", "uint8 or uint16", "float32"]),
    (frame(shape=(6, 5, 2)), ValueError, ["source element 3", "1, 3 or 4 channels"]),
    (frame(shape=(2, 6, 5, 3)), ValueError, ["source element 3", "HWC or HW"]),
    (frame(shape=(0, 5, 3)), ValueError, ["source element 3", "non-empty"]),
    (frame(shape=(6, 5, 4)), ValueError, ["source element 3", "frames of one batch differ",
                                          "same dtype and channel count"]),
    (frame(dtype=np.uint16), ValueError, ["source element 3", "frames of one batch differ"]),
    ("a-path-that-is-not-there.png", FileNotFoundError, ["source element 3", "no such file"]),
    (None, TypeError, ["source element 3", "a file path, encoded image bytes or an HWC array"]),
])
def test_bad_elements_of_an_iterable_raise_naming_the_position(bad, exc, words):
    source = [frame(), frame(), frame(), bad]  # the bad one is second in the second batch
    got = []
    with pytest.raises(exc) as info, Loader(source, SIZE, batch_size=2, device="cpu") as loader:
        for _, meta in loader:
            got.append(meta.index.tolist())
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert got == [[0, 1]]  # the batch before it was delivered


def test_an_exception_in_decode_names_the_element():
    def decode(i):
        if i == 5:
            raise KeyError("record 5 is gone")
        return frame(i)

    with pytest.raises(KeyError, match="source element 5.*record 5 is gone"):
        run(range(8), decode=decode)


def test_the_sources_own_error_comes_after_every_frame_read_before_it():
    def source():
        for i in range(7):
            yield frame(i)
        raise OSError("camera unplugged")

    got = []
    loader = Loader(source(), SIZE, batch_size=3, prefetch=2, device="cpu")
    with pytest.raises(OSError, match=r"source element 7 \(reading the source\): camera unplugged"), loader:
        for _, meta in loader:
            got.extend(meta.index.tolist())
    assert got == list(range(7))  # frames 0..6 all delivered, the partial batch included


def test_an_error_in_a_frame_that_needs_no_decoding_keeps_the_batches_before_it():
    """A bad array is found when it is read (no decode thread); the batches read before it
    still come first."""
    source = [frame(i) for i in range(9)] + [frame(dtype=np.float64)]
    got = []
    loader = Loader(source, SIZE, batch_size=2, prefetch=3, device="cpu")
    with pytest.raises(TypeError, match="source element 9"), loader:
        for _, meta in loader:
            got.extend(meta.index.tolist())
    assert got == list(range(8))


# --- on_error="skip" ---------------------------------------------------------------------------
def test_skip_leaves_out_and_reports_each_bad_element(files):
    source = [files["good"], files["missing"], png_bytes(1), files["empty"], b"", frame(2),
              frame(dtype=np.float32), frame(3), files["truncated"], frame(shape=(6, 5, 4))]
    batches, skipped = run(source, batch_size=3, on_error="skip")
    indexes = [m.index.tolist() for _, m in batches]
    assert indexes == [[0, 2], [5], [7]]
    reported = [s for _, m in batches for s in m.skipped]
    assert [s.index for s in reported] == [1, 3, 4, 6, 8]
    assert [s.index for s in skipped] == [1, 3, 4, 6, 8, 9]  # 9: in no batch's meta (none after it)
    assert all(isinstance(s, Skipped) for s in skipped)
    assert skipped[0].item == files["missing"] and "FileNotFoundError" in skipped[0].reason
    assert skipped[1].item == files["empty"] and "0 bytes" in skipped[1].reason
    assert skipped[2].item is None and "0 bytes" in skipped[2].reason
    assert "TypeError" in skipped[3].reason and "float32" in skipped[3].reason
    assert skipped[4].item == files["truncated"]
    assert "4 channel(s) of uint8" in skipped[5].reason and "have 3 channel(s)" in skipped[5].reason
    # what was kept equals preprocess of the kept frames
    np.testing.assert_array_equal(batches[1][0], cupyprep.preprocess([frame(2)], SIZE)[0])


def test_skip_all_of_a_batch_reports_it_with_the_next():
    source = [frame(0), frame(1), b"", b"", frame(4), frame(5)]
    batches, skipped = run(source, batch_size=2, on_error="skip")
    assert [m.index.tolist() for _, m in batches] == [[0, 1], [4, 5]]
    assert [s.index for s in batches[1][1].skipped] == [2, 3]
    assert [s.index for s in skipped] == [2, 3]


def test_skip_keeps_the_frames_most_of_a_batch_share():
    """The first batch's most common dtype and channel count wins (not its first frame's),
    and holds for the batches after it."""
    source = [frame(shape=(6, 5, 1)), frame(), frame(), frame(shape=(6, 5, 1)), frame()]
    batches, skipped = run(source, batch_size=3, on_error="skip")
    assert [m.index.tolist() for _, m in batches] == [[1, 2], [4]]
    assert [s.index for s in skipped] == [0, 3]


def test_skip_still_raises_the_sources_own_error_and_bad_options():
    def source():
        yield frame()
        raise RuntimeError("stream broke")

    with pytest.raises(RuntimeError, match="source element 1.*stream broke"):
        run(source(), on_error="skip")
    with pytest.raises(ValueError, match="on_error: expected 'raise' or 'skip', got 'ignore'"):
        Loader([frame()], SIZE, device="cpu", on_error="ignore")


FAULTS = ("missing", "empty_file", "truncated", "empty_bytes", "garbage", "float", "channels",
          "four_d", "decode_error", "none")


def test_ten_thousand_elements_with_random_faults_are_all_accounted_for(tmp_path):
    """Every position comes out exactly once, in order: in a batch's ``index`` or in
    ``skipped`` (the faults planted are exactly the positions skipped)."""
    rng = np.random.default_rng(49)
    n = 10_000
    good_file = tmp_path / "good.png"
    good_file.write_bytes(png_bytes(3))
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "truncated.png").write_bytes(png_bytes(5, (30, 30, 3))[:50])
    good_blob = png_bytes(4)
    planted = {}
    elements = []
    for i in range(n):
        kind = FAULTS[rng.integers(len(FAULTS))] if rng.random() < 0.1 else None
        planted[i] = kind
        good = (frame(i % 251, (int(rng.integers(1, 9)), int(rng.integers(1, 9)), 3)),
                str(good_file), good_blob)[i % 3]
        elements.append({
            None: good, "missing": str(tmp_path / f"missing{i}.png"),
            "empty_file": str(tmp_path / "empty.png"), "truncated": str(tmp_path / "truncated.png"),
            "empty_bytes": b"", "garbage": bytes(rng.integers(0, 256, 40, dtype=np.uint8)),
            "float": frame(dtype=np.float32), "channels": frame(shape=(3, 3, 2)),
            "four_d": frame(shape=(1, 3, 3, 3)), "decode_error": "raise", "none": None,
        }[kind])

    def decode(element):
        if isinstance(element, str) and element == "raise":
            raise RuntimeError("decode failed")
        return element

    before = loader_threads()
    seen = []
    reported = []
    with Loader(elements, SIZE, batch_size=64, device="cpu", workers=2, decode=decode,
                on_error="skip") as loader:
        for batch, meta in loader:
            assert batch.shape[0] == len(meta.index) == len(meta.items)
            seen.extend(meta.index.tolist())
            reported.extend(s.index for s in meta.skipped)
        skipped = loader.skipped
    faults = [i for i in range(n) if planted[i] is not None]
    assert len(faults) > 800  # about 10%
    assert [s.index for s in skipped] == faults
    assert reported == [s.index for s in skipped if s.index < seen[-1]]
    assert seen == [i for i in range(n) if planted[i] is None]
    assert sorted(seen + faults) == list(range(n))
    assert_no_loader_threads(before)


# --- shutdown: threads released ------------------------------------------------------------
def endless(shape=(8, 8, 3)):
    f = np.zeros(shape, np.uint8)
    while True:
        yield f


def test_breaking_out_of_a_for_loop_releases_the_threads():
    before = loader_threads()
    for i, _ in enumerate(Loader(endless(), SIZE, batch_size=2, workers=3, device="cpu")):
        if i == 3:
            break
    gc.collect()
    assert_no_loader_threads(before)


def test_close_from_another_thread_while_the_consumer_waits():
    """close() while a batch is being made: the waiting consumer gets StopIteration."""
    release = threading.Event()

    def slow(i):
        release.wait(5)
        return frame(i)

    before = loader_threads()
    loader = Loader(range(100), SIZE, batch_size=4, decode=slow, device="cpu")
    closer = threading.Timer(0.2, loader.close)
    closer.start()
    try:
        with pytest.raises(StopIteration):
            next(loader)
    finally:
        release.set()
        closer.join()
    assert_no_loader_threads(before)


def test_close_mid_batch_with_decodes_in_flight():
    started = threading.Event()

    def slow(i):
        started.set()
        time.sleep(0.01)
        return frame(i % 200)

    before = loader_threads()
    loader = Loader(range(10_000), SIZE, batch_size=16, decode=slow, workers=4, device="cpu")
    next(loader)
    assert started.is_set()
    loader.close()
    assert_no_loader_threads(before)
    with pytest.raises(StopIteration):
        next(loader)


def test_keyboard_interrupt_releases_the_threads():
    def slow():
        for _ in range(1000):
            time.sleep(0.01)
            yield frame()

    before = loader_threads()
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in Loader(slow(), SIZE, batch_size=500, device="cpu"):
                pass
    finally:
        timer.cancel()
    gc.collect()
    assert_no_loader_threads(before)


def test_garbage_collection_of_a_running_loader_in_a_reference_cycle():
    before = loader_threads()
    loader = Loader(endless(), SIZE, batch_size=2, workers=2, device="cpu")
    next(loader)
    loader.cycle = loader  # only the cycle collector can free it
    del loader
    gc.collect()
    assert_no_loader_threads(before)


def test_a_loader_collected_in_one_of_its_own_threads_does_not_deadlock():
    """The last reference dropped in a decode thread: close() runs there and must not wait
    for that thread itself."""
    before = loader_threads()
    holder = {}

    def decode(i):
        if i == 20:
            holder.pop("loader", None)  # the consumer's reference is gone already
        return frame(i)

    loader = Loader(range(10_000), SIZE, batch_size=4, workers=1, decode=decode, device="cpu")
    next(loader)
    holder["loader"] = loader
    del loader
    assert_no_loader_threads(before, timeout=10)


# --- GPU: the same bookkeeping through pinned staging ----------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("output", ["torch", "cupy"])
def test_gpu_skip_accounts_for_every_element_and_frees_staging(output):
    import cupy

    if output == "torch":
        pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    elements, planted = [], []
    for i in range(600):
        bad = rng.random() < 0.15
        planted.append(bad)
        elements.append((b"", frame(dtype=np.float32), frame(shape=(5, 5, 4)))[i % 3] if bad
                        else frame(i % 251, (int(rng.integers(1, 40)), int(rng.integers(1, 40)), 3)))
    before = loader_threads()
    seen = []
    loader = Loader(elements, (32, 32), batch_size=16, device="cuda", output=output, on_error="skip")
    with loader:
        for batch, meta in loader:
            assert batch.shape[0] == len(meta.index)
            seen.extend(meta.index.tolist())
            # the batch's first row is preprocess of that frame alone, on the device
            want, _ = cupyprep.preprocess([cupy.asarray(elements[int(meta.index[0])])], (32, 32))
            got = batch[:1].cpu().numpy() if output == "torch" else batch[:1].get()
            np.testing.assert_array_equal(got, want.get())
    assert seen == [i for i in range(600) if not planted[i]]
    assert [s.index for s in loader.skipped] == [i for i in range(600) if planted[i]]
    assert all(s.capacity == 0 and s.host is None and s.dev is None for s in loader._pipe.slots)
    assert_no_loader_threads(before)
