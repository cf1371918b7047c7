"""``resize``: ``cv2.resize`` for images and batches on the GPU."""
from __future__ import annotations

from ._resizing import resize_antialias, resize_images
from ._specs.resize import DTYPES as RESIZE_DTYPES
from ._specs.resize import INTERPOLATIONS

__all__ = ["resize", "INTERPOLATIONS", "RESIZE_DTYPES"]


def resize(img, size, *, interpolation="linear", layout="HWC", antialias=False, out=None):
    """Resize an image or a batch, with ``cv2.resize`` semantics (``antialias=True``:
    torchvision's).

    Parameters
    ----------
    img : numpy.ndarray, cupy.ndarray or torch.Tensor
        ``HW``, ``HWC`` or a batch ``NHWC`` (``CHW`` / ``NCHW`` with ``layout="CHW"``);
        uint8, uint16, float16 or float32; any number of channels. Views with any strides
        are read in place.
    size : (int, int)
        Output ``(height, width)`` (array order; ``cv2compat.resize`` keeps OpenCV's
        ``(width, height)``).
    interpolation : {"nearest", "linear", "area", "cubic"}
    layout : {"HWC", "CHW", "NHWC", "NCHW"}
        Axis order of ``img``; the output has the same.
    antialias : bool
        ``True``: ``torchvision.transforms.v2.functional.resize(antialias=True)`` instead of
        ``cv2.resize``, for ``interpolation`` ``"linear"`` (bilinear) or ``"cubic"``
        (bicubic): a separable pass along x, then one along y, each output a normalized
        weighted sum of the sources within the filter's support, widened by the scale
        when shrinking (the triangle; Keys' cubic with a = -0.5 as PIL, not OpenCV's
        -0.75). When enlarging, linear equals the plain bilinear resize in real numbers
        (the rounding of uint8 is PyTorch's); cubic keeps a = -0.5. uint8 is PyTorch's
        fixed point (int16 weights, a uint8 intermediate) and equals torchvision on the
        CPU bit for bit; torchvision on the GPU computes uint8 in float32 (no clamp between
        the passes): bilinear within 1 of it, bicubic further where a pass overshoots. The other dtypes compute in float32 (within ~1e-6 of torchvision's
        float32); uint16 rounds half to even where torchvision truncates. A size that
        does not change is a copy.
    out : array, optional
        Written in place; same kind, shape and dtype as the result. May be the input itself
        or overlap it (as OpenCV's ``dst=src``).

    Returns
    -------
    The resized image(s), same kind (numpy / cupy / torch), dtype and layout as ``img``.

    Convention
    ----------
    As OpenCV: pixel centers at +0.5, ``src = (dst + 0.5) * scale - 0.5`` with
    ``scale = 1 / (dst_size / src_size)`` in double precision; edges clamp (replicate).
    ``nearest`` takes ``floor(dst * scale)``; ``cubic`` is Keys' kernel with A = -0.75;
    ``area`` is OpenCV's three algorithms (integer factors: cell means; other downscales:
    weighted cells; upscales: linear with area weights), and ``linear`` at an exact factor
    of 2 on both axes is area's cell mean, as in OpenCV.

    Every mode and dtype follows OpenCV's own arithmetic step by step (its fixed point for
    uint8, its float32 operation order otherwise; float16 is OpenCV's float32 resize
    rounded once), and equals ``cv2.resize`` bit for bit where OpenCV runs that code. Two
    things make OpenCV differ from itself across machines, and so from the kernels: its
    x86 build hands float32 / uint16 linear and most cubic resizes to Intel IPP (see
    ``cv2.ipp.setUseIPP``), and its float vector code is chosen for the CPU at run time
    (FMA or not). uint8 linear and nearest involve neither and are equal everywhere. The
    CPU backend (NumPy input) runs ``cv2.resize`` with IPP off for the call, so it gives
    the kernels' result; stock ``cv2.resize`` with IPP differs by up to 1 for uint8 cubic
    and ~4e-5 of the range for float32 linear / cubic (docs/exactness.md).

    Example
    -------
    >>> small = cupyprep.resize(frame, (224, 224))           # doctest: +SKIP
    """
    if antialias is not False and antialias is not True:
        raise TypeError(f"antialias: expected True or False, got {antialias!r}")
    if antialias:
        return resize_antialias(img, size, interpolation, layout, out)
    return resize_images(img, size, interpolation, layout, out)
