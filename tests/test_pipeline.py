"""Loader: every kind of source, batches equal to preprocess of the same frames, errors
raised in the consumer, shutdown with threads joined, backpressure; on a GPU the pinned,
asynchronous path over many batches (rotating staging buffers) and ragged batches."""
from __future__ import annotations

import _thread
import gc
import threading
import time

import numpy as np
import pytest

import cupyprep
from conftest import photo, random_image
from cupyprep.pipeline import Loader, LoaderMeta

cv2 = pytest.importorskip("cv2")

SIZE = (48, 64)


def frames_of(n, shape=(30, 40, 3), seed=0):
    rng = np.random.default_rng(seed)
    return [random_image(rng, shape, np.uint8) for _ in range(n)]


def ragged_frames(n, seed=0):
    rng = np.random.default_rng(seed)
    return [random_image(rng, (int(rng.integers(5, 60)), int(rng.integers(5, 60)), 3), np.uint8)
            for _ in range(n)]


def expected_batches(frames, batch_size, **options):
    return [cupyprep.preprocess(frames[i:i + batch_size], SIZE, **options)[0]
            for i in range(0, len(frames), batch_size)]


def collect(loader):
    with loader:
        return list(loader)


def assert_joined(threads, timeout=5.0):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        assert not t.is_alive(), f"thread {t.name} still running"


# --- sources (CPU backend, CI) ------------------------------------------------------------------
def test_numpy_frames_equal_preprocess_batch_by_batch():
    frames = frames_of(10)
    got = collect(Loader(frames, SIZE, batch_size=4, device="cpu", mode="letterbox", pad_value=0))
    want = expected_batches(frames, 4, mode="letterbox", pad_value=0)
    assert [b.shape[0] for b, _ in got] == [4, 4, 2]
    for (batch, meta), ref in zip(got, want):
        assert isinstance(batch, np.ndarray) and batch.dtype == np.float32
        np.testing.assert_array_equal(batch, ref)
        assert isinstance(meta, LoaderMeta) and meta.size == SIZE
    np.testing.assert_array_equal(got[1][1].index, [4, 5, 6, 7])


def test_nhwc_array_source_and_torch_cpu_output():
    torch = pytest.importorskip("torch")
    frames = np.stack(frames_of(6))
    got = collect(Loader(frames, SIZE, batch_size=3, device="cpu", output="torch", dtype="float16"))
    ref = expected_batches(list(frames), 3, dtype="float16")
    assert len(got) == len(ref) == 2
    for (batch, _), r in zip(got, ref):
        assert isinstance(batch, torch.Tensor) and batch.device.type == "cpu"
        np.testing.assert_array_equal(batch.numpy(), r)


def test_ragged_frames_take_the_list_path():
    frames = ragged_frames(7)
    got = collect(Loader(frames, SIZE, batch_size=3, device="cpu", layout="NHWC"))
    want = expected_batches(frames, 3, layout="NHWC")
    assert len(got) == len(want) == 3
    for (batch, meta), ref, start in zip(got, want, range(0, 7, 3)):
        np.testing.assert_array_equal(batch, ref)
        np.testing.assert_array_equal(meta.orig_size, [f.shape[:2] for f in frames[start:start + 3]])


@pytest.mark.parametrize("ext", [".png", ".jpg"])
def test_file_paths_decoded_in_the_pool(tmp_path, ext):
    paths = []
    for i, name in enumerate(["astronaut", "coffee", "chelsea", "rocket", "camera"]):
        img = photo(name)
        img = img if img.ndim == 2 else img[:, :, ::-1]
        p = tmp_path / f"{i}{ext}"
        assert cv2.imwrite(str(p), img[::4, ::4])
        paths.append(p)
    got = collect(Loader(paths, SIZE, batch_size=2, device="cpu", workers=3))
    decoded = [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in paths]
    want = expected_batches(decoded, 2)
    assert len(got) == len(want) == 3
    for (batch, meta), ref, start in zip(got, want, range(0, 5, 2)):
        np.testing.assert_array_equal(batch, ref)
        assert meta.items == tuple(str(p) for p in paths[start:start + 2])


def test_encoded_bytes_and_a_decode_function():
    frames = frames_of(3)
    blobs = [cv2.imencode(".png", f)[1].tobytes() for f in frames]
    got = collect(Loader(blobs, SIZE, batch_size=3, device="cpu"))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0][0], expected_batches(frames, 3)[0])
    # a decode function sees each element and may return (image, target)
    got = collect(Loader(range(3), SIZE, batch_size=3, device="cpu", decode=lambda i: (frames[i], f"label{i}")))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0][0], expected_batches(frames, 3)[0])
    assert got[0][1].targets == ("label0", "label1", "label2")


class FakeCapture:
    """What the Loader uses of cv2.VideoCapture: read() -> (ok, frame)."""

    def __init__(self, frames):
        self.frames = list(frames)
        self.reads = 0

    def isOpened(self):
        return True

    def read(self):
        self.reads += 1
        if not self.frames:
            return False, None
        return True, self.frames.pop(0)


def test_video_capture_like_source():
    frames = frames_of(5, (36, 64, 3))
    cap = FakeCapture(frames)
    got = collect(Loader(cap, SIZE, batch_size=2, device="cpu"))
    assert [b.shape[0] for b, _ in got] == [2, 2, 1]
    for (batch, _), ref in zip(got, expected_batches(frames, 2)):
        np.testing.assert_array_equal(batch, ref)
    assert cap.reads == 6  # five frames and the read that said the video ended


def test_torch_datasets():
    torch = pytest.importorskip("torch")
    frames = frames_of(5)

    class Photos(torch.utils.data.Dataset):
        def __init__(self):
            self.threads = set()

        def __len__(self):
            return len(frames)

        def __getitem__(self, i):
            self.threads.add(threading.current_thread().name)
            return torch.from_numpy(frames[i]), i * 10

    ds = Photos()
    got = collect(Loader(ds, SIZE, batch_size=2, device="cpu", workers=2))
    want = expected_batches(frames, 2)
    assert len(got) == len(want) == 3
    for (batch, meta), ref, start in zip(got, want, range(0, 5, 2)):
        np.testing.assert_array_equal(batch, ref)
        assert meta.targets == tuple(i * 10 for i in range(start, min(start + 2, 5)))
    # __getitem__ ran on this very dataset object, and only in the pool
    assert ds.threads and all(name.startswith("cupyprep-decode") for name in ds.threads)

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter({"image": f, "id": i} for i, f in enumerate(frames))

    got = collect(Loader(Stream(), SIZE, batch_size=5, device="cpu"))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0][0], expected_batches(frames, 5)[0])
    assert got[0][1].targets[3] == {"id": 3}


def test_drop_last_len_and_meta_maps_back():
    frames = frames_of(7, (40, 80, 3))
    loader = Loader(frames, (64, 64), batch_size=3, device="cpu", drop_last=True)
    assert len(loader) == 2
    got = collect(loader)
    assert len(got) == 2
    meta = got[0][1]
    # a box over the whole letterboxed image maps to the whole frame
    box = np.array([[[0.0, 16.0, 64.0, 48.0]]] * 3)
    np.testing.assert_allclose(meta.to_original(box)[:, 0], [[0, 0, 80, 40]] * 3)


def test_progress_bar():
    pytest.importorskip("tqdm")
    loader = Loader(frames_of(5), SIZE, batch_size=2, device="cpu", progress=True)
    collect(loader)
    assert loader._progress.n == 5


# --- arguments ---------------------------------------------------------------------------------
def test_exception_arguments():
    frames = frames_of(2)
    with pytest.raises(TypeError, match="not arguments of cupyprep.preprocess"):
        Loader(frames, SIZE, device="cpu", sizes=3)
    with pytest.raises(TypeError, match="out"):
        Loader(frames, SIZE, device="cpu", out=np.empty(3))
    with pytest.raises(ValueError, match="batch_size"):
        Loader(frames, SIZE, batch_size=0, device="cpu")
    with pytest.raises(ValueError, match="output"):
        Loader(frames, SIZE, device="cpu", output="cupy")
    with pytest.raises(ValueError, match="device"):
        Loader(frames, SIZE, device="tpu")
    with pytest.raises(TypeError, match="source"):
        Loader(3, SIZE, device="cpu")
    with pytest.raises(TypeError, match="single path in a list"):
        Loader("frame.png", SIZE, device="cpu")
    with pytest.raises(TypeError, match="size"):
        Loader(frames, 64, device="cpu")


def length(loader):
    with loader:
        return len(loader)


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: Loader(frames_of(2), SIZE, device="cpu", prefetch=0), ValueError,
         ["prefetch", "positive int", "got 0"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", prefetch=-3), ValueError,
         ["prefetch", "positive int", "got -3"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", workers=0), ValueError,
         ["workers", "positive int", "got 0"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", workers=1.5), ValueError,
         ["workers", "positive int", "got 1.5"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", copy_threads=-1), ValueError,
         ["copy_threads", "positive int", "got -1"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", decode="cv2.imread"), ValueError,
         ["decode", "'cpu', 'gpu', 'auto'", "or a callable", "'cv2.imread'"]),
        (lambda: Loader(frames_of(2), SIZE, device="cpu", decode=3), TypeError,
         ["decode", "a callable", "builtins.int"]),
        (lambda: collect(Loader([b"not an image"], SIZE, device="cpu")), ValueError,
         ["source element 0", "could not decode 12 bytes as an image"]),
        (lambda: length(Loader(iter(frames_of(2)), SIZE, device="cpu")), TypeError,
         ["len(Loader)", "a source with a length", "builtins.list_iterator"]),
    ],
)
def test_bad_arguments_name_the_argument(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# --- errors raised in the consumer ------------------------------------------------------------
def test_missing_file_raises_in_the_consumer_and_closes(tmp_path):
    good = tmp_path / "good.png"
    cv2.imwrite(str(good), frames_of(1)[0])
    loader = Loader([good, good, tmp_path / "missing.png", good], SIZE, batch_size=2, device="cpu")
    threads = loader.threads
    batch, _ = next(loader)
    assert batch.shape[0] == 2
    with pytest.raises(FileNotFoundError, match=r"source element 2.*missing\.png"):
        next(loader)
    assert_joined(threads + loader.threads)
    with pytest.raises(StopIteration):
        next(loader)


def test_bad_frames_name_the_element():
    with pytest.raises(TypeError, match="source element 1: expected uint8 or uint16"):
        collect(Loader([frames_of(1)[0], np.zeros((4, 4, 3), np.float32)], SIZE, batch_size=2, device="cpu"))
    with pytest.raises(ValueError, match="same dtype and channel count"):
        collect(Loader([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)], SIZE,
                       batch_size=2, device="cpu"))
    with pytest.raises(TypeError, match="source element 0"):
        collect(Loader([object()], SIZE, device="cpu"))


def test_worker_exception_from_a_dataset():
    torch = pytest.importorskip("torch")

    class Broken(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 4:
                raise KeyError("no such record")
            return np.zeros((8, 8, 3), np.uint8)

    loader = Loader(Broken(), SIZE, batch_size=2, device="cpu")
    with pytest.raises(KeyError, match="source element 4"):
        collect(loader)
    assert_joined(loader.threads)


def test_source_iteration_error_raises_in_the_consumer():
    def source():
        yield from frames_of(3)
        raise OSError("camera unplugged")

    with pytest.raises(OSError, match="camera unplugged"):
        collect(Loader(source(), SIZE, batch_size=2, device="cpu"))


# --- shutdown and backpressure -------------------------------------------------------------
def endless(counter, shape=(16, 16, 3)):
    frame = np.zeros(shape, np.uint8)
    while True:
        counter[0] += 1
        yield frame


def test_backpressure_bounds_reading_ahead():
    counter = [0]
    batch_size, prefetch = 4, 2
    with Loader(endless(counter), SIZE, batch_size=batch_size, prefetch=prefetch, device="cpu") as loader:
        next(loader)
        time.sleep(0.5)  # a slow consumer
        ahead = counter[0] - batch_size
        assert ahead <= (2 * prefetch + 1) * batch_size
        assert ahead >= prefetch * batch_size  # it did read ahead
        next(loader)
        time.sleep(0.3)
        assert counter[0] - 2 * batch_size <= (2 * prefetch + 1) * batch_size
    assert_joined(loader.threads)


def test_close_in_the_middle_joins_threads():
    counter = [0]
    loader = Loader(endless(counter), SIZE, batch_size=2, workers=3, device="cpu")
    for i, _ in enumerate(loader):
        if i == 2:
            break
    threads = loader.threads
    assert len(threads) >= 1 and threads[0].is_alive()
    loader.close()
    loader.close()  # idempotent
    assert_joined(threads)
    with pytest.raises(StopIteration):
        next(loader)


def test_garbage_collection_stops_the_threads():
    counter = [0]
    loader = Loader(endless(counter), SIZE, batch_size=2, device="cpu")
    next(loader)
    threads = loader.threads
    del loader
    gc.collect()
    assert_joined(threads)


def test_keyboard_interrupt_in_the_consumer_closes():
    def slow():
        for f in frames_of(1000, (8, 8, 3)):
            time.sleep(0.02)
            yield f

    loader = Loader(slow(), SIZE, batch_size=500, device="cpu")
    threads = loader.threads
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(loader)
    finally:
        timer.cancel()
    assert_joined(threads)


# --- GPU: pinned staging, copy / compute streams ----------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("output", ["torch", "cupy"])
def test_gpu_uniform_batches_equal_preprocess(output):
    torch = pytest.importorskip("torch")
    import cupy

    frames = [photo("astronaut")[::-1, :, ::-1].copy()] + frames_of(40, (512, 512, 3))  # many batches
    options = dict(mode="letterbox", mean=(0.1, 0.2, 0.3), std=(0.5, 0.6, 0.7))
    loader = Loader(frames, (320, 320), batch_size=4, device="cuda", output=output, prefetch=2, **options)
    with loader:
        got = [next(loader)]
        # staging buffers are page-locked host memory (read once per slot: the staging
        # thread may be setting up another slot meanwhile)
        mems = [s.host_mem for s in loader._pipe.slots]
        staging = [m for m in mems if m is not None]
        assert staging and all(isinstance(m, cupy.cuda.PinnedMemoryPointer) for m in staging)
        got += list(loader)
    assert len(got) == 11
    for i, (batch, meta) in enumerate(got):
        ref, _ = cupyprep.preprocess(torch.from_numpy(np.stack(frames[4 * i:4 * i + 4])).cuda(), (320, 320),
                                     **options)
        if output == "torch":
            assert isinstance(batch, torch.Tensor) and batch.is_cuda
            np.testing.assert_array_equal(batch.cpu().numpy(), ref.cpu().numpy())
        else:
            assert isinstance(batch, cupy.ndarray)
            np.testing.assert_array_equal(cupy.asnumpy(batch), ref.cpu().numpy())


@pytest.mark.gpu
def test_gpu_ragged_batches_equal_preprocess():
    torch = pytest.importorskip("torch")
    frames = ragged_frames(17, seed=3) + [photo("coffee")]
    got = collect(Loader(frames, SIZE, batch_size=6, device="cuda", output="torch", layout="NHWC",
                         dtype="float16"))
    assert len(got) == 3  # 18 frames in batches of 6
    for i, (batch, _) in enumerate(got):
        ref, _ = cupyprep.preprocess([torch.from_numpy(f).cuda() for f in frames[6 * i:6 * i + 6]], SIZE,
                                     layout="NHWC", dtype="float16")
        np.testing.assert_array_equal(batch.cpu().numpy(), ref.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("pinned", ["all", "some"])
def test_gpu_page_locked_frames_are_sent_directly(pinned):
    """Frames in page-locked memory (torch pin_memory tensors) skip the staging copy when a
    whole batch is page-locked; a batch mixing them with pageable frames is staged. Every
    batch equals preprocess of its frames, also while the source's tensors are dropped as
    soon as they are handed over (the Loader keeps them until their copy has finished)."""
    torch = pytest.importorskip("torch")
    from cupyprep import _staging

    rng = np.random.default_rng(5)
    frames = [rng.integers(0, 256, (300 + 7 * i, 400, 3), dtype=np.uint8) for i in range(4)] * 6

    def source():
        for i, f in enumerate(frames):
            t = torch.from_numpy(f)
            yield t.pin_memory() if (pinned == "all" or i % 2) else t

    seen = []
    original = _staging.page_locked

    def spy(frame):
        seen.append(original(frame))
        return seen[-1]

    _staging.page_locked = spy
    try:
        got = collect(Loader(source(), SIZE, batch_size=4, device="cuda", output="torch"))
    finally:
        _staging.page_locked = original
    if pinned == "all":  # every frame was checked and sent from where it was
        assert len(seen) == len(frames) and all(seen)
    else:  # each batch starts with a pageable frame, so every batch is staged
        assert seen and not any(seen)
    assert len(got) == len(frames) // 4
    for i, (batch, _) in enumerate(got):
        ref, _ = cupyprep.preprocess([torch.from_numpy(f).cuda() for f in frames[4 * i:4 * i + 4]], SIZE)
        np.testing.assert_array_equal(batch.cpu().numpy(), ref.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("consumer", ["torch", "cupy", "cupy_per_thread"])
def test_gpu_batches_are_ready_on_the_consumer_stream(consumer):
    """The consumer uses each batch on its own stream right away, after a long kernel there,
    and drops it while that stream is behind: batches must hold the values preprocess gives
    (no missing wait, no memory written again before the consumer's stream is done with
    it). Streams: a torch stream (torch output), a CuPy stream of its own and the thread's
    per-thread default stream (CuPy output)."""
    torch = pytest.importorskip("torch")
    import cupy

    frames = [np.full((256, 256, 3), i, np.uint8) for i in range(60)]
    if consumer == "torch":
        stream = torch.cuda.Stream()
        ctx, output = torch.cuda.stream(stream), "torch"
    else:
        stream = cupy.cuda.Stream.ptds if consumer == "cupy_per_thread" else cupy.cuda.Stream(non_blocking=True)
        ctx, output = stream, "cupy"
    maxima = []
    with ctx, torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr) if output == "cupy" else stream):
        for batch, meta in Loader(frames, (128, 128), batch_size=5, device="cuda", output=output,
                                  mode="stretch", scale=1.0, swap_rb=False):
            torch.cuda._sleep(2_000_000)  # keep the consumer stream behind the pipeline
            maxima.append(batch.amax(dim=(1, 2, 3)) if output == "torch" else batch.max(axis=(1, 2, 3)))
            del batch
    stream.synchronize()
    got = torch.cat(maxima).cpu().numpy() if output == "torch" else cupy.asnumpy(cupy.concatenate(maxima))
    np.testing.assert_array_equal(got, np.arange(60, dtype=np.float32))


@pytest.mark.gpu
def test_gpu_close_mid_run_and_errors():
    pytest.importorskip("torch")
    counter = [0]
    loader = Loader(endless(counter, (64, 64, 3)), SIZE, batch_size=8, device="cuda")
    next(loader)
    threads = loader.threads
    loader.close()
    assert_joined(threads)
    assert all(s.capacity == 0 for s in loader._pipe.slots)
    with pytest.raises(TypeError, match="source element 1"):
        collect(Loader([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 3), np.float32)], SIZE,
                       batch_size=2, device="cuda"))
