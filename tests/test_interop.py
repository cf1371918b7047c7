"""Interop: zero-copy handoff (data pointers equal), the DLPack stream handshake, the
stream an op runs on (a test that fails when a wait is missing), one memory pool."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cupyprep
from conftest import needs_pools, not_under_sanitizer, random_image, torch_graphs_need_caching, tune
from cupyprep import _allocators, _arrays, _streams, _torch, _transfers, interop
from cupyprep._specs import nms as nms_spec
from op_cases import _META, flat, image_ops, post_ops

torch = pytest.importorskip("torch")


class DLPackOnly:
    """An array that exposes nothing but the DLPack protocol."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class CAIOnly:
    """A device array that exposes nothing but ``__cuda_array_interface__``."""

    def __init__(self, array):
        self._array = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


class OtherDevice:
    """A DLPack producer whose memory is on a device that is neither host nor CUDA (device
    type 14, oneAPI); its ``__dlpack__`` must not be called."""

    def __dlpack__(self, **kwargs):
        raise AssertionError("__dlpack__ called for memory that cannot be taken")

    def __dlpack_device__(self):
        return (14, 0)


# --- host arrays (CI) ------------------------------------------------------------------------
def test_numpy_torch_round_trip_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = interop.to_torch(a)
    assert t.data_ptr() == a.ctypes.data and t.shape == (3, 4)
    back = interop.from_torch(t)
    assert back.ctypes.data == a.ctypes.data
    assert interop.to_torch(t) is t
    g = torch.ones(3, requires_grad=True)
    assert interop.from_torch(g).ctypes.data == g.data_ptr()  # detached, same memory


def test_as_array_accepts_dlpack_and_array_interface():
    a = np.arange(6, dtype=np.uint8)
    assert interop.as_array(a) is a
    assert interop.as_array(DLPackOnly(a)).ctypes.data == a.ctypes.data
    t = torch.arange(5)
    assert interop.as_array(t).ctypes.data == t.data_ptr()
    pil = pytest.importorskip("PIL.Image").fromarray(np.zeros((4, 5, 3), np.uint8))
    assert interop.as_array(pil).shape == (4, 5, 3)
    assert interop.to_torch(DLPackOnly(a)).data_ptr() == a.ctypes.data


def test_blocks_allocated_under_a_capture_are_kept(monkeypatch):
    """What an op on CuPy arrays allocates while its stream is being captured is held for
    good (a graph's replays may use it at any time), through whatever allocator was
    current; the allocator is restored afterwards."""
    import cupy

    monkeypatch.setattr(_allocators, "KEPT_FOR_GRAPHS", [])
    given = []

    def fake(size):
        given.append(object())
        return given[-1]

    with cupy.cuda.using_allocator(fake):
        with _allocators.captured_allocations():
            a = cupy.cuda.get_allocator()(256)
            b = cupy.cuda.get_allocator()(512)
        assert cupy.cuda.get_allocator() is fake
    assert [a, b] == given == _allocators.KEPT_FOR_GRAPHS


def test_release_graph_memory_lets_go_of_the_kept_blocks(monkeypatch):
    """release_graph_memory drops the blocks held for CuPy graphs and returns their bytes;
    blocks allocated under a capture after it are held again."""
    import cupy

    monkeypatch.setattr(_allocators, "KEPT_FOR_GRAPHS", [])

    class Block:
        def __init__(self, size):
            self.mem = type("Memory", (), {"size": size})()

    with cupy.cuda.using_allocator(Block), _allocators.captured_allocations():
        cupy.cuda.get_allocator()(512)
        cupy.cuda.get_allocator()(1536)
    assert len(_allocators.KEPT_FOR_GRAPHS) == 2
    assert cupyprep.release_graph_memory() == 2048
    assert _allocators.KEPT_FOR_GRAPHS == [] and cupyprep.release_graph_memory() == 0
    with cupy.cuda.using_allocator(Block), _allocators.captured_allocations():
        cupy.cuda.get_allocator()(256)
    assert cupyprep.release_graph_memory() == 256


@pytest.mark.gpu
def test_release_graph_memory_gives_a_cupy_capture_back_to_the_pool():
    """After a CuPy capture of an op, its blocks stay in use from CuPy's pool though graph
    and outputs are gone; release_graph_memory gives them back (the pool's bytes in use
    fall by what it returns), and a new capture replays as before."""
    needs_pools()
    import cupy

    x = cupy.asarray(random_image(np.random.default_rng(12), (2, 64, 80, 3), np.uint8))
    pool = cupy.get_default_memory_pool()
    stream = cupy.cuda.Stream(non_blocking=True)

    def capture():
        with stream:
            cupyprep.preprocess(x, (32, 32))  # compiled, pools warm
            stream.synchronize()
            stream.begin_capture()
            try:
                batch, _ = cupyprep.preprocess(x, (32, 32))
            finally:
                graph = stream.end_capture()
        return graph, batch

    cupyprep.release_graph_memory()
    graph, batch = capture()
    del graph, batch
    cupy.cuda.Device().synchronize()
    used = pool.used_bytes()
    freed = cupyprep.release_graph_memory()
    assert freed >= 2 * 3 * 32 * 32 * 4  # at least the batch
    assert pool.used_bytes() == used - freed
    graph, batch = capture()
    batch[...] = 0
    graph.launch(stream)
    stream.synchronize()
    want, _ = cupyprep.preprocess(cupy.asnumpy(x), (32, 32))
    np.testing.assert_array_equal(cupy.asnumpy(batch), want)


def test_torch_allocations_are_swapped_in_and_out():
    """Inside an op call on torch tensors, CuPy allocates from torch's caching allocator;
    the allocator before is current again afterwards, also when the call raised."""
    import cupy

    def fake(size):
        raise AssertionError("not to be called")

    with cupy.cuda.using_allocator(fake):
        with _allocators.torch_allocations():
            assert cupy.cuda.get_allocator() is _allocators.torch_malloc
        assert cupy.cuda.get_allocator() is fake
        with pytest.raises(KeyError):
            with _allocators.torch_allocations():
                raise KeyError("inside")
        assert cupy.cuda.get_allocator() is fake


def test_exception_arguments():
    with pytest.raises(TypeError, match=r"x: expected an array .* got builtins.str"):
        interop.as_array("frame")
    with pytest.raises(TypeError, match=r"^t: expected a torch.Tensor, got numpy.ndarray of shape \(3,\) "
                                        r"and dtype float64$"):
        interop.from_torch(np.zeros(3))
    with pytest.raises(TypeError, match="bfloat16"):
        interop.from_torch(torch.zeros(2, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="s: expected a torch.cuda.Stream"):
        with interop.stream("side"):
            pass


def test_memory_neither_host_nor_cuda_is_refused():
    """DLPack memory on another device (oneAPI here) and tensors on torch's meta device are
    refused with a TypeError naming the argument, what it takes and what it got, before
    any exchange."""
    with pytest.raises(TypeError, match=r"^frame: DLPack device type 14 is neither host nor CUDA "
                                        r"memory, got [\w.]*OtherDevice$"):
        interop.as_array(OtherDevice(), "frame")
    with pytest.raises(TypeError, match=r"^x: DLPack device type 14 .* got [\w.]*OtherDevice$"):
        interop.to_torch(OtherDevice())
    meta = torch.zeros((2, 3), device="meta")
    with pytest.raises(TypeError, match=r"^t: expected a CPU or CUDA tensor, got torch.Tensor of "
                                        r"shape \(2, 3\) and dtype torch.float32 on meta$"):
        interop.from_torch(meta)
    with pytest.raises(TypeError, match=r"^frame: expected a CPU or CUDA tensor, got .* on meta$"):
        interop.as_array(meta, "frame")


def test_to_torch_refuses_negative_strides():
    """torch has no negative strides and to_torch makes no copy (its result shares the
    input's memory), so a reversed view is refused with a ValueError naming ``x``, the
    strides it takes and the ones it got; the contiguous copy the message asks for works."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view, strides in ((a[::-1], r"\(-16, 4\)"), (a[:, ::-2], r"\(16, -8\)")):
        with pytest.raises(ValueError, match=rf"^x: expected non-negative strides .* got strides "
                                             rf"{strides} of numpy.ndarray of shape"):
            interop.to_torch(view)
        with pytest.raises(ValueError, match="^x: expected non-negative strides"):
            interop.to_torch(DLPackOnly(view))
        np.testing.assert_array_equal(interop.to_torch(np.ascontiguousarray(view)).numpy(), view)


def test_stream_none_and_host_inputs_are_untouched():
    """``stream(None)`` chooses nothing, and a host input computes inside it what it
    computes outside."""
    img = random_image(np.random.default_rng(3), (4, 6, 3), np.uint8)
    want = cupyprep.resize(img, (2, 3))
    with interop.stream(None) as s:
        assert s is None and _streams.chosen_stream() is None
        np.testing.assert_array_equal(cupyprep.resize(img, (2, 3)), want)


# ExternalStream is told its device, where Stream.from_external asks CUDA for it (a GPU)
@pytest.mark.filterwarnings("ignore:ExternalStream is deprecated:DeprecationWarning")
def test_stream_blocks_nest_and_are_per_thread():
    """cupyprep.stream's documented choice: ``None`` inside a block restores the default
    choice there, leaving a nested block (also by an error) restores the outer one's, and
    the choice is the thread's own: another thread, in a block of its own meanwhile, sees
    neither this one's choice nor changes it. The streams are CuPy objects made from
    handles no stream has; nothing is launched on them."""
    import threading

    import cupy

    outer, inner, other = (cupy.cuda.ExternalStream(ptr, device_id=0) for ptr in (0x1000, 0x2000, 0x3000))

    def chosen():
        choice = _streams.chosen_stream()
        return None if choice is None else (choice.ptr, choice.device_id)

    seen = {}
    entered, checked = threading.Event(), threading.Event()

    def elsewhere():
        seen["before"] = chosen()
        with cupyprep.stream(other):
            seen["own"] = chosen()
            entered.set()
            checked.wait(10)
            seen["own, later"] = chosen()
        seen["after"] = chosen()

    assert chosen() is None
    with cupyprep.stream(outer) as s:
        assert s is outer and chosen() == (0x1000, 0)
        with cupyprep.stream(None):
            assert chosen() is None
            with cupyprep.stream(inner):
                assert chosen() == (0x2000, 0)
            assert chosen() is None
        assert chosen() == (0x1000, 0)
        with pytest.raises(KeyError), cupyprep.stream(inner):
            assert chosen() == (0x2000, 0)
            raise KeyError("inside")
        assert chosen() == (0x1000, 0)
        thread = threading.Thread(target=elsewhere)
        thread.start()
        assert entered.wait(10)
        assert chosen() == (0x1000, 0)  # the other thread is inside its own block now
        checked.set()
        thread.join(10)
        assert chosen() == (0x1000, 0)
    assert chosen() is None
    own = (0x3000, 0)
    assert seen == {"before": None, "own": own, "own, later": own, "after": None}


def test_use_torch_allocator_restores_the_allocator_before():
    """use_torch_allocator makes CuPy allocate through torch_malloc, or with
    ``enable=False`` from CuPy's default pool; as a context manager it puts back the very
    allocator in place before it (also after an error), and without one the setting stays.
    Nothing is allocated here."""
    import cupy

    def mine(size):
        raise AssertionError("not to be called")

    pool_malloc = cupy.get_default_memory_pool().malloc
    before = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(mine)
    try:
        with interop.use_torch_allocator():
            assert cupy.cuda.get_allocator() is _allocators.torch_malloc
        assert cupy.cuda.get_allocator() is mine
        with pytest.raises(KeyError), interop.use_torch_allocator():
            raise KeyError("inside")
        assert cupy.cuda.get_allocator() is mine
        with interop.use_torch_allocator(enable=False):
            assert cupy.cuda.get_allocator() == pool_malloc
        assert cupy.cuda.get_allocator() is mine
        with interop.use_torch_allocator():
            with interop.use_torch_allocator(enable=False):
                assert cupy.cuda.get_allocator() == pool_malloc
            assert cupy.cuda.get_allocator() is _allocators.torch_malloc
        assert cupy.cuda.get_allocator() is mine
        interop.use_torch_allocator()
        assert cupy.cuda.get_allocator() is _allocators.torch_malloc
        interop.use_torch_allocator(enable=False)
        assert cupy.cuda.get_allocator() == pool_malloc
    finally:
        cupy.cuda.set_allocator(before)


# --- device (GPU) ----------------------------------------------------------------------------
def cupy_view(torch_stream):
    return _streams.cupy_stream(torch_stream.cuda_stream)


def _spin(stream, ms=200):
    """A long kernel on ``stream`` (torch's sleep kernel: about ``ms`` milliseconds)."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(ms * 1.5e6))


@pytest.mark.gpu
def test_cupy_torch_round_trip_is_zero_copy():
    import cupy

    for dtype in (np.uint8, np.uint16, np.int32, np.float16, np.float32):
        x = cupy.arange(24, dtype=dtype).reshape(2, 3, 4)[:, 1:]
        t = interop.to_torch(x)
        assert t.data_ptr() == x.data.ptr and tuple(t.stride()) == tuple(s // x.itemsize for s in x.strides)
        np.testing.assert_array_equal(t.cpu().numpy(), cupy.asnumpy(x))
        back = interop.from_torch(t)
        assert back.data.ptr == x.data.ptr and back.dtype == x.dtype
    assert interop.as_array(CAIOnly(x)).data.ptr == x.data.ptr
    assert interop.as_array(DLPackOnly(x)).data.ptr == x.data.ptr
    assert interop.to_torch(CAIOnly(x)).data_ptr() == x.data.ptr
    for view in (x[::-1], x[:, :, ::-2]):
        with pytest.raises(ValueError, match=r"^x: expected non-negative strides .* got strides "
                                             r"\(.*-.*\) of cupy.ndarray"):
            interop.to_torch(view)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bool", "bfloat16"])
def test_from_torch_bool_and_bfloat16_share_memory(dtype):
    """from_torch of a CUDA tensor of bool or bfloat16 (a strided view): a CuPy array on
    the same memory with the tensor's values; a write through it lands in the tensor."""
    import cupy

    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="CuPy takes bfloat16 from ml_dtypes")
    base = torch.arange(-6, 18, device="cuda").reshape(4, 6)
    t = (base % 3 == 0) if dtype == "bool" else (base.to(torch.bfloat16) * 0.25)
    t = t[1:, ::2]
    a = interop.from_torch(t)
    assert a.data.ptr == t.data_ptr() and a.shape == (3, 3)
    assert a.strides == tuple(s * t.element_size() for s in t.stride())
    got = cupy.asnumpy(a)
    want = t.cpu() if dtype == "bool" else t.float().cpu()
    np.testing.assert_array_equal(got.astype(np.float32) if dtype == "bfloat16" else got, want.numpy())
    a[0, 0] = a[1, 1]
    torch.cuda.synchronize()
    assert bool(t[0, 0] == t[1, 1])


@pytest.mark.gpu
def test_from_torch_bfloat16_without_ml_dtypes_names_t(monkeypatch):
    """Where CuPy has no bfloat16 (it takes it from ml_dtypes), its NotImplementedError
    becomes a TypeError naming the argument, the dtype and the package."""

    def without_ml_dtypes(t):  # what CuPy 14.2 raises without ml_dtypes
        raise NotImplementedError("CuPy does not support bfloat16. Please install ml_dtypes to use bfloat16.")

    monkeypatch.setattr(_torch, "cupy_from_dlpack", without_ml_dtypes)
    t = torch.zeros((2, 3), dtype=torch.bfloat16, device="cuda")
    with pytest.raises(TypeError, match=r"^t: expected a dtype CuPy has \(its bfloat16 needs the "
                                        r"ml_dtypes package\), got torch.Tensor of shape \(2, 3\) and "
                                        r"dtype torch.bfloat16 on cuda:0; CuPy says: .*ml_dtypes"):
        interop.from_torch(t)
    with pytest.raises(TypeError, match=r"^frame: expected a dtype CuPy has"):
        interop.as_array(t, "frame")


@pytest.mark.gpu
def test_to_torch_honors_the_dlpack_stream():
    """CuPy writes on stream A after a long kernel; torch reads on stream B right away."""
    import cupy

    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = cupy.zeros(1 << 20, cupy.float32)
    cupy.cuda.Device().synchronize()
    a_cupy = cupy_view(a)
    _spin(a)
    with a_cupy:
        x.fill(3.0)
        with torch.cuda.stream(b):
            t = interop.to_torch(x)  # torch names B; CuPy orders A's work before it
            total = t.sum()
    b.synchronize()
    assert float(total) == 3.0 * (1 << 20)


_TORCH_VIEWS = {
    "contiguous": lambda: torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4),
    "transposed": lambda: torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4).T,
    "offset and step": lambda: torch.arange(40, dtype=torch.int64, device="cuda").reshape(5, 8)[1:, ::3],
    "uint16": lambda: (torch.arange(7, dtype=torch.int32) * 9000).to(torch.uint16).cuda(),
    "bool": lambda: torch.arange(5, device="cuda") % 2 == 0,
    "0-d": lambda: torch.tensor(2.5, dtype=torch.float16, device="cuda"),
    "empty": lambda: torch.zeros((0, 3), device="cuda"),
    "int8 (through DLPack)": lambda: torch.arange(-3, 3, dtype=torch.int8, device="cuda"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(_TORCH_VIEWS))
def test_internal_torch_views_share_memory(case):
    """The ops' cupy view of a torch tensor (inputs, outputs, scratch): same memory, shape,
    strides and values; a write through it lands in the tensor."""
    t = _TORCH_VIEWS[case]()
    x = _torch.from_torch(t)
    host = t.cpu().numpy()
    assert x.shape == host.shape and x.dtype == host.dtype
    np.testing.assert_array_equal(x.get(), host)
    if t.numel():
        assert x.data.ptr == t.data_ptr()
        assert x.strides == tuple(s * t.element_size() for s in t.stride())
        x[...] = x.dtype.type(1)
        assert (t.cpu().numpy() == host.dtype.type(1)).all()


@pytest.mark.gpu
def test_from_torch_honors_the_dlpack_stream():
    import cupy

    a = torch.cuda.Stream()
    t = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    _spin(a)
    with torch.cuda.stream(a):
        t.fill_(2.0)
        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            x = interop.from_torch(t)  # CuPy names its stream; torch orders A's work before it
            total = x.sum()
        side.synchronize()
    assert float(total) == 2.0 * (1 << 20)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["torch", "cupy"])
@pytest.mark.parametrize("stream_kind", ["torch", "cupy"])
def test_op_on_another_stream_waits_for_the_input(kind, stream_kind):
    """A long kernel on stream A writes the input; the op runs on stream B. Without the
    wait cupyprep inserts, B reads the zeros that were there before."""
    import cupy

    a = torch.cuda.Stream()
    b = torch.cuda.Stream() if stream_kind == "torch" else cupy.cuda.Stream(non_blocking=True)
    b_ptr = b.cuda_stream if stream_kind == "torch" else b.ptr
    frames = torch.zeros((4, 270, 480, 3), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    a_cupy = cupy_view(a)
    _spin(a)
    with torch.cuda.stream(a), a_cupy:
        frames.fill_(200)
        x = frames if kind == "torch" else interop.from_torch(frames)
        with cupyprep.stream(b):
            batch, _ = cupyprep.preprocess(x, (128, 128), mode="stretch")
    assert torch.cuda.current_stream().cuda_stream != b_ptr
    _streams.cupy_stream(b_ptr).synchronize()
    values = batch.cpu().numpy() if kind == "torch" else cupy.asnumpy(batch)
    np.testing.assert_allclose(values, np.float32(200) / np.float32(255))


def _op_cases():
    host = random_image(np.random.default_rng(0), (2, 30, 40, 3), np.uint8)
    return [(name, (host,), op) for name, op in image_ops()] + post_ops()


_OP_CASES = _op_cases()


@pytest.mark.gpu
@pytest.mark.parametrize("chosen", [False, True], ids=["current", "chosen"])
@pytest.mark.parametrize("case", _OP_CASES, ids=[c[0] for c in _OP_CASES])
def test_every_op_runs_after_its_inputs_are_written(case, chosen):
    """Every argument tensor is written on side stream A behind a long kernel; the op is
    called with A current (or inside ``cupyprep.stream(B)``, which must wait for A). All of
    the op's device work (matrices, sorts, tables, not only its main kernel) must be queued
    after those writes: work put on another stream reads the 3s that were there before."""
    name, inputs, op = case
    want = [r.cpu().numpy() for r in flat(op(*[torch.from_numpy(np.asarray(a)).cuda() for a in inputs]))]
    src = [torch.from_numpy(np.asarray(a)).cuda() for a in inputs]
    args = [torch.full_like(t, 3) for t in src]
    torch.cuda.synchronize()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    _spin(a, 100)
    with torch.cuda.stream(a):
        for dst, value in zip(args, src):
            dst.copy_(value)
        if chosen:
            with cupyprep.stream(b):
                got = flat(op(*args))
        else:
            got = flat(op(*args))
    torch.cuda.synchronize()
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.cpu().numpy(), w, err_msg=name)


def _sync_free_cases():
    """The calls that must not wait for the GPU (no value read back to the host): all but
    those whose documentation names a read back (nms / batched_nms without return_count,
    warps of device matrices without inverse_map (their singularity test), align_faces)."""
    by_name = {name: (name, inputs, op) for name, inputs, op in _OP_CASES}
    rng = np.random.default_rng(9)
    imgs = random_image(rng, (3, 40, 50, 3), np.uint8)
    rot = cupyprep.get_rotation_matrix_2d((25.0, 20.0), 30.0, 0.9)
    persp = np.array([[1.0, 0.1, 2.0], [-0.05, 0.95, 1.0], [1e-3, 2e-3, 1.0]])
    inverse = cupyprep.invert_affine_transform(np.stack([rot] * 3))
    huge = by_name["batched_nms"][1]
    return [case for name, case in by_name.items() if name in {
        "resize", "resize_cubic", "resize_area", "normalize", "swap_rb", "to_gray", "preprocess", "preprocess_ragged", "preprocess_area", "preprocess_area_ragged",
        "preprocess_area_fused", "preprocess_area_fused_ragged",
        "random_affine", "nms_large", "multiclass_nms", "roi_align", "roi_align_list", "nms_empty", "box_iou",
        "transform_points", "transform_points_perspective", "meta_to_original", "meta_to_network_list",
        "meta_to_original_index",
        "box_convert", "clip_boxes", "decode_boxes", "decode_landmarks", "decode_yolo"}] + [
        ("decode_boxes_host_priors", by_name["decode_boxes"][1][:1],
         lambda l: cupyprep.decode_boxes(l, by_name["decode_boxes"][1][1])),
        ("warp_affine_host_matrix", (imgs,), lambda x: cupyprep.warp_affine(x, rot, (40, 50))),
        ("warp_affine_list", (imgs,),
         lambda x: cupyprep.warp_affine([x[0], x[1, :30], x[2, 5:, 3:]], rot, (40, 50))),
        ("warp_perspective_host_matrix", (imgs,),
         lambda x: cupyprep.warp_perspective(x, persp, (40, 50), interpolation="cubic")),
        ("warp_affine_device_inverse", (imgs, inverse),
         lambda x, m: cupyprep.warp_affine(x, m, (40, 50), inverse_map=True)),
        ("nms_small_count", by_name["nms_small"][1], lambda b, s: cupyprep.nms(b, s, 0.5, return_count=True)),
        ("batched_nms_count", huge, lambda b, s, c: cupyprep.batched_nms(b, s, c, 0.5, return_count=True)),
        ("batched_nms_small_count", tuple(a[:900] for a in huge),
         lambda b, s, c: cupyprep.batched_nms(b, s, c, 0.5, return_count=True)),
    ]


_SYNC_FREE = _sync_free_cases()


@pytest.mark.gpu
@pytest.mark.parametrize("case", _SYNC_FREE, ids=[c[0] for c in _SYNC_FREE])
def test_sync_free_ops_do_not_wait_for_the_gpu(case):
    """Called on a stream busy with a long kernel, the op returns while that kernel still
    runs: it queued its work without reading anything back (which would wait for the
    stream), so a pipeline can prepare the next batch while the model runs."""
    not_under_sanitizer()
    name, inputs, op = case
    args = [torch.from_numpy(np.asarray(a)).cuda() for a in inputs]
    op(*args)  # kernels compiled and loaded, pools warm
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    _spin(stream, 300)
    with torch.cuda.stream(stream):
        op(*args)
    busy = not stream.query()
    stream.synchronize()
    assert busy, f"{name} waited for the GPU"


def _host_table_cases():
    """Calls that copy a table from host memory at every call (besides host priors, in
    _SYNC_FREE): under capture the table goes into the graph as kernel parameters."""
    rng = np.random.default_rng(10)
    imgs = random_image(rng, (3, 40, 50, 3), np.uint8)
    rot = cupyprep.get_rotation_matrix_2d((25.0, 20.0), 30.0, 0.9)
    rots = cupyprep.get_rotation_matrix_2d(np.tile([25.0, 20.0], (3, 1)), np.array([10.0, -30.0, 75.0]), 0.9)
    return [
        ("warp_affine_host_matrices", (imgs,), lambda x: cupyprep.warp_affine(x, rots, (40, 50))),
        ("transform_points_host_matrix", (rng.uniform(0, 50, (5, 2)),),
         lambda p: cupyprep.transform_points(p, rot)),
        ("meta_host_image_index", (rng.uniform(0, 64, (6, 4)),),
         lambda c: _META.to_original(c, image_index=np.array([0, 1, 1, 0, 1, 0]))),
        ("meta_of_many_images", (rng.uniform(0, 64, (65, 2, 4)),), lambda c: _MANY.to_original(c)),
        # lists of more images than the kernels take by value
        ("preprocess_list_of_65", (random_image(rng, (65, 12, 10, 3), np.uint8),),
         lambda x: cupyprep.preprocess([x[i, :5 + i % 7] for i in range(65)], (16, 16))[0]),
        ("warp_affine_list_of_65", (random_image(rng, (65, 12, 10, 3), np.uint8),),
         lambda x: cupyprep.warp_affine([x[i, :5 + i % 7] for i in range(65)], rot, (8, 8))),
    ]


# a preprocessing of more images than boxes.cu takes by value
_MANY = cupyprep.preprocess([np.zeros((9, 7 + i % 5, 3), np.uint8) for i in range(65)], (16, 16))[1]

# random_affine without a generator makes one, which torch refuses under capture
_CAPTURED = [c for c in _SYNC_FREE if c[0] != "random_affine"] + _host_table_cases()


def _bystanders(stream):
    """Arrays from CuPy's pool and torch's, allocated for ``stream`` and filled with 0x5A:
    a block an op took from either pool outside a graph's own, and gave back, is handed to
    one of these."""
    import cupy

    arrays = []
    with torch.cuda.stream(stream), _streams.cupy_stream(stream.cuda_stream):
        for n in [1 << k for k in range(9, 21)] * 3:
            arrays.append(cupy.full(n, 0x5A, cupy.uint8))
            arrays.append(torch.full((n,), 0x5A, dtype=torch.uint8, device="cuda"))
    return arrays


def _replay_inputs(inputs, to_device):
    """A case's inputs on the device (``to_device`` of a NumPy array), and fresh values of
    the same shapes (arrays reversed along their first axis) for the replay."""
    args = [to_device(np.asarray(a)) for a in inputs]
    fresh = [to_device(np.ascontiguousarray(np.asarray(a)[::-1]) if np.ndim(a) else np.asarray(a))
             for a in inputs]
    return args, fresh


def _check_replay(name, args, fresh, got, want, bystanders, replay, synchronize, to_host):
    """The captured call's inputs given fresh values and its outputs zeroed, one replay
    must compute ``want`` (what a fresh call computed) and leave the bystanders' bytes."""
    for dst, src in zip(args, fresh):
        dst[...] = src
    for g in got:
        g[...] = 0
    synchronize()
    replay()
    synchronize()
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        np.testing.assert_array_equal(to_host(g), w, err_msg=name)
    for b in bystanders:
        assert int((b != 0x5A).sum()) == 0, f"{name}: a replay wrote memory it does not own"


@pytest.mark.gpu
@pytest.mark.parametrize("case", _CAPTURED, ids=[c[0] for c in _CAPTURED])
def test_sync_free_ops_capture_in_a_cuda_graph(case):
    """Captured by ``torch.cuda.graph``, a call replays on new input values as a fresh call
    computes them, and a replay writes nothing but the call's outputs: arrays allocated
    after the capture, for the capture's stream, from CuPy's pool and torch's, keep their
    bytes (an op whose tables or scratch came from a pool outside the graph's would have
    given that memory back when the captured call ended, and the replays would write it)."""
    torch_graphs_need_caching()
    name, inputs, op = case
    args, fresh = _replay_inputs(inputs, lambda a: torch.from_numpy(a).cuda())
    want = [r.cpu().numpy() for r in flat(op(*fresh))]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op(*args)  # compiled, tables made, pools warm (as torch asks before a capture)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        got = flat(op(*args))
    _check_replay(name, args, fresh, got, want, _bystanders(stream), graph.replay,
                  torch.cuda.synchronize, lambda g: g.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("case", _CAPTURED, ids=[c[0] for c in _CAPTURED])
def test_sync_free_ops_capture_in_a_cupy_graph(case):
    """The same with CuPy arrays, captured by CuPy (``Stream.begin_capture`` /
    ``end_capture``): replays compute what a fresh call computes, and write nothing but the
    call's outputs (arrays allocated after the capture for its stream, from CuPy's pool and
    torch's, keep their bytes)."""
    import cupy

    name, inputs, op = case
    args, fresh = _replay_inputs(inputs, cupy.asarray)
    want = [cupy.asnumpy(r) for r in flat(op(*fresh))]
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()
    with stream:
        op(*args)  # compiled, tables made, pools warm
        stream.synchronize()
        stream.begin_capture()
        try:
            got = flat(op(*args))
        finally:
            graph = stream.end_capture()
    _check_replay(name, args, fresh, got, want, _bystanders(torch.cuda.ExternalStream(stream.ptr)),
                  lambda: graph.launch(stream), cupy.cuda.Device().synchronize, cupy.asnumpy)


def _uncapturable_cases():
    """Calls that cannot be captured, and what their error under capture names: host data
    larger than a graph takes as kernel parameters, and the reads back."""
    many = np.tile(np.float32([[0.5, 0.5, 0.1, 0.2]]), (20000, 1))  # 320000 bytes
    return [
        ("decode_boxes_large_host_priors", (np.zeros((20000, 4), np.float32),),
         lambda l: cupyprep.decode_boxes(l, many), r"priors .*\(320000 bytes; a graph takes up to 256000\)"),
    ] + _read_back_cases()


def _read_back_cases():
    """Calls that read a value back from the device (the list in docs/streams-and-graphs.md),
    and what their error under capture names."""
    by_name = {name: (inputs, op) for name, inputs, op in _OP_CASES}
    rng = np.random.default_rng(14)
    imgs = random_image(rng, (3, 40, 50, 3), np.uint8)
    rots = cupyprep.get_rotation_matrix_2d(np.tile([25.0, 20.0], (3, 1)), np.array([10.0, -30.0, 75.0]), 1.0)
    persp = np.tile(np.eye(3), (3, 1, 1))
    persp[:, 2, :2] = 1e-3
    kept = "the number of boxes kept"
    return [
        ("nms", by_name["nms_small"][0], lambda b, s: cupyprep.nms(b, s, 0.5), kept),
        ("batched_nms", by_name["batched_nms"][0], lambda b, s, c: cupyprep.batched_nms(b, s, c, 0.5), kept),
        ("multiclass_nms_count", by_name["multiclass_nms"][0],  # the test shrinks the mask budget
         lambda b, s: cupyprep.multiclass_nms(b, s, score_threshold=0.2), "the count of candidates"),
        ("flatten", by_name["multiclass_nms_flat"][0], by_name["multiclass_nms_flat"][1], "counts"),
        ("warp_affine_device_matrices", (imgs, rots), lambda x, m: cupyprep.warp_affine(x, m, (40, 50)),
         "the device matrices' singularity test"),
        ("warp_perspective_device_matrices", (imgs, persp),
         lambda x, m: cupyprep.warp_perspective(x, m, (40, 50)), "the device matrices' singularity test"),
        ("align_faces_device_index", by_name["align_faces"][0], by_name["align_faces"][1], "image_index"),
        ("align_faces_host_index", by_name["align_faces"][0][:2],
         lambda x, lm: cupyprep.align_faces(x, lm, [0, 2, 1, 2]), "landmarks: the fit's check"),
    ]


_UNCAPTURABLE = _uncapturable_cases()


# a capture ended by an error before any work was queued is empty, and torch says so
_EMPTY_GRAPH = pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")


@pytest.mark.parametrize("dtype, shape", [
    (np.uint8, (0,)), (np.uint8, (1,)), (np.uint8, (7,)), (np.float64, (4, 2, 3)),
    (np.int32, (1000,)), (np.float32, (1001,)), (np.int64, (3, 700)), (np.uint8, (12345,))])
def test_host_data_put_by_kernel_parameters(kernels, dtype, shape):
    """What ``upload`` does under capture: host data written by launches that carry it as
    a kernel parameter (1000 words a launch, the last word padded), every byte of it, into
    a new array of its shape and dtype (eagerly here, so the emulator runs it too)."""
    host = np.random.default_rng(len(shape) + math.prod(shape)).integers(
        0, 256, math.prod(shape) * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype).reshape(shape)
    if kernels.name == "gpu":
        import cupy as xp
    else:
        xp = np
    got = _transfers._put_in_graph(xp, host)
    assert got.shape == shape and got.dtype == dtype
    np.testing.assert_array_equal(kernels.get(got).view(np.uint8), host.view(np.uint8))


@pytest.mark.gpu
def test_readme_graph_example():
    """The CUDA graphs example of docs/streams-and-graphs.md, at a smaller size."""
    torch_graphs_need_caching()
    rng = np.random.default_rng(13)
    next_frames = torch.from_numpy(random_image(rng, (3, 108, 192, 3), np.uint8)).cuda()
    frames = torch.empty((3, 108, 192, 3), dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        cupyprep.preprocess(frames, (64, 64))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        batch, meta = cupyprep.preprocess(frames, (64, 64))
    frames.copy_(next_frames)
    graph.replay()
    want, _ = cupyprep.preprocess(next_frames.cpu().numpy(), (64, 64))
    np.testing.assert_array_equal(batch.cpu().numpy(), want)


@pytest.mark.gpu
@_EMPTY_GRAPH
@pytest.mark.parametrize("case", _UNCAPTURABLE, ids=[c[0] for c in _UNCAPTURABLE])
def test_host_copies_and_read_backs_under_capture_name_what(case, monkeypatch):
    """A call that copies more host data than a graph takes as kernel parameters, or reads
    a value back, raises under capture a ValueError naming what it copies or reads (and
    how to avoid it), before the copy or read (which would invalidate the capture); the
    capture then ends cleanly and CUDA stays usable."""
    torch_graphs_need_caching()
    name, inputs, op, what = case
    if name == "multiclass_nms_count":
        tune(monkeypatch, nms_spec, mask_budget=0)  # it counts the candidates first
    args = [torch.from_numpy(np.asarray(a)).cuda() for a in inputs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op(*args)  # outside a capture the call works
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match=f"^(?=.*CUDA graph cannot capture){what}"):
        with torch.cuda.graph(graph, stream=stream):
            op(*args)
    assert float(torch.ones(4, device="cuda").sum()) == 4.0


@pytest.mark.gpu
def test_random_affine_captures_with_a_registered_generator():
    """random_affine draws from a torch generator: one the graph knows of
    (``register_generator_state``) is captured, and each replay draws new matrices, whose
    warp is the images warped by them."""
    torch_graphs_need_caching()
    x = torch.from_numpy(random_image(np.random.default_rng(11), (3, 40, 50, 3), np.uint8)).cuda()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cupyprep.random_affine(x, degrees=20, scale=(0.8, 1.2), generator=gen)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(gen)
    with torch.cuda.graph(graph, stream=stream):
        out, mats = cupyprep.random_affine(x, degrees=20, scale=(0.8, 1.2), generator=gen)
    seen = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), cupyprep.warp_affine(x, mats, (40, 50)).cpu().numpy())
        seen.append(mats.cpu().numpy())
    assert not np.array_equal(seen[0], seen[1])


@pytest.mark.gpu
@_EMPTY_GRAPH
def test_area_resize_tables_stay_on_the_device():
    """The area resize's tables are made once per geometry: a first call of new sizes under
    capture is refused (naming them), one made before lets the same sizes be captured."""
    torch_graphs_need_caching()
    x = torch.randint(0, 256, (2, 31, 45, 3), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="area resize's tables"):
        with torch.cuda.graph(graph, stream=stream):
            cupyprep.resize(x, (19, 23), interpolation="area")
    want = cupyprep.resize(x, (19, 23), interpolation="area")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        got = cupyprep.resize(x, (19, 23), interpolation="area")
    graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(got.cpu().numpy(), want.cpu().numpy())
    np.testing.assert_array_equal(want.cpu().numpy(), cupyprep.resize(x.cpu().numpy(), (19, 23), interpolation="area"))


@pytest.mark.gpu
def test_captured_tables_outlive_the_cache(monkeypatch):
    """The kept tables are dropped when the cache is full, except those a captured call
    reads: after more new tables than the cache keeps, with the dropped tables' memory
    handed out again and overwritten, the graph of an area resize still replays what a
    fresh call computes."""
    torch_graphs_need_caching()
    import cupy

    monkeypatch.setattr(_transfers, "_CONSTANTS_MAX", 8)
    monkeypatch.setattr(_transfers, "_constants_limit", len(_transfers._constants) + 8)
    rng = np.random.default_rng(13)
    host, fresh = (random_image(rng, (2, 33, 47, 3), np.uint8) for _ in range(2))
    x = torch.from_numpy(host).cuda()
    size = (18, 29)  # OpenCV's weighted area: a table per axis
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cupyprep.resize(x, size, interpolation="area")
    torch.cuda.current_stream().wait_stream(stream)
    tables = [k for k in _transfers._constants if k[1] == "area" and k[2:4] in ((47, 29), (33, 18))]
    assert len(tables) == 2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        got = cupyprep.resize(x, size, interpolation="area")
    fillers = [("filler", i) for i in range(30)]
    for key in fillers:
        _transfers.device_constant(cupy, key, lambda: np.zeros(200, np.float32), "a filler", "")
    kept = set(_transfers._constants)
    assert all(k in kept for k in tables)
    assert sum(k[1:] in fillers for k in kept) <= 8  # the others were dropped
    garbage = [cupy.full(n, 0xFF, cupy.uint8) for n in [1 << k for k in range(9, 20)] * 4]
    x.copy_(torch.from_numpy(fresh))
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(got.cpu().numpy(), cupyprep.resize(fresh, size, interpolation="area"))
    del garbage


@pytest.mark.gpu
def test_kept_tables_neither_wait_nor_race():
    """A first area resize of new sizes queues its tables' upload behind the stream's work
    and returns without waiting; the same sizes at once on another stream wait for that
    upload on the device, not read the tables before they are there."""
    host = random_image(np.random.default_rng(12), (2, 37, 53, 3), np.uint8)
    want = cupyprep.resize(host, (23, 19), interpolation="area")
    x = torch.from_numpy(host).cuda()
    # the kernel compiled and loaded (on a cold kernel cache that outlasts the spin) by
    # other sizes: the tables of (23, 19) are still new below
    cupyprep.resize(x, (22, 18), interpolation="area")
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    a.wait_stream(torch.cuda.current_stream())
    b.wait_stream(torch.cuda.current_stream())
    _spin(a, 300)
    with torch.cuda.stream(a):
        first = cupyprep.resize(x, (23, 19), interpolation="area")
    assert not a.query(), "the first call waited for the GPU"
    with torch.cuda.stream(b):
        second = cupyprep.resize(x, (23, 19), interpolation="area")
    torch.cuda.synchronize()
    np.testing.assert_array_equal(first.cpu().numpy(), want)
    np.testing.assert_array_equal(second.cpu().numpy(), want)


@pytest.mark.gpu
def test_op_runs_on_the_chosen_stream():
    """Work queued on B before the op delays it: the op is on B, not on the current stream."""
    b = torch.cuda.Stream()
    frames = torch.full((2, 64, 64, 3), 7, dtype=torch.uint8, device="cuda")
    cupyprep.preprocess(frames, (32, 32), scale=1.0, swap_rb=False)  # compiled (a cold kernel
    torch.cuda.synchronize()  # cache takes longer than the spin), planned
    _spin(b, 300)
    with cupyprep.stream(b):
        batch, _ = cupyprep.preprocess(frames, (32, 32), scale=1.0, swap_rb=False)
    assert not b.query()
    b.synchronize()
    assert float(batch.min()) == 7.0


@pytest.mark.gpu
def test_stream_on_another_device_is_refused():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    other = torch.cuda.Stream(device=1)
    with cupyprep.stream(other), pytest.raises(ValueError, match="device 1"):
        cupyprep.preprocess(torch.zeros((1, 8, 8, 3), dtype=torch.uint8, device="cuda:0"), (4, 4))


@pytest.mark.gpu
def test_use_torch_allocator_counts_outputs_in_torch():
    needs_pools()
    import cupy

    frames = cupy.zeros((4, 540, 960, 3), cupy.uint8)
    torch.cuda.synchronize()
    previous = cupy.cuda.get_allocator()
    with interop.use_torch_allocator():
        before = torch.cuda.memory_allocated()
        batch, _ = cupyprep.preprocess(frames, (640, 640))
        during = torch.cuda.memory_allocated()
        assert during - before >= batch.nbytes
        assert batch.data.mem.__class__.__name__ == "UnownedMemory"
        nbytes = batch.nbytes
        del batch
        cupy.cuda.Device().synchronize()
        assert torch.cuda.memory_allocated() <= during - nbytes  # given back to torch's pool
    assert cupy.cuda.get_allocator() is previous
    x = cupy.empty(1 << 20, cupy.uint8)  # CuPy's own pool again
    assert x.data.mem.__class__.__name__ != "UnownedMemory"


@pytest.mark.gpu
def test_current_stream_handle_is_torchs():
    s = torch.cuda.Stream()
    assert _streams.torch_current_stream(0) == torch.cuda.current_stream(0).cuda_stream
    with torch.cuda.stream(s):
        assert _streams.torch_current_stream(0) == s.cuda_stream


@pytest.mark.gpu
@pytest.mark.parametrize("chosen", [False, True])
def test_launch_context_unwinds_after_an_error(chosen):
    """An error inside an op's launch context leaves cupy's and torch's current streams as
    they were (with and without cupyprep.stream)."""
    import contextlib

    import cupy

    x = torch.zeros(4, device="cuda")
    call = _arrays.prepare(x, "x")
    other = torch.cuda.Stream()
    before = (cupy.cuda.get_current_stream().ptr, torch.cuda.current_stream().cuda_stream)
    outer = cupyprep.stream(other) if chosen else contextlib.nullcontext()
    with outer:
        with pytest.raises(RuntimeError, match="inside"):
            with call.launch():
                inside = (cupy.cuda.get_current_stream().ptr, torch.cuda.current_stream().cuda_stream)
                raise RuntimeError("inside")
    expected = other.cuda_stream if chosen else before[1]
    assert inside[0] == expected and inside[1] == expected
    assert (cupy.cuda.get_current_stream().ptr, torch.cuda.current_stream().cuda_stream) == before


@pytest.mark.gpu
@pytest.mark.parametrize("chosen", [False, True], ids=["current", "chosen"])
def test_nested_launch_contexts_pick_the_stream_a_fresh_one_would(chosen):
    """A launch context inside another (an op's helper, then its warp) leaves the device
    and stream as they are where a fresh one would choose the same (CuPy arrays, torch
    under torch), and still enters where it would not (torch under CuPy, another device);
    leaving the inner one keeps the outer's, leaving the outer restores the caller's."""
    import contextlib

    import cupy

    t_side, c_side, chosen_side = torch.cuda.Stream(), cupy.cuda.Stream(), torch.cuda.Stream()
    x = cupy.zeros(4, cupy.float32)
    t = torch.zeros(4, device="cuda")
    choice = cupyprep.stream(chosen_side) if chosen else contextlib.nullcontext()

    def current():
        return cupy.cuda.get_current_stream().ptr, torch.cuda.current_stream().cuda_stream

    with torch.cuda.stream(t_side), c_side, choice:
        before = current()
        with _arrays.prepare(t, "t").launch():
            fresh_t = current()
        with _arrays.prepare(x, "x").launch():
            fresh_x = current()
        with _arrays.prepare(t, "t").launch():
            with _arrays.prepare(x, "x").launch():
                assert current() == fresh_t  # skipped: CuPy's stream is the outer's
            with _arrays.prepare(t, "t").launch():
                assert current() == fresh_t
            assert current() == fresh_t
        with _arrays.prepare(x, "x").launch():
            with _arrays.prepare(t, "t").launch():
                assert current() == fresh_t  # entered: torch's stream differs from CuPy's
            assert current() == fresh_x
        assert current() == before
    want_t = chosen_side.cuda_stream if chosen else t_side.cuda_stream
    want_x = chosen_side.cuda_stream if chosen else c_side.ptr
    assert fresh_t[0] == want_t and fresh_x[0] == want_x


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_nested_launch_context_enters_another_device():
    """A launch context for an array on device 1 inside one for device 0 enters device 1
    (for a CuPy array; for a torch tensor, with the stream torch has current there);
    leaving it restores device 0."""
    import cupy

    with cupy.cuda.Device(0):
        y = cupy.zeros(4, cupy.float32)
    with cupy.cuda.Device(1):
        z = cupy.zeros(4, cupy.float32)
    t = torch.zeros(4, device="cuda:1")
    side = torch.cuda.Stream(device=1)
    with torch.cuda.stream(side), cupy.cuda.Device(0), _arrays.prepare(y, "y").launch():
        assert cupy.cuda.runtime.getDevice() == 0
        with _arrays.prepare(z, "z").launch():
            assert cupy.cuda.runtime.getDevice() == 1
        assert cupy.cuda.runtime.getDevice() == 0
        with _arrays.prepare(t, "t").launch():
            assert cupy.cuda.runtime.getDevice() == 1
            assert cupy.cuda.get_current_stream().ptr == side.cuda_stream
        assert cupy.cuda.runtime.getDevice() == 0


@pytest.mark.gpu
def test_every_op_from_many_threads_at_once():
    """Eight threads, each with its own torch stream, run every op case at the same time,
    starting from an empty kernel cache (so the first calls look kernels up and load them
    concurrently): every result equals the one-thread result."""
    import threading

    from cupyprep import _kernels

    want = {name: [r.cpu().numpy() for r in flat(op(*[torch.from_numpy(np.asarray(a)).cuda() for a in inputs]))]
            for name, inputs, op in _OP_CASES}
    _kernels._cuda_cache.clear()
    failures = []
    start = threading.Barrier(8)

    def work(k):
        try:
            stream = torch.cuda.Stream()
            order = _OP_CASES[k:] + _OP_CASES[:k]  # each thread starts at another op
            start.wait()
            with torch.cuda.stream(stream):
                for name, inputs, op in order:
                    got = flat(op(*[torch.from_numpy(np.asarray(a)).cuda() for a in inputs]))
                    stream.synchronize()
                    if len(got) != len(want[name]):
                        failures.append(f"thread {k}: {name} gave {len(got)} results, not {len(want[name])}")
                    for g, w in zip(got, want[name]):
                        if not np.array_equal(g.cpu().numpy(), w, equal_nan=True):
                            failures.append(f"thread {k}: {name} differs")
        except Exception as exc:  # reported below, with the thread and the op
            failures.append(f"thread {k}: {exc!r}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
