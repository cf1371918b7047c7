"""Decoding a batch of encoded images: where each image is decoded, and how the results
land in the caller's memory.

- Sources (bytes, a NumPy buffer, a path) become :class:`Entry` records: the encoded
  bytes, their format (sniffed from the first bytes) and what is wrong with them, if
  anything that can be told before decoding (an empty buffer, a missing file, a JPEG
  without its end-of-image marker, i.e. truncated).
- The GPU backend (:func:`gpu_backend`: nvImageCodec, or None) decodes the images of the
  formats it takes (JPEG) in one batched call on the caller's stream; everything else,
  and every image it could not decode, goes to ``cv2.imdecode`` on the host
  (:mod:`cupyprep.cpu.decode`), which also says which data is bad.
- A sink puts each image in the caller's memory: NumPy on the host (:class:`HostSink`),
  or device memory from the caller's allocator (CuPy's, or torch's caching allocator)
  written on the caller's stream (:class:`DeviceSink`), so a reader on that stream sees
  the image only after its decode and copy. nvImageCodec allocates its output buffers on
  that stream (stream-ordered) and frees them there when released, which happens once the
  copies out of them are queued: the memory is reused only after the copies have run, and
  no free is ever queued on a stream the caller may have destroyed since. The encoded
  bytes (and the pinned buffers host images are uploaded from) stay referenced until an
  event recorded after the copies has completed (:data:`IN_FLIGHT`).
"""
from __future__ import annotations

import os
import threading
import warnings
from typing import NamedTuple

import numpy as np

from ._arrays import contiguous_strides
from ._streams import cupy_stream
from .cpu import decode as cpu_decode

__all__ = [
    "COLORS",
    "IN_FLIGHT",
    "UNREADABLE",
    "DeviceSink",
    "Entry",
    "Failure",
    "HostSink",
    "NvImageCodecBackend",
    "decode_batch",
    "describe_source",
    "frame_entry",
    "gpu_backend",
    "jpeg_problem",
    "read_source",
    "sniff",
    "undecodable",
]

COLORS = cpu_decode.COLORS
CHANNELS = {"bgr": 3, "rgb": 3, "gray": 1}

# nvImageCodec's decoder options: libjpeg's "fancy" (interpolating) chroma upsampling, the
# choice OpenCV's libjpeg-turbo makes, so 4:2:0 / 4:2:2 images come out like cv2.imdecode's
NVIMGCODEC_OPTIONS = ":fancy_upsampling=1"
# nvImageCodec's backends, in the order it tries them: the hardware JPEG engines (where the
# GPU has them), then CUDA decoding, then CUDA with the Huffman decoding on the host
NVIMGCODEC_BACKENDS = ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU")
# batches whose copies may be in flight before a new one waits on the oldest (host memory
# held for them stays bounded when the GPU falls far behind)
MAX_IN_FLIGHT = 64


class Entry(NamedTuple):
    """One source of a batch: its position, what the caller passed (for messages), and
    either encoded ``data`` (a 1-D uint8 array) of ``format``, a decoded ``frame``, or
    the ``reason`` it cannot be decoded."""

    index: int
    source: str
    path: str | None
    data: np.ndarray | None = None
    format: str | None = None
    frame: np.ndarray | None = None
    reason: str | None = None


class Failure(NamedTuple):
    """A source that gave no image: its position, description, path and why."""

    index: int
    source: str
    path: str | None
    reason: str


UNREADABLE = "could not read the file"  # the start of the reason for a file that cannot be read


# --- reading sources ---------------------------------------------------------------------------
_MAGIC = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"))
CMYK_JPEG = "jpeg-cmyk"  # a JPEG of four components: decoded by OpenCV


def sniff(data):
    """The format of encoded bytes from their first bytes: "jpeg", "png" or "other"."""
    head = bytes(data[:8])
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return "other"


def jpeg_problem(data):
    """Why a JPEG cannot be whole, or None. A JPEG ends with an end-of-image marker (FF D9)
    after its first scan; the entropy-coded data between cannot hold that byte pair (a
    0xFF there is followed by 0x00 or a restart marker), so its absence means the file was
    cut short. Bytes after the marker (camera padding, an appended video) are allowed, as
    libjpeg allows them. The usual file ends with the marker and costs two byte reads."""
    n = len(data)
    if n >= 4 and data[n - 2] == 0xFF and data[n - 1] == 0xD9:
        return None
    pos = 2
    while True:  # walk the header segments to the first scan
        if pos + 1 >= n:
            return "truncated JPEG: the data ends inside its headers"
        if data[pos] != 0xFF:
            return f"corrupt JPEG: no segment marker at byte {pos}"
        marker = int(data[pos + 1])
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xDA:
            break
        if marker == 0xD9:
            return "corrupt JPEG: end-of-image marker before any image data"
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            pos += 2
            continue
        if pos + 3 >= n:
            return "truncated JPEG: the data ends inside its headers"
        length = (int(data[pos + 2]) << 8) | int(data[pos + 3])
        if length < 2:
            return f"corrupt JPEG: segment length {length} at byte {pos}"
        pos += 2 + length
    if bytes(data[pos:]).find(b"\xff\xd9") < 0:
        return "truncated JPEG: no end-of-image marker after the image data"
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers


def jpeg_components(data):
    """The component count of a JPEG's frame header (1 gray, 3 YCbCr, 4 CMYK / YCCK), or
    None where the headers end first (a walk over the few segments before the frame)."""
    n, pos = len(data), 2
    while pos + 3 < n and data[pos] == 0xFF:
        marker = int(data[pos + 1])
        if marker == 0xFF:
            pos += 1
            continue
        if marker in _SOF:
            return int(data[pos + 9]) if pos + 9 < n else None
        if marker == 0xDA or 0xD0 <= marker <= 0xD9 or marker == 0x01:
            return None
        pos += 2 + ((int(data[pos + 2]) << 8) | int(data[pos + 3]))
    return None


def describe_source(source):
    """``(description, path)`` of a source for messages."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return repr(path), path
    if isinstance(source, np.ndarray):
        return f"numpy.ndarray of {source.size} bytes", None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return f"{type(source).__name__} of {memoryview(source).nbytes} bytes", None
    return f"{type(source).__module__}.{type(source).__qualname__}", None


def _buffer(source, name):
    """A 1-D uint8 view of an encoded-bytes source (TypeError / ValueError naming ``name``
    for anything else)."""
    if isinstance(source, np.ndarray):
        if source.dtype != np.uint8 or source.ndim != 1:
            raise TypeError(f"{name}: expected a 1-D uint8 NumPy buffer of encoded bytes, got a "
                            f"numpy.ndarray of shape {source.shape} and dtype {source.dtype} "
                            f"(decoded frames need no decoding)")
        return np.ascontiguousarray(source)
    view = memoryview(source)
    if not view.c_contiguous:
        raise ValueError(f"{name}: expected a contiguous buffer of encoded bytes, got a "
                         f"non-contiguous memoryview")
    return np.frombuffer(view, np.uint8)


def read_source(index, source, name="sources"):
    """The :class:`Entry` of ``sources[index]``: its bytes read and checked. A source of a
    wrong kind raises TypeError (an argument error); bad data gives an entry with a
    ``reason``."""
    where = f"{name}[{index}]"
    if not isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview, np.ndarray)):
        raise TypeError(f"{where}: expected encoded bytes (bytes, bytearray, memoryview, a 1-D "
                        f"uint8 NumPy buffer) or a file path, got "
                        f"{describe_source(source)[0]}")
    description, path = describe_source(source)
    if path is not None:
        try:
            with open(path, "rb") as f:
                data = np.frombuffer(f.read(), np.uint8)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return Entry(index, description, path, reason=f"{UNREADABLE}: {reason}")
    else:
        data = _buffer(source, where)
    return check_entry(Entry(index, description, path, data=data))


def check_entry(entry):
    """``entry`` with its format, or with the reason its bytes cannot decode."""
    data = entry.data
    if data.size == 0:
        return entry._replace(data=None, reason="empty: no bytes to decode")
    fmt = sniff(data)
    reason = jpeg_problem(data) if fmt == "jpeg" else None
    if reason is not None:
        return entry._replace(data=None, format=fmt, reason=reason)
    if fmt == "jpeg" and jpeg_components(data) == 4:
        # Adobe CMYK / YCCK: OpenCV's conversion to BGR (nvJPEG's rounds otherwise, by 1 on
        # most pixels), so these decode as cv2.imdecode decodes them
        fmt = CMYK_JPEG
    return entry._replace(format=fmt)


def frame_entry(index, source, path, frame):
    """An entry for an image that is decoded already (it is only placed in the output)."""
    return Entry(index, source, path, frame=frame)


# --- the batch -------------------------------------------------------------------------------
def decode_batch(entries, color, backend, sink):
    """Decode ``entries`` (in order) into ``sink``'s memory: ``(images, failures)``,
    ``images[k]`` the image of ``entries[k]`` or None where it failed, ``failures`` the
    :class:`Failure` of each None, in order. ``backend`` (or None) decodes the entries of
    its formats on the GPU in one call; the rest and its failures go to cv2.imdecode.

    ``backend.decode(buffers, color=, device_id=, stream_ptr=)`` returns ``(images,
    held)``: per buffer an image (``__cuda_array_interface__`` or a host array, HWC; HW1
    for gray) or None, and objects to keep until the stream's work has run."""
    images = [None] * len(entries)
    failures = {}
    keep = []
    gpu_tried = set()
    fell_back = set()
    with sink:
        if backend is not None:
            batch = [k for k, e in enumerate(entries) if e.data is not None and e.format in backend.formats]
            if batch:
                decoded, held = backend.decode([entries[k].data for k in batch], color=color,
                                               device_id=sink.device_id, stream_ptr=sink.stream_ptr)
                # the encoded bytes and what reads them stay until the stream's work has run;
                # the decoded images are let go when this call returns: their buffers were
                # allocated in the stream's order and are freed in it, after the copies
                keep += [held, [entries[k].data for k in batch]]
                for k, img in zip(batch, decoded):
                    gpu_tried.add(k)
                    if img is not None:
                        images[k] = sink.place(img, color)  # None where its layout is unexpected
        todo = [k for k, e in enumerate(entries) if images[k] is None and e.reason is None and e.frame is None]
        decoded_here = dict(zip(todo, _host_decode([entries[k].data for k in todo], color)))
        for k, e in enumerate(entries):
            if images[k] is not None:
                continue
            if e.reason is not None:
                failures[k] = e.reason
            elif e.frame is not None:
                images[k] = sink.place(e.frame, None)
            else:
                frame = decoded_here[k]
                if frame is None:
                    failures[k] = undecodable(e.format, k in gpu_tried)
                else:
                    fell_back.add(k)
                    images[k] = sink.place(frame, color)
        for k, img in enumerate(images):  # nothing is lost without a word
            if img is None and k not in failures:
                failures[k] = "the decoded image has an unexpected dtype or channel count"
        gpu_ok = any(images[k] is not None for k in gpu_tried - fell_back)
        if not gpu_ok and fell_back & gpu_tried and not getattr(backend, "warned", True):
            backend.warned = True
            warnings.warn(f"{backend.name} decoded none of {len(gpu_tried)} JPEG images that OpenCV "
                          f"decodes: they were decoded on the CPU. Is nvJPEG installed (the "
                          f"cupyprep[decode] extra installs nvidia-nvimgcodec-cu13[nvjpeg])?",
                          RuntimeWarning, stacklevel=3)
        sink.finish(keep)
    return images, [Failure(k, entries[k].source, entries[k].path, failures[k]) for k in sorted(failures)]


_pool = []


def _host_decode(buffers, color):
    """:func:`fallback_decode` of each buffer, in a thread pool where there are several
    (cv2.imdecode releases the GIL)."""
    if len(buffers) < 2:
        return [fallback_decode(b, color) for b in buffers]
    if not _pool:
        import concurrent.futures

        _pool.append(concurrent.futures.ThreadPoolExecutor(min(16, os.cpu_count() or 1),
                                                           thread_name_prefix="cupyprep-imdecode"))
    return list(_pool[0].map(lambda b: fallback_decode(b, color), buffers))


def fallback_decode(data, color):
    """The host decode of one image (cv2.imdecode), for the formats the GPU backend does not
    take and the images it could not decode."""
    return cpu_decode.imdecode(data, color)


def undecodable(fmt, gpu_tried):
    if fmt in ("jpeg", CMYK_JPEG):
        who = "the GPU decoder and cv2.imdecode both failed" if gpu_tried else "cv2.imdecode failed"
        return f"corrupt JPEG data ({who})"
    if fmt == "png":
        return "corrupt or truncated PNG data (cv2.imdecode failed)"
    return "not an image format OpenCV decodes, or corrupt data (cv2.imdecode failed)"


# --- where images go -----------------------------------------------------------------------------
def _expected_shape(shape, color):
    """The output shape for a decoded image's shape (HWC or HW): HW for gray."""
    if color is None:
        return tuple(shape)
    h, w = shape[0], shape[1]
    return (h, w) if color == "gray" else (h, w, 3)


def _host_layout_ok(frame, color):
    """An image of the expected kind: uint8 with ``color``'s channels (HW or HWC), or for
    an already decoded frame (``color`` None) uint8 / uint16, HW or HWC."""
    if frame.ndim not in (2, 3):
        return False
    if color is None:
        return frame.dtype in (np.uint8, np.uint16)
    if frame.dtype != np.uint8:
        return False
    channels = 1 if frame.ndim == 2 else frame.shape[2]
    return channels == CHANNELS[color]


class HostSink:
    """Images as NumPy arrays (the CPU backend's output)."""

    device_id = None
    stream_ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def place(self, img, color):
        if hasattr(img, "__cuda_array_interface__"):
            import cupy

            img = cupy.asnumpy(_cupy_view(img))
        frame = np.asarray(img)
        if not _host_layout_ok(frame, color):
            return None
        return np.ascontiguousarray(frame.reshape(_expected_shape(frame.shape, color)))

    def finish(self, keep):
        pass


def _device_layout(img):
    """``(ptr, shape, strides)`` of a device image from ``__cuda_array_interface__`` (rows
    may be padded: nvImageCodec reports the row pitch in ``strides``)."""
    cai = img.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    own = getattr(img, "strides", None)
    if isinstance(own, tuple) and len(own) == len(shape):
        strides = own
    if strides is None:  # C-contiguous; uint8, so elements are bytes
        strides = contiguous_strides(shape)
    if np.dtype(cai.get("typestr", "|V1")) != np.uint8:
        return None
    return int(cai["data"][0]), shape, tuple(int(s) for s in strides)


def _cupy_view(img):
    import cupy

    ptr, shape, strides = _device_layout(img)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    mem = cupy.cuda.UnownedMemory(ptr, span, img)
    return cupy.ndarray(shape, np.uint8, cupy.cuda.MemoryPointer(mem, 0), strides)


class DeviceSink:
    """Images in device memory from the caller's allocator, written on the caller's stream.

    ``library`` "cupy" (CuPy's current allocator: its pool, or torch's through
    :func:`cupyprep.use_torch_allocator`) or "torch" (``torch.empty``: torch's caching
    allocator, the block recorded for ``torch_stream``)."""

    def __init__(self, library, device_id, stream_ptr, torch_stream=None):
        self.library = library
        self.device_id = int(device_id)
        self.stream_ptr = int(stream_ptr)
        self.torch_stream = torch_stream
        self._contexts = []
        self._pinned = []

    def __enter__(self):
        import cupy

        try:
            self._enter(cupy.cuda.Device(self.device_id))
            self._enter(cupy_stream(self.stream_ptr, self.device_id))  # made on that device
            if self.library == "torch":
                import torch

                self._enter(torch.cuda.device(self.device_id))
                self._enter(torch.cuda.stream(self.torch_stream))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _enter(self, context):
        context.__enter__()
        self._contexts.append(context)

    def __exit__(self, *exc):
        while self._contexts:
            self._contexts.pop().__exit__(*exc)
        return False

    def _empty(self, shape, dtype=np.uint8):
        if self.library == "torch":
            import torch

            tdtype = torch.uint8 if np.dtype(dtype) == np.uint8 else torch.uint16
            out = torch.empty(shape, dtype=tdtype, device=f"cuda:{self.device_id}")
            return out, out.data_ptr()
        import cupy

        out = cupy.empty(shape, dtype)
        return out, out.data.ptr

    def place(self, img, color):
        import cupy

        runtime = cupy.cuda.runtime
        if hasattr(img, "__cuda_array_interface__"):
            layout = _device_layout(img)
            if layout is None:
                return None
            ptr, shape, strides = layout
            if len(shape) != 3 or strides[2] != 1 or strides[1] != shape[2] or \
                    (color is not None and shape[2] != CHANNELS[color]):
                return None
            out, dst = self._empty(_expected_shape(shape, color))
            h, w, c = shape
            if h and w:
                # one pitched copy: drops any row padding of the decoder's buffer
                runtime.memcpy2DAsync(dst, w * c, ptr, strides[0], w * c, h,
                                      runtime.memcpyDeviceToDevice, self.stream_ptr)
            return out
        frame = np.asarray(img)
        if not _host_layout_ok(frame, color):
            return None
        frame = np.ascontiguousarray(frame)
        out, dst = self._empty(_expected_shape(frame.shape, color), frame.dtype)
        if frame.nbytes:
            # staged through page-locked memory: the copy is asynchronous, the host never waits
            pinned = cupy.cuda.alloc_pinned_memory(frame.nbytes)
            np.copyto(np.frombuffer(pinned, frame.dtype, frame.size).reshape(frame.shape), frame)
            runtime.memcpyAsync(dst, pinned.ptr, frame.nbytes, runtime.memcpyHostToDevice, self.stream_ptr)
            self._pinned.append(pinned)
        return out

    def finish(self, keep):
        """Hold ``keep`` (the encoded bytes and the decoder's code streams) and the pinned
        staging buffers until the work queued on the stream so far has run."""
        import cupy

        keep = keep + self._pinned
        self._pinned = []
        if keep:
            event = cupy.cuda.Event(block=False, disable_timing=True)
            event.record(cupy_stream(self.stream_ptr, self.device_id))
            IN_FLIGHT.add(event, keep)


class _InFlight:
    """Objects held until an event has completed (checked without waiting at each add)."""

    def __init__(self):
        self._items = []
        self._lock = threading.Lock()

    def add(self, event, objects):
        with self._lock:
            self._drop_done()
            self._items.append((event, objects))
            while len(self._items) > MAX_IN_FLIGHT:
                oldest, _ = self._items.pop(0)
                oldest.synchronize()

    def release_done(self):
        """Let go of the objects whose event has completed (the next :meth:`add` would);
        returns how many entries are still held."""
        with self._lock:
            self._drop_done()
            return len(self._items)

    def __len__(self):
        """The entries held (done or not: counting lets go of nothing)."""
        with self._lock:
            return len(self._items)

    def _drop_done(self):
        self._items = [(e, o) for e, o in self._items if not e.done]


IN_FLIGHT = _InFlight()


# --- the GPU backend --------------------------------------------------------------------------------
class NvImageCodecBackend:
    """nvImageCodec's GPU decoders (nvJPEG: the hardware JPEG engines where the GPU has
    them, CUDA decoding otherwise), one batched call per batch on the caller's stream.

    Only its GPU backends are enabled: what they cannot decode comes back as None and is
    decoded by OpenCV, so CPU-decoded images are always OpenCV's. ``decode`` returns, per
    buffer, an ``nvimgcodec.Image`` (device memory, ``__cuda_array_interface__``) ordered
    on ``stream_ptr``, or None; and the objects to hold until the work queued on the
    stream has run (the code streams reading the buffers)."""

    name = "nvImageCodec"
    formats = frozenset({"jpeg"})
    warned = False  # once per process: it decoded nothing OpenCV could (nvJPEG missing?)

    def __init__(self, nvimgcodec):
        self.nvimgcodec = nvimgcodec
        self._decoders = {}
        self._params = {}
        self._lock = threading.Lock()

    def _decoder(self, device_id):
        decoder = self._decoders.get(device_id)
        if decoder is None:
            nv = self.nvimgcodec
            backends = [nv.Backend(getattr(nv.BackendKind, k)) for k in NVIMGCODEC_BACKENDS]
            decoder = nv.Decoder(device_id=device_id, backends=backends, options=NVIMGCODEC_OPTIONS)
            self._decoders[device_id] = decoder
        return decoder

    def params(self, color):
        params = self._params.get(color)
        if params is None:
            nv = self.nvimgcodec
            spec, fmt = {"bgr": (nv.ColorSpec.SRGB, nv.SampleFormat.I_BGR),
                         "rgb": (nv.ColorSpec.SRGB, nv.SampleFormat.I_RGB),
                         "gray": (nv.ColorSpec.GRAY, nv.SampleFormat.I_Y)}[color]
            params = nv.DecodeParams(apply_exif_orientation=True, color_spec=spec, allow_any_depth=False,
                                     sample_format=fmt)
            self._params[color] = params
        return params

    def decode(self, buffers, *, color, device_id, stream_ptr):
        nv = self.nvimgcodec
        if device_id is None:  # images for the host: the current device, the legacy stream
            device_id, stream_ptr = nv.NVIMGCODEC_DEVICE_CURRENT, 0
        out = [None] * len(buffers)
        streams, where = [], []
        for k, b in enumerate(buffers):
            stream = self._code_stream(b)
            if stream is not None:
                streams.append(stream)
                where.append(k)
        if not streams:
            return out, streams
        params = self.params(color)
        with self._lock:  # one decoder per device, not reentrant
            decoder = self._decoder(device_id)
            try:
                images = decoder.decode(streams, params=params, cuda_stream=stream_ptr)
            except Exception:  # one bad image must not take the batch with it
                images = None
            if images is None or len(images) != len(streams):
                # (releases that leave failed images out of the list, too) one at a time
                images = [self._one(decoder, s, params, stream_ptr) for s in streams]
        for k, img in zip(where, images):
            out[k] = img
        return out, streams

    def _code_stream(self, buffer):
        """A code stream over the buffer (its header is parsed here: None for a corrupt
        one). The buffer is passed as it is; a release that wants writable or ``bytes``
        input gets a copy."""
        for data in (buffer, buffer.tobytes()):
            try:
                return self.nvimgcodec.CodeStream(data)
            except Exception:
                continue
        return None

    @staticmethod
    def _one(decoder, stream, params, stream_ptr):
        try:
            return decoder.decode(stream, params=params, cuda_stream=stream_ptr)
        except Exception:
            return None


_backend = []


def gpu_backend():
    """The GPU decoding backend (:class:`NvImageCodecBackend`), or None where nvImageCodec
    is not installed or no CUDA device is visible. Looked up once per process."""
    if not _backend:
        _backend.append(_find_backend())
    return _backend[0]


def _find_backend():
    try:
        from nvidia import nvimgcodec
    except ImportError:
        return None
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
    except Exception:
        return None
    return NvImageCodecBackend(nvimgcodec)
