"""Random numbers drawn where a batch lives, for the ops that draw per-image parameters
(random_affine, color_jitter, hsv_gain): on the device for device arrays, with no host
round trip, so the draw is captured by a CUDA graph."""
from __future__ import annotations

import numbers

import numpy as np

from ._arrays import describe
from ._torch import from_torch

__all__ = ["check_seed", "uniforms"]

_SEED_LIMIT = 2**64  # torch.Generator.manual_seed's range; NumPy and CuPy take these too


def check_seed(seed):
    """``seed``: None or an int in [0, 2**64); a TypeError / ValueError naming it."""
    if seed is None:
        return None
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"seed: expected None or a non-negative int, got {seed!r}")
    if not 0 <= seed < _SEED_LIMIT:
        raise ValueError(f"seed: expected None or an int in [0, 2**64), got {seed!r}")
    return int(seed)


def _check_generator(call, generator):
    """A generator of the batch's kind (and device, for torch), or a TypeError /
    ValueError naming ``generator``."""
    module = type(generator).__module__
    if call.kind == "torch":
        import torch

        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator: expected a torch.Generator for a torch batch, got "
                            f"{describe(generator)}")
        g, t = generator.device, call.tensor.device
        # a CUDA generator made with device="cuda" may carry no index: only two known indexes differ
        if g.type != t.type or (g.type == "cuda" and None not in (g.index, t.index)
                                and min(g.index, t.index) >= 0 and g.index != t.index):
            raise ValueError(f"generator: expected a torch.Generator on the batch's device "
                             f"{call.tensor.device}, got one on {generator.device}")
        return
    want = "cupy" if call.device and call.kind != "numpy" else "numpy"
    drawn = ("random",) if want == "numpy" else ("random", "random_sample")
    if not module.startswith(want) or not any(callable(getattr(generator, m, None)) for m in drawn):
        kinds = ("a cupy.random.Generator or RandomState" if want == "cupy"
                 else "a numpy.random.Generator")
        raise TypeError(f"generator: expected {kinds} for a {want} batch, got {describe(generator)}")


def uniforms(call, shape, generator, seed, native=False):
    """float64 uniforms in [0, 1) of ``shape`` on the batch's side (``call``: the op's
    :class:`~cupyprep._arrays.Prepared` main input), from ``generator`` (a NumPy
    ``Generator``, a ``cupy.random.Generator`` / ``RandomState``, or a ``torch.Generator`` on
    the batch's device) or a new generator seeded with ``seed``. A torch batch on the
    device gets them as a CuPy view, or with ``native`` as the torch tensor."""
    seed = check_seed(seed)
    if generator is not None:
        _check_generator(call, generator)
    if call.kind == "torch":
        import torch

        dev = call.tensor.device
        if generator is None:
            generator = torch.Generator(device=dev)
            if seed is not None:
                generator.manual_seed(seed)
            else:
                generator.seed()
        u = torch.rand(shape, generator=generator, device=dev, dtype=torch.float64)
        if not call.device:
            return u.numpy()
        return u if native else from_torch(u)
    if call.device and call.kind != "numpy":
        import cupy

        gen = generator if generator is not None else cupy.random.default_rng(seed)
        if hasattr(gen, "random"):
            return gen.random(shape, dtype=np.float64)
        return gen.random_sample(shape, dtype=np.float64)
    gen = generator if generator is not None else np.random.default_rng(seed)
    return gen.random(shape)
