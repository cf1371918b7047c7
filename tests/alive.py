"""Which device arrays are still alive when a test session ends, and what holds them
(``CUPYPREP_TEST_ALIVE_DIR``: one report per process there). A leak check at exit reports
every block these hold; the referrer chains say which module, cache or object keeps it."""
from __future__ import annotations

import gc
import os
import sys
import types
import warnings


def _device_objects():
    torch = sys.modules.get("torch")
    objects = gc.get_objects()
    cupy = sys.modules.get("cupy")
    arrays = [o for o in objects if cupy is not None and isinstance(o, cupy.ndarray)]
    held = {id(a.data) for a in arrays}
    for o in arrays:
        yield o, o.nbytes, f"cupy {o.dtype} {o.shape}"
    for o in objects:
        t = type(o)
        if cupy is not None and t is cupy.cuda.MemoryPointer and id(o) not in held:
            yield o, o.mem.size, f"cupy MemoryPointer of {o.mem.size} bytes (no array)"
        elif torch is not None and isinstance(o, torch.Tensor) and o.is_cuda:
            yield o, o.element_size() * o.numel(), f"torch {o.dtype} {tuple(o.shape)}"


def _describe(r):
    if isinstance(r, types.FrameType):
        return f"frame {r.f_code.co_filename}:{r.f_lineno} {r.f_code.co_name}"
    if isinstance(r, types.ModuleType):
        return f"module {r.__name__}"
    if isinstance(r, dict):
        for m in list(sys.modules.values()):
            if getattr(m, "__dict__", None) is r:
                return f"globals of {m.__name__}"
        return f"dict of {len(r)} keys {list(r)[:4]!r}"[:160]
    if isinstance(r, (list, tuple)):
        return f"{type(r).__name__} of {len(r)}"
    return f"{type(r).__module__}.{type(r).__qualname__}"


def _chain(o, depth, seen):
    """Referrer chains up to ``depth`` levels, a few referrers per level."""
    lines = []
    if depth == 0:
        return lines
    for r in gc.get_referrers(o):
        if id(r) in seen or r is seen or (
                isinstance(r, types.FrameType) and r.f_code.co_filename == __file__):
            continue
        if len(lines) >= 8:
            break
        seen.add(id(r))
        lines.append(_describe(r))
        lines += ["  " + x for x in _chain(r, depth - 1, seen)]
    return lines


def report_alive(directory, session):
    gc.collect()
    with warnings.catch_warnings():  # isinstance() wakes some modules' deprecated names
        warnings.simplefilter("ignore")
        found = sorted(_device_objects(), key=lambda x: -x[1])
    os.makedirs(directory, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    files = "-".join(os.path.basename(str(a)).replace(".py", "") for a in session.config.args)[:60]
    with open(os.path.join(directory, f"alive-{files}-{name}.txt"), "w") as f:
        f.write(f"{len(found)} device arrays alive, {sum(n for _, n, _ in found)} bytes\n")
        for o, nbytes, what in found[:25]:
            f.write(f"\n{nbytes} bytes: {what}\n")
            skip = {id(found)} | {id(x) for x in found}
            f.writelines("    " + line + "\n" for line in _chain(o, 4, skip))
