"""Encoded images (JPEG, PNG, ... bytes or files) to decoded images on the GPU, in one call
per batch: nvImageCodec's GPU decoders where it is installed (``pip install
'cupyprep[decode]'``), ``cv2.imdecode`` for the rest."""
from __future__ import annotations

import dataclasses
import numbers
import os
import sys

import numpy as np

from . import _arrays, _decoders, _validate
from ._streams import chosen_stream, order_after, torch_current_stream

__all__ = ["DecodeError", "DecodeFailure", "decode"]

_ON_ERROR = ("raise", "skip")


@dataclasses.dataclass(frozen=True)
class DecodeFailure:
    """A source :func:`decode` gave no image for (``on_error="skip"``).

    ``index`` is its position in ``sources``; ``source`` describes it (the path's repr, or
    the buffer's type and size); ``path`` is the file path or None; ``reason`` says why
    (unreadable file, empty buffer, truncated or corrupt data, unsupported format).
    """

    index: int
    source: str
    path: str | None
    reason: str

    def __str__(self):
        return f"sources[{self.index}] ({self.source}): {self.reason}"


class DecodeError(ValueError):
    """A source could not be decoded (``on_error="raise"``). ``failures`` lists every source
    of the call that failed (:class:`DecodeFailure`); the message names the first one's
    index and path."""

    def __init__(self, failures, message=None):
        self.failures = list(failures)
        if message is None:
            first = self.failures[0]
            more = len(self.failures) - 1
            tail = f" (and {more} more: {[f.index for f in self.failures[1:]]})" if more else ""
            message = f"could not decode {first}{tail}"
        super().__init__(message)

    @property
    def index(self):
        return self.failures[0].index

    @property
    def path(self):
        return self.failures[0].path


def decode(sources, *, device=None, like=None, color="bgr", on_error="raise"):
    """Decode a batch of encoded images, in one call, into HWC uint8 images.

    Parameters
    ----------
    sources : sequence
        Each element is encoded bytes (``bytes``, ``bytearray``, ``memoryview``, a 1-D
        uint8 NumPy buffer) or a file path (``str`` / ``os.PathLike``, read here). Any
        format ``cv2.imdecode`` reads; JPEG is decoded on the GPU where the GPU backend is
        installed, everything else (and any JPEG the GPU decoder refuses) by
        ``cv2.imdecode`` on the host and uploaded.
    device : None, "cpu", "cuda", "cuda:N", int, or a torch.device
        Where the images go. None: the device of ``like`` where it is an array, else the
        current CUDA device (CuPy's; torch's for ``like=torch``) when one is present,
        else the host. ``"cpu"``: the CPU backend (``cv2.imdecode``), NumPy images.
    like : None, numpy, cupy or torch (the module, its name, or an array of it)
        The kind of image returned. None: CuPy on a CUDA device, NumPy on the host.
        ``torch``: torch tensors (CUDA tensors whose memory comes from torch's caching
        allocator, written on torch's current stream; CPU tensors where torch has no
        CUDA device).
    color : {"bgr", "rgb", "gray"}
        ``"bgr"`` (3 channels, as ``cv2.imdecode(buf, IMREAD_COLOR)``), ``"rgb"`` (the
        same, channels swapped) or ``"gray"`` (HW, as ``IMREAD_GRAYSCALE``).
    on_error : {"raise", "skip"}
        ``"raise"``: a :class:`DecodeError` naming the first source that failed (its
        index and path) after the batch was read; ``"skip"``: no exception for bad data.

    Returns
    -------
    images : list
        ``on_error="raise"``: one image per source, in order. ``on_error="skip"``: a
        tuple ``(images, failures)``: the images of the sources that decoded, in source
        order, and a list of :class:`DecodeFailure` (one per source that did not, in
        source order, with its index and reason). ``len(images) + len(failures) ==
        len(sources)``; the image of ``sources[i]`` is ``images[i - (number of failures
        with index < i)]``.

    Convention
    ----------
    Pixels follow ``cv2.imdecode`` with ``cv2.imread``'s default flags: EXIF orientation
    applied, gray images replicated into 3 channels, alpha dropped, 16-bit samples reduced
    to 8 bits (their high byte), CMYK converted (``docs/decoding.md``). GPU-decoded JPEG
    pixels differ from libjpeg's by the rounding of the inverse DCT and color conversion
    (a few levels at most). On a CUDA device the images are written on the caller's
    stream (CuPy's current stream, torch's for ``like=torch``, or the one of
    :func:`cupyprep.stream`): work queued there after this call sees them decoded, and
    the host does not wait for the GPU. Device memory comes from the caller's allocator
    (CuPy's, or torch's for ``like=torch``); the decoder's own buffers are freed in the
    stream's order after the copies out of them.

    Example
    -------
    >>> images = cupyprep.decode([open(p, "rb").read() for p in paths])   # doctest: +SKIP
    >>> batch, meta = cupyprep.preprocess(images, (640, 640))              # doctest: +SKIP
    """
    color = _validate.choice("color", color, _decoders.COLORS)
    on_error = _validate.choice("on_error", on_error, _ON_ERROR)
    if isinstance(sources, (str, bytes, bytearray, memoryview, os.PathLike)) or \
            (isinstance(sources, np.ndarray) and sources.ndim <= 1):
        raise TypeError(f"sources: expected a sequence of encoded images or paths, got one "
                        f"{_decoders.describe_source(sources)[0]} (put a single source in a list)")
    if (_arrays.is_cupy(sources) or _arrays.is_torch(sources)) and sources.ndim <= 1:
        raise TypeError(f"sources: expected a sequence of encoded images or paths, got one array "
                        f"({_arrays.describe(sources)}; put a single source in a list)")
    if not hasattr(sources, "__iter__"):
        raise TypeError(f"sources: expected a sequence of encoded images or paths, got "
                        f"{_arrays.describe(sources)}")
    library, device_id = _target(device, like)
    entries = [_decoders.read_source(i, s) for i, s in enumerate(sources)]
    if library in ("numpy", "torch-cpu"):
        images, failures = _decoders.decode_batch(entries, color, None, _decoders.HostSink())
        if library == "torch-cpu":
            import torch

            images = [None if im is None else torch.from_numpy(im) for im in images]
    else:
        images, failures = _decoders.decode_batch(entries, color, _decoders.gpu_backend(),
                                                  _device_sink(library, device_id))
    failures = [DecodeFailure(f.index, f.source, f.path, f.reason) for f in failures]
    if on_error == "skip":
        return [im for im in images if im is not None], failures
    if failures:
        raise DecodeError(failures)
    return images


# --- where the images go -------------------------------------------------------------------------
def _target(device, like):
    """``(library, device_id)``: "numpy" / "torch-cpu" (host) or "cupy" / "torch" and the
    CUDA device index."""
    library, like_device = _like_library(like)
    index = _device_index(device)
    if index == "cpu":
        if library == "cupy":
            raise ValueError("device: 'cpu' cannot hold CuPy arrays (like=cupy); pass a CUDA device")
        return ("torch-cpu" if library == "torch" else "numpy"), None
    if library == "numpy":
        if index is not None:
            raise ValueError(f"like: NumPy images live on the host, but device={device!r} names a "
                             f"CUDA device")
        return "numpy", None
    if index is None:
        if like_device == "cpu":  # like= a CPU tensor
            return "torch-cpu", None
        index = like_device
    if library == "torch":
        import torch

        if not torch.cuda.is_available():
            if index is not None:
                raise ValueError(f"device: {device!r} requested, but torch sees no CUDA device")
            return "torch-cpu", None
        return "torch", (torch.cuda.current_device() if index is None else index)
    # CuPy, or no preference
    count = _cuda_device_count()
    if count == 0:
        if library == "cupy" or index is not None:
            raise ValueError(f"device: a CUDA device is needed for {'like=cupy' if library else device!r}, "
                             f"but none is present")
        return "numpy", None
    if index is None:
        import cupy

        index = cupy.cuda.Device().id
    if not 0 <= index < count:
        raise ValueError(f"device: CUDA device {index} requested, {count} present")
    return "cupy", index


def _like_library(like):
    """``(library, device index or None)`` of ``like``: None, "numpy", "cupy" or "torch"."""
    if like is None:
        return None, None
    if isinstance(like, str):
        if like not in ("numpy", "cupy", "torch"):
            raise ValueError(f"like: expected numpy, cupy or torch (the module, its name or an "
                             f"array), got {like!r}")
        return like, None
    name = getattr(like, "__name__", None)
    if name in ("numpy", "cupy", "torch") and type(like).__name__ == "module":
        return name, None
    if isinstance(like, np.ndarray):
        return "numpy", None
    if _arrays.is_cupy(like):
        return "cupy", like.device.id
    if _arrays.is_torch(like):
        return "torch", (like.device.index if like.is_cuda else "cpu")
    raise TypeError(f"like: expected numpy, cupy or torch (the module, its name or an array), got "
                    f"{_arrays.describe(like)}")


def _device_index(device):
    """None, "cpu" or a CUDA device index."""
    if device is None or (isinstance(device, str) and device == "cpu"):
        return device
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        if device.type == "cpu":
            return "cpu"
        return device.index if device.index is not None else torch.cuda.current_device()
    if isinstance(device, numbers.Integral) and not isinstance(device, bool) and device >= 0:
        return int(device)
    if isinstance(device, str) and device == "cuda":
        import cupy

        return cupy.cuda.Device().id
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    if hasattr(device, "id") and type(device).__module__.startswith("cupy"):
        return int(device.id)
    raise ValueError(f"device: expected None, 'cpu', 'cuda', 'cuda:N', an int or a torch.device, "
                     f"got {device!r}")


def _cuda_device_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def _device_sink(library, device_id):
    """The sink writing on the caller's stream: torch's current stream for torch, CuPy's
    for CuPy, or the stream of :func:`cupyprep.stream` (after the natural one)."""
    import cupy

    with cupy.cuda.Device(device_id):
        natural = torch_current_stream(device_id) if library == "torch" else cupy.cuda.get_current_stream().ptr
        choice = chosen_stream()
        if choice is not None and choice.device_id == device_id and choice.ptr != natural:
            order_after(natural, choice.ptr)  # the caller's earlier work on its stream comes first
            torch_stream = choice.as_torch() if library == "torch" else None
            return _decoders.DeviceSink(library, device_id, choice.ptr, torch_stream)
    torch_stream = None
    if library == "torch":
        import torch

        torch_stream = torch.cuda.current_stream(device_id)
    return _decoders.DeviceSink(library, device_id, natural, torch_stream)
