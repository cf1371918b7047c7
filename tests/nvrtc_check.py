"""Compile kernel variants with NVRTC alone, without a GPU.

CuPy's own compile path asks the driver for the device architecture, so on a machine
without a GPU the tests call NVRTC directly.
"""
from __future__ import annotations

from cupyprep import _kernels


# NVRTC's fast-compile mode (12.8 and later) stops on some code the full optimizer takes
# ("unsupported operation", e.g. preprocess.cu's cubic variants): such a program is
# compiled again with the default options, so a variant fails only where those fail too
_FAST = "--Ofast-compile=mid"
_FAST_REFUSED = "unsupported operation"


def compile_variants(filename, name_expressions, arch, fast=False):
    """Compile one kernel file for ``arch`` (e.g. "sm_90") with every name expression;
    return the lowered (mangled) names. Raises KernelCompileError with NVRTC's log.
    ``fast``: NVRTC's fast-compile mode where the NVRTC has it, for a check that the
    variants compile rather than for code to run (see ``_FAST_REFUSED``)."""
    from cupy_backends.cuda.libs import nvrtc

    options = list(_kernels.NVRTC_OPTIONS) + [f"-arch={arch}"]
    if fast and nvrtc.getVersion() >= (12, 8):
        try:
            return _compile(nvrtc, filename, name_expressions, options + [_FAST])
        except _kernels.KernelCompileError as exc:
            if _FAST_REFUSED not in str(exc):
                raise
    return _compile(nvrtc, filename, name_expressions, options)


def _compile(nvrtc, filename, name_expressions, options):
    source = _kernels.read_source(filename)
    prog = nvrtc.createProgram(source, filename, [], [])
    try:
        for expr in name_expressions:
            nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise _kernels.KernelCompileError(filename, ", ".join(name_expressions), log) from None
        return {expr: nvrtc.getLoweredName(prog, expr) for expr in name_expressions}
    finally:
        nvrtc.destroyProgram(prog)
