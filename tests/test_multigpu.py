"""Every op runs on the device that holds its input (needs two GPUs; skipped otherwise)."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import random_image
from op_cases import flat, image_ops, matrix_helpers, post_ops

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]


def _device_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


if _device_count() < 2:
    pytestmark.append(pytest.mark.skip(reason="needs two CUDA devices"))


@pytest.mark.parametrize("name, op", image_ops())
def test_cupy_ops_stay_on_the_input_device(name, op):
    import cupy

    host = random_image(np.random.default_rng(0), (2, 30, 40, 3), np.uint8)
    with cupy.cuda.Device(0):
        ref = cupy.asnumpy(op(cupy.asarray(host)))
    with cupy.cuda.Device(1):
        x1 = cupy.asarray(host)
    # called with device 0 current: the op must still run on device 1, where x1 lives
    with cupy.cuda.Device(0):
        out = op(x1)
    assert out.device.id == 1, name
    np.testing.assert_array_equal(cupy.asnumpy(out), ref)
    keys = {k[0] for k in cupyprep._kernels._cuda_cache}
    assert {0, 1} <= keys  # kernels compiled and cached per device


_CUPY_CASES = post_ops() + matrix_helpers()


@pytest.mark.parametrize("name, inputs, op", _CUPY_CASES, ids=[o[0] for o in _CUPY_CASES])
def test_warps_detection_and_helpers_stay_on_the_input_device(name, inputs, op):
    import cupy

    with cupy.cuda.Device(0):
        ref = [cupy.asnumpy(r) for r in flat(op(*[cupy.asarray(a) for a in inputs]))]
    with cupy.cuda.Device(1):
        args = [cupy.asarray(a) for a in inputs]
    with cupy.cuda.Device(0):
        out = flat(op(*args))
    assert [o.device.id for o in out] == [1] * len(out), name
    for got, want in zip(out, ref):
        np.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=name)


@pytest.mark.parametrize("name, inputs, op", post_ops(), ids=[o[0] for o in post_ops()])
def test_torch_warps_and_detection_on_cuda1(name, inputs, op):
    """torch tensors on cuda:1 while cuda:0 is current, on a side stream of cuda:1: the
    work is ordered on that stream (read back after synchronizing it alone)."""
    torch = pytest.importorskip("torch")
    ref = [r.cpu().numpy() for r in flat(op(*[torch.from_numpy(np.asarray(a)).to("cuda:0") for a in inputs]))]
    args = [torch.from_numpy(np.asarray(a)).to("cuda:1") for a in inputs]
    torch.cuda.synchronize(1)
    stream = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.device(0), torch.cuda.stream(stream):
        out = flat(op(*args))
    stream.synchronize()
    assert [o.device for o in out] == [torch.device("cuda:1")] * len(out), name
    for got, want in zip(out, ref):
        np.testing.assert_array_equal(got.cpu().numpy(), want, err_msg=name)


def test_meta_maps_cupy_boxes_on_their_device():
    """PreprocessMeta.to_original / to_network on cupy boxes of device 1 while device 0 is
    current: computed on device 1, equal to the same on device 0."""
    import cupy

    host = random_image(np.random.default_rng(5), (2, 30, 40, 3), np.uint8)
    _, meta = cupyprep.preprocess(host, (64, 64))
    boxes = np.random.default_rng(6).uniform(0, 64, (2, 5, 4)).astype(np.float32)
    with cupy.cuda.Device(0):
        want = [cupy.asnumpy(f(cupy.asarray(boxes))) for f in (meta.to_original, meta.to_network)]
    with cupy.cuda.Device(1):
        b1 = cupy.asarray(boxes)
    with cupy.cuda.Device(0):
        got = [f(b1) for f in (meta.to_original, meta.to_network)]
    for g, w in zip(got, want):
        assert g.device.id == 1
        np.testing.assert_array_equal(cupy.asnumpy(g), w)


def test_cupy_loader_on_cuda1():
    """A Loader with CuPy output on the second GPU while the first is current: its batches
    live on device 1 and equal preprocess on device 0."""
    import cupy

    frames = [random_image(np.random.default_rng(40 + i), (90 + 4 * i, 120, 3), np.uint8) for i in range(6)]
    with cupy.cuda.Device(0):
        ref = cupy.asnumpy(cupyprep.preprocess([cupy.asarray(f) for f in frames], (48, 64))[0])
        with cupyprep.Loader(frames, (48, 64), batch_size=4, device="cuda:1", output="cupy") as loader:
            batches = [batch for batch, _ in loader]
    assert [b.device.id for b in batches] == [1, 1]
    np.testing.assert_array_equal(np.concatenate([cupy.asnumpy(b) for b in batches]), ref)


def test_torch_tensors_on_cuda1():
    torch = pytest.importorskip("torch")
    host = random_image(np.random.default_rng(1), (2, 30, 40, 3), np.uint8)
    t0, t1 = torch.from_numpy(host).to("cuda:0"), torch.from_numpy(host).to("cuda:1")
    stream = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.device(0), torch.cuda.stream(stream):
        b1, _ = cupyprep.preprocess(t1, (64, 64))
    stream.synchronize()
    b0, _ = cupyprep.preprocess(t0, (64, 64))
    assert b1.device == torch.device("cuda:1")
    np.testing.assert_array_equal(b1.cpu().numpy(), b0.cpu().numpy())


def test_mixed_devices_are_an_error():
    import cupy

    host = random_image(np.random.default_rng(2), (30, 40, 3), np.uint8)
    with cupy.cuda.Device(0):
        a = cupy.asarray(host)
    with cupy.cuda.Device(1):
        b = cupy.asarray(host)
        out = cupy.empty((10, 10, 3), cupy.uint8)
    with pytest.raises(ValueError, match="device"):
        cupyprep.preprocess([a, b], (32, 32))
    with pytest.raises(ValueError, match="device"):
        cupyprep.resize(a, (10, 10), out=out)
    torch = pytest.importorskip("torch")
    t0, t1 = torch.from_numpy(host).to("cuda:0"), torch.from_numpy(host).to("cuda:1")
    with pytest.raises(ValueError, match=r"images\[2\]: expected an array on device 0 .* device 1"):
        cupyprep.preprocess([t0, t0, t1], (32, 32))
    with pytest.raises(ValueError, match=r"img\[1\]: expected an array on device 1 .* device 0"):
        cupyprep.warp_affine([t1, t0], np.eye(3)[:2], (8, 8))


def _shard_worker(rank, host, result_dir):
    import torch

    import cupyprep as cp

    torch.cuda.set_device(rank)
    shard = torch.from_numpy(host[rank::2]).to(f"cuda:{rank}")
    batch, _ = cp.preprocess(shard, (64, 64), mean=cp.IMAGENET_MEAN, std=cp.IMAGENET_STD)
    np.save(f"{result_dir}/rank{rank}.npy", batch.cpu().numpy())


def test_ddp_style_two_processes_equal_one_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as mp

    host = random_image(np.random.default_rng(3), (6, 48, 64, 3), np.uint8)
    mp.spawn(_shard_worker, args=(host, str(tmp_path)), nprocs=2, join=True)
    ref, _ = cupyprep.preprocess(torch.from_numpy(host).cuda(), (64, 64), mean=cupyprep.IMAGENET_MEAN,
                                 std=cupyprep.IMAGENET_STD)
    ref = ref.cpu().numpy()
    for rank in (0, 1):
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{rank}.npy"), ref[rank::2])


def test_two_loaders_on_two_gpus_run_concurrently():
    import threading

    torch = pytest.importorskip("torch")
    frames = [random_image(np.random.default_rng(i), (120, 160, 3), np.uint8) for i in range(16)]
    ref, _ = cupyprep.preprocess(torch.from_numpy(np.stack(frames)).cuda(), (64, 64))
    ref = ref.cpu().numpy()
    results, errors = {}, []

    def consume(device):
        try:
            with cupyprep.Loader(frames, (64, 64), batch_size=4, device=f"cuda:{device}") as loader:
                batches = []
                for batch, _ in loader:
                    assert batch.device == torch.device("cuda", device)
                    batches.append(batch.cpu().numpy())
            results[device] = np.concatenate(batches)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for device in (0, 1):
        np.testing.assert_array_equal(results[device], ref)
