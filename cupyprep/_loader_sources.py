"""What a Loader reads: samples from its source (paths, encoded bytes, frames, a torch
Dataset, a ``cv2.VideoCapture``), decoded and checked on the host."""
from __future__ import annotations

import os
import sys

import numpy as np

from . import _arrays, _decoders

FRAME_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))


class Sample:
    """One element of the source, before decoding."""

    __slots__ = ("position", "value", "lazy_index")

    def __init__(self, position, value, lazy_index=False):
        self.position = position
        self.value = value
        self.lazy_index = lazy_index  # value is an index into a map-style dataset


# --- reading the source --------------------------------------------------------------------------
def samples(source):
    """Iterate the source's elements as :class:`Sample` (in the feeder thread)."""
    if is_map_dataset(source):
        for i in range(len(source)):
            yield Sample(i, i, lazy_index=True)
        return
    if hasattr(source, "read") and callable(source.read) and not hasattr(source, "__iter__"):
        # a cv2.VideoCapture (or anything with its read() -> (ok, frame))
        position = 0
        while True:
            ok, frame = source.read()
            if not ok:
                return
            yield Sample(position, frame)
            position += 1
    for position, value in enumerate(source):
        yield Sample(position, value)


def is_map_dataset(source):
    torch = sys.modules.get("torch")
    if torch is not None:
        data = getattr(torch.utils, "data", None)
        if data is not None and isinstance(source, data.IterableDataset):
            return False
        if data is not None and isinstance(source, data.Dataset):
            return hasattr(source, "__len__")
    return False


def _read_image(value, flags):
    import cv2

    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        # the file the caller named, opened as it is: nothing here joins, resolves or
        # searches other paths. OpenCV takes a C string: a NUL would end the name early
        # and open another file (the OS refuses such names everywhere else)
        if "\0" in path:
            raise ValueError(f"a file path may not contain a NUL character, got {path!r}")
        frame = cv2.imread(path, flags)
        if frame is None:
            raise _unreadable(path)
        return frame, path
    buf = np.frombuffer(value, np.uint8)
    if buf.size == 0:
        raise ValueError("could not decode 0 bytes as an image (empty)")
    frame = cv2.imdecode(buf, flags)
    if frame is None:
        raise ValueError(f"could not decode {len(buf)} bytes as an image")
    return frame, None


def _unreadable(path):
    """Why OpenCV gave no image for ``path``: the error to raise."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return FileNotFoundError(f"no such file: {path!r}")
    except OSError as exc:
        return OSError(f"could not read {path!r}: {exc.strerror or exc}")
    if os.path.isdir(path):
        return IsADirectoryError(f"expected an image file, got the directory {path!r}")
    if size == 0:
        return ValueError(f"{path!r} is an empty file (0 bytes)")
    return ValueError(f"could not decode {path!r} ({size} bytes) as an image (truncated, corrupt, "
                      f"unreadable or not an image format OpenCV decodes)")


def _as_frame(value, flags):
    """``(frame, path)`` for one image value: a path, encoded bytes or an array."""
    if isinstance(value, (str, os.PathLike, bytes, bytearray, memoryview)):
        return _read_image(value, flags)
    if isinstance(value, np.ndarray):
        return value, None
    if _arrays.is_torch(value):
        if value.device.type != "cpu":
            raise TypeError(f"expected a host frame, got {_arrays.describe(value)} (frames already "
                            f"on the GPU go to cupyprep.preprocess directly)")
        return value.detach().numpy(), None
    if hasattr(value, "__array_interface__"):  # PIL images
        return np.asarray(value), None
    raise TypeError(f"expected a file path, encoded image bytes or an HWC array, got "
                    f"{_arrays.describe(value)}")


def _split_sample(value):
    """A dataset's sample: ``(image, target...)`` or ``{"image": ..., ...}``."""
    if isinstance(value, tuple):
        if not value:
            raise ValueError("expected a sample (image, target...), got an empty tuple")
        rest = value[1:]
        return value[0], (rest[0] if len(rest) == 1 else (rest or None))
    if isinstance(value, dict) and "image" in value:
        rest = {k: v for k, v in value.items() if k != "image"}
        return value["image"], (rest or None)
    return value, None


def load(sample, source, decode, flags):
    """Decode one sample (in a pool thread): ``(frame, path, target)``."""
    with _naming(sample):
        value = source[sample.value] if sample.lazy_index else sample.value
        if decode is not None:
            value = decode(value)
        image, target = _split_sample(value)
        frame, path = _as_frame(image, flags)
        if isinstance(sample.value, (str, os.PathLike)) and path is None:
            path = os.fspath(sample.value)
        return _checked(frame), path, target


def read_encoded(sample, source, color, formats):
    """Read one sample for decoding on the GPU (in a pool thread): ``(entry, path,
    target)``, the entry (:class:`cupyprep._decoders.Entry`) holding the encoded bytes of
    a format in ``formats`` (decoded with the batch), or a frame: images of other formats
    are decoded here by cv2.imdecode (in parallel, as the CPU path does), and frames in the
    source are taken as they are."""
    with _naming(sample):
        value = source[sample.value] if sample.lazy_index else sample.value
        image, target = _split_sample(value)
        if isinstance(image, (str, os.PathLike, bytes, bytearray, memoryview)) or (
                isinstance(image, np.ndarray) and image.ndim == 1):
            entry = _decoders.read_source(sample.position, image, "source")
            if entry.reason is not None:
                if entry.reason.startswith(_decoders.UNREADABLE):
                    raise FileNotFoundError(f"{entry.reason} ({entry.path!r})")
                raise ValueError(entry.reason)
            if entry.format not in formats:
                frame = _decoders.fallback_decode(entry.data, color)
                if frame is None:
                    raise ValueError(_decoders.undecodable(entry.format, False))
                entry = _decoders.frame_entry(entry.index, entry.source, entry.path, frame)
        else:
            frame, _ = _as_frame(image, None)
            entry = _decoders.frame_entry(sample.position, _arrays.describe(frame), None, _checked(frame))
        path = entry.path
        if isinstance(sample.value, (str, os.PathLike)) and path is None:
            path = os.fspath(sample.value)
        return entry, path, target


def _checked(frame):
    frame = np.asarray(frame)
    if frame.dtype not in FRAME_DTYPES:
        raise TypeError(f"expected uint8 or uint16 pixels (converted to float on the GPU, "
                        f"not before), got {_arrays.describe(frame)}")
    if frame.ndim not in (2, 3) or frame.shape[0] == 0 or frame.shape[1] == 0:
        raise ValueError(f"expected a non-empty HWC or HW frame, got {_arrays.describe(frame)}")
    if frame.ndim == 3 and frame.shape[2] not in (1, 3, 4):
        raise ValueError(f"expected 1, 3 or 4 channels, got {_arrays.describe(frame)}")
    return frame


def path_of(sample):
    """The file path a sample names, or None."""
    if isinstance(sample.value, (str, os.PathLike)):
        return os.fspath(sample.value)
    return None


def named(exc, where):
    """``exc`` with ``where`` (the source element) in front of its message: the same type
    where it can be made from one message, else ``exc`` itself."""
    try:
        return type(exc)(f"{where}: {exc}")
    except Exception:  # an exception type that wants other arguments goes as it is
        return exc


class _naming:
    """Re-raise an exception of a sample's reading or decoding with the source element's
    position (and path) in front of its message, as the same type."""

    __slots__ = ("sample",)

    def __init__(self, sample):
        self.sample = sample

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or not isinstance(exc, Exception):
            return False
        where = f"source element {self.sample.position}"
        path = path_of(self.sample)
        if path is not None and path not in str(exc):
            where += f" ({path!r})"
        error = named(exc, where)
        if error is exc:
            return False
        raise error from exc
