"""examples/triton: the Python-backend models driven as Triton drives them (initialize with
the shipped config.pbtxt as Triton's JSON, execute with a dynamic batch of requests),
through a stand-in for triton_python_backend_utils (tests/triton_stub), on NumPy (a
KIND_CPU instance) and on the device with CuPy arrays (a KIND_GPU instance, given device
tensors or tensors in host memory); outputs checked against direct calls."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cupyprep

STUB = Path(__file__).resolve().parent / "triton_stub"
REPO = Path(__file__).resolve().parent.parent / "examples" / "triton" / "model_repository"
sys.path.insert(0, str(STUB))
import triton_python_backend_utils as pb_utils


def _load(name, kind):
    spec = importlib.util.spec_from_file_location(f"triton_{name}_model", REPO / name / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    config = pb_utils.model_config_json((REPO / name / "config.pbtxt").read_text())
    model.initialize({"model_config": config, "model_instance_kind": kind.split("-")[0], "model_instance_device_id": "0",
                      "model_name": name, "model_version": "1", "model_repository": str(REPO / name)})
    return model


def _side(kind):
    """``(put, get)``: a request tensor as the instance gets it, and an output to NumPy. A
    GPU instance gets device tensors, or host tensors ("GPU-host": Triton may place a GPU
    model's inputs in host memory, as a client's inputs arrive)."""
    if kind == "GPU-host":
        import cupy

        return np.asarray, cupy.asnumpy
    if kind == "GPU":
        import cupy

        def put(a):
            """A request tensor in device memory, ready as Triton hands it over: the copy
            (on this thread's stream; the model launches on its own non-blocking stream)
            has finished."""
            d = cupy.asarray(a)
            cupy.cuda.get_current_stream().synchronize()
            return d

        return put, cupy.asnumpy
    return np.asarray, np.asarray


def _tensor(name, array):
    return pb_utils.Tensor(name, array) if isinstance(array, np.ndarray) else pb_utils.Tensor.from_dlpack(name, array)


def _requests(put, batches):
    return [pb_utils.InferenceRequest([_tensor("IMAGE", put(b))]) for b in batches]


def _out(response, name, get):
    t = pb_utils.get_output_tensor_by_name(response, name)
    return get(t.array())


KINDS = [pytest.param("CPU"), pytest.param("GPU", marks=pytest.mark.gpu),
         pytest.param("GPU-host", marks=pytest.mark.gpu)]


def test_config_reads_as_triton_passes_it():
    config = json.loads(pb_utils.model_config_json((REPO / "preprocess" / "config.pbtxt").read_text()))
    assert config["max_batch_size"] == 64 and config["backend"] == "python"
    assert config["input"][0] == {"name": "IMAGE", "data_type": "TYPE_UINT8", "dims": ["-1", "-1", "3"]}
    assert config["output"][0]["dims"] == ["3", "640", "640"]
    assert config["instance_group"] == [{"kind": "KIND_GPU", "count": 1}]
    assert config["parameters"]["FORCE_CPU_ONLY_INPUT_TENSORS"] == {"string_value": "no"}
    assert "max_queue_delay_microseconds" in config["dynamic_batching"]
    ens = json.loads(pb_utils.model_config_json((REPO / "ensemble" / "config.pbtxt").read_text()))
    steps = ens["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["preprocess", "detector", "postprocess"]
    assert steps[2]["input_map"] == {"HEAD": "head", "META": "meta"}


@pytest.mark.parametrize("kind", KINDS)
def test_preprocess_model_equals_direct_calls(kind):
    """Three requests of different sizes (one with two images) and one bad request in one
    execute: each good response equals cupyprep.preprocess of its images, the bad one
    carries an error and nothing else is lost."""
    put, get = _side(kind)
    model = _load("preprocess", kind)
    rng = np.random.default_rng(60)
    batches = [rng.integers(0, 256, (2, 48, 80, 3), dtype=np.uint8),
               rng.integers(0, 256, (1, 700, 333, 3), dtype=np.uint8),
               rng.integers(0, 256, (1, 1, 1, 3), dtype=np.uint8)]
    requests = _requests(put, batches[:2]) + _requests(put, [np.zeros((1, 4, 4, 2), np.uint8)]) \
        + _requests(put, batches[2:])
    responses = model.execute(requests)
    assert len(responses) == 4
    assert responses[2].has_error() and "expected uint8 [batch, H, W, 3]" in responses[2].error().message()
    for response, batch in zip([responses[0], responses[1], responses[3]], batches):
        assert not response.has_error()
        want, meta = cupyprep.preprocess(list(batch), (640, 640), scale=0.00392156862745098)
        got = _out(response, "INPUT", get)
        assert got.dtype == np.float32 and got.shape == (len(batch), 3, 640, 640)
        np.testing.assert_array_equal(got, want)
        rows = _out(response, "META", get)
        np.testing.assert_array_equal(rows[:, 0:2], meta.orig_size)
        np.testing.assert_array_equal(rows[:, 2:4], meta.resized_size)
        np.testing.assert_array_equal(rows[:, 4:6], meta.offset)
        np.testing.assert_array_equal(rows[:, 6:8], [[640, 640]] * len(batch))
    if kind != "CPU":
        import cupy

        assert isinstance(pb_utils.get_output_tensor_by_name(responses[0], "INPUT").array(), cupy.ndarray)


@pytest.mark.parametrize("kind", KINDS)
def test_postprocess_model_equals_direct_calls(kind):
    """Heads of two requests (2 and 1 images) in one execute: NMS and the mapping back equal
    the direct calls, in EfficientNMS's padded layout."""
    put, get = _side(kind)
    model = _load("postprocess", kind)
    rng = np.random.default_rng(61)
    rows_n, classes = 300, 4
    heads = []
    for b in (2, 1):
        h = np.empty((b, rows_n, 5 + classes), np.float32)
        h[..., :2] = rng.uniform(0, 640, (b, rows_n, 2))
        h[..., 2:4] = rng.uniform(10, 120, (b, rows_n, 2))
        h[..., 4:] = rng.uniform(0, 1, (b, rows_n, 1 + classes))
        heads.append(h)
    images = [np.zeros((480, 640, 3), np.uint8), np.zeros((1080, 1920, 3), np.uint8), np.zeros((333, 700, 3), np.uint8)]
    _, meta = cupyprep.preprocess(images, (640, 640))
    meta_rows = np.concatenate([meta.orig_size, meta.resized_size, meta.offset, [[640, 640]] * 3], 1).astype(np.int64)
    requests = [pb_utils.InferenceRequest([_tensor("HEAD", put(heads[0])), _tensor("META", put(meta_rows[:2]))]),
                pb_utils.InferenceRequest([_tensor("HEAD", put(heads[1])), _tensor("META", put(meta_rows[2:]))])]
    responses = model.execute(requests)
    boxes, scores = cupyprep.decode_yolo(np.concatenate(heads))
    det = cupyprep.multiclass_nms(boxes, scores, iou_threshold=0.45, score_threshold=0.25,
                                  max_detections=100).to_original(meta)
    for response, part in zip(responses, (slice(0, 2), slice(2, 3))):
        assert not response.has_error()
        np.testing.assert_array_equal(_out(response, "COUNT", get)[:, 0], det.counts[part])
        np.testing.assert_array_equal(_out(response, "BOXES", get), det.boxes[part])
        np.testing.assert_array_equal(_out(response, "SCORES", get), det.scores[part])
        np.testing.assert_array_equal(_out(response, "CLASSES", get), det.classes[part])
    assert det.counts.min() > 0


def test_models_import_no_torch():
    """The models run (initialize + execute) without importing torch."""
    code = f"""
import sys
sys.path.insert(0, {str(STUB)!r}); sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import numpy as np, test_triton as t
m = t._load("preprocess", "CPU")
m.execute(t._requests(np.asarray, [np.zeros((1, 9, 7, 3), np.uint8)]))
t._load("postprocess", "CPU")
print("torch" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(cupyprep.__file__).resolve().parent.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
