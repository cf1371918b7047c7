"""Stream order of the blocks cupyprep allocates on one stream and uses on another, as a
stream-ordered allocator (cudaMallocAsync) needs it, with a stand-in for CuPy's streams and
events (no GPU): the kept tables order every other stream after their upload through an
event wait (once per stream, also after the upload has finished), and a Loader's device
staging buffer is allocated on the copy stream that writes it."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from cupyprep import _staging, _transfers


class Stream:
    current = None

    def __init__(self, ptr, capturing=False):
        self.ptr, self.capturing, self.waits = ptr, capturing, []

    def is_capturing(self):
        return self.capturing

    def wait_event(self, event):
        self.waits.append(event)

    def __enter__(self):
        self.previous, Stream.current = Stream.current, self
        return self

    def __exit__(self, *exc):
        Stream.current = self.previous


class Event:
    def __init__(self, **kwargs):
        self.stream, self.done, self.ptr = None, False, id(self)

    def record(self, stream=None):
        self.stream = stream

    def synchronize(self):
        self.done = True


class Device:
    synchronized = []

    def __init__(self, device_id):
        self.device_id = device_id

    def use(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def synchronize(self):
        Device.synchronized.append(self.device_id)


class Block(np.ndarray):
    """A device array of the stand-in: notes the stream current at its allocation."""


def fake_cupy(monkeypatch):
    external = []

    def asarray(a, dtype=None):
        block = np.asarray(a, dtype=dtype).view(Block)
        block.stream = Stream.current
        return block

    def empty(shape, dtype):
        block = types.SimpleNamespace(shape=shape, stream=Stream.current)
        block.data = types.SimpleNamespace(ptr=id(block))
        return block

    runtime = types.SimpleNamespace(getDevice=lambda: 0,
                                    streamWaitEvent=lambda s, e, flags: external.append((s, e, flags)))
    cuda = types.SimpleNamespace(runtime=runtime, Event=Event, get_current_stream=lambda: Stream.current,
                                 Device=Device)
    cupy = types.SimpleNamespace(cuda=cuda, ndarray=Block, asarray=asarray, empty=empty)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_transfers, "_constants", {})
    return cupy, external


def table(cupy, key=("t",)):
    return _transfers.device_constant(cupy, key, lambda: np.arange(4, dtype=np.int32), "a table", "a hint")


def test_every_other_stream_waits_for_a_kept_tables_upload_once(monkeypatch):
    cupy, external = fake_cupy(monkeypatch)
    a, b, c = Stream(11), Stream(12), Stream(13)
    with a:
        first = table(cupy)
        again = table(cupy)
    assert again is first and first.stream is a and a.waits == []  # (the upload's own stream)
    entry = _transfers._constants[(0, "t")]
    assert entry.event.stream is a
    with b:
        assert table(cupy) is first
        assert table(cupy) is first
    assert b.waits == [entry.event]  # once: later work on b comes after the wait
    entry.event.done = True  # the host has seen the upload finish: another stream still waits
    with c:
        table(cupy)
    assert c.waits == [entry.event] and external == []


def test_a_capture_waits_at_every_captured_call_through_an_external_wait(monkeypatch):
    """Also on a stream that waited before the capture, and on the upload's own stream: a
    graph's replay may run on any stream."""
    cupy, external = fake_cupy(monkeypatch)
    upload = Stream(1)
    with upload:
        table(cupy)
    entry = _transfers._constants[(0, "t")]
    before = Stream(5)
    with before:
        table(cupy)
    assert before.waits == [entry.event]
    before.capturing = upload.capturing = True
    with before:
        table(cupy)
        table(cupy)
    with upload:
        table(cupy)
    assert external == [(5, entry.event.ptr, 0x1)] * 2 + [(1, entry.event.ptr, 0x1)]
    assert before.waits == [entry.event] and upload.waits == [] and entry.captured


def test_the_per_thread_default_stream_waits_at_every_call(monkeypatch):
    """Its handle (cudaStreamPerThread) names another stream in each thread: a table
    uploaded on one thread's is no table of another's, and no wait is remembered for it."""
    cupy, _ = fake_cupy(monkeypatch)
    with Stream(2) as upload:
        table(cupy)
    entry = _transfers._constants[(0, "t")]
    assert entry.stream_ptr == 2 and upload.waits == []
    with Stream(2) as other_thread:
        table(cupy)
        table(cupy)
    assert other_thread.waits == [entry.event] * 2 and entry.waited == set()


def test_an_eviction_keeps_the_dropped_tables_until_the_next(monkeypatch):
    """A call may take a table just before another call's eviction and launch on it after
    the eviction's synchronize: the dropped tables stay until the next synchronize."""
    cupy, _ = fake_cupy(monkeypatch)
    monkeypatch.setattr(_transfers, "_CONSTANTS_MAX", 3)
    monkeypatch.setattr(_transfers, "_constants_limit", 3)
    monkeypatch.setattr(_transfers, "_retired", [])
    monkeypatch.setattr(Device, "synchronized", [])
    with Stream(1):
        first = [table(cupy, (k,)) for k in range(3)]
        assert _transfers._retired == [] and Device.synchronized == []
        table(cupy, (3,))  # the fourth: the three are dropped after a synchronize
        assert Device.synchronized == [0] and len(_transfers._constants) == 1
        assert [t is f for t, f in zip(_transfers._retired, first)] == [True] * 3
        more = [table(cupy, (k,)) for k in range(4, 6)]
        table(cupy, (6,))  # the next eviction: the first three may go now
        assert Device.synchronized == [0, 0]
        assert len(_transfers._retired) == 3 and not any(t is f for t in _transfers._retired for f in first)
        assert any(t is more[0] for t in _transfers._retired)


def test_the_streams_a_table_remembers_are_bounded(monkeypatch):
    cupy, _ = fake_cupy(monkeypatch)
    with Stream(1):
        table(cupy)
    entry = _transfers._constants[(0, "t")]
    streams = [Stream(100 + k) for k in range(_transfers._WAITED_MAX + 5)]
    for s in streams:
        with s:
            table(cupy)
    assert all(len(s.waits) == 1 for s in streams)
    assert len(entry.waited) <= _transfers._WAITED_MAX
    with streams[-1]:  # remembered: no second wait
        table(cupy)
    assert len(streams[-1].waits) == 1


def test_the_staging_buffer_is_allocated_on_the_copy_stream(monkeypatch):
    cupy, _ = fake_cupy(monkeypatch)
    copy, elsewhere = Stream(7), Stream(8)
    slot = _staging.Slot(0, "cupy", copy)
    monkeypatch.setattr(cupy.cuda, "alloc_pinned_memory", lambda n: bytearray(n), raising=False)
    with elsewhere:  # (the staging thread's own current stream)
        slot.ensure(1000)
    assert slot.dev.stream is copy and slot.capacity == 1000
    first = slot.dev
    with elsewhere:
        slot.ensure(1000)  # room enough: the same block
        assert slot.dev is first
        slot.ensure(5000)
    assert slot.dev is not first and slot.dev.stream is copy and slot.capacity == 5000


def test_the_torch_staging_buffer_is_allocated_on_the_copy_stream(monkeypatch):
    torch = pytest.importorskip("torch")
    cupy, _ = fake_cupy(monkeypatch)
    monkeypatch.setattr(cupy.cuda, "alloc_pinned_memory", lambda n: bytearray(n), raising=False)
    seen = []

    class StreamContext:
        def __init__(self, stream):
            self.stream = stream

        def __enter__(self):
            seen.append(("enter", self.stream))

        def __exit__(self, *exc):
            seen.append(("exit", self.stream))

    def empty(n, dtype, device):
        seen.append(("empty", n, device))
        return types.SimpleNamespace(data_ptr=lambda: 1234)

    monkeypatch.setattr(torch.cuda, "stream", StreamContext)
    monkeypatch.setattr(torch, "empty", empty)
    copy_t = object()
    slot = _staging.Slot(0, "torch", copy_t)
    slot.ensure(64)
    assert seen == [("enter", copy_t), ("empty", 64, "cuda:0"), ("exit", copy_t)]
    assert slot.dev_ptr == 1234


def test_a_failed_staging_allocation_leaves_the_slot_empty(monkeypatch):
    """The old buffer goes before the larger one is asked for; an allocation that fails
    leaves no pointer to the old block behind (a later batch that fits the old size must
    not be copied there) and allocates again next time."""
    cupy, _ = fake_cupy(monkeypatch)
    monkeypatch.setattr(cupy.cuda, "alloc_pinned_memory", lambda n: bytearray(n), raising=False)
    slot = _staging.Slot(0, "cupy", Stream(7))
    slot.ensure(1000)
    allocate = cupy.empty

    def out_of_memory(shape, dtype):
        assert slot.dev is None  # (the old block was let go first)
        raise MemoryError("out of device memory")

    monkeypatch.setattr(cupy, "empty", out_of_memory)
    with pytest.raises(MemoryError):
        slot.ensure(5000)
    assert (slot.dev, slot.dev_ptr, slot.capacity, slot.host) == (None, 0, 0, None)
    monkeypatch.setattr(cupy, "empty", allocate)
    slot.ensure(800)  # smaller than before the failure: allocated again
    assert slot.dev is not None and slot.dev_ptr == slot.dev.data.ptr and slot.capacity == 800


@pytest.mark.parametrize("output", ["cupy", "torch"])
def test_the_loader_stages_on_its_copy_stream(monkeypatch, output):
    """Every staging slot allocates on the Loader's copy stream, of the output's library
    (torch's stream where the buffers come from torch's allocator)."""
    from cupyprep import _streams, pipeline

    cupy, _ = fake_cupy(monkeypatch)
    made = []

    def new_stream(**kwargs):
        made.append(Stream(30 + len(made)))
        return made[-1]

    monkeypatch.setattr(cupy.cuda, "Stream", new_stream, raising=False)
    if output == "torch":
        torch = pytest.importorskip("torch")
        monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
        monkeypatch.setattr(torch.cuda, "Stream", lambda device: new_stream())
        monkeypatch.setattr(_streams, "cupy_stream", lambda handle: ("cupy", handle))
        monkeypatch.setattr(Stream, "cuda_stream", property(lambda self: self.ptr), raising=False)
    pipe = types.SimpleNamespace(device=0, output=output)
    pipeline._Pipeline._setup_device(pipe)
    copy_s, _, copy_t, _ = pipe.streams
    assert made[0] is (copy_t if output == "torch" else copy_s)
    assert len(pipe.slots) == pipeline._STAGING_BUFFERS
    assert all(s.copy_stream is made[0] and s.library == output for s in pipe.slots)
    seen = []
    monkeypatch.setattr(_staging, "page_locked", lambda frame: True)
    pipe.slots = [types.SimpleNamespace(copied=Event(), held=None, ensure=lambda nbytes, host: seen.append((nbytes, host)))]
    pipe.turn = 0
    pipeline._Pipeline._stage_gpu(pipe, [np.zeros((4, 5, 3), np.uint8)], {})
    assert seen == [(60, False)]  # (page-locked frames: no pinned buffer)


def test_a_consumer_on_another_stream_gets_the_next_outputs_allocated_there(monkeypatch):
    """CuPy output: the batch's stream waits for its preprocessing, and a consumer that
    moved to another stream since the Loader started gets the next outputs allocated on
    that one (where they are read and given back)."""
    from cupyprep import pipeline

    fake_cupy(monkeypatch)
    loader = types.SimpleNamespace(output="cupy", device=0, _pipe=types.SimpleNamespace(consumer_stream=11))
    ready = Event()
    with Stream(11) as first:
        pipeline.Loader._hand_over(loader, None, ready)
    assert first.waits == [ready] and loader._pipe.consumer_stream == 11
    with Stream(14) as moved:
        pipeline.Loader._hand_over(loader, None, ready)
    assert moved.waits == [ready] and loader._pipe.consumer_stream == 14


def test_a_loader_closed_from_its_own_thread_orders_the_frees_after_the_preprocessing(monkeypatch):
    """From a pipeline thread (garbage collection) the buffers are not waited for: they go
    with the pipeline object, and the copy stream, where the device buffers were allocated
    and are freed, first waits for the preprocessing that read them."""
    import queue
    import threading

    from cupyprep import pipeline

    fake_cupy(monkeypatch)
    pool = types.SimpleNamespace(shutdown=lambda wait, cancel_futures: None)
    slots = [types.SimpleNamespace(consumed=Event(), release=lambda: pytest.fail("waited from its own thread"))
             for _ in range(2)]
    copy_s = Stream(21)
    pipe = types.SimpleNamespace(lock=threading.Lock(), closed=False, stop=threading.Event(), queue=queue.Queue(),
                                 thread=types.SimpleNamespace(is_alive=lambda: False), decoders=pool, copiers=pool,
                                 streams=(copy_s, Stream(22), None, None), slots=slots,
                                 _own_threads=lambda: [threading.current_thread()])
    pipeline._Pipeline.close(pipe)
    assert copy_s.waits == [s.consumed for s in slots]


def test_a_consumer_on_its_per_thread_default_stream_gets_outputs_on_the_legacy_stream(monkeypatch):
    """The handle of a thread's per-thread default stream (cudaStreamPerThread) names the
    feeder's own there: the output is allocated on the legacy default stream, which the
    consumer's per-thread stream synchronizes with, and the compute stream comes after it."""
    from cupyprep import _streams, pipeline

    fake_cupy(monkeypatch)
    handles = {}
    monkeypatch.setattr(_streams, "cupy_stream", lambda handle: handles.setdefault(handle, Stream(handle)))
    ordered = []
    monkeypatch.setattr(_streams, "order_after", lambda producer, consumer: ordered.append((producer, consumer)))
    pipe = types.SimpleNamespace(size=(8, 8), options={}, consumer_stream=None)
    for consumer, allocated_on in ((0x2, 0x1), (17, 17), (None, 0)):
        pipe.consumer_stream = consumer
        out = pipeline._Pipeline._cupy_output(pipe, 2, 3, Stream(40))
        assert out.stream is handles[allocated_on] and ordered.pop() == (allocated_on, 40)


def test_the_ray_uploader_stages_on_the_stages_stream(monkeypatch):
    """A GPU actor's upload: the device buffer allocated, the copy made and its event
    recorded on the stage's stream (torch's handle for Detect)."""
    from cupyprep import _streams
    from cupyprep.integrations import ray as cray

    cupy, _ = fake_cupy(monkeypatch)
    copies = []
    monkeypatch.setattr(cupy.cuda, "alloc_pinned_memory", lambda n: bytearray(n), raising=False)
    monkeypatch.setattr(cupy.cuda.runtime, "memcpyHostToDevice", 1, raising=False)
    monkeypatch.setattr(cupy.cuda.runtime, "memcpyAsync", lambda dst, src, n, kind, s: copies.append((n, s)),
                        raising=False)
    monkeypatch.setattr(_streams, "cupy_stream", lambda handle: Stream(handle))
    monkeypatch.setattr(_staging, "device_views", lambda dev, *rest: ("views of", dev))
    frames = [np.zeros((4, 5, 3), np.uint8), np.ones((2, 3, 3), np.uint8)]
    stage = Stream(9)
    up = cray._Uploader(0, "cupy", stage)
    with Stream(8):  # (another current stream)
        assert up(frames) == ("views of", up.slot.dev)
    assert up.slot.dev.stream is stage and copies == [(up.slot.capacity, 9)]
    assert up.slot.copied.stream.ptr == 9
    on_device = ["already on the device"]
    assert up(on_device) is on_device and len(copies) == 1
    torch_stage = types.SimpleNamespace(cuda_stream=12)
    up = cray._Uploader(0, "torch", torch_stage)
    assert up.slot.copy_stream is torch_stage and up.stream_ptr == 12


def test_the_stream_cache_keeps_the_objects_blocks_refer_to(monkeypatch):
    """Past its bound the cache drops only the stream objects nothing refers to weakly: a
    block of CuPy's MemoryAsyncPool frees itself on its stream object while it lives (on
    the current stream, unordered, once it is gone)."""
    import weakref

    from cupyprep import _streams

    class Handle(Stream):
        pass

    cupy, _ = fake_cupy(monkeypatch)
    monkeypatch.setattr(cupy.cuda, "Stream", types.SimpleNamespace(from_external=lambda h: Handle(h.ptr)),
                        raising=False)
    monkeypatch.setattr(_streams, "_stream_cache", {})
    monkeypatch.setattr(_streams, "_STREAM_CACHE_MAX", 4)
    held = _streams.cupy_stream(100)
    block = weakref.ref(held)  # as a MemoryAsync block allocated on it
    for ptr in range(101, 104):
        assert _streams.cupy_stream(ptr) is _streams.cupy_stream(ptr)
    assert len(_streams._stream_cache) == 4
    _streams.cupy_stream(104)  # past the bound: the three unreferenced ones go
    assert sorted(k[1] for k in _streams._stream_cache) == [100, 104]
    assert _streams.cupy_stream(100) is held and block() is held
    del block
    for ptr in range(105, 108):
        _streams.cupy_stream(ptr)
    assert sorted(k[1] for k in _streams._stream_cache) == [107]
