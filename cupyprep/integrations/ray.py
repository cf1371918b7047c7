"""Ray Data batch inference: callable classes for ``Dataset.map_batches``.

Ray Data hands a callable class a batch as a dict of NumPy arrays (``batch_format="numpy"``,
the default) and runs one instance per actor: ``__init__`` once (the model loaded and the
kernels compiled there), ``__call__`` per batch. The classes here take batches as Ray
gives them:

- an image column of same-size images (an ``(N, H, W, C)`` array) or of images of
  different sizes (an object array of ``(H, W, C)`` arrays, or a list);
- or a bytes column (``ray.data.read_binary_files``'s ``"bytes"``), decoded by
  :func:`decode_images` (``cupyprep.decode`` where that exists, ``cv2.imdecode`` otherwise),
  or by the ``decode`` callable given;
- an id column (any type: ints, strings such as ``read_binary_files(...,
  include_paths=True)``'s ``"path"``), carried through, and named by every error.

They return model-ready batches plus the geometry to map outputs back
(:data:`META_COLUMNS`), as columns; every other column passes through unchanged.

- :class:`Preprocess`: images → ``cupyprep.preprocess`` → a host batch column and the
  meta columns (a stage of its own, before a model stage).
- :class:`MapBack`: boxes or points per row in network coordinates → original-image
  coordinates through the meta columns.
- :class:`Detect`: the whole detector in one GPU actor (decode, preprocess, a torch model,
  YOLO head decoding, ``multiclass_nms``, boxes mapped back): no float tensor crosses back
  to the host between the stages. :func:`detection_pipeline` applies it to a dataset.

On an actor that holds a GPU (``num_gpus=1``) the work runs on it (CuPy kernels; the torch
model on the same device and stream); elsewhere (``device="auto"`` without a GPU, or
``device="cpu"``) on the CPU backend, with the same results where the ops are exact
(uint8 letterbox / resize, the meta mapping, NMS: README's table). Each actor warms the
kernels it will launch in ``__init__`` (one call on a small batch of each form), so no
batch pays a compile.

This module imports neither Ray nor torch (torch only when a :class:`Detect` runs a
model); Ray calls the classes. Recipe: docs/scaling-out.md.

Example
-------
>>> ds = ray.data.read_binary_files("images/", include_paths=True)            # doctest: +SKIP
>>> out = detection_pipeline(ds, load_model, (640, 640), id_column="path",   # doctest: +SKIP
...                          concurrency=2, num_gpus=1, batch_size=64)
>>> out.write_parquet("detections/")                                         # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

import cupyprep

from .. import _staging, _streams

__all__ = ["DEVICES", "META_COLUMNS", "Detect", "MapBack", "Preprocess", "decode_images",
           "detection_pipeline", "images_from_batch", "meta_columns", "meta_from_columns"]

# the columns that carry a PreprocessMeta, one row per image: (N, 2) int64 each
META_COLUMNS = ("orig_size", "resized_size", "offset", "canvas_size")
DEVICES = "'auto', 'cpu', 'cuda', 'cuda:N' or an int"


# --- decoding ------------------------------------------------------------------------------------
def decode_images(sources, *, device=False, like=None):
    """Compressed images (bytes) to HWC uint8 BGR images, as ``cv2.imdecode`` reads them.

    ``cupyprep.decode`` where the installed cupyprep has it, on the device for a GPU actor
    (``device=True``: device images of the kind ``like``, ``"cupy"`` or ``"torch"``, on that
    library's current stream; no host round trip); otherwise ``cv2.imdecode`` with
    ``IMREAD_COLOR``. A source that does not decode is a ``ValueError`` naming its position
    (:class:`Preprocess` names its id).
    """
    decode = getattr(cupyprep, "decode", None)
    if decode is not None and device:
        return decode(list(sources), like=like)
    import cv2

    images = []
    for i, data in enumerate(sources):
        buf = np.frombuffer(memoryview(data), np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        img = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
        if img is None:
            raise ValueError(f"sources[{i}]: cv2.imdecode could not decode {buf.size} bytes "
                             f"(not an image, truncated or corrupt)")
        images.append(img)
    return images


def _decode_rows(decode, sources, ids, id_column):
    """``decode`` of a batch's sources; a failure is raised again naming the row's id (the
    failing source found by decoding the rows one at a time)."""
    try:
        return list(decode(sources))
    except Exception:
        for i, src in enumerate(sources):
            try:
                decode([src])
            except Exception as exc:
                raise ValueError(f"{_row(ids, id_column, i)}: could not decode the image "
                                 f"({len(src)} bytes): {exc}") from exc
        raise


# --- batches and columns -------------------------------------------------------------------------
def _row(ids, id_column, i):
    """How an error names row ``i`` of a batch."""
    if ids is None:
        return f"row {i} of the batch"
    value = ids[i].item() if isinstance(ids[i], np.generic) else ids[i]
    return f"{id_column}={value!r}"


def images_from_batch(batch, image_column="image"):
    """A Ray Data batch's image column as preprocess takes it: an ``(N, H, W, C)`` array as
    it is (``(N, H, W)`` gets a channel axis), an object array or list as a list of
    images."""
    col = batch[image_column]
    if isinstance(col, np.ndarray) and col.dtype != object:
        if col.ndim == 4:
            return col
        if col.ndim == 3:
            return col[..., None]
        raise ValueError(f"batch[{image_column!r}]: expected (N, H, W, C) or (N, H, W) images, "
                         f"or an object array of images, got shape {col.shape}")
    return list(col)


def meta_columns(meta):
    """A :class:`cupyprep.PreprocessMeta` as columns (:data:`META_COLUMNS`), one (2,) int64
    row per image."""
    n = len(meta)
    return {
        "orig_size": np.ascontiguousarray(meta.orig_size, np.int64),
        "resized_size": np.ascontiguousarray(meta.resized_size, np.int64),
        "offset": np.ascontiguousarray(meta.offset, np.int64),
        "canvas_size": np.tile(np.array(meta.size, np.int64), (n, 1)),
    }


def meta_from_columns(batch):
    """The :class:`cupyprep.PreprocessMeta` of a batch's meta columns (:data:`META_COLUMNS`,
    as :func:`meta_columns` writes them; every row of one batch on the same canvas)."""
    missing = [c for c in META_COLUMNS if c not in batch]
    if missing:
        raise ValueError(f"batch: expected the meta columns {list(META_COLUMNS)} (Preprocess "
                         f"writes them), missing {missing}; columns: {sorted(batch)}")
    cols = {c: np.asarray(np.stack(list(batch[c])) if np.asarray(batch[c]).dtype == object
                          else batch[c], np.int64).reshape(-1, 2) for c in META_COLUMNS}
    canvases = np.unique(cols["canvas_size"], axis=0)
    if len(canvases) > 1:
        raise ValueError(f"batch['canvas_size']: expected one canvas size in a batch, got "
                         f"{canvases.tolist()}")
    size = tuple(int(v) for v in canvases[0]) if len(canvases) else (0, 0)
    return cupyprep.PreprocessMeta(orig_size=cols["orig_size"], resized_size=cols["resized_size"],
                                   offset=cols["offset"], size=size)


def _check_rows(images, ids, id_column):
    """Each image of a batch an HW or HWC image of 1, 3 or 4 channels and the first one's
    dtype, else a ValueError naming its row."""
    if not isinstance(images, list):
        return
    dtype = images[0].dtype if images else None
    for i, img in enumerate(images):
        shape = tuple(img.shape)
        if len(shape) not in (2, 3) or 0 in shape[:2] or (len(shape) == 3 and shape[2] not in (1, 3, 4)):
            raise ValueError(f"{_row(ids, id_column, i)}: expected an HW or HWC image with 1, 3 or "
                             f"4 channels, got shape {shape}")
        if img.dtype != dtype:
            raise ValueError(f"{_row(ids, id_column, i)}: expected dtype {dtype} like the batch's "
                             f"first image, got {img.dtype}")


def _device_index(device):
    """The CUDA device index an actor uses, or None for the CPU backend."""
    if device == "cpu":
        return None
    ok = device in ("auto", "cuda") or (isinstance(device, str) and device.startswith("cuda:")
                                        and device[5:].isdigit()) \
        or (isinstance(device, numbers.Integral) and not isinstance(device, bool))
    if not ok:
        raise ValueError(f"device: expected {DEVICES}, got {device!r}")
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (no CuPy, no driver or no device: the CPU backend)
        count = 0
    if device == "auto":
        return 0 if count else None
    index = 0 if device == "cuda" else int(device[5:]) if isinstance(device, str) else int(device)
    if not 0 <= index < count:
        raise ValueError(f"device: CUDA device {index} requested, {count} visible to this actor "
                         f"(map_batches(..., num_gpus=1) gives an actor one)")
    return index


class _Uploader:
    """A batch's host images to the device in one copy: packed into a page-locked buffer,
    copied on the stream the work runs on, viewed there as a list (or, same-size images,
    as one NHWC array)."""

    def __init__(self, device, library, stream):
        """``stream``: the stage's stream (CuPy's, or torch's for ``library="torch"``),
        where the staging buffer is allocated and the copy and the work run."""
        self.slot = _staging.Slot(device, library, stream)
        self.stream_ptr = stream.cuda_stream if library == "torch" else stream.ptr
        self.library = library

    def __call__(self, images):
        import cupy

        frames = list(images) if isinstance(images, np.ndarray) else images
        if not frames or not all(isinstance(f, np.ndarray) for f in frames):
            return images  # already on the device (a device decoder's output)
        frames = [np.ascontiguousarray(f) for f in frames]
        shapes, offsets, nbytes, uniform = _staging.layout(frames)
        slot = self.slot
        slot.copied.synchronize()  # the last batch's copy has left the pinned buffer
        slot.ensure(nbytes)
        for job in _staging.copy_jobs(frames, shapes, offsets, slot.host):
            _staging.copy_band(job)
        cupy.cuda.runtime.memcpyAsync(slot.dev_ptr, slot.host.ctypes.data, nbytes,
                                      cupy.cuda.runtime.memcpyHostToDevice, self.stream_ptr)
        slot.copied.record(_streams.cupy_stream(self.stream_ptr))
        # HW frames come back as (H, W, 1) views (an NHW1 array when they share a size)
        return _staging.device_views(slot.dev, shapes, offsets, frames[0].dtype, uniform, self.library)


class Preprocess:
    """``cupyprep.preprocess`` as a Ray Data ``map_batches`` stage.

    Parameters
    ----------
    size : (int, int)
        The model input (height, width).
    image_column, bytes_column : str
        Where the images are: decoded images in ``image_column``, else compressed ones in
        ``bytes_column`` (``read_binary_files``' ``"bytes"``).
    id_column : str or None
        A column that names each row (carried through; every error names the row by it).
        ``None``: errors name the row's position in its batch.
    output_column : str
        The column of the model-ready batch: ``(N, C, H, W)`` (or NHWC) NumPy.
    device : {"auto", "cpu", "cuda", "cuda:N"} or int
        ``"auto"``: the actor's GPU when it has one (``num_gpus=1``), the CPU backend
        otherwise.
    decode : callable, optional
        ``decode(list_of_bytes) -> list of HWC images`` (NumPy, or device arrays on a GPU
        actor); default :func:`decode_images`.
    warm : bool
        Compile the kernels this stage launches now, on a small batch of each form (a list
        of different sizes, and one NHWC array), so no batch pays a compile.
    **options
        ``cupyprep.preprocess``'s keyword arguments (``mode``, ``interpolation``,
        ``pad_value``, ``mean``, ``std``, ``scale``, ``swap_rb``, ``layout``, ``dtype``).

    Returns (per batch)
    -------------------
    Every column but the image / bytes column, ``output_column``, and the meta columns
    (:data:`META_COLUMNS`) that :class:`MapBack` (or :func:`meta_from_columns`) reads.

    Example
    -------
    >>> ds.map_batches(Preprocess, fn_constructor_args=((640, 640),), batch_size=64,   # doctest: +SKIP
    ...                concurrency=2, num_gpus=1)
    """

    def __init__(self, size, *, image_column="image", bytes_column="bytes", id_column="id",
                 output_column="input", device="auto", decode=None, warm=True, **options):
        self.size = tuple(size)
        self.image_column = image_column
        self.bytes_column = bytes_column
        self.id_column = id_column
        self.output_column = output_column
        self.options = options
        self.device = _device_index(device)
        self.decode = self._decode if decode is None else decode
        self.library = "cupy"
        self._uploader = None
        self._stream = None
        if self.device is not None:
            import cupy

            cupy.cuda.Device(self.device).use()
            self._set_library()
            self._uploader = _Uploader(self.device, self.library, self._stream)
        if warm:
            self.warm()

    def _set_library(self):
        import cupy

        self._stream = cupy.cuda.Stream(non_blocking=True)

    def _decode(self, sources):
        """The default decoder: :func:`decode_images`, on the device for a GPU actor, as the
        stage's library's arrays (torch tensors for :class:`Detect`'s model)."""
        return decode_images(sources, device=self.device is not None, like=self.library)

    # -- the steps, shared with Detect -----------------------------------------------------------
    def warm(self, channels=3, dtype=np.uint8):
        """Run the stage's kernels once on a ragged list and on an NHWC array of small images
        (the variants a batch of that dtype and channel count launches)."""
        for batch in self._warm_batches(channels, dtype):
            self._drop(self.run(batch))

    def _warm_batches(self, channels, dtype):
        """Two small batches: a list of two sizes, and an NHWC array."""
        for col in (_object_column([np.zeros((5, 7, channels), dtype), np.zeros((9, 4, channels), dtype)]),
                    np.zeros((2, 6, 5, channels), dtype)):
            yield {self.image_column: col} if self.id_column is None else \
                {self.image_column: col, self.id_column: np.arange(2)}

    def _drop(self, result):
        """Finish a warm-up call's work (its outputs unused)."""
        if self.device is not None:
            self._synchronize()

    def _synchronize(self):
        self._stream.synchronize()

    def _stream_context(self):
        return contextlib.nullcontext() if self._stream is None else self._stream

    def images(self, batch):
        """The batch's images (decoded where they are bytes) and its ids."""
        ids = None
        if self.id_column is not None:
            if self.id_column not in batch:
                raise ValueError(f"batch: expected an id column {self.id_column!r} (or pass "
                                 f"id_column=None, or 'path' with read_binary_files(..., "
                                 f"include_paths=True)); columns: {sorted(batch)}")
            ids = list(batch[self.id_column])
        if self.image_column in batch:
            images = images_from_batch(batch, self.image_column)
        elif self.bytes_column in batch:
            images = _decode_rows(self.decode, list(batch[self.bytes_column]), ids, self.id_column)
        else:
            raise ValueError(f"batch: expected an image column {self.image_column!r} or a bytes "
                             f"column {self.bytes_column!r}; columns: {sorted(batch)}")
        _check_rows(images, ids, self.id_column)
        return images, ids

    def run(self, batch):
        """``(model_input, meta, passthrough)``: the preprocessed batch where the stage runs
        (a device array on a GPU actor), its :class:`cupyprep.PreprocessMeta`, and the
        columns that pass through."""
        rest = {k: v for k, v in batch.items() if k not in (self.image_column, self.bytes_column)}
        with self._stream_context():  # a device decoder's work too
            images, ids = self.images(batch)
            if len(images) == 0:
                images = np.zeros((0, 1, 1, 3), np.uint8)
            elif self.device is not None:
                images = self._uploader(images)
            out, meta = self._call(images, ids)
        return out, meta, rest

    def _call(self, images, ids):
        try:
            return cupyprep.preprocess(images, self.size, **self.options)
        except (TypeError, ValueError) as exc:
            named = "" if ids is None else f" (the batch's {self.id_column}s: {ids})"
            raise type(exc)(f"{exc}{named}") from exc

    def __call__(self, batch):
        out, meta, rest = self.run(batch)
        if self.device is not None:
            import cupy

            host = cupy.asnumpy(out, stream=self._stream)
            self._synchronize()
        else:
            host = out
        return {**rest, self.output_column: host, **meta_columns(meta)}


def _object_column(arrays):
    col = np.empty(len(arrays), object)
    for i, a in enumerate(arrays):
        col[i] = a
    return col


class MapBack:
    """Boxes (or points) per row, in network coordinates, mapped to original-image
    coordinates through the meta columns :class:`Preprocess` wrote.

    Parameters
    ----------
    columns : sequence of str
        Columns of ``(K, 4)`` xyxy boxes or ``(K, 2)`` points per row (an object array of
        arrays, or one ``(N, K, 4|2)`` array).
    clip : bool
        Limit the results to each original image.
    drop_meta : bool
        Leave the meta columns out of the result.
    """

    def __init__(self, columns=("boxes",), *, clip=True, drop_meta=True):
        self.columns = (columns,) if isinstance(columns, str) else tuple(columns)
        self.clip = clip
        self.drop_meta = drop_meta

    def __call__(self, batch):
        meta = meta_from_columns(batch)
        out = {k: v for k, v in batch.items() if not (self.drop_meta and k in META_COLUMNS)}
        for name in self.columns:
            if name not in batch:
                raise ValueError(f"batch: expected a column {name!r} to map; columns: {sorted(batch)}")
            col = batch[name]
            rows = list(col) if isinstance(col, np.ndarray) and col.dtype == object or \
                isinstance(col, list) else None
            if rows is None:
                out[name] = meta.to_original(np.asarray(col), clip=self.clip)
            else:
                mapped = meta.to_original([np.asarray(r) for r in rows], clip=self.clip) if rows else []
                out[name] = _object_column(mapped)
        return out


class Detect(Preprocess):
    """A YOLO-style detector as one ``map_batches`` stage: images (or bytes) in, detections
    in original-image coordinates out.

    Per batch: decode (bytes), :class:`Preprocess`'s steps, ``model(batch)`` (a torch
    tensor on the actor's device, or a CPU tensor on a CPU actor), ``decode_yolo``,
    ``multiclass_nms``, ``to_original``, and one copy of the detections to the host.

    Parameters
    ----------
    model_factory : callable
        Called once per actor with no arguments; returns the model, a callable from the
        ``(N, C, H, W)`` input tensor to the head: ``(N, boxes, 5 + classes)`` rows
        ``(cx, cy, w, h, obj, cls...)`` (``head="yolov5"``) or YOLOv8's
        ``(N, 4 + classes, boxes)`` (``head="yolov8"``). A ``torch.nn.Module`` is moved to
        the actor's device and put in eval mode.
    size : (int, int)
        The model input (height, width).
    head : {"yolov5", "yolov8"}
    iou_threshold, score_threshold, top_k, max_detections, class_agnostic :
        As :func:`cupyprep.multiclass_nms`.
    **kwargs
        :class:`Preprocess`'s (columns, ``device``, ``decode``, ``warm``, preprocess
        options).

    Returns (per batch)
    -------------------
    Every column but the image / bytes column, and per row ``boxes`` (K, 4) float32 xyxy
    in the original image's pixels, ``scores`` (K,) float32, ``classes`` (K,) int64, by
    descending score (object columns: Parquet and JSON write them as lists).
    """

    def __init__(self, model_factory, size, *, head="yolov5", iou_threshold=0.45,
                 score_threshold=0.25, top_k=None, max_detections=100, class_agnostic=False,
                 warm=True, **kwargs):
        if head not in ("yolov5", "yolov8"):
            raise ValueError(f"head: expected 'yolov5' or 'yolov8', got {head!r}")
        self.head = head
        self.nms_options = {"iou_threshold": iou_threshold, "score_threshold": score_threshold,
                            "top_k": top_k, "max_detections": max_detections,
                            "class_agnostic": class_agnostic}
        super().__init__(size, warm=False, **kwargs)
        import torch

        self._torch = torch
        self.model = model_factory()
        if isinstance(self.model, torch.nn.Module):
            self.model = self.model.to(self._torch_device()).eval()
        if warm:
            self.warm()

    def _set_library(self):
        # the model's library: preprocess writes torch tensors on torch's current stream
        import torch

        torch.cuda.set_device(self.device)
        self.library = "torch"
        self._stream = torch.cuda.Stream(self.device)

    def _synchronize(self):
        self._stream.synchronize()

    def _stream_context(self):
        return contextlib.nullcontext() if self._stream is None else self._torch.cuda.stream(self._stream)

    def _torch_device(self):
        return "cpu" if self.device is None else f"cuda:{self.device}"

    def warm(self, channels=3, dtype=np.uint8):
        """Run the whole stage once on a ragged list and on an NHWC array of small images:
        the kernels compiled, the model's first call (its own start-up) made."""
        for batch in self._warm_batches(channels, dtype):
            self.detect(batch)

    def detect(self, batch):
        """The detections of a batch: ``(rest, boxes, scores, classes)`` with the last three
        lists of host arrays, one per row."""
        torch = self._torch
        x, meta, rest = self.run(batch)
        n = len(meta)
        if n == 0:
            empty = []
            return rest, empty, empty, empty
        with self._stream_context(), torch.inference_mode():
            if isinstance(x, np.ndarray):
                x = torch.from_numpy(x)
            elif not isinstance(x, torch.Tensor):  # a decoder's CuPy images gave CuPy
                x = cupyprep.to_torch(x)
            head = self.model(x)
            if self.head == "yolov8":
                head = head.transpose(1, 2)
            if head.dtype not in (torch.float32, torch.float16):
                head = head.float()
            boxes, scores = cupyprep.decode_yolo(head, objectness=self.head == "yolov5")
            det = cupyprep.multiclass_nms(boxes, scores, **self.nms_options).to_original(meta)
            parts = [det.counts, det.boxes, det.scores, det.classes]
            if self.device is not None:
                parts = [p.to("cpu", non_blocking=False) for p in parts]
        counts, boxes, scores, classes = (p.numpy() for p in parts)
        boxes = boxes.astype(np.float32, copy=False)
        return (rest, [boxes[i, :c] for i, c in enumerate(counts)],
                [scores[i, :c] for i, c in enumerate(counts)], [classes[i, :c] for i, c in enumerate(counts)])

    def __call__(self, batch):
        rest, boxes, scores, classes = self.detect(batch)
        return {**rest, "boxes": _object_column(boxes), "scores": _object_column(scores),
                "classes": _object_column(classes)}


def detection_pipeline(dataset, model_factory, size, *, batch_size=32, concurrency=1, num_gpus=None,
                       num_cpus=None, **kwargs):
    """``dataset.map_batches(Detect, ...)``: a Ray Dataset of images (an image column) or
    of files (``read_binary_files``'s ``bytes``) to one of detections, per row ``boxes``,
    ``scores``, ``classes`` (:class:`Detect`) and the columns that pass through.

    ``concurrency`` actors of ``num_gpus`` GPUs each (``None``: 1 where this Ray cluster
    has GPUs, else 0 and the CPU backend) and ``num_cpus`` CPUs each (``None``: Ray's
    default, 1; leave the reading tasks a CPU: actors holding every CPU of a cluster
    starve the read that feeds them); ``kwargs`` go to :class:`Detect`. Write the result
    with ``.write_parquet(path)`` or ``.write_json(path)``.
    """
    if num_gpus is None:
        import ray

        num_gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    resources = {} if num_cpus is None else {"num_cpus": num_cpus}
    return dataset.map_batches(Detect, fn_constructor_args=(model_factory, size),
                               fn_constructor_kwargs=kwargs, batch_size=batch_size,
                               concurrency=concurrency, num_gpus=num_gpus, **resources)
