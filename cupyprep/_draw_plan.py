"""Launch plans of the ops that draw per-image parameters on the device (color_jitter,
hsv_gain): the launches of a call, all but their arrays fixed, run by the first call with a
given geometry and options and by every later one (see :mod:`cupyprep._plans`).

A call draws its uniforms, allocates its small arrays (the parameters it returns, and
scratch) and runs the stored launches with their arguments packed once. The uniforms are
drawn at every call (a new draw each time, from the generator or seed given then)."""
from __future__ import annotations

import numpy as np

from ._launch import held, launch_filled, pointer
from ._plans import overlap, prepared
from ._random import uniforms
from ._torch import torch_dtype

__all__ = ["DrawPlan", "launch_step"]


def launch_step(fn, grid, block, args, names):
    """One launch of a plan: ``args`` the kernel's arguments with the arrays at positions
    ``names`` (``{position: name}``; a name is "src", "dst", "u" or a buffer's index) left
    to each call."""
    args = list(args)
    for i in names:
        args[i] = None
    return fn, grid, block, held(args), tuple(names.items())


class DrawPlan:
    """``draws`` uniforms for each image of the batch (the output's first axis), the arrays
    allocated per call (``buffers``: ``(shape, dtype)``, the first ``returned`` of them
    handed back as the parameters) and the launches (:func:`launch_step`); the output's
    shape and dtype."""

    __slots__ = ("_torch_dtypes", "buffers", "draws", "out_dtype", "out_shape", "returned", "steps")

    def __init__(self, draws, buffers, steps, returned, out_shape, out_dtype):
        self.draws, self.buffers, self.steps = draws, tuple(buffers), tuple(steps)
        self.returned = returned
        self.out_shape, self.out_dtype = tuple(out_shape), np.dtype(out_dtype)
        self._torch_dtypes = None  # the output's, then the buffers' (looked up once)

    def _torch(self):
        dtypes = self._torch_dtypes
        if dtypes is None:
            dtypes = self._torch_dtypes = [torch_dtype(self.out_dtype)] + [torch_dtype(d) for _, d in self.buffers]
        return dtypes

    def launch(self, call, src, dst, generator, seed):
        """Draw, allocate and launch (inside ``call``'s launch context) from ``src`` into
        ``dst`` (arrays, or pointers for torch); returns the parameters (caller's kind)."""
        torch = call.kind == "torch"
        u = uniforms(call, (self.out_shape[0], self.draws), generator, seed, native=True)
        named = {"src": src, "dst": dst, "u": pointer(u.data_ptr()) if torch else u}
        natives = []
        if torch:
            tensor = call.tensor
            for i, ((shape, _), dtype) in enumerate(zip(self.buffers, self._torch()[1:])):
                t = tensor.new_empty(shape, dtype=dtype)
                natives.append(t)
                named[i] = pointer(t.data_ptr())
        else:
            empty = call.xp.empty
            for i, (shape, dtype) in enumerate(self.buffers):
                named[i] = a = empty(shape, dtype)
                natives.append(a)
        for step in self.steps:
            launch_filled(*step, named)
        return natives[:self.returned]

    def replay(self, x, kind, out, generator, seed):
        """A call on ``x`` (a device array of the plan's geometry and ``kind``) into a new
        output or ``out``: ``(output, parameters)``, or None where ``out`` shares memory with
        ``x`` (the general path stages it)."""
        if out is not None and overlap(x, out):
            return None
        if kind == "torch":
            call = prepared(x, kind)
            with call.launch():
                if out is None:
                    out = x.new_empty(self.out_shape, dtype=self._torch()[0])
                params = self.launch(call, pointer(x.data_ptr()), pointer(out.data_ptr()), generator, seed)
            return out, params
        call = prepared(x, kind)
        with call.launch():
            if out is None:
                out = call.xp.empty(self.out_shape, self.out_dtype)
            params = self.launch(call, x, out, generator, seed)
        return out, params
