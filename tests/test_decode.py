"""decode: every kind of source, the CPU backend equal to cv2.imdecode, the formats'
documented behaviour, errors that name the source (index and path), on_error="skip"
bookkeeping, the GPU orchestration (batching, fallback, order) and the Loader's
decode="gpu" with the GPU decoder replaced by a fake; on a GPU, nvImageCodec's pixels
against cv2.imdecode on photographs, stream ordering, torch's allocator and flat memory
over 10,000 images."""
from __future__ import annotations

import io
import os
import pathlib

import numpy as np
import pytest
from conftest import needs_pools, photo

import cupyprep
from cupyprep import DecodeError, DecodeFailure, _decoders
from cupyprep.cpu import decode as cpu_decode
from cupyprep.pipeline import Loader

cv2 = pytest.importorskip("cv2")

SIZE = (48, 64)
SAMPLINGS = {"444": "IMWRITE_JPEG_SAMPLING_FACTOR_444", "422": "IMWRITE_JPEG_SAMPLING_FACTOR_422",
             "420": "IMWRITE_JPEG_SAMPLING_FACTOR_420"}


# --- encoded test images ----------------------------------------------------------------------
def bgr(name, step=1):
    img = photo(name)
    img = np.stack([img] * 3, axis=2) if img.ndim == 2 else img[:, :, :3]
    return np.ascontiguousarray(img[::step, ::step, ::-1])


def jpeg(img, quality=90, sampling="420", progressive=False):
    params = [cv2.IMWRITE_JPEG_QUALITY, quality,
              cv2.IMWRITE_JPEG_SAMPLING_FACTOR, getattr(cv2, SAMPLINGS[sampling])]
    if progressive:
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


def png(img):
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def exif_jpeg(img_bgr, orientation):
    """A JPEG (through PIL) with an EXIF orientation tag."""
    from PIL import Image

    pil = Image.fromarray(np.ascontiguousarray(img_bgr[:, :, ::-1]))
    exif = pil.getexif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    pil.save(out, "JPEG", quality=92, exif=exif)
    return out.getvalue()


def cmyk_jpeg(img_bgr):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img_bgr[:, :, ::-1])).convert("CMYK").save(out, "JPEG", quality=92)
    return out.getvalue()


def with_thumbnail(blob):
    """``blob`` with an APP1 segment that holds a whole small JPEG (as EXIF thumbnails do):
    its end-of-image marker comes before the main image's data."""
    thumb = jpeg(bgr("coffee", 16), 80)
    payload = b"Exif\x00\x00" + thumb
    app1 = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    return blob[:2] + app1 + blob[2:]


def cv2_decode(blob, color="bgr"):
    img = cv2.imdecode(np.frombuffer(blob, np.uint8),
                       cv2.IMREAD_GRAYSCALE if color == "gray" else cv2.IMREAD_COLOR)
    assert img is not None
    return np.ascontiguousarray(img[:, :, ::-1]) if color == "rgb" else img


# --- the CPU backend (cv2.imdecode) -----------------------------------------------------------
def test_every_source_kind_decodes_like_cv2_imdecode(tmp_path):
    blob = jpeg(bgr("astronaut", 2))
    blob_png = png(bgr("chelsea", 2))
    (tmp_path / "a.jpg").write_bytes(blob)
    (tmp_path / "b.png").write_bytes(blob_png)
    sources = [blob, bytearray(blob_png), memoryview(blob), np.frombuffer(blob_png, np.uint8),
               str(tmp_path / "a.jpg"), tmp_path / "b.png"]
    images = cupyprep.decode(sources, like=np)
    want = [cv2_decode(b) for b in (blob, blob_png) * 3]
    assert len(images) == 6
    for got, ref in zip(images, want):
        assert isinstance(got, np.ndarray) and got.dtype == np.uint8 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, ref)
    # device="cpu" is the same backend
    np.testing.assert_array_equal(cupyprep.decode([blob], device="cpu")[0], want[0])


@pytest.mark.parametrize("color", ["bgr", "rgb", "gray"])
def test_colors(color):
    blobs = [jpeg(bgr("coffee", 2)), png(bgr("rocket", 2))]
    images = cupyprep.decode(blobs, like=np, color=color)
    for got, blob in zip(images, blobs):
        np.testing.assert_array_equal(got, cv2_decode(blob, color))
        assert got.ndim == (2 if color == "gray" else 3)
    if color == "rgb":
        np.testing.assert_array_equal(images[1], bgr("rocket", 2)[:, :, ::-1])  # PNG: lossless


def test_torch_cpu_tensors_when_torch_has_no_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch has CUDA here (the GPU tests cover like=torch)")
    blob = png(bgr("camera", 4))
    (img,) = cupyprep.decode([blob], like=torch)
    assert isinstance(img, torch.Tensor) and img.device.type == "cpu"
    np.testing.assert_array_equal(img.numpy(), cv2_decode(blob))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_applied_as_cv2_imread_does(tmp_path, orientation):
    img = bgr("astronaut", 4)[:, :100]  # 128 x 100: a transposing orientation swaps them
    blob = exif_jpeg(img, orientation)
    path = tmp_path / "o.jpg"
    path.write_bytes(blob)
    (got,) = cupyprep.decode([blob], like=np)
    np.testing.assert_array_equal(got, cv2.imread(str(path)))  # imread's default flags
    assert got.shape[:2] == ((100, 128) if orientation >= 5 else (128, 100))


def test_formats_behave_as_documented():
    """16-bit PNG -> 8 bits (the high byte); gray -> 3 equal channels; RGBA -> alpha
    dropped; CMYK and progressive JPEG decoded; each equal to cv2.imdecode."""
    rng = np.random.default_rng(0)
    deep = rng.integers(0, 65536, (40, 50, 3), dtype=np.uint16)
    gray = bgr("camera", 4)[:, :, 0]
    rgba = np.dstack([bgr("coffee", 4), rng.integers(0, 256, bgr("coffee", 4).shape[:2], dtype=np.uint8)])
    blobs = [png(deep), png(gray), png(rgba), jpeg(gray[:, :, None]), cmyk_jpeg(bgr("chelsea", 2)),
             jpeg(bgr("rocket", 2), progressive=True)]
    images = cupyprep.decode(blobs, like=np)
    for got, blob in zip(images, blobs):
        np.testing.assert_array_equal(got, cv2_decode(blob))
        assert got.dtype == np.uint8 and got.ndim == 3 and got.shape[2] == 3
    np.testing.assert_array_equal(images[0], (deep >> 8).astype(np.uint8))
    np.testing.assert_array_equal(images[1], np.stack([gray] * 3, axis=2))
    np.testing.assert_array_equal(images[2], rgba[:, :, :3])
    # CMYK: a color image close to the photograph (JPEG at quality 92)
    assert np.abs(images[4].astype(int) - bgr("chelsea", 2)).mean() < 4


def test_an_empty_list_gives_empty_results():
    assert cupyprep.decode([], like=np) == []
    assert cupyprep.decode([], like=np, on_error="skip") == ([], [])


# --- errors ---------------------------------------------------------------------------------------
def corrupt_jpeg():
    """A JPEG whose end is intact but whose headers are garbage."""
    blob = bytearray(jpeg(bgr("coffee", 4)))
    blob[4:150] = bytes(146)  # the JPEG signature stays, the tables and frame header go
    blob = bytes(blob)
    assert _decoders.sniff(np.frombuffer(blob, np.uint8)) == "jpeg"
    assert cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_COLOR) is None
    return blob


def bad_sources(tmp_path):
    """(source, words its failure's reason holds) for every kind of bad data."""
    good = jpeg(bgr("coffee", 4))
    truncated_path = tmp_path / "cut.jpg"
    truncated_path.write_bytes(good[: len(good) // 2])
    return [
        (good[: len(good) * 3 // 4], ["truncated JPEG"]),
        (str(truncated_path), ["truncated JPEG"]),
        (corrupt_jpeg(), ["corrupt JPEG"]),
        (b"", ["empty"]),
        (b"this is not an image at all", ["not an image format"]),
        (png(bgr("rocket", 4))[:300], ["PNG"]),
        (str(tmp_path / "missing.jpg"), ["could not read the file", "No such file"]),
        (with_thumbnail(good)[: len(good) // 2 + 400], ["truncated JPEG"]),
    ]


def test_each_kind_of_bad_data_names_the_index_and_path(tmp_path):
    good = png(bgr("chelsea", 4))
    for source, words in bad_sources(tmp_path):
        with pytest.raises(DecodeError) as info:
            cupyprep.decode([good, source], like=np)
        message = str(info.value)
        assert "sources[1]" in message, message
        assert info.value.index == 1
        if isinstance(source, str):
            assert repr(source) in message and info.value.path == source
        for w in words:
            assert w in message, (w, message)
        assert isinstance(info.value, ValueError)


def test_skip_keeps_order_and_loses_nothing(tmp_path):
    bad = bad_sources(tmp_path)
    goods = [jpeg(bgr(n, 4)) for n in ("astronaut", "coffee", "chelsea", "rocket")] + [png(bgr("camera", 4))]
    sources, expected, bad_at = [], [], []
    for i in range(len(bad) + len(goods)):  # interleaved: good, bad, good, bad, ...
        if i % 2 == 0 and goods:
            sources.append(goods.pop(0))
            expected.append(cv2_decode(sources[-1]))
        elif bad:
            bad_at.append(len(sources))
            sources.append(bad.pop(0)[0])
        else:
            sources.append(goods.pop(0))
            expected.append(cv2_decode(sources[-1]))
    images, failures = cupyprep.decode(sources, like=np, on_error="skip")
    assert len(images) + len(failures) == len(sources)
    assert [f.index for f in failures] == bad_at
    assert all(isinstance(f, DecodeFailure) and f.reason for f in failures)
    for got, ref in zip(images, expected):
        np.testing.assert_array_equal(got, ref)
    # the documented way back from an image to its source
    failed = {f.index for f in failures}
    for i in range(len(sources)):
        if i not in failed:
            k = i - sum(1 for f in failed if f < i)
            np.testing.assert_array_equal(images[k], cv2_decode(sources[i]))
    # raise: every failure is listed on the exception, the first one named
    with pytest.raises(DecodeError) as info:
        cupyprep.decode(sources, like=np)
    assert [f.index for f in info.value.failures] == bad_at
    assert f"sources[{bad_at[0]}]" in str(info.value) and f"{len(bad_at) - 1} more" in str(info.value)


@pytest.mark.parametrize("call, exc, words", [
    (lambda: cupyprep.decode(b"\xff\xd8", like=np), TypeError, ["sources", "single source in a list"]),
    (lambda: cupyprep.decode("x.jpg", like=np), TypeError, ["sources", "single source in a list"]),
    (lambda: cupyprep.decode(3, like=np), TypeError, ["sources", "builtins.int"]),
    (lambda: cupyprep.decode([b"\xff", 7], like=np), TypeError, ["sources[1]", "builtins.int"]),
    (lambda: cupyprep.decode([np.zeros((4, 4, 3), np.uint8)], like=np), TypeError,
     ["sources[0]", "1-D uint8", "(4, 4, 3)"]),
    (lambda: cupyprep.decode([np.zeros(8, np.int16)], like=np), TypeError, ["sources[0]", "int16"]),
    (lambda: cupyprep.decode([b"x"], like=np, color="bgra"), ValueError, ["color", "'bgra'"]),
    (lambda: cupyprep.decode([b"x"], like=np, on_error="ignore"), ValueError, ["on_error", "'ignore'"]),
    (lambda: cupyprep.decode([b"x"], like="jax"), ValueError, ["like", "'jax'"]),
    (lambda: cupyprep.decode([b"x"], like=3), TypeError, ["like", "builtins.int"]),
    (lambda: cupyprep.decode([b"x"], like=np, device="cuda:0"), ValueError, ["like", "host", "cuda:0"]),
    (lambda: cupyprep.decode([b"x"], device="tpu"), ValueError, ["device", "'tpu'"]),
])
def test_bad_arguments_name_the_argument(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_without_a_gpu_the_default_is_the_cpu_backend(monkeypatch):
    import importlib

    decode_module = importlib.import_module("cupyprep.decode")  # the module, not the function
    monkeypatch.setattr(decode_module, "_cuda_device_count", lambda: 0)
    blob = jpeg(bgr("coffee", 4))
    (img,) = cupyprep.decode([blob])
    assert isinstance(img, np.ndarray)
    np.testing.assert_array_equal(img, cv2_decode(blob))
    with pytest.raises(ValueError, match="CUDA device"):
        cupyprep.decode([blob], like="cupy")


# --- the JPEG completeness check ----------------------------------------------------------------
def test_jpeg_check_matches_what_libjpeg_decodes():
    blob = jpeg(bgr("astronaut", 2))
    thumbed = with_thumbnail(blob)
    rng = np.random.default_rng(1)
    # bytes after the end marker (padding, an appended video holding FF D9 / FF DA pairs)
    appended = blob + b"\x00" * 7
    video = blob + rng.integers(0, 256, 20000, dtype=np.uint8).tobytes() + b"\xff\xda\x00\xff\xd9\x12"
    whole = [blob, thumbed, appended, video, jpeg(bgr("rocket", 2), progressive=True)]
    for b in whole:
        data = np.frombuffer(b, np.uint8)
        assert _decoders.jpeg_problem(data) is None
        assert cv2.imdecode(data, cv2.IMREAD_COLOR) is not None
    for b in whole[:2] + whole[-1:]:
        for cut in (len(b) - 1, len(b) - 2, len(b) // 2, 200):
            data = np.frombuffer(b[:cut], np.uint8)
            assert _decoders.jpeg_problem(data) is not None, cut
            assert cv2.imdecode(data, cv2.IMREAD_COLOR) is None, cut  # OpenCV refuses them too


def test_sniff():
    assert _decoders.sniff(np.frombuffer(jpeg(bgr("coffee", 8)), np.uint8)) == "jpeg"
    assert _decoders.sniff(np.frombuffer(png(bgr("coffee", 8)), np.uint8)) == "png"
    assert _decoders.sniff(np.frombuffer(b"GIF89a", np.uint8)) == "other"


# --- the GPU path's bookkeeping, with a fake GPU decoder ----------------------------------------
class FakeGpu:
    """Stands in for nvImageCodec: decodes its formats with OpenCV and flips the lowest
    bit of every pixel, so a test can tell which path made an image; gray comes back HW1
    as nvImageCodec gives it. Buffers in ``refuse`` come back as None (not decodable on
    the GPU), as do those OpenCV cannot decode."""

    formats = frozenset({"jpeg"})

    def __init__(self, refuse=(), bad_layout=()):
        self.calls = []
        self.refuse = {bytes(b) for b in refuse}
        self.bad_layout = {bytes(b) for b in bad_layout}

    def decode(self, buffers, *, color, device_id, stream_ptr):
        self.calls.append([bytes(b) for b in buffers])
        out = []
        for b in buffers:
            img = cpu_decode.imdecode(b, color)
            if img is None or bytes(b) in self.refuse:
                out.append(None)
            elif bytes(b) in self.bad_layout:
                out.append(np.zeros((4, 4, 2), np.uint8))  # not the asked-for channels
            else:
                out.append(marked(img)[:, :, None] if color == "gray" else marked(img))
        return out, []


def marked(img):
    return img ^ np.uint8(1)


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = FakeGpu()
    monkeypatch.setattr(_decoders, "gpu_backend", lambda: fake)
    return fake


@pytest.fixture
def fallbacks(monkeypatch):
    """The buffers decoded by the host fallback (cv2.imdecode)."""
    seen = []
    original = _decoders.fallback_decode

    def spy(data, color):
        seen.append(bytes(data))
        return original(data, color)

    monkeypatch.setattr(_decoders, "fallback_decode", spy)
    return seen


@pytest.mark.parametrize("color", ["bgr", "gray"])
def test_batch_goes_to_the_gpu_in_one_call_the_rest_to_cv2(tmp_path, fallbacks, color):
    jpegs = [jpeg(bgr(n, 4)) for n in ("astronaut", "coffee", "chelsea")]
    refused = jpeg(bgr("rocket", 4), progressive=True)
    odd = jpeg(bgr("camera", 4))
    pngs = [png(bgr("rocket", 4))]
    fake = FakeGpu(refuse=[refused], bad_layout=[odd])
    sources = [jpegs[0], pngs[0], jpegs[1], refused, b"", jpegs[2], odd]
    entries = [_decoders.read_source(i, s) for i, s in enumerate(sources)]
    images, failures = _decoders.decode_batch(entries, color, fake, _decoders.HostSink())
    # one GPU call with every JPEG that passed the checks, in source order
    assert fake.calls == [[jpegs[0], jpegs[1], refused, jpegs[2], odd]]
    # cv2 decoded the PNG, the JPEG the GPU refused and the one it gave a wrong layout for
    assert sorted(fallbacks) == sorted([pngs[0], refused, odd])  # decoded in a thread pool
    assert [f.index for f in failures] == [4] and "empty" in failures[0].reason
    assert images[4] is None
    want = [marked(cv2_decode(jpegs[0], color)), cv2_decode(pngs[0], color), marked(cv2_decode(jpegs[1], color)),
            cv2_decode(refused, color), None, marked(cv2_decode(jpegs[2], color)), cv2_decode(odd, color)]
    for got, ref in zip(images, want):
        if ref is not None:
            np.testing.assert_array_equal(got, ref)


def test_cmyk_jpegs_go_to_opencv(fallbacks):
    """Four-component (Adobe CMYK / YCCK) JPEGs are decoded by OpenCV, as cv2.imdecode
    converts them; three- and one-component JPEGs go to the GPU decoder."""
    cmyk, ycc, gray = cmyk_jpeg(bgr("chelsea", 4)), jpeg(bgr("coffee", 4)), jpeg(bgr("camera", 4)[:, :, :1])
    assert [_decoders.jpeg_components(np.frombuffer(b, np.uint8)) for b in (cmyk, ycc, gray)] == [4, 3, 1]
    assert _decoders.jpeg_components(np.frombuffer(with_thumbnail(cmyk), np.uint8)) == 4
    entries = [_decoders.read_source(k, b) for k, b in enumerate((cmyk, ycc))]
    assert [e.format for e in entries] == [_decoders.CMYK_JPEG, "jpeg"]
    fake = FakeGpu()
    images, failures = _decoders.decode_batch(entries, "bgr", fake, _decoders.HostSink())
    assert failures == [] and fake.calls == [[ycc]]
    np.testing.assert_array_equal(images[0], cv2_decode(cmyk))
    assert fallbacks == [cmyk]


def test_a_jpeg_neither_decoder_reads_is_named(fallbacks):
    bad = corrupt_jpeg()
    fake = FakeGpu()
    entries = [_decoders.read_source(0, jpeg(bgr("coffee", 4))), _decoders.read_source(1, bad)]
    images, failures = _decoders.decode_batch(entries, "bgr", fake, _decoders.HostSink())
    assert [f.index for f in failures] == [1] and images[1] is None and images[0] is not None
    assert "corrupt JPEG data (the GPU decoder and cv2.imdecode both failed)" in failures[0].reason
    assert fake.calls == [[entries[0].data.tobytes(), bad]]


def test_a_gpu_decoder_that_decodes_nothing_is_reported_once():
    """nvImageCodec without nvJPEG decodes no JPEG: every image then comes from OpenCV,
    right but slow, and a warning says so (once)."""
    blobs = [jpeg(bgr("coffee", 4)), jpeg(bgr("rocket", 4))]
    fake = FakeGpu(refuse=blobs)
    fake.name, fake.warned = "FakeGpu", False
    entries = [_decoders.read_source(i, b) for i, b in enumerate(blobs)]
    with pytest.warns(RuntimeWarning, match="decoded none of 2 JPEG images"):
        images, failures = _decoders.decode_batch(entries, "bgr", fake, _decoders.HostSink())
    assert not failures and all(im is not None for im in images)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _decoders.decode_batch(entries, "bgr", fake, _decoders.HostSink())


# --- the Loader with decode="gpu" (fake GPU decoder, CPU backend) -------------------------------
def write_files(tmp_path):
    paths, frames = [], []
    for i, name in enumerate(["astronaut", "coffee", "chelsea", "rocket", "camera"]):
        img = bgr(name, 4)
        if i == 3:  # one PNG among the JPEGs: decoded in the pool
            p = tmp_path / f"{i}.png"
            p.write_bytes(png(img))
            frames.append(cv2.imread(str(p)))
        else:
            p = tmp_path / f"{i}.jpg"
            p.write_bytes(jpeg(img))
            frames.append(marked(cv2.imread(str(p))))
        paths.append(p)
    return paths, frames


def collect(loader):
    with loader:
        return list(loader)


def test_loader_decodes_batches_on_the_gpu_decoder(tmp_path, fake_gpu, fallbacks):
    paths, frames = write_files(tmp_path)
    got = collect(Loader(paths, SIZE, batch_size=2, device="cpu", decode="gpu", workers=3,
                         mode="letterbox"))
    assert len(got) == 3
    for (batch, meta), start in zip(got, range(0, 5, 2)):
        ref, _ = cupyprep.preprocess(frames[start:start + 2], SIZE, mode="letterbox")
        np.testing.assert_array_equal(batch, ref)
        assert meta.items == tuple(str(p) for p in paths[start:start + 2])
        np.testing.assert_array_equal(meta.index, np.arange(start, min(start + 2, 5)))
    # the pool read the files' bytes; each batch's JPEGs went to the GPU decoder in one call
    data = [p.read_bytes() for p in paths]
    assert fake_gpu.calls == [[data[0], data[1]], [data[2]], [data[4]]]
    assert fallbacks == [data[3]]  # the PNG, decoded in a pool thread


def test_loader_gpu_decoding_of_bytes_frames_and_samples(fake_gpu):
    blobs = [jpeg(bgr(n, 4)) for n in ("astronaut", "coffee")]
    frame = bgr("chelsea", 4)
    source = [(blobs[0], "a"), (frame, "b"), (np.frombuffer(blobs[1], np.uint8), "c")]
    (batch, meta), = collect(Loader(source, SIZE, batch_size=3, device="cpu", decode="gpu", layout="NHWC"))
    ref, _ = cupyprep.preprocess([marked(cv2_decode(blobs[0])), frame, marked(cv2_decode(blobs[1]))], SIZE,
                                 layout="NHWC")
    np.testing.assert_array_equal(batch, ref)
    assert meta.targets == ("a", "b", "c")
    assert fake_gpu.calls == [blobs]


def test_loader_gray_decoding(tmp_path, fake_gpu):
    paths, _ = write_files(tmp_path)
    got = collect(Loader(paths[:2], SIZE, batch_size=2, device="cpu", decode="gpu",
                         imread_flags=cv2.IMREAD_GRAYSCALE, mean=(0.5,), std=(0.25,), swap_rb=False))
    frames = [marked(cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)) for p in paths[:2]]
    ref, _ = cupyprep.preprocess([f[:, :, None] for f in frames], SIZE, mean=(0.5,), std=(0.25,), swap_rb=False)
    np.testing.assert_array_equal(got[0][0], ref)


@pytest.mark.parametrize("bad, exc, words", [
    ("missing", FileNotFoundError, ["source element 2", "missing.jpg", "No such file"]),
    ("truncated", ValueError, ["source element 2", "truncated JPEG"]),
    ("empty", ValueError, ["source element 2", "empty"]),
    ("refused", DecodeError, ["source element 2", "corrupt JPEG data"]),
])
def test_loader_gpu_decoding_errors_name_the_element(tmp_path, monkeypatch, bad, exc, words):
    paths, _ = write_files(tmp_path)
    target = tmp_path / "missing.jpg"
    if bad == "truncated":
        target.write_bytes(paths[0].read_bytes()[:500])
    elif bad == "empty":
        target.write_bytes(b"")
    elif bad == "refused":  # the GPU decoder gives None, and cv2.imdecode cannot read it either
        blob = bytearray(paths[0].read_bytes())
        blob[300:-2] = b"\x00" * (len(blob) - 302)
        target.write_bytes(bytes(blob))
        monkeypatch.setattr(_decoders, "fallback_decode", lambda data, color: None)
    fake = FakeGpu(refuse=[target.read_bytes()] if target.exists() else ())
    monkeypatch.setattr(_decoders, "gpu_backend", lambda: fake)
    source = [paths[0], paths[1], target, paths[2]]
    with pytest.raises(exc) as info:
        collect(Loader(source, SIZE, batch_size=2, device="cpu", decode="gpu"))
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_loader_gpu_decoding_skips_failed_sources(tmp_path, monkeypatch):
    """on_error="skip" with decode="gpu": each bad source (unreadable, truncated, empty, or
    a JPEG no decoder reads) is left out and reported once, the rest keep their order."""
    paths, frames = write_files(tmp_path)
    missing = tmp_path / "missing.jpg"
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(paths[0].read_bytes()[:500])
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    refused = tmp_path / "refused.jpg"
    blob = bytearray(paths[1].read_bytes())
    blob[300:-2] = b"\x00" * (len(blob) - 302)
    refused.write_bytes(bytes(blob))
    real_fallback = _decoders.fallback_decode
    monkeypatch.setattr(_decoders, "fallback_decode",
                        lambda data, color: None if bytes(data) == bytes(blob) else real_fallback(data, color))
    monkeypatch.setattr(_decoders, "gpu_backend", lambda: FakeGpu(refuse=[bytes(blob)]))
    source = [paths[0], missing, paths[1], truncated, empty, refused, paths[2], paths[3], paths[4]]
    good = [0, 2, 6, 7, 8]
    got = collect(Loader(source, SIZE, batch_size=3, device="cpu", decode="gpu", on_error="skip"))
    index = np.concatenate([m.index for _, m in got])
    np.testing.assert_array_equal(index, good)
    skipped = [s for _, m in got for s in m.skipped]
    assert [s.index for s in skipped] == [1, 3, 4, 5]
    assert [s.item for s in skipped] == [str(missing), str(truncated), str(empty), str(refused)]
    assert "corrupt JPEG data" in skipped[3].reason
    want = [frames[0], frames[1], frames[2], frames[3], frames[4]]
    batch = np.concatenate([b for b, _ in got])
    ref, _ = cupyprep.preprocess(want, SIZE)
    np.testing.assert_array_equal(batch, ref)


def test_loader_decode_modes_without_a_gpu_decoder(tmp_path, monkeypatch):
    monkeypatch.setattr(_decoders, "gpu_backend", lambda: None)
    paths, _ = write_files(tmp_path)
    with pytest.raises(ValueError, match="nvImageCodec"):
        Loader(paths, SIZE, device="cpu", decode="gpu")
    for mode in ("auto", "cpu"):
        loader = Loader(paths, SIZE, batch_size=5, device="cpu", decode=mode)
        assert loader.decode == "cpu"
        (batch, _), = collect(loader)
        ref, _ = cupyprep.preprocess([cv2.imread(str(p)) for p in paths], SIZE)
        np.testing.assert_array_equal(batch, ref)


def test_loader_auto_on_the_cpu_backend_decodes_on_the_cpu(tmp_path, fake_gpu):
    paths, _ = write_files(tmp_path)
    loader = Loader(paths, SIZE, batch_size=5, device="cpu", decode="auto")
    assert loader.decode == "cpu"
    collect(loader)
    assert fake_gpu.calls == []


def test_loader_gpu_decoding_flags_must_be_a_color_mode(tmp_path, fake_gpu):
    with pytest.raises(ValueError, match="imread_flags"):
        Loader([b""], SIZE, device="cpu", decode="gpu", imread_flags=cv2.IMREAD_UNCHANGED)


# --- GPU: nvImageCodec against cv2.imdecode ------------------------------------------------------
# Bounds between nvJPEG and libjpeg-turbo (OpenCV's) on the same JPEG: the inverse DCT
# and the YCbCr->RGB conversion round differently (and the upsampling of subsampled
# chroma is computed differently even with fancy upsampling on both). Measured on the GPU
# (nvImageCodec 0.9): 3-channel and gray photographs at most 3 levels apart, mean at most 0.05 per
# image; the mean's bound leaves room for other JPEG encoders' files (the test prints each
# image's figures, `-s`). CMYK JPEGs are decoded by OpenCV (nvJPEG's conversion differed by
# a mean of 1.0), so they are compared bit for bit.
JPEG_MAX_DIFF = 3
JPEG_MEAN_DIFF = 0.5
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")


@pytest.fixture
def nvimgcodec():
    """nvImageCodec and the backend cupyprep built on it (skipped where it is not
    installed; where it is, the backend must be there)."""
    module = pytest.importorskip("nvidia.nvimgcodec")
    backend = _decoders.gpu_backend()
    assert backend is not None, "nvImageCodec imports but cupyprep found no GPU decoder"
    return module


def assert_jpeg_close(got, ref, what):
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    diff = np.abs(got.astype(np.int16) - ref.astype(np.int16))
    worst, mean = int(diff.max()), float(diff.mean())
    print(f"{what}: max {worst}, mean {mean:.4f}")
    assert worst <= JPEG_MAX_DIFF and mean <= JPEG_MEAN_DIFF, (what, worst, mean)


@pytest.mark.gpu
@pytest.mark.parametrize("color", ["bgr", "rgb", "gray"])
def test_gpu_jpeg_parity_with_cv2(nvimgcodec, fallbacks, color):
    import cupy

    blobs, names = [], []
    for name in PHOTOS:
        for quality in (50, 75, 95):
            for sampling in SAMPLINGS:
                blobs.append(jpeg(bgr(name), quality, sampling))
                names.append(f"{name} q{quality} {sampling}")
    images = cupyprep.decode(blobs, color=color)
    assert fallbacks == [], "the GPU decoder refused baseline JPEGs"
    for img, blob, what in zip(images, blobs, names):
        assert isinstance(img, cupy.ndarray) and img.dtype == np.uint8 and img.flags.c_contiguous
        assert_jpeg_close(cupy.asnumpy(img), cv2_decode(blob, color), f"{what} {color}")


@pytest.mark.gpu
def test_gpu_jpeg_kinds_parity_with_cv2(nvimgcodec):
    """Progressive, gray, CMYK, EXIF-rotated and odd-sized JPEGs: on the GPU where it takes
    them, by OpenCV where not; either way close to cv2.imdecode."""
    import cupy

    blobs = {"progressive": jpeg(bgr("astronaut"), progressive=True),
             "gray": jpeg(bgr("camera")[:, :, :1]),
             "cmyk": cmyk_jpeg(bgr("chelsea")),
             "odd 1x1": jpeg(bgr("coffee")[:1, :1]),
             "odd 37x19": jpeg(bgr("coffee")[:37, :19], sampling="420")}
    for o in range(1, 9):
        blobs[f"exif {o}"] = exif_jpeg(bgr("rocket")[:, :300], o)
    images = cupyprep.decode(list(blobs.values()))
    for img, (what, blob) in zip(images, blobs.items()):
        if what == "cmyk":  # decoded by OpenCV: its bits
            np.testing.assert_array_equal(cupy.asnumpy(img), cv2_decode(blob))
        assert_jpeg_close(cupy.asnumpy(img), cv2_decode(blob), what)


@pytest.mark.gpu
def test_gpu_png_bit_exact_and_mixed_batches(nvimgcodec):
    import cupy

    rng = np.random.default_rng(2)
    blobs = [png(bgr(n)) for n in PHOTOS] + [png(rng.integers(0, 65536, (33, 17, 3), dtype=np.uint16)),
                                             png(bgr("camera")[:, :, 0])]
    mixed = [blobs[0], jpeg(bgr("coffee")), blobs[1]]
    for color in ("bgr", "rgb", "gray"):
        for img, blob in zip(cupyprep.decode(blobs, color=color), blobs):
            np.testing.assert_array_equal(cupy.asnumpy(img), cv2_decode(blob, color))
    got = cupyprep.decode(mixed)
    np.testing.assert_array_equal(cupy.asnumpy(got[0]), cv2_decode(mixed[0]))
    np.testing.assert_array_equal(cupy.asnumpy(got[2]), cv2_decode(mixed[2]))
    assert_jpeg_close(cupy.asnumpy(got[1]), cv2_decode(mixed[1]), "mixed batch JPEG")


@pytest.mark.gpu
def test_gpu_errors_and_skip(nvimgcodec, tmp_path):
    import cupy

    bad = bad_sources(tmp_path)
    good = [jpeg(bgr("coffee")), png(bgr("rocket", 2))]
    sources = [good[0]] + [b for b, _ in bad] + [good[1]]
    images, failures = cupyprep.decode(sources, on_error="skip")
    assert [f.index for f in failures] == list(range(1, len(bad) + 1))
    assert len(images) == 2
    assert_jpeg_close(cupy.asnumpy(images[0]), cv2_decode(good[0]), "good JPEG among bad ones")
    np.testing.assert_array_equal(cupy.asnumpy(images[1]), cv2_decode(good[1]))
    with pytest.raises(DecodeError, match=r"sources\[1\]"):
        cupyprep.decode(sources)


def poison_pool(shapes, stream, value):
    """Blocks of the pool, freed on ``stream`` after it was held back and then filled with
    ``value``: an image written there out of the stream's order would show it."""
    import cupy

    blocks = []
    with stream:
        for s in shapes:
            a = cupy.empty(s, np.uint8)
            a.fill(value)
            blocks.append(a)
    spans = [(b.data.ptr, b.data.ptr + b.nbytes) for b in blocks]
    del blocks
    return spans


def overlaps(spans, others):
    """Whether any [start, end) of ``spans`` overlaps one of ``others``."""
    return any(a < d and c < b for a, b in spans for c, d in others)


@pytest.mark.gpu
def test_gpu_images_are_ordered_on_the_callers_stream(nvimgcodec):
    """The caller's stream is held back by a long kernel, then fills the memory the images
    will reuse with poison; the decoded images must still read right on that stream."""
    torch = pytest.importorskip("torch")
    import cupy

    blobs = [jpeg(bgr(n)) for n in PHOTOS] + [png(bgr("camera"))]
    refs = [cv2_decode(b) for b in blobs]
    shapes = [r.shape for r in refs]
    for _ in range(3):
        stream = cupy.cuda.Stream(non_blocking=True)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr)):
            torch.cuda._sleep(50_000_000)  # tens of milliseconds
        poisoned = poison_pool(shapes, stream, 77)
        with stream:
            images = cupyprep.decode(blobs)
            sums = [img.astype(np.int64).sum() for img in images]  # read on the same stream
        assert overlaps(poisoned, [(im.data.ptr, im.data.ptr + im.nbytes) for im in images]), \
            "the test's poisoned memory was not reused"
        stream.synchronize()
        for img, s, ref, blob in zip(images, sums, refs, blobs):
            got = cupy.asnumpy(img)
            assert int(s) == int(got.astype(np.int64).sum())
            if blob[:2] == b"\xff\xd8":
                assert_jpeg_close(got, ref, "after a held-back stream")
            else:
                np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_gpu_cupyprep_stream_is_honoured(nvimgcodec):
    import cupy

    blob = png(bgr("coffee"))
    stream = cupy.cuda.Stream(non_blocking=True)
    with cupyprep.stream(stream):
        (img,) = cupyprep.decode([blob])
        total = img.astype(np.int64).sum()
    stream.synchronize()
    assert int(total) == int(cv2_decode(blob).astype(np.int64).sum())


@pytest.mark.gpu
def test_gpu_like_torch_uses_torchs_allocator_and_stream(nvimgcodec):
    needs_pools()
    torch = pytest.importorskip("torch")
    blobs = [jpeg(bgr(n)) for n in PHOTOS] + [png(bgr("camera"))]
    refs = [cv2_decode(b) for b in blobs]
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)
        # poison the caching allocator's blocks for this stream, freed behind the sleep
        poison = [torch.full(r.shape, 99, dtype=torch.uint8, device="cuda") for r in refs]
        poisoned = [(p.data_ptr(), p.data_ptr() + p.numel()) for p in poison]
        del poison
        images = cupyprep.decode(blobs, like=torch)
        sums = [img.to(torch.int64).sum() for img in images]
    grown = torch.cuda.memory_allocated() - before
    assert grown >= sum(r.nbytes for r in refs), grown  # the images live in torch's allocator
    assert overlaps(poisoned, [(im.data_ptr(), im.data_ptr() + im.numel()) for im in images]), \
        "the test's poisoned memory was not reused"
    stream.synchronize()
    for img, s, ref, blob in zip(images, sums, refs, blobs):
        assert isinstance(img, torch.Tensor) and img.is_cuda and img.dtype == torch.uint8
        got = img.cpu().numpy()
        assert int(s) == int(got.astype(np.int64).sum())
        if blob[:2] == b"\xff\xd8":
            assert_jpeg_close(got, ref, "like=torch")
        else:
            np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("output", ["torch", "cupy"])
def test_gpu_loader_decode_gpu_equals_decode_then_preprocess(nvimgcodec, tmp_path, output):
    torch = pytest.importorskip("torch")
    import cupy

    paths = []
    for i in range(22):  # ragged sizes, JPEG and PNG; several batches
        name = PHOTOS[i % len(PHOTOS)]
        img = bgr(name)[: 200 + 9 * i, : 300 - 5 * i]
        p = tmp_path / (f"{i}.png" if i % 5 == 4 else f"{i}.jpg")
        p.write_bytes(png(img) if i % 5 == 4 else jpeg(img))
        paths.append(p)
    options = dict(mode="letterbox", pad_value=114)
    loader = Loader(paths, (160, 160), batch_size=6, device="cuda", output=output, decode="gpu", **options)
    assert loader.decode == "gpu"
    got = collect(loader)
    assert len(got) == 4
    for k, (batch, meta) in enumerate(got):
        chunk = [p.read_bytes() for p in paths[6 * k:6 * k + 6]]
        ref, _ = cupyprep.preprocess(cupyprep.decode(chunk, like=torch), (160, 160), **options)
        values = batch.cpu().numpy() if output == "torch" else cupy.asnumpy(batch)
        np.testing.assert_array_equal(values, ref.cpu().numpy())
        assert meta.items == tuple(str(p) for p in paths[6 * k:6 * k + 6])
    # and close to the CPU-decoding Loader (the JPEG difference, after resizing and /1)
    cpu = collect(Loader(paths, (160, 160), batch_size=6, device="cuda", output="torch", decode="cpu", **options))
    for (a, _), (b, _) in zip(got, cpu):
        a = a.cpu().numpy() if output == "torch" else cupy.asnumpy(a)
        # a resize averages pixels, so the difference stays within the JPEG bound; one
        # more level for the rounding of the interpolated values
        assert np.abs(a - b.cpu().numpy()).max() <= (JPEG_MAX_DIFF + 1) / 255 + 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["default", "cuda", "int", "cuda:0", "torch.device", "cupy.Device",
                                  "like-cupy-array", "like-torch-tensor", "cuda-like-torch", "like-numpy"])
def test_gpu_every_device_and_like_form(nvimgcodec, form):
    """Each way of naming the device and the kind gives the images there, of that kind, with
    the GPU decoder's pixels (like=numpy: decoded on the host by OpenCV, so the JPEG within
    the JPEG bound; PNG decoding is exact)."""
    torch = pytest.importorskip("torch")
    import cupy

    sources = [png(bgr(PHOTOS[0])[:61, :47]), jpeg(bgr(PHOTOS[1])[:80, :90])]
    device, like = {
        "default": (None, None), "cuda": ("cuda", None), "int": (0, None), "cuda:0": ("cuda:0", None),
        "torch.device": (torch.device("cuda", 0), None), "cupy.Device": (cupy.cuda.Device(0), None),
        "like-cupy-array": (None, cupy.zeros(1)), "like-torch-tensor": (None, torch.zeros(1, device="cuda")),
        "cuda-like-torch": ("cuda", "torch"), "like-numpy": (None, "numpy")}[form]
    images = cupyprep.decode(sources, device=device, like=like)
    kind = (torch.Tensor if form in ("like-torch-tensor", "cuda-like-torch")
            else np.ndarray if form == "like-numpy" else cupy.ndarray)
    assert all(isinstance(im, kind) for im in images), [type(im) for im in images]
    if kind is torch.Tensor:
        assert all(im.device == torch.device("cuda", 0) for im in images)
    elif kind is cupy.ndarray:
        assert all(im.device.id == 0 for im in images)
    want = [t.cpu().numpy() for t in cupyprep.decode(sources, like=torch)]
    got = [im.cpu().numpy() if kind is torch.Tensor else cupy.asnumpy(im) for im in images]
    np.testing.assert_array_equal(got[0], want[0])
    if form == "like-numpy":
        assert_jpeg_close(got[1], want[1], form)
    else:
        np.testing.assert_array_equal(got[1], want[1])

@pytest.mark.gpu
def test_gpu_decoder_feeds_a_cpu_loader(nvimgcodec, tmp_path):
    """Loader(device="cpu", decode="gpu"): nvImageCodec decodes on the GPU into host images
    (the current device, the legacy stream) that the CPU backend preprocesses; each batch
    equals the CPU preprocessing of the GPU decoder's pixels."""
    torch = pytest.importorskip("torch")
    paths = []
    for i in range(9):  # ragged sizes, JPEG and PNG
        img = bgr(PHOTOS[i % len(PHOTOS)])[: 120 + 7 * i, : 150 - 4 * i]
        p = tmp_path / (f"{i}.png" if i % 3 == 2 else f"{i}.jpg")
        p.write_bytes(png(img) if i % 3 == 2 else jpeg(img))
        paths.append(p)
    loader = Loader(paths, (96, 96), batch_size=4, device="cpu", decode="gpu", mode="letterbox")
    assert loader.decode == "gpu"
    got = collect(loader)
    assert len(got) == 3
    for k, (batch, meta) in enumerate(got):
        chunk = [p.read_bytes() for p in paths[4 * k:4 * k + 4]]
        decoded = [t.cpu().numpy() for t in cupyprep.decode(chunk, like=torch)]
        ref, _ = cupyprep.preprocess(decoded, (96, 96), mode="letterbox")
        assert isinstance(batch, np.ndarray)
        np.testing.assert_array_equal(batch, ref)
        assert meta.items == tuple(str(p) for p in paths[4 * k:4 * k + 4])


@pytest.mark.gpu
def test_gpu_loader_batches_ready_on_the_consumer_stream(nvimgcodec, tmp_path):
    torch = pytest.importorskip("torch")
    paths = []
    for i in range(40):
        p = tmp_path / f"{i}.png"
        p.write_bytes(png(np.full((64, 80, 3), i, np.uint8)))  # lossless: exact values
        paths.append(p)
    consumer = torch.cuda.Stream()
    peaks = []
    with torch.cuda.stream(consumer):
        for batch, _ in Loader(paths, (32, 32), batch_size=5, device="cuda", output="torch", decode="gpu",
                               mode="stretch", scale=1.0, swap_rb=False):
            torch.cuda._sleep(2_000_000)
            peaks.append(batch.amax(dim=(1, 2, 3)))
            del batch
    consumer.synchronize()
    np.testing.assert_array_equal(torch.cat(peaks).cpu().numpy(), np.arange(40, dtype=np.float32))


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.serial  # device-wide memory: other test processes would move it
@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_memory_stays_flat_over_10000_images(nvimgcodec):
    """10,000 images decoded in batches of 40 (CuPy out, and torch out): after the first
    batches, device memory (the driver's count, which includes nvImageCodec's own pool
    and CuPy's and torch's caches) and the process's resident host memory stay flat."""
    needs_pools()
    pytest.importorskip("torch")
    import cupy

    blobs = [jpeg(bgr(n, 2), q) for n in PHOTOS for q in (60, 90)] * 5  # 40 a batch
    blobs[7] = png(bgr("camera", 2))

    def used_device():
        free, total = cupy.cuda.runtime.memGetInfo()
        return total - free

    def run(batches, like):
        for _ in range(batches):
            images = cupyprep.decode(blobs, like=like)
            del images
        cupy.cuda.Device().synchronize()

    for like in ("cupy", "torch"):
        run(10, like)
        dev0, rss0 = used_device(), _rss_bytes()
        run(125, like)  # 5,000 images
        dev1, rss1 = used_device(), _rss_bytes()
        print(f"{like}: device {dev0 / 2**20:.1f} -> {dev1 / 2**20:.1f} MiB, "
              f"host RSS {rss0 / 2**20:.1f} -> {rss1 / 2**20:.1f} MiB")
        assert dev1 - dev0 <= 64 << 20, (like, dev0, dev1)
        assert rss1 - rss0 <= 64 << 20, (like, rss0, rss1)
    assert len(_decoders.IN_FLIGHT) <= _decoders.MAX_IN_FLIGHT


class _FakeEvent:
    def __init__(self):
        self.done = False

    def synchronize(self):
        self.done = True


def test_in_flight_holds_objects_until_their_event_is_done(monkeypatch):
    """The decodes' encoded bytes and page-locked uploads are held until the event after
    their copies is done, then let go (release_done, as the next decode does); at most
    MAX_IN_FLIGHT entries are kept, the oldest waited for."""
    monkeypatch.setattr(_decoders, "MAX_IN_FLIGHT", 2)
    held = _decoders._InFlight()
    events = [_FakeEvent() for _ in range(3)]
    objects = [[object()] for _ in range(3)]
    held.add(events[0], objects[0])
    held.add(events[1], objects[1])
    assert held.release_done() == 2 and len(held) == 2
    events[0].done = True
    assert len(held) == 2  # counting lets go of nothing
    assert held.release_done() == 1 and len(held) == 1
    assert all(o is not objects[0] for _, o in held._items)
    held.add(events[2], objects[2])
    assert len(held) == 2 and not events[1].done
    held.add(_FakeEvent(), [object()])  # a third entry: the oldest (events[1]) is waited for
    assert events[1].done and len(held) == 2
    assert [o for _, o in held._items][0] is objects[2]


def test_paths_are_described_in_messages(tmp_path):
    path = pathlib.Path(tmp_path) / "nothing here.jpg"
    _, failures = cupyprep.decode([path], like=np, on_error="skip")
    assert failures[0].path == str(path) and repr(str(path)) in str(failures[0])
