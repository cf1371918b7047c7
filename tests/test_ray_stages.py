"""The Ray Data stages of cupyprep.integrations.ray called as plain callables, as an actor
calls them (no Ray needed, so they run wherever the GPU suite runs): on a GPU, a batch's
host images go up through the stage's pinned upload and come out equal to the CPU stage's,
bit for bit (uint8 linear letterbox, the mapping, decode_yolo and NMS are exact; the
stand-in model is exactly rounded operations: tests/toy_detector.py)."""
from __future__ import annotations

import numpy as np
import pytest

from cupyprep.integrations import ray as cray

SIZE = (64, 64)
NMS = {"iou_threshold": 0.45, "score_threshold": 0.25, "max_detections": 20}


def _images(n, seed):
    """Ragged uint8 BGR images (a 1-pixel-thin one among them) with bright blocks."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(8, 121, 2))
        img = rng.integers(0, 90, (1 if i == 3 else h, w, 3), dtype=np.uint8)
        for _ in range(3):
            y, x = int(rng.integers(0, img.shape[0])), int(rng.integers(0, w))
            img[y:y + 12, x:x + 12] = rng.integers(150, 256, 3, dtype=np.uint8)
        out.append(img)
    return out


def _column(arrays):
    col = np.empty(len(arrays), object)
    col[:] = arrays
    return col


def _batches(source):
    """``"images"``: a ragged batch, a larger one (the staging buffer grows), an NHWC array
    and an empty batch; ``"png"``: a ragged batch as PNG bytes (decoded on the device by a
    GPU stage, by OpenCV by a CPU one: PNG decoding is exact); each with ids."""
    small, large = _images(5, seed=70), _images(12, seed=71)
    if source == "png":
        cv2 = pytest.importorskip("cv2")
        pytest.importorskip("nvidia.nvimgcodec")
        encoded = [cv2.imencode(".png", img)[1].tobytes() for img in large]
        return [{"id": np.arange(len(large)) + 100, "bytes": _column(encoded)}]
    same = np.stack([np.random.default_rng(72).integers(0, 256, (40, 50, 3), dtype=np.uint8)] * 4)
    return [{"id": np.arange(len(imgs)) + 100, "image": col}
            for imgs, col in ((small, _column(small)), (large, _column(large)), (same, same),
                              ([], _column([])))]


@pytest.mark.gpu
@pytest.mark.parametrize("source", ["images", "png"])
def test_gpu_preprocess_stage_equals_the_cpu_stage(source):
    cpu = cray.Preprocess(SIZE, device="cpu", warm=False)
    gpu = cray.Preprocess(SIZE, device="cuda")
    for batch in _batches(source):
        want, got = cpu(batch), gpu(batch)
        assert set(got) == set(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def _same_detections(got, want):
    """The rows' detections equal; the number of detections compared."""
    assert set(got) == set(want)
    np.testing.assert_array_equal(got["id"], want["id"])
    for key in ("boxes", "scores", "classes"):
        assert len(got[key]) == len(want[key])
        for i, (g, w) in enumerate(zip(got[key], want[key])):
            np.testing.assert_array_equal(g, w, err_msg=f"{key} of row {i}")
    return sum(len(b) for b in want["boxes"])


@pytest.mark.gpu
@pytest.mark.parametrize("source", ["images", "png", "png-cupy-decoder"])
def test_gpu_detect_stage_equals_the_cpu_stage(source):
    """``png-cupy-decoder``: a user's decoder that gives CuPy images; the model still gets
    a torch tensor (through ``to_torch``)."""
    pytest.importorskip("torch")
    from toy_detector import make_detector

    import cupyprep

    custom = {"decode": lambda sources: cupyprep.decode(sources, like="cupy")} if source == "png-cupy-decoder" else {}
    cpu = cray.Detect(make_detector, SIZE, device="cpu", warm=False, **NMS)
    gpu = cray.Detect(make_detector, SIZE, device="cuda", **custom, **NMS)
    found = sum(_same_detections(gpu(batch), cpu(batch)) for batch in _batches(source.split("-")[0]))
    assert found > 0  # (the comparison saw detections)


class _Yolov8:
    """The stand-in detector's head as YOLOv8 gives it: (N, 4 + classes, boxes), no
    objectness (the class scores multiplied by it; the direct calls get the same
    products)."""

    def __init__(self):
        from toy_detector import make_detector

        self.model = make_detector()

    def __call__(self, x):
        import torch

        rows = self.model(x)
        scores = rows[..., 5:] * rows[..., 4:5]
        return torch.cat([rows[..., :4], scores], -1).transpose(1, 2)


@pytest.mark.parametrize("head", ["yolov8", "yolov5-float64"])
def test_detect_stage_head_forms(head):
    """``head="yolov8"`` (transposed, no objectness) and a head that is not float32 /
    float16 (taken as float32): the detections equal the direct calls'."""
    torch = pytest.importorskip("torch")
    from toy_detector import make_detector

    import cupyprep

    if head == "yolov8":
        factory = _Yolov8
    else:
        def factory():
            model = make_detector()
            return lambda x: model(x).double()
    detect = cray.Detect(factory, SIZE, device="cpu", head=head.split("-")[0], warm=False, **NMS)
    batch = _batches("images")[1]
    got = detect(batch)
    images = list(batch["image"])
    x, meta = cupyprep.preprocess(images, SIZE)
    raw = factory()(torch.from_numpy(x))
    head_rows = raw.transpose(1, 2) if head == "yolov8" else raw.float()
    boxes, scores = cupyprep.decode_yolo(head_rows, objectness=head != "yolov8")
    det = cupyprep.multiclass_nms(boxes, scores, **NMS).to_original(meta)
    counts = det.counts.numpy()
    assert counts.sum() > 0
    for i, c in enumerate(counts):
        np.testing.assert_array_equal(got["boxes"][i], det.boxes[i, :c].numpy().astype(np.float32))
        np.testing.assert_array_equal(got["scores"][i], det.scores[i, :c].numpy())
        np.testing.assert_array_equal(got["classes"][i], det.classes[i, :c].numpy())
