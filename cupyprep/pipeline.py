"""Host frames to ready batches: a :class:`Loader` decodes in a thread pool, stages uint8
frames in pinned buffers, copies them to the GPU on a copy stream and preprocesses the
previous batch on a compute stream at the same time.

The data path of one batch, on a CUDA device::

    source --(feeder thread)--> decode pool (cv2.imread / imdecode, or the frame itself)
           --> copy pool: frames into a pinned staging buffer (uint8, packed), while the
               previous batch is sent and launched (frames already in page-locked memory,
               such as torch's pin_memory() tensors, are sent from where they are)
           --> copy stream: one host-to-device copy, event ``copied``
           --> compute stream: waits ``copied``, cupyprep.preprocess, events ``consumed``
               (the device staging buffer may be overwritten) and ``ready``
           --> bounded queue --> consumer: its stream waits ``ready``

Three staging buffers rotate: a pinned buffer is written again only after the copy out of
it has finished (a host wait on ``copied``), and a device buffer only after the
preprocessing that read it (the copy stream waits on ``consumed``). Only uint8 (or uint16)
pixels cross PCIe; conversion to float happens on the GPU.

With ``decode="gpu"`` the decode pool only reads each file's bytes (and decodes the
formats the GPU decoder does not take); the feeder decodes each batch in one call on the
compute stream (nvImageCodec, :mod:`cupyprep._decoders`) into images from the output's
allocator, preprocesses them there and queues the batch with its ``ready`` event, while
the pool reads the next batches.

Without a GPU the same Loader runs the CPU backend (OpenCV) in its feeder thread and yields
NumPy batches (or torch CPU tensors), so code written against it runs anywhere.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import inspect
import numbers
import os
import queue
import threading
import weakref
from typing import NamedTuple

import numpy as np

from . import _arrays, _decoders, _loader_sources, _staging, _streams
from .decode import DecodeError, DecodeFailure
from .preprocess import PreprocessMeta, preprocess

# preprocess's own defaults, for the outputs a Loader allocates for it
_PREPROCESS_DEFAULTS = {k: p.default for k, p in inspect.signature(preprocess).parameters.items()}

__all__ = ["Loader", "LoaderMeta", "Skipped"]

_STAGING_BUFFERS = 3
_DECODE_MODES = ("cpu", "gpu", "auto")
_POLL_S = 0.05  # how often blocked threads look at the stop flag
_PREPROCESS_OPTIONS = frozenset(inspect.signature(preprocess).parameters) - {"images", "size", "out"}


@dataclasses.dataclass(frozen=True)
class LoaderMeta(PreprocessMeta):
    """:class:`PreprocessMeta` of one batch plus where each frame came from.

    Extra attributes: ``index`` (N,) int64 position of each frame in the source;
    ``items`` the file path of each frame (None for frames that were not files);
    ``targets`` the rest of each dataset sample (``(image, target)`` → ``target``; None
    where there was none); ``skipped`` the :class:`Skipped` elements
    (``on_error="skip"``) left out since the previous batch, in source order.
    """

    index: np.ndarray = None
    items: tuple = ()
    targets: tuple = ()
    skipped: tuple = ()


class Skipped(NamedTuple):
    """A source element a ``Loader(on_error="skip")`` left out: its position in the source,
    its file path (None when it was not a path) and why."""

    index: int
    item: object
    reason: str


class _Done:
    """A finished future, for samples that need no decoding (the call runs at once; its
    exception is raised by ``result()``, in the batch's turn, like a pool's future)."""

    __slots__ = ("_exc", "_value")

    def __init__(self, fn, *args):
        self._value = self._exc = None
        try:
            self._value = fn(*args)
        except Exception as exc:
            self._exc = exc

    def result(self, timeout=None):
        if self._exc is not None:
            raise self._exc
        return self._value


class _Failure:
    def __init__(self, exc):
        self.exc = exc


_END = object()


class _Stopped(Exception):
    """The loader was closed while its feeder was waiting."""


























# --- the pipeline state (no reference to the Loader, so the Loader can be collected) ------------
class _Pipeline:
    def __init__(self, source, size, batch_size, device, output, workers, copy_threads, prefetch,
                 decode, flags, drop_last, options, on_error="raise", gpu_decode=None):
        self.source = source
        # (backend, color) when batches are decoded by the GPU backend, else None
        self.gpu_decode = gpu_decode
        self.size = size
        self.batch_size = batch_size
        self.device = device  # None for the CPU backend, else the CUDA device index
        self.output = output
        self.prefetch = prefetch
        self.decode = decode
        self.flags = flags
        self.drop_last = drop_last
        self.options = options
        self.stop = threading.Event()
        self.queue = queue.Queue(maxsize=prefetch)
        self.decoders = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="cupyprep-decode")
        self.copiers = (concurrent.futures.ThreadPoolExecutor(copy_threads, thread_name_prefix="cupyprep-stage")
                        if device is not None else None)
        self.thread = threading.Thread(target=self._run, name="cupyprep-loader", daemon=True)
        self.slots = []
        self.staged = None  # a batch whose staging copy is under way
        self.streams = None
        self.consumer_stream = None
        self.closed = False
        self.lock = threading.Lock()
        self.pulled = 0  # source elements taken so far (for backpressure checks)
        self.on_error = on_error
        self.skipped = []  # every Skipped so far (the consumer reads it after the last batch too)
        self.unreported = []  # skipped since the last batch put in the queue
        self.form = None  # (dtype, channels) of the frames accepted so far, with on_error="skip"

    # -- feeder ---------------------------------------------------------------------------------
    def _run(self):
        try:
            if self.device is not None:
                self._setup_device()
            self._feed()
            self._put(_END)
        except _Stopped:
            pass
        except BaseException as exc:  # handed to the consumer, raised there
            try:
                self._put(_Failure(exc))
            except _Stopped:
                pass

    def _until_stopped(self, attempt, busy):
        """``attempt()`` (which gives up after _POLL_S with ``busy``) until it succeeds or
        the Loader stops."""
        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                return attempt()
            except busy:
                continue

    def _put(self, item):
        self._until_stopped(lambda: self.queue.put(item, timeout=_POLL_S), queue.Full)

    def _wait(self, future):
        return self._until_stopped(lambda: future.result(timeout=_POLL_S), concurrent.futures.TimeoutError)

    def _submit(self, sample):
        if self.gpu_decode is not None:
            backend, color = self.gpu_decode
            return self.decoders.submit(_loader_sources.read_encoded, sample, self.source, color, backend.formats)
        if self.decode is None and not sample.lazy_index and isinstance(sample.value, np.ndarray):
            return _Done(_loader_sources.load, sample, self.source, None, self.flags)  # nothing to decode
        return self.decoders.submit(_loader_sources.load, sample, self.source, self.decode, self.flags)

    def _feed(self):
        pending = collections.deque()  # batches whose decoding is under way
        batch = []
        reading = _loader_sources.samples(self.source)
        try:
            for sample in reading:
                if self.stop.is_set():
                    raise _Stopped
                self.pulled += 1
                batch.append((sample, self._submit(sample)))
                if len(batch) == self.batch_size:
                    pending.append(batch)
                    batch = []
                    while len(pending) > self.prefetch:
                        self._emit(pending.popleft())
        except _Stopped:
            raise
        except Exception as exc:
            # the source itself failed (its iterator raised): the frames read before it
            # still reach the consumer, then the error, naming the element it stopped at
            if batch:
                pending.append(batch)
            while pending:
                self._emit(pending.popleft())
            self._flush()
            error = _loader_sources.named(exc, f"source element {self.pulled} (reading the source)")
            if error is exc:
                raise
            raise error from exc
        if batch and not self.drop_last:
            pending.append(batch)
        while pending:
            self._emit(pending.popleft())
        self._flush()

    def _flush(self):
        if self.staged is not None:
            staged, self.staged = self.staged, None
            self._finish_gpu(staged)

    def _settle(self, batch):
        """Wait for a batch's decoding: its positions and decoded samples, minus (with
        ``on_error="skip"``) those that failed, which are recorded instead."""
        kept = []
        for sample, future in batch:
            try:
                kept.append((sample, self._wait(future)))
            except _Stopped:
                raise
            except Exception as exc:
                if self.on_error == "raise":
                    raise
                self._skip(sample, exc)
        if self.on_error == "skip" and kept:
            # a frame unlike the others (dtype, channels) is skipped, not the whole batch
            forms = [self._form_of(d[0]) for _, d in kept]
            form = self.form or _common_form(forms)
            for (sample, d), (dtype, channels) in zip(kept, forms):
                if (dtype, channels) != form:
                    self._skip(sample, ValueError(
                        f"source element {sample.position}: {channels} channel(s) of {dtype} "
                        f"({_describe_item(d[0])}); the Loader's frames have {form[1]} "
                        f"channel(s) of {form[0]}"))
            kept = [item for item, f in zip(kept, forms) if f == form]
            self.form = form
        positions = [sample.position for sample, _ in kept]
        decoded = [d for _, d in kept]
        if self.on_error == "raise":
            _check_form(positions, [d[0] for d in decoded], self._form_of)
        return positions, decoded

    def _form_of(self, item):
        """``(dtype, channels)`` of a frame, or of the image an encoded entry decodes to."""
        if isinstance(item, _decoders.Entry):
            if item.frame is None:
                return np.dtype(np.uint8), (1 if self.gpu_decode[1] == "gray" else 3)
            item = item.frame
        return _form(item)

    def _skip(self, sample, exc):
        self._record(Skipped(int(sample.position), _loader_sources.path_of(sample),
                             f"{type(exc).__name__}: {exc}"))

    def _record(self, entry):
        self.skipped.append(entry)
        self.unreported.append(entry)

    def _emit(self, batch):
        positions, decoded = self._settle(batch)
        if self.gpu_decode is not None and decoded:
            self._emit_encoded(positions, decoded)
            return
        if not decoded:  # every element skipped: reported with the next batch
            return
        frames = [d[0] for d in decoded]
        extra = self._extra(positions, decoded)
        if self.device is None:
            result, meta = self._process_cpu(frames)
            self._put((result, _with_extra(meta, extra), None))
            return
        # the copy threads stage this batch while the previous one is sent and launched
        staged = self._stage_gpu(frames, extra)
        previous, self.staged = self.staged, staged
        if previous is not None:
            self._finish_gpu(previous)

    def _extra(self, positions, decoded):
        """A batch's meta fields beside preprocess's, and the skipped elements not yet reported."""
        skipped, self.unreported = tuple(sorted(self.unreported)), []
        return {"index": np.array(positions, np.int64), "items": tuple(d[1] for d in decoded),
                "targets": tuple(d[2] for d in decoded), "skipped": skipped}

    def _emit_encoded(self, positions, decoded):
        """Decode a batch with the GPU backend and preprocess it: on the compute stream
        (decoded images and the batch ordered there, the consumer's stream waits for
        ``ready``), or on the host for a Loader on the CPU backend. Sources that fail to
        decode raise, or with ``on_error="skip"`` are recorded and left out."""
        backend, color = self.gpu_decode
        entries = [d[0] for d in decoded]
        if self.device is None:
            images, failures = _decoders.decode_batch(entries, color, backend, _decoders.HostSink())
        else:
            _, compute_s, _, compute_t = self.streams
            library = "torch" if self.output == "torch" else "cupy"
            sink = _decoders.DeviceSink(library, self.device, compute_s.ptr, compute_t)
            images, failures = _decoders.decode_batch(entries, color, backend, sink)
        if failures:
            if self.on_error == "raise":
                _raise_failures(failures, positions)
            for f in failures:
                self._record(Skipped(int(positions[f.index]), f.path, f"DecodeError: {f.reason}"))
            kept = [k for k, img in enumerate(images) if img is not None]
            positions = [positions[k] for k in kept]
            decoded = [decoded[k] for k in kept]
            images = [images[k] for k in kept]
            if not images:  # reported with the next batch
                return
        extra = self._extra(positions, decoded)
        if self.device is None:
            result, meta = self._process_cpu(images)
            self._put((result, _with_extra(meta, extra), None))
            return
        import cupy

        images = [im if im.ndim == 3 else im[:, :, None] for im in images]  # gray: HW1
        if self.output == "torch":
            import torch

            with torch.cuda.stream(compute_t):
                batch, meta = preprocess(images, self.size, **self.options)
        else:
            out = self._cupy_output(len(images), images[0].shape[2], compute_s)
            with compute_s:
                batch, meta = preprocess(images, self.size, out=out, **self.options)
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record(compute_s)
        self._put((batch, _with_extra(meta, extra), ready))

    def _process_cpu(self, frames):
        _staging.layout(frames)  # the same checks as the device path
        batch, meta = preprocess(frames, self.size, **self.options)
        if self.output == "torch":
            import torch

            batch = torch.from_numpy(batch)
        return batch, meta

    def _setup_device(self):
        import cupy

        cupy.cuda.Device(self.device).use()
        if self.output == "torch":
            import torch

            torch.cuda.set_device(self.device)
            copy_t, compute_t = torch.cuda.Stream(self.device), torch.cuda.Stream(self.device)
            self.streams = (_streams.cupy_stream(copy_t.cuda_stream), _streams.cupy_stream(compute_t.cuda_stream),
                            copy_t, compute_t)
            copy = copy_t  # (the staging buffers come from torch's allocator)
        else:
            copy_s = cupy.cuda.Stream(non_blocking=True)
            compute_s = cupy.cuda.Stream(non_blocking=True)
            self.streams = (copy_s, compute_s, None, None)
            copy = copy_s
        self.slots = [_staging.Slot(self.device, self.output, copy) for _ in range(_STAGING_BUFFERS)]
        self.turn = 0

    def _stage_gpu(self, frames, extra):
        """Take the next staging slot and start copying the frames into its pinned buffer
        (copy threads); frames that already live in page-locked memory are not copied."""
        shapes, offsets, nbytes, uniform = _staging.layout(frames)
        slot = self.slots[self.turn % len(self.slots)]
        self.turn += 1
        slot.copied.synchronize()  # the slot's last host-to-device copy has finished
        slot.held = None  # frames it copied from directly may go now
        direct = all(_staging.page_locked(f) for f in frames)
        slot.ensure(nbytes, host=not direct)
        futures = []
        if not direct:
            futures = [self.copiers.submit(_staging.copy_band, job) for job in _staging.copy_jobs(frames, shapes, offsets, slot.host)]
        return _staging.Staged(frames, extra, shapes, offsets, nbytes, uniform, slot, direct, futures)

    def _finish_gpu(self, st):
        """Wait for the staging copies, send the batch on the copy stream, preprocess it on
        the compute stream and queue it for the consumer."""
        import cupy

        copy_s, compute_s, _, compute_t = self.streams
        for f in st.futures:
            self._wait(f)
        slot = st.slot
        copy_s.wait_event(slot.consumed)  # the device buffer's last reader is done
        h2d = cupy.cuda.runtime.memcpyHostToDevice
        if st.direct:
            for f, off in zip(st.frames, st.offsets):
                cupy.cuda.runtime.memcpyAsync(slot.dev_ptr + off, f.ctypes.data, f.nbytes, h2d, copy_s.ptr)
            slot.held = st.frames  # referenced until this copy has finished
        else:
            cupy.cuda.runtime.memcpyAsync(slot.dev_ptr, slot.host.ctypes.data, st.nbytes, h2d, copy_s.ptr)
        slot.copied.record(copy_s)
        compute_s.wait_event(slot.copied)
        dtype = st.frames[0].dtype
        views = _staging.device_views(slot.dev, st.shapes, st.offsets, dtype, st.uniform, self.output)
        if self.output == "torch":
            import torch

            with torch.cuda.stream(compute_t):
                batch, meta = preprocess(views, self.size, **self.options)
        else:
            out = self._cupy_output(len(st.frames), st.shapes[0][2], compute_s)
            with compute_s:
                batch, meta = preprocess(views, self.size, out=out, **self.options)
        slot.consumed.record(compute_s)
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record(compute_s)
        self._put((batch, _with_extra(meta, st.extra), ready))

    def _cupy_output(self, n, channels, compute_s):
        """A CuPy output for the consumer's stream: a block the consumer freed is written
        only after the consumer's stream has finished with it."""
        import cupy

        H, W = self.size
        layout = self.options.get("layout", _PREPROCESS_DEFAULTS["layout"])
        shape = (n, channels, H, W) if layout == "NCHW" else (n, H, W, channels)
        consumer = self.consumer_stream if self.consumer_stream is not None else 0
        if consumer == _streams.PER_THREAD_STREAM:
            # the consumer thread's per-thread default stream, which this thread cannot
            # name (the handle means its own): the legacy default stream, which that stream
            # synchronizes with, stands for it
            consumer = _streams.LEGACY_STREAM
        with _streams.cupy_stream(consumer):
            out = cupy.empty(shape, np.dtype(self.options.get("dtype", _PREPROCESS_DEFAULTS["dtype"])))
        _streams.order_after(consumer, compute_s.ptr)
        return out

    # -- shutdown -------------------------------------------------------------------------------
    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.stop.set()
        while True:  # unblock a feeder waiting to put
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        # close() may run in one of the pipeline's own threads (garbage collection happens
        # wherever the last reference goes): that thread cannot wait for itself
        own = threading.current_thread() in self._own_threads()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=30)
        self.decoders.shutdown(wait=not own, cancel_futures=True)
        if self.copiers is not None:
            self.copiers.shutdown(wait=not own, cancel_futures=True)
        if self.streams is not None:
            if own:
                # from a pipeline thread the buffers go with the pipeline object, without
                # waiting: their frees (on the copy stream, where the device buffers were
                # allocated) come after the preprocessing that read them
                for slot in self.slots:
                    self.streams[0].wait_event(slot.consumed)
            else:
                # pinned and device buffers are freed only after the copies using them
                for slot in self.slots:
                    slot.release()

    def _own_threads(self):
        out = [self.thread]
        for pool in (self.decoders, self.copiers):
            if pool is not None:
                out.extend(getattr(pool, "_threads", ()))
        return out


def _form(frame):
    return frame.dtype, (frame.shape[2] if frame.ndim == 3 else 1)


def _common_form(forms):
    """The (dtype, channels) most frames of a batch have (the earliest on a tie)."""
    counts = collections.Counter(forms)
    return max(counts, key=lambda k: (counts[k], -forms.index(k))) if counts else None


def _describe_item(item):
    if isinstance(item, _decoders.Entry):
        return item.source if item.frame is None else _arrays.describe(item.frame)
    return _arrays.describe(item)


def _check_form(positions, items, form_of):
    """One dtype and channel count per batch (the first frame's), or an error naming the
    source element that differs."""
    if not items:
        return
    first = form_of(items[0])
    for p, f in zip(positions, items):
        if form_of(f) != first:
            raise ValueError(f"source element {p}: frames of one batch differ: source element "
                             f"{positions[0]} is {_describe_item(items[0])}, source element {p} is "
                             f"{_describe_item(f)} (same dtype and channel count expected)")


def _raise_failures(failures, positions):
    """A decode failure of a batch as the error of its source element."""
    if failures:
        f = failures[0]
        failure = DecodeFailure(int(positions[f.index]), f.source, f.path, f.reason)
        raise DecodeError([failure], f"source element {failure.index} ({failure.source}): "
                                     f"{failure.reason}")


def _with_extra(meta, extra):
    fields = {f.name: getattr(meta, f.name) for f in dataclasses.fields(PreprocessMeta)}
    return LoaderMeta(**fields, **extra)


# --- the public iterator -----------------------------------------------------------------------
def _gpu_device(device):
    """The CUDA device index to use, or None for the CPU backend."""
    if device == "cpu":
        return None
    if device not in ("auto", "cuda") and not (isinstance(device, str) and device.startswith("cuda:")) \
            and not (isinstance(device, numbers.Integral) and not isinstance(device, bool)):
        raise ValueError(f"device: expected 'auto', 'cpu', 'cuda', 'cuda:N' or an int, got {device!r}")
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        count = 0
    if device == "auto":
        return 0 if count > 0 else None
    index = device if isinstance(device, numbers.Integral) else (
        0 if device == "cuda" else int(device.split(":", 1)[1]))
    if not 0 <= index < count:
        raise ValueError(f"device: CUDA device {index} requested, {count} present")
    return int(index)


def _torch_cuda():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


class Loader:
    """Iterate ready model-input batches from host images: ``for batch, meta in Loader(...)``.

    Parameters
    ----------
    source : iterable, torch Dataset, or cv2.VideoCapture
        Elements are file paths (decoded with ``cv2.imread``), encoded image bytes
        (``cv2.imdecode``), HWC (or HW) uint8 / uint16 arrays (NumPy, torch CPU tensors,
        PIL images), or dataset samples ``(image, target...)`` / ``{"image": ..., ...}``
        whose image is one of those. A map-style ``torch.utils.data.Dataset`` is indexed
        ``0 .. len - 1`` inside the decode threads (so its ``__getitem__`` runs in
        parallel); an object with ``read() -> (ok, frame)`` (a ``cv2.VideoCapture``) is
        read until ``ok`` is false. Frames are BGR as OpenCV decodes them (``swap_rb=True``
        by default gives RGB out; pass ``swap_rb=False`` for RGB sources such as PIL).
    size : (int, int)
        Output (height, width), as :func:`cupyprep.preprocess`.
    batch_size : int
        Frames per batch; the last batch is smaller unless ``drop_last``.
    device : {"auto", "cpu", "cuda", "cuda:N"} or int
        ``auto``: the first CUDA device when CuPy sees one, else the CPU backend.
    output : {"torch", "cupy", "numpy"}, optional
        The batch's kind. Default: torch on a GPU when torch has CUDA (CuPy otherwise);
        NumPy on the CPU backend (``"torch"`` gives torch CPU tensors there).
    workers : int, optional
        Decode threads (``cv2.imread`` / ``imdecode`` release the GIL); default
        ``min(8, os.cpu_count())``.
    copy_threads : int, optional
        Threads copying frames into pinned staging buffers; default ``min(8, os.cpu_count())``.
    prefetch : int
        Ready batches held in the queue. The source is read at most
        ``(2 * prefetch + 1) * batch_size`` elements past the batches the consumer has
        taken: ``prefetch`` batches queued, one waiting to be queued, ``prefetch`` decoding
        (backpressure: a slow consumer stops the reading).
    decode : {"cpu", "gpu", "auto"} or callable, optional
        Where encoded images (paths, bytes) are decoded. ``"cpu"`` (the default, also
        None): ``cv2.imread`` / ``imdecode`` in the decode threads. ``"gpu"``: the decode
        threads only read the bytes; each batch is decoded in one call by the GPU decoder
        (nvImageCodec, ``pip install 'cupyprep[decode]'``; :func:`cupyprep.decode`) on the
        compute stream and preprocessed there, so compressed bytes cross PCIe instead of
        pixels. Formats the GPU decoder does not take (PNG, ...) are decoded by OpenCV in
        the decode threads; frames in the source are uploaded as they are. A ValueError
        without nvImageCodec or a CUDA device. ``"auto"``: ``"gpu"`` on a CUDA device when
        nvImageCodec is installed, else ``"cpu"``. A callable: applied to each source
        element in a decode thread instead of the default reading; returns an image
        (array, path or bytes) or a sample ``(image, target...)``, decoded on the CPU.
    imread_flags : int, optional
        Flags for ``cv2.imread`` / ``imdecode`` (default ``cv2.IMREAD_COLOR``); with GPU
        decoding ``IMREAD_COLOR``, ``IMREAD_GRAYSCALE`` or ``IMREAD_COLOR_RGB``.
    drop_last : bool
    progress : bool
        A tqdm progress bar in images (needs ``tqdm``).
    on_error : {"raise", "skip"}
        What a source element that cannot be used does (a missing, empty or corrupt file,
        bytes that do not decode, a frame of another dtype or channel count than the
        others, an exception in ``decode`` or a dataset's ``__getitem__``). ``"raise"``:
        the consumer gets the error, naming the element's position (and path), after the
        batches before it. ``"skip"``: it is left out of its batch (which is then smaller)
        and listed in ``meta.skipped`` of the next batch yielded, and in
        :attr:`Loader.skipped`; the first frames accepted fix the dtype and channel count.
        An exception raised by the source's own iterator is raised either way, after the
        frames read before it.
    **options :
        Passed to :func:`cupyprep.preprocess` (``mode``, ``interpolation``, ``pad_value``,
        ``mean``, ``std``, ``scale``, ``swap_rb``, ``layout``, ``dtype``, ...).

    Yields
    ------
    (batch, meta) : the preprocessed batch and a :class:`LoaderMeta` (``to_original`` maps
    boxes back to each frame; ``index``, ``items``, ``targets`` say where frames came from).

    Convention
    ----------
    On a GPU, a yielded batch is ready for the consumer's current stream (torch's current
    stream for torch output, CuPy's for CuPy output): that stream waits on the device for
    the batch's preprocessing, and the host never blocks on the GPU. CuPy output is allocated
    in that stream's order, so memory the consumer drops is written again only after its
    stream is done with it (a consumer on its thread's per-thread default stream: in the
    legacy default stream's order, which that stream synchronizes with). Frames of one size go
    up as one packed NHWC block (one launch without per-frame tables); frames of different
    sizes as one staging buffer with a device view per frame (the ragged path). An error in
    a worker (a file that does not decode, a bad frame) is raised in the consumer, naming
    the source element; the loader is then closed. ``close()`` (or leaving a ``with`` block,
    a KeyboardInterrupt in the loop, or garbage collection) stops the threads, joins them
    and frees the staging buffers after their copies finish. A Loader is one pass over its
    source.

    Example
    -------
    >>> with cupyprep.Loader(paths, (640, 640), batch_size=32) as loader:   # doctest: +SKIP
    ...     for batch, meta in loader:
    ...         boxes = meta.to_original(model(batch))
    """

    def __init__(self, source, size, *, batch_size=32, device="auto", output=None, workers=None,
                 copy_threads=None, prefetch=2, decode=None, imread_flags=None, drop_last=False,
                 progress=False, on_error="raise", **options):
        unknown = sorted(set(options) - _PREPROCESS_OPTIONS)
        if "out" in options:
            raise TypeError("out: the Loader allocates each batch; out= is not accepted")
        if unknown:
            raise TypeError(f"options: {unknown} are not arguments of cupyprep.preprocess "
                            f"(expected some of {sorted(_PREPROCESS_OPTIONS)})")
        if not (isinstance(batch_size, numbers.Integral) and not isinstance(batch_size, bool)) \
                or batch_size <= 0:
            raise ValueError(f"batch_size: expected a positive int, got {batch_size!r}")
        if not (isinstance(prefetch, numbers.Integral) and not isinstance(prefetch, bool)) or prefetch <= 0:
            raise ValueError(f"prefetch: expected a positive int, got {prefetch!r}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error: expected 'raise' or 'skip', got {on_error!r}")
        if isinstance(decode, str):
            if decode not in _DECODE_MODES:
                raise ValueError(f"decode: expected one of {list(_DECODE_MODES)} or a callable, got {decode!r}")
        elif decode is not None and not callable(decode):
            raise TypeError(f"decode: expected 'cpu', 'gpu', 'auto' or a callable, got "
                            f"{_arrays.describe(decode)}")
        if isinstance(source, (str, bytes, os.PathLike)):
            raise TypeError(f"source: expected an iterable of images, got one {type(source).__name__} "
                            f"(put a single path in a list)")
        if not (_loader_sources.is_map_dataset(source) or hasattr(source, "__iter__") or hasattr(source, "read")):
            raise TypeError(f"source: expected an iterable, a torch Dataset or a cv2.VideoCapture, "
                            f"got {_arrays.describe(source)}")
        if isinstance(source, np.ndarray) and source.ndim == 4:
            source = list(source)  # an NHWC array: its frames
        from . import _validate

        size = _validate.size_hw("size", size)
        gpu = _gpu_device(device)
        if output is None:
            output = "numpy" if gpu is None else ("torch" if _torch_cuda() else "cupy")
        allowed = ("numpy", "torch") if gpu is None else ("torch", "cupy")
        if output not in allowed:
            where = "the CPU backend" if gpu is None else f"CUDA device {gpu}"
            raise ValueError(f"output: expected one of {list(allowed)} on {where}, got {output!r}")
        if output == "torch":
            import torch  # noqa: F401
        cpus = os.cpu_count() or 1
        workers = _thread_count("workers", workers, cpus)
        copy_threads = _thread_count("copy_threads", copy_threads, cpus)
        if imread_flags is None:
            import cv2

            imread_flags = cv2.IMREAD_COLOR
        gpu_decode = None
        if isinstance(decode, str):
            gpu_decode = _gpu_decoding(decode, gpu, imread_flags)
            decode = None
        self._progress = None
        if progress:
            try:
                from tqdm import tqdm
            except ImportError:
                raise ImportError("progress=True needs tqdm (pip install tqdm)") from None
            total = len(source) if hasattr(source, "__len__") else None
            self._progress = tqdm(total=total, unit="img", desc="cupyprep.Loader")
        self.size = size
        self.batch_size = int(batch_size)
        self.device = gpu
        self.output = output
        self.workers = workers
        self.copy_threads = copy_threads
        self.drop_last = bool(drop_last)
        self._source = source
        self._pipe = _Pipeline(source, size, self.batch_size, gpu, output, workers, copy_threads,
                               int(prefetch), decode, imread_flags, self.drop_last, options, on_error,
                               gpu_decode)
        self.decode = "cpu" if gpu_decode is None else "gpu"
        self._started = False
        self._finished = False
        self._finalizer = weakref.finalize(self, _shutdown, self._pipe, self._progress)

    # -- iteration ------------------------------------------------------------------------------
    def __iter__(self):
        self._start()
        return self

    def _start(self):
        if self._started:
            return
        self._started = True
        if self.device is not None and self.output == "cupy":
            import cupy

            with cupy.cuda.Device(self.device):
                self._pipe.consumer_stream = cupy.cuda.get_current_stream().ptr
        self._pipe.thread.start()

    def __next__(self):
        if self._finished:
            raise StopIteration
        self._start()
        try:
            item = self._get()
        except BaseException:
            self.close()
            raise
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.exc
        batch, meta, ready = item
        if ready is not None:
            self._hand_over(batch, ready)
        if self._progress is not None:
            self._progress.update(len(meta))
        return batch, meta

    def _get(self):
        pipe = self._pipe
        while True:
            try:
                return pipe.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if pipe.closed:  # close() from another thread while this one waited
                    return _END
                if not pipe.thread.is_alive() and pipe.queue.empty():
                    raise RuntimeError("cupyprep.Loader: the feeder thread ended without a result") from None

    def _hand_over(self, batch, ready):
        """Order the consumer's current stream after the batch's preprocessing."""
        if self.output == "torch":
            import torch

            current = torch.cuda.current_stream(batch.device)
            _streams.cupy_stream(current.cuda_stream).wait_event(ready)
            # the caching allocator must not hand this memory to the compute stream again
            # before the consumer's stream is done with it
            batch.record_stream(current)
        else:
            import cupy

            with cupy.cuda.Device(self.device):
                current = cupy.cuda.get_current_stream()
                current.wait_event(ready)
                # the next outputs are allocated on the stream the consumer reads them on
                # now (and gives them back on), also where it moved to another one
                self._pipe.consumer_stream = current.ptr

    def __len__(self):
        if not hasattr(self._source, "__len__"):
            raise TypeError(f"len(Loader): expected a source with a length (a sequence or a "
                            f"map-style Dataset), got {_arrays.describe(self._source)}")
        n = len(self._source)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # -- shutdown -------------------------------------------------------------------------------
    def close(self):
        """Stop the threads, join them and free the staging buffers (idempotent)."""
        self._finished = True
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def skipped(self):
        """Every :class:`Skipped` element so far, in source order (``on_error="skip"``),
        including those after the last batch yielded."""
        return sorted(self._pipe.skipped)

    @property
    def pulled(self):
        """Source elements read so far."""
        return self._pipe.pulled

    @property
    def threads(self):
        """The threads this loader started (the feeder, decode and staging pools)."""
        return self._pipe._own_threads()


def _gpu_decoding(mode, device, flags):
    """``(backend, color)`` for decoding batches with the GPU backend, or None to decode
    on the CPU (``mode`` "cpu", or "auto" without a GPU decoder or a GPU Loader)."""
    if mode == "cpu":
        return None
    backend = _decoders.gpu_backend()
    if backend is None:
        if mode == "gpu":
            raise ValueError("decode: 'gpu' needs nvImageCodec and a CUDA device (pip install "
                             "'cupyprep[decode]'); decode='auto' falls back to the CPU")
        return None
    if mode == "auto" and device is None:
        return None
    import cv2

    colors = {cv2.IMREAD_COLOR: "bgr", cv2.IMREAD_GRAYSCALE: "gray"}
    if hasattr(cv2, "IMREAD_COLOR_RGB"):
        colors[cv2.IMREAD_COLOR_RGB] = "rgb"
    if flags not in colors:
        raise ValueError(f"imread_flags: decode={mode!r} decodes as cv2.IMREAD_COLOR, "
                         f"IMREAD_GRAYSCALE or IMREAD_COLOR_RGB do; got {flags!r}")
    return backend, colors[flags]


def _thread_count(name, value, cpus):
    """A pool's thread count: ``value``, a positive int, or by default the CPUs (up to 8)."""
    if value is None:
        return min(8, cpus)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def _shutdown(pipe, progress):
    pipe.close()
    if progress is not None:
        progress.close()
