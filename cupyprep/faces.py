"""``align_faces``: aligned face crops for many faces across a batch, in one warp launch."""
from __future__ import annotations

import numpy as np

from . import _arrays, _matrix_math, _transfers, _validate
from ._arrays import unwrap
from ._warping import gather_images, warp_images

__all__ = ["align_faces", "ARCFACE_112"]


# The standard 5-point face template (eyes, nose tip, mouth corners) for 112x112 crops.
ARCFACE_112 = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float64)


def align_faces(images, landmarks, image_index, size=(112, 112), template=ARCFACE_112, *,
                interpolation="linear", out=None):
    """Aligned face crops for many faces across a batch, in one launch.

    Parameters
    ----------
    images : NHWC array or list of HWC images (numpy, cupy or torch)
    landmarks : (F, K, 2) array
        Per face, K >= 2 points (x, y) in its source image, in the template's order (5 for
        ``ARCFACE_112``: eyes, nose tip, mouth corners).
    image_index : (F,) ints
        The image each face is in.
    size : (int, int)
        Crop (height, width); the template (given for 112 x 112) is scaled to it.
    template : (K, 2) array
    interpolation : {"nearest", "linear", "cubic"}

    Returns
    -------
    (crops, matrices): (F, H, W, C) crops of the images' kind and dtype, and the (F, 2, 3)
    float64 source-to-crop matrices, also of the images' kind (numpy, cupy, or torch on the
    images' device).

    Convention
    ----------
    Each face's matrix is :func:`estimate_similarity` from its landmarks to the template
    (Umeyama, as insightface's ``norm_crop``), then :func:`warp_affine` with a constant 0
    border.

    Example
    -------
    >>> crops, M = cupyprep.align_faces(frames_gpu, kps, idx)            # doctest: +SKIP
    """
    gathered = gather_images(images, "images")
    call, arrays, uniform, (n_src, c, has_channels) = gathered
    dh, dw = _validate.size_hw("size", size)
    tmpl = np.asarray(template, np.float64)
    if tmpl.ndim != 2 or tmpl.shape[1] != 2 or tmpl.shape[0] < 2:
        raise ValueError(f"template: expected shape (K, 2) with K >= 2, got {tmpl.shape}")
    tmpl = tmpl * np.array([dw / 112.0, dh / 112.0])
    # the landmarks' conversion and the similarity fit run on the images' device and stream
    with call.launch():
        lm = unwrap(landmarks)[0]
        lm = call.convert(landmarks, "landmarks") if (call.device and not isinstance(lm, np.ndarray)) else lm
        xp = call.xp if call.device else np
        lm = _validate.as_numbers("landmarks", lm, xp.float64, xp)
        if lm.ndim != 3 or lm.shape[1:] != tmpl.shape:
            raise ValueError(f"landmarks: expected shape (F, {tmpl.shape[0]}, 2), got {_arrays.describe(lm)}")
        idx = _transfers.read_back(unwrap(image_index)[0], "image_index", "align_faces reads it (and its fits' "
                                "check) back: call it outside the capture") \
            if not isinstance(image_index, (list, tuple)) else np.asarray(image_index)
        idx = np.asarray(idx)
        if idx.shape != (lm.shape[0],) or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"image_index: expected ({lm.shape[0]},) integers (one per face of landmarks), "
                             f"got shape {idx.shape} dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= n_src):
            raise ValueError(f"image_index: expected values in [0, {n_src}) (images holds {n_src}), got "
                             f"{idx.min()}..{idx.max()}")
        if uniform and arrays.ndim != 4:
            raise ValueError(f"images: expected an NHWC batch or a list of images, got {_arrays.describe(arrays)}")
        if lm.shape[0] == 0:
            mats = inv = xp.zeros((0, 2, 3))
        elif call.device:  # the fit and its inverse in one launch
            tmpl = _transfers.upload(xp, tmpl, "template", "align_faces also reads its fits' check "
                                  "back: call it outside the capture")
            mats, inv = _matrix_math.similarity_on_device(xp, lm, tmpl, "landmarks", inverse=True)
        else:
            mats = _matrix_math.similarity_numpy(lm, tmpl, "landmarks")
            # the same words as the device path's check, which does not say which fit
            inv = _matrix_math.invert_affine(mats, np, lambda k: _matrix_math.singular_fit("landmarks"))
        crops = warp_images(images, inv, (dh, dw), interpolation, "constant", 0, True, out, False,
                      src_index=idx.astype(np.int32), name="images", matrix_name="landmarks",
                      checked=True, gathered=gathered)
        return crops, call.back(mats)
