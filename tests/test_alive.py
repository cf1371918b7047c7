"""The leak hunt's report (tests/alive.py, for benchmarks/sanitize.sh): CuPy allocations
tracked from the allocator until freed, each with the stack that made it."""
from __future__ import annotations

import gc
import sys
import types

import alive
import pytest


class FakeMemory:  # CuPy's Memory as the tracker uses it: a size (no device here)
    def __init__(self, size):
        self.size = size


class FakePointer:
    def __init__(self, mem, offset):
        self.mem, self.offset = mem, offset


@pytest.fixture
def fake_cupy(monkeypatch):
    chosen = []
    cuda = types.SimpleNamespace(memory=types.SimpleNamespace(Memory=FakeMemory), MemoryPointer=FakePointer,
                                 set_allocator=chosen.append)
    with monkeypatch.context() as m:  # (only while the tracker is set up: it keeps the module)
        m.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
        monkeypatch.setattr(alive, "_LIVE", {})
        monkeypatch.setattr(alive, "_TRACKING", [])
        alive.track_allocations()
    monkeypatch.setattr(alive, "_device_objects", lambda: iter(()))  # (arrays: not this test's)
    return chosen


def make_image(malloc, size):
    return malloc(size)


def test_allocations_are_listed_until_freed_with_their_maker(fake_cupy, tmp_path):
    (malloc,) = fake_cupy
    kept = [make_image(malloc, 1000), make_image(malloc, 1000)]
    freed = malloc(7)
    del freed
    gc.collect()
    blocks = alive._live_blocks()
    assert [(n, k) for n, k, _ in blocks] == [(2000, 2)]
    assert "make_image" in blocks[0][2] and "test_allocations_are_listed" in blocks[0][2]
    session = types.SimpleNamespace(config=types.SimpleNamespace(args=["tests/test_x.py"]))
    alive.report_alive(str(tmp_path), session)
    (report,) = tmp_path.iterdir()
    text = report.read_text()
    assert "2 CuPy allocations not freed, 2000 bytes" in text and "make_image" in text
    del kept
    gc.collect()
    assert alive._live_blocks() == []


def test_no_tracking_no_allocation_section(fake_cupy, monkeypatch, tmp_path):
    monkeypatch.setattr(alive, "_TRACKING", [])
    session = types.SimpleNamespace(config=types.SimpleNamespace(args=["tests/test_x.py"]))
    alive.report_alive(str(tmp_path), session)
    (report,) = tmp_path.iterdir()
    assert "not freed" not in report.read_text()


def test_decoding_without_the_hardware_engine(monkeypatch):
    """CUPYPREP_TEST_NO_HW_DECODE=1: nvImageCodec's decoder is made without its hardware
    backend, the others in their order; unset, with all three."""
    from alive import decode_without_the_hardware_engine

    from cupyprep import _decoders

    made = []
    nv = types.SimpleNamespace(
        BackendKind=types.SimpleNamespace(HW_GPU_ONLY="hw", GPU_ONLY="gpu", HYBRID_CPU_GPU="hybrid"),
        Backend=lambda kind: ("backend", kind),
        Decoder=lambda **kw: made.append(kw["backends"]) or object())
    monkeypatch.setattr(_decoders, "NVIMGCODEC_BACKENDS", ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU"))
    monkeypatch.delenv("CUPYPREP_TEST_NO_HW_DECODE", raising=False)
    decode_without_the_hardware_engine()
    _decoders.NvImageCodecBackend(nv)._decoder(0)
    monkeypatch.setenv("CUPYPREP_TEST_NO_HW_DECODE", "1")
    decode_without_the_hardware_engine()
    _decoders.NvImageCodecBackend(nv)._decoder(0)
    assert made == [[("backend", "hw"), ("backend", "gpu"), ("backend", "hybrid")],
                    [("backend", "gpu"), ("backend", "hybrid")]]


def test_async_pools_set_cupys_stream_ordered_allocator(monkeypatch):
    """POOLS=async of benchmarks/sanitize.sh: CuPy allocates from a MemoryAsyncPool."""
    chosen = []

    class FakeAsyncPool:
        def malloc(self, size):
            return ("async", size)

    cuda = types.SimpleNamespace(MemoryAsyncPool=FakeAsyncPool, set_allocator=chosen.append)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    alive.use_async_pools()
    assert len(chosen) == 1 and chosen[0](8) == ("async", 8)


def test_conftest_reads_the_pool_settings(monkeypatch):
    import conftest

    for name in ("CUPYPREP_TEST_NO_POOL", "CUPYPREP_TEST_ASYNC_POOL", "PYTORCH_NO_CUDA_MEMORY_CACHING"):
        monkeypatch.delenv(name, raising=False)
    assert not conftest.cupy_pool_off() and not conftest.torch_caching_off() and not conftest.async_pools()
    monkeypatch.setenv("CUPYPREP_TEST_ASYNC_POOL", "1")  # the default pool and caching replaced
    assert conftest.cupy_pool_off() and conftest.torch_caching_off() and conftest.async_pools()
    monkeypatch.delenv("CUPYPREP_TEST_ASYNC_POOL")
    monkeypatch.setenv("CUPYPREP_TEST_NO_POOL", "1")
    assert conftest.cupy_pool_off() and not conftest.torch_caching_off()


def test_release_kept_blocks_lets_go_of_the_last_decodes_uploads(monkeypatch):
    """The leak check's release drops the decoder's in-flight entries whose event is done
    (after its device synchronize, every one): the page-locked uploads of the last decodes
    were reported as leaks before."""
    import weakref

    from cupyprep import _decoders, _plans, _transfers, interop

    class Done:
        done = True

    class Upload:  # stands in for a page-locked buffer
        pass

    calls = []
    pool = types.SimpleNamespace(free_all_blocks=lambda: calls.append("free"))
    cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: calls.append("sync")),
                                 Event=object,
                                 pinned_memory=types.SimpleNamespace(_add_to_watch_list=lambda e, o: None))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=cuda, get_default_memory_pool=lambda: pool, get_default_pinned_memory_pool=lambda: pool))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    for owner, name in ((_plans, "clear_all"), (_transfers, "drop_constants"), (interop, "release_graph_memory")):
        monkeypatch.setattr(owner, name, lambda: None)
    held = _decoders._InFlight()
    monkeypatch.setattr(_decoders, "IN_FLIGHT", held)
    upload = Upload()
    gone = weakref.ref(upload)
    held.add(Done(), [upload])
    del upload
    assert gone() is not None  # held until something looks at the event
    alive.release_kept_blocks()
    assert gone() is None and len(held) == 0
    assert calls[0] == "sync"
