"""Testing helpers: the CPU kernel emulator.

:func:`emulate` runs every kernel launch of cupyprep on the CPU instead of a GPU, so the
op code paths that launch kernels run in CI without a GPU. NumPy arrays stand in for
device memory; the kernels are the real ``kernels/*.cu`` sources, compiled for the host
with AddressSanitizer and UndefinedBehaviorSanitizer so an out-of-bounds access or
undefined behaviour in a kernel fails the test with a sanitizer report
(:class:`EmulatorError`)::

    from cupyprep.testing import emulate

    with emulate():
        out = cupyprep.resize(numpy_image, (64, 64))

Launch arguments follow CuPy's ``RawKernel`` call, strictly: arrays are
``numpy.ndarray`` (any strides: the whole span they cover is passed), scalars must be
NumPy scalars of exactly the kernel parameter's type (``np.int32(n)``, not ``n``),
``None`` is a NULL pointer, :class:`PointerTable` is a device array of pointers, and
:class:`Records` are bytes holding pointers (a ragged batch's per-image records), by value
or in device memory.

What the emulator cannot show: races (the threads of a block run one at a time and switch
only at ``__syncthreads`` and warp collectives, so a missing barrier usually goes
unnoticed), timing and performance, warp divergence and the GPU's memory-ordering
effects, reads of uninitialised shared memory (a block sees what the previous block left),
float differences where the GPU contracts multiply-adds into FMAs (the host build uses
``-ffp-contract=off``; use ``__fmul_rn``/``__fadd_rn`` where exactness matters) or uses
its approximate fast-math intrinsics, and texture hardware. Dynamic shared memory,
cooperative groups, inline PTX, clocks and texture/surface objects are not emulated: a
source using them raises :class:`UnsupportedFeatureError`. Warp collectives must name
exactly the warp's non-exited lanes in their mask, and a barrier opens once every thread
that has not exited waits at it. See :mod:`cupyprep.testing._emulator` for details.
"""
from ._emulator import (
    EmulatedKernel,
    Emulator,
    EmulatorError,
    PointerTable,
    Records,
    UnsupportedFeatureError,
    emulate,
)

__all__ = [
    "emulate",
    "Emulator",
    "EmulatedKernel",
    "EmulatorError",
    "UnsupportedFeatureError",
    "PointerTable",
    "Records",
]
