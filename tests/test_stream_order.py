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
    cuda = types.SimpleNamespace(runtime=runtime, Event=Event, get_current_stream=lambda: Stream.current)
    cupy = types.SimpleNamespace(cuda=cuda, ndarray=Block, asarray=asarray, empty=empty)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_transfers, "_constants", {})
    return cupy, external


def table(cupy, key=("t",)):
    return _transfers.device_constant(cupy, key, lambda: np.arange(4, dtype=np.int32), "a table", "a hint")


def test_every_other_stream_waits_for_a_kept_tables_upload_once(monkeypatch):
    cupy, external = fake_cupy(monkeypatch)
    a, b, c = Stream(1), Stream(2), Stream(3)
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
    cupy, external = fake_cupy(monkeypatch)
    with Stream(1):
        table(cupy)
    entry = _transfers._constants[(0, "t")]
    capture = Stream(5, capturing=True)
    with capture:
        table(cupy)
        table(cupy)
    assert external == [(5, entry.event.ptr, 0x1)] * 2 and capture.waits == []
    assert entry.captured


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
    slot = _staging.Slot(0)
    copy, elsewhere = Stream(7), Stream(8)
    monkeypatch.setattr(cupy.cuda, "alloc_pinned_memory", lambda n: bytearray(n), raising=False)
    with elsewhere:  # (the staging thread's own current stream)
        slot.ensure(1000, "cupy", copy)
    assert slot.dev.stream is copy and slot.capacity == 1000
    first = slot.dev
    with elsewhere:
        slot.ensure(1000, "cupy", copy)  # room enough: the same block
        assert slot.dev is first
        slot.ensure(5000, "cupy", copy)
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
    slot = _staging.Slot(0)
    copy_t = object()
    slot.ensure(64, "torch", copy_t)
    assert seen == [("enter", copy_t), ("empty", 64, "cuda:0"), ("exit", copy_t)]
    assert slot.dev_ptr == 1234
