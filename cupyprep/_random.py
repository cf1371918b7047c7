"""Random numbers drawn where a batch lives, for the ops that draw per-image parameters
(random_affine, color_jitter, hsv_gain): on the device for device arrays, with no host
round trip, so the draw is captured by a CUDA graph."""
from __future__ import annotations

import numpy as np

from ._torch import from_torch

__all__ = ["uniforms"]


def uniforms(call, shape, generator, seed):
    """float64 uniforms in [0, 1) of ``shape`` on the batch's side (``call``: the op's
    :class:`~cupyprep._arrays.Prepared` main input), from ``generator`` (a NumPy
    ``Generator``, a ``cupy.random.Generator`` / ``RandomState``, or a ``torch.Generator`` on
    the batch's device) or a new generator seeded with ``seed``."""
    if call.kind == "torch":
        import torch

        dev = call.tensor.device
        if generator is None:
            generator = torch.Generator(device=dev)
            if seed is not None:
                generator.manual_seed(int(seed))
            else:
                generator.seed()
        u = torch.rand(shape, generator=generator, device=dev, dtype=torch.float64)
        return from_torch(u) if call.device else u.numpy()
    if call.device and call.kind != "numpy":
        import cupy

        gen = generator if generator is not None else cupy.random.default_rng(seed)
        if hasattr(gen, "random"):
            return gen.random(shape, dtype=np.float64)
        return gen.random_sample(shape, dtype=np.float64)
    gen = generator if generator is not None else np.random.default_rng(seed)
    return gen.random(shape)
