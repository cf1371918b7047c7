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
    pointers = [o for o in objects if cupy is not None and type(o) is cupy.cuda.MemoryPointer]
    for o in arrays:
        yield o, o.nbytes, f"cupy {o.dtype} {o.shape}"
    for o in pointers:
        if id(o) not in held:
            yield o, o.mem.size, f"cupy MemoryPointer of {o.mem.size} bytes (no array)"
    for o in objects:
        if cupy is not None and isinstance(o, cupy.cuda.pinned_memory.PinnedMemory):
            yield o, o.size, f"cupy PinnedMemory of {o.size} bytes (page-locked host memory)"
        elif torch is not None and isinstance(o, torch.Tensor) and o.is_cuda:
            yield o, o.element_size() * o.numel(), f"torch {o.dtype} {tuple(o.shape)}"


def _describe(r):
    if isinstance(r, types.FrameType):
        return f"frame {r.f_code.co_filename}:{r.f_lineno} {r.f_code.co_name}"
    if isinstance(r, types.ModuleType):
        return f"module {r.__name__}"
    if isinstance(r, dict):
        for m in list(sys.modules.values()):
            try:  # (some entries are lazy loaders that import on any attribute)
                if getattr(m, "__dict__", None) is r:
                    return f"globals of {m.__name__}"
            except (ImportError, AttributeError):
                continue
        return f"dict of {len(r)} keys {list(r)[:4]!r}"[:160]
    if isinstance(r, (list, tuple)):
        return f"{type(r).__name__} of {len(r)}"
    return f"{type(r).__module__}.{type(r).__qualname__}"


def _referrers(o, ignore):
    """``o``'s referrers, less this module's own frames and lists (``ignore``: ids of
    objects this report made, the lists ``gc.get_referrers`` returned among them)."""
    found = gc.get_referrers(o)
    ignore.add(id(found))
    return [r for r in found if id(r) not in ignore and type(r).__name__ not in ("list_iterator", "dict_valueiterator") and not (
        isinstance(r, types.FrameType) and r.f_code.co_filename == __file__)]


def _chain(o, depth, ignore, seen=None):
    """Referrer chains up to ``depth`` levels, a few referrers per level."""
    seen = set() if seen is None else seen
    lines = []
    if depth == 0:
        return lines
    for r in _referrers(o, ignore)[:6]:
        if id(r) in seen:
            continue
        seen.add(id(r))
        lines.append(_describe(r))
        lines += ["  " + x for x in _chain(r, depth - 1, ignore, seen)]
    return lines


def _frame_holders(o, ignore):
    """What keeps the frames that refer to ``o`` alive: every frame reachable from them
    through the frames that refer to each (a called frame refers to its caller), then the
    referrers of those frames that are not frames (a traceback, a generator, a cache)."""
    frames = [r for r in _referrers(o, ignore) if isinstance(r, types.FrameType)]
    reached = {id(f): f for f in frames}
    ignore.add(id(reached))
    ignore.add(id(frames))
    while frames:
        f = frames.pop()
        for r in _referrers(f, ignore):
            if isinstance(r, types.FrameType) and id(r) not in reached:
                reached[id(r)] = r
                frames.append(r)
    holders = []
    ignore.add(id(holders))
    every = list(reached.values())
    ignore.add(id(every))
    for f in every:
        for r in _referrers(f, ignore):
            if not isinstance(r, types.FrameType):
                holders.append(f"{_describe(r)} holds {_describe(f)}")
                holders += ["    " + x for x in _chain(r, 3, ignore)]
    return holders


# --- the sanitizer runs' settings (benchmarks/sanitize.sh exports them) ------------------------
def pools_off() -> bool:
    """``CUPYPREP_TEST_NO_POOL=1`` (``POOLS=off``): every CuPy allocation a ``cudaMalloc``
    of its own, so the leak check sees each block a pool would keep."""
    return os.environ.get("CUPYPREP_TEST_NO_POOL") == "1"


def async_pools() -> bool:
    """``CUPYPREP_TEST_ASYNC_POOL=1`` (``POOLS=async``): CuPy allocates with
    ``cudaMallocAsync`` (``cupy.cuda.MemoryAsyncPool``), and torch too
    (``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync``), so the tools see every allocation
    and free in its stream's order."""
    return os.environ.get("CUPYPREP_TEST_ASYNC_POOL") == "1"


def no_hw_decode() -> bool:
    """``CUPYPREP_TEST_NO_HW_DECODE=1`` (``HW_DECODE=off``): see
    :func:`decode_without_the_hardware_engine`."""
    return os.environ.get("CUPYPREP_TEST_NO_HW_DECODE") == "1"


def apply_run_settings(device=True, track=False):
    """Put a process (the tests', or an example script's) in the run's settings: decoding
    without the hardware engine, and CuPy's allocator (stream-ordered where ``device``, or
    without pools, with ``track`` each block's maker noted). Returns whether a leak check
    follows at exit (the pools off or stream-ordered)."""
    decode_without_the_hardware_engine()
    if async_pools():
        if device:
            use_async_pools()
        return True
    if pools_off():
        turn_cupy_pools_off(track)
        return True
    return False


def turn_cupy_pools_off(track=False):
    """CuPy without its pools (device and page-locked): every allocation a ``cudaMalloc``
    (``cudaHostAlloc``) of its own, freed when its last holder goes, so a leak check sees
    each block a pool would keep; with ``track``, each block's maker noted
    (:func:`track_allocations`)."""
    import cupy

    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)
    if track:
        track_allocations()


def use_async_pools():
    """CuPy's allocations made with ``cudaMallocAsync`` on the current stream and freed with
    ``cudaFreeAsync`` (``cupy.cuda.MemoryAsyncPool``): with memcheck's
    ``--track-stream-ordered-races all``, a use of a block on a stream not ordered after its
    allocation, or after its free, is reported. (torch's allocator is chosen by
    ``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`` before it starts.)"""
    import cupy

    cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)


def decode_without_the_hardware_engine():
    """``CUPYPREP_TEST_NO_HW_DECODE=1`` (``HW_DECODE=off`` of benchmarks/sanitize.sh):
    nvImageCodec decodes with CUDA only, not with the JPEG hardware engine. initcheck
    reported reads in nvJPEG's conversion kernels after hardware decodes (docs/reliability.md,
    runs 9 and 10); the engine's writes are no kernel stores, and with this setting the
    same tests show whether a CUDA decode, whose writes are, gives them too."""
    if not no_hw_decode():
        return
    from cupyprep import _decoders

    _decoders.NVIMGCODEC_BACKENDS = tuple(k for k in _decoders.NVIMGCODEC_BACKENDS if k != "HW_GPU_ONLY")


def release_kept_blocks():
    """Let go of every block cupyprep keeps on purpose (launch plans, uploaded tables, graph
    memory, the page-locked uploads of the last decodes), collect garbage, and have CuPy
    and torch give back what they cache, so that a leak check at exit reports only blocks
    nothing owns. CuPy keeps the page-locked staging buffer of a host-to-device copy
    (``cupy.asarray`` of a NumPy array) until its event is seen done, which only its next
    such copy checks: an event that is done (never recorded) added to its watch list has it
    release every finished one."""
    import cupy
    from cupy.cuda import pinned_memory

    from cupyprep import _plans, _transfers, interop

    cupy.cuda.Device().synchronize()
    _plans.clear_all()
    _transfers.drop_constants()
    decoders = sys.modules.get("cupyprep._decoders")
    if decoders is not None:  # the encoded bytes and page-locked uploads of the last decodes
        decoders.IN_FLIGHT.release_done()
    interop.release_graph_memory()
    gc.collect()
    cupy.cuda.Device().synchronize()  # (copies a finalizer or a lingering thread queued)
    pinned_memory._add_to_watch_list(cupy.cuda.Event(), None)
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # torch's page-locked host cache (tensor.pin_memory(), .item() reads) and its
        # cuBLAS workspaces (a model's layers: the example scripts) keep their blocks to the end
        for name in ("_host_emptyCache", "_cuda_clearCublasWorkspaces"):
            release = getattr(torch._C, name, None)
            if release is not None:
                release()


_LIVE: dict = {}  # id of a tracked allocation -> (bytes, the stack that made it, as text)
_TRACKING: list = []  # [True] once track_allocations() set the allocator


def track_allocations():
    """CuPy's allocator for a leak hunt: every allocation a ``cudaMalloc`` of its own (as
    with no pool), recorded with the stack that made it until it is freed. CuPy's blocks
    are not objects Python's collector sees (nor are the DLPack capsules or C extensions
    that may hold one), so the report lists the blocks still allocated at the end, with
    where each was made. The stack is kept as text, not frames: nothing is held alive."""
    import traceback
    import weakref

    import cupy

    class Tracked(cupy.cuda.memory.Memory):  # (a Python subclass can be weakly referenced)
        pass

    def malloc(size):
        mem = Tracked(size)
        key = id(mem)
        _LIVE[key] = (size, "".join(traceback.format_stack(limit=14)[:-1]))
        weakref.finalize(mem, _LIVE.pop, key, None)
        return cupy.cuda.MemoryPointer(mem, 0)

    cupy.cuda.set_allocator(malloc)
    _TRACKING.append(True)


def _live_blocks():
    """The tracked allocations still made, by stack: ``(bytes, count, stack)``, most bytes
    first."""
    by_stack = {}
    for size, stack in list(_LIVE.values()):
        n, k = by_stack.get(stack, (0, 0))
        by_stack[stack] = (n + size, k + 1)
    return sorted(((n, k, stack) for stack, (n, k) in by_stack.items()), key=lambda x: -x[0])


def _watch_list_report():
    """The page-locked buffers CuPy still holds for copies it has not seen finished (its
    watch list: ``(event, buffer)`` pairs, released from the front while the front event is
    done), each with whether its event is done now: a done event behind one that is not
    says which copy holds the rest."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return ""
    watcher_type = getattr(cupy.cuda.pinned_memory, "_EventWatcher", None)
    watchers = [o for o in gc.get_objects() if watcher_type is not None and isinstance(o, watcher_type)]
    entries = [e for w in watchers for r in gc.get_referents(w) if isinstance(r, list) for e in r]
    lines = [f"\nCuPy's watch list of page-locked copy buffers: {len(entries)} entries\n"]
    for event, obj in entries[:20]:
        try:
            done = event.done
        except Exception as exc:  # (an event of a capture, a lost context: say so)
            done = f"unknown ({exc!r})"
        size = getattr(getattr(obj, "mem", None), "size", None)
        lines.append(f"    event done: {done}; holds {type(obj).__name__} of {size} bytes\n")
    return "".join(lines)


def report_alive(directory, session):
    gc.collect()
    with warnings.catch_warnings():  # isinstance() wakes some modules' deprecated names
        warnings.simplefilter("ignore")
        found = sorted(_device_objects(), key=lambda x: -x[1])
        watched = _watch_list_report()
    os.makedirs(directory, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    files = "-".join(os.path.basename(str(a)).replace(".py", "") for a in session.config.args)[:60]
    with open(os.path.join(directory, f"alive-{files}-{name}-{os.getpid()}.txt"), "w") as f:
        f.write(f"{len(found)} device arrays and blocks alive, {sum(n for _, n, _ in found)} bytes\n")
        for o, nbytes, what in found[:25]:
            f.write(f"\n{nbytes} bytes: {what}\n")
            ignore = {id(found)} | {id(x) for x in found}
            f.writelines("    " + line + "\n" for line in _chain(o, 3, ignore))
            f.writelines("  frames held by: " + line + "\n" for line in _frame_holders(o, ignore)[:12])
        f.write(watched)
        if not _TRACKING:
            return
        blocks = _live_blocks()
        f.write(f"\n{sum(k for _, k, _ in blocks)} CuPy allocations not freed, {sum(n for n, _, _ in blocks)} bytes\n")
        f.writelines(f"\n{n} bytes in {k} allocations, made at:\n{stack}" for n, k, stack in blocks[:15])
