"""``warp_affine`` and ``warp_perspective``: ``cv2.warpAffine`` / ``cv2.warpPerspective``
for images, batches and lists of images on the GPU."""
from __future__ import annotations

from ._specs.warp import BORDER_MODES
from ._specs.warp import INTERPOLATIONS as WARP_INTERPOLATIONS
from ._warping import warp_images

__all__ = ["warp_affine", "warp_perspective", "WARP_INTERPOLATIONS", "BORDER_MODES"]


def warp_affine(img, M, size, *, interpolation="linear", border_mode="constant", border_value=0,
                inverse_map=False, out=None):
    """Warp an image or a batch by affine matrices, with ``cv2.warpAffine`` semantics.

    Parameters
    ----------
    img : array (numpy, cupy or torch) or list of arrays
        ``HW``, ``HWC`` or a batch ``NHWC``; or a list of ``HW`` / ``HWC`` images of
        different sizes (one launch over the whole list; the output is one ``NHWC``
        batch; up to 64 images go to the kernel by value, a longer list's table is copied
        per call, into a CUDA graph as kernel parameters under capture). uint8, uint16,
        float16 or float32; 1 to 4 channels.
    M : array
        (2, 3), one matrix for every image, or (N, 2, 3), one per image; numpy, or on
        the images' device.
    size : (int, int)
        Output ``(height, width)`` (``cv2compat.warpAffine`` keeps OpenCV's ``(width,
        height)``).
    interpolation : {"nearest", "linear", "cubic"}
    border_mode : {"constant", "replicate", "reflect", "reflect101", "wrap"}
    border_value : float or sequence
        Per channel, for ``constant`` (in pixel units; saturated to the image type).
    inverse_map : bool
        ``M`` maps destination to source (OpenCV's ``WARP_INVERSE_MAP``).
    out : array, optional
        Written in place; same kind, shape and dtype as the result. May be the input itself
        or overlap it (as OpenCV's ``dst=src``).

    Returns
    -------
    The warped image(s): ``size`` + channels, with the batch axis for a batch or list.

    Convention
    ----------
    As OpenCV: ``dst(x, y) = src(M^-1 (x, y))`` with pixel centers at integer coordinates
    (a pixel's center is ``(x, y)``, not ``(x + 0.5, y + 0.5)``); M is inverted in double
    (``invertAffineTransform``'s formula), a singular M is an error. Border taps follow
    ``border_mode``; with ``constant`` a pixel whose taps all fall outside takes
    ``border_value``, and partial neighbourhoods blend it in.

    The kernels follow OpenCV 5's arithmetic step by step: for nearest and linear on 1, 3
    and 4 channels its float32 warp kernels (matrix in float32, fused multiply-adds where
    its AVX2 code has them, results rounded half to even); for 2 channels its fixed-point
    remap (coordinates quantized to 1/32 pixel, 32x32 weight tables, int16 weights for
    uint8); cubic takes Keys' weights at the float32 coordinates. uint8 results equal
    ``cv2.warpAffine`` bit for bit on a CPU where OpenCV runs its AVX2 code (every x86 CPU
    since 2013). float16 is the float32 warp rounded once. OpenCV 5.1's x86 build hands
    some warps with constant or replicate borders to Intel IPP, which rounds otherwise (a
    nearest sample at a half-pixel coordinate can take the other pixel): the CPU backend
    runs ``cv2`` with IPP off for the call (``cv2.ipp.setUseIPP`` is per thread; the
    caller's setting is put back), so both backends agree on every OpenCV version.

    Example
    -------
    >>> M = cupyprep.get_rotation_matrix_2d((255.5, 255.5), 30.0)       # doctest: +SKIP
    >>> rotated = cupyprep.warp_affine(batch_gpu, M, (512, 512))         # doctest: +SKIP
    """
    return warp_images(img, M, size, interpolation, border_mode, border_value, inverse_map, out,
                       perspective=False)


def warp_perspective(img, M, size, *, interpolation="linear", border_mode="constant",
                     border_value=0, inverse_map=False, out=None):
    """Warp by homographies, with ``cv2.warpPerspective`` semantics: as :func:`warp_affine`
    with ``M`` (3, 3) or (N, 3, 3).

    Convention
    ----------
    ``dst(x, y) = src((M^-1 [x, y, 1])_xy / (M^-1 [x, y, 1])_w)``, pixel centers at
    integers. Numpy matrices are inverted with OpenCV's own ``cv::invert`` (LU), device
    matrices with the device's LU; a singular M is an error. Arithmetic as
    :func:`warp_affine` (the perspective division in float32; for 2 channels in double,
    with coordinates quantized to 1/32 pixel).

    Example
    -------
    >>> H = cupyprep.get_perspective_transform(quad, corners)           # doctest: +SKIP
    >>> flat = cupyprep.warp_perspective(page_gpu, H, (800, 600))       # doctest: +SKIP
    """
    return warp_images(img, M, size, interpolation, border_mode, border_value, inverse_map, out,
                       perspective=True)
