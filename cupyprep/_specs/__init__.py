"""The kernel registry: for each kernel family, its source files, name expressions,
variants and launch tuning, as one frozen dataclass (``<family>.SPEC``).

A leaf layer: it imports no other part of cupyprep, so :func:`cupyprep.warmup` and the
compile test enumerate every variant without importing an op module, and the op modules
read their kernels' names and tuning from here (never the other way round). Tuning is
read from ``SPEC`` at each call, so a test can put a changed copy in its place
(``monkeypatch.setattr(_specs.warp, "SPEC", dataclasses.replace(...))``).

Name expressions are built only from the validated enums and dtype tables here, never
from user strings.
"""
from __future__ import annotations

from . import (_common, boxes, color, crop, filter, flip_pad, meta, nms, normalize, photometric,
               preprocess, resize, resize_aa, roi_align, upload, warp)

# op name (as warmup() takes it) -> the module holding its SPEC
FAMILIES = {m.SPEC.name: m for m in (resize, resize_aa, warp, preprocess, meta, normalize, color,
                                     nms, boxes, roi_align, upload, flip_pad, crop, photometric,
                                     filter)}


def variants(op=None):
    """``(filename, name_expression)`` pairs for one op family, or for all."""
    if op is None:
        names = list(FAMILIES)
    elif op in FAMILIES:
        names = [op]
    else:
        raise ValueError(f"op: expected one of {sorted(FAMILIES)}, got {op!r}")
    return [pair for name in names for pair in FAMILIES[name].SPEC.variants()]


def cuda_constants():
    """Every ``(file, C++ name, value)`` written both in Python and in a kernel source."""
    return _common.CUDA_CONSTANTS + tuple(c for m in FAMILIES.values() for c in m.CUDA_CONSTANTS)
