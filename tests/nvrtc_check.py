"""Compile kernel variants with NVRTC alone, without a GPU.

CuPy's own compile path asks the driver for the device architecture, so on a machine
without a GPU the tests call NVRTC directly.
"""
from __future__ import annotations

from cupyprep import _kernels


def compile_variants(filename, name_expressions, arch):
    """Compile one kernel file for ``arch`` (e.g. "sm_90") with every name expression;
    return the lowered (mangled) names. Raises KernelCompileError with NVRTC's log."""
    from cupy_backends.cuda.libs import nvrtc

    source = _kernels.read_source(filename)
    prog = nvrtc.createProgram(source, filename, [], [])
    try:
        for expr in name_expressions:
            nvrtc.addNameExpression(prog, expr)
        options = list(_kernels.NVRTC_OPTIONS) + [f"-arch={arch}"]
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise _kernels.KernelCompileError(filename, ", ".join(name_expressions), log) from None
        return {expr: nvrtc.getLoweredName(prog, expr) for expr in name_expressions}
    finally:
        nvrtc.destroyProgram(prog)
