"""cupyprep.integrations.ray under a real local Ray (``ray.init(num_cpus=2)``): a few hundred
images of different sizes through Ray Data's map_batches on actors, every output checked
against a direct call of the public API, nothing lost, duplicated or reordered, ids carried
through, and an actor's failure surfaced with the image's id. The GPU tests run the same
pipelines on ``num_gpus=1`` actors and compare them with the CPU run bit for bit (the
stand-in model is made of exactly rounded operations: tests/toy_detector.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cuda_available

import cupyprep

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
cv2 = pytest.importorskip("cv2")

from toy_detector import make_detector

from cupyprep.integrations import ray as cray

SIZE = (64, 64)
NMS = {"iou_threshold": 0.45, "score_threshold": 0.25, "max_detections": 20}
N_IMAGES = 240


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray for the module: 2 CPUs (and the GPU where there is one), no dashboard,
    a small object store; workers find this checkout's cupyprep and tests/ first."""
    here = Path(__file__).resolve().parent
    package_root = Path(cupyprep.__file__).resolve().parent.parent
    path = os.pathsep.join([str(package_root), str(here), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, num_gpus=1 if cuda_available() else 0, include_dashboard=False,
             object_store_memory=300 * 2**20, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield ray
    ray.shutdown()


def _images(n=N_IMAGES, seed=50):
    """Ragged uint8 BGR images (8 to 120 pixels a side, some 1-pixel-thin) with a few
    bright blocks each, so the stand-in detector finds something."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(8, 121, 2))
        if i % 37 == 5:
            h = 1
        img = rng.integers(0, 90, (h, w, 3), dtype=np.uint8)
        for _ in range(3):
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            img[y:y + 12, x:x + 12] = rng.integers(150, 256, 3, dtype=np.uint8)
        out.append(img)
    return out


def _ids(n):
    return [1000 + 7 * i for i in range(n)]  # not the row positions


def _direct(img, model=None):
    """A direct call of the public API for one image: the network input and, with a model,
    the detections in the image's pixels."""
    batch, meta = cupyprep.preprocess([img], SIZE)
    if model is None:
        return batch[0], meta
    with torch.inference_mode():
        head = model(torch.from_numpy(batch))
    boxes, scores = cupyprep.decode_yolo(head)
    det = cupyprep.multiclass_nms(boxes, scores, **NMS).to_original(meta)
    c = int(det.counts[0])
    return batch[0], (det.boxes[0, :c].numpy(), det.scores[0, :c].numpy(), det.classes[0, :c].numpy())


class NetworkBoxes:
    """A model stage between Preprocess and MapBack: the stand-in detector on the batch's
    input column, boxes per row in network coordinates."""

    def __init__(self):
        self.model = make_detector()

    def __call__(self, batch):
        with torch.inference_mode():
            head = self.model(torch.from_numpy(np.ascontiguousarray(batch["input"])))
        boxes, scores = cupyprep.decode_yolo(head)
        det = cupyprep.multiclass_nms(boxes, scores, **NMS)
        counts = det.counts.numpy()
        col = np.empty(len(counts), object)
        for i, c in enumerate(counts):
            col[i] = det.boxes[i, :c].numpy()
        return {**batch, "boxes": col}


# Each stage's actors and tasks take a fraction of the 2 CPUs, so that every stage of a
# pipeline can hold its workers at once (actors of 1 CPU each would starve the others).
def _staged(ds, num_gpus):
    """Preprocess (GPU actors where num_gpus) -> a model stage -> MapBack."""
    return (ds.map_batches(cray.Preprocess, fn_constructor_args=(SIZE,),
                           fn_constructor_kwargs={"device": "cuda" if num_gpus else "cpu"}, batch_size=32,
                           concurrency=1 if num_gpus else 2, num_gpus=num_gpus, num_cpus=0.25)
            .map_batches(NetworkBoxes, batch_size=32, concurrency=1, num_cpus=0.25)
            .map_batches(cray.MapBack, fn_constructor_kwargs={"columns": ["boxes"], "drop_meta": False},
                         batch_size=32, num_cpus=0.25))


def _write_pngs(folder, images):
    for i, img in zip(_ids(len(images)), images):
        cv2.imwrite(str(folder / f"{i}.png"), img)


def _fused(folder, num_gpus):
    ds = ray.data.read_binary_files(str(folder), include_paths=True)
    return cray.detection_pipeline(ds, make_detector, SIZE, id_column="path", batch_size=32,
                                   concurrency=1 if num_gpus else 2, num_gpus=num_gpus, num_cpus=0.5,
                                   device="cuda" if num_gpus else "cpu", **NMS)


def _rows_by_id(rows, key):
    ids = [r[key] for r in rows]
    assert len(set(ids)) == len(ids), "an image came out twice"
    return dict(zip(ids, rows))


# --- under Ray, on CPU actors ---------------------------------------------------------------
def test_staged_pipeline_equals_direct_calls(ray_cluster):
    """Preprocess -> a model stage -> MapBack on 2 actors: every row's network input, meta
    and mapped boxes equal the direct calls; ids in the input's order, none lost."""
    images = _images()
    ds = ray.data.from_items([{"id": i, "image": img} for i, img in zip(_ids(len(images)), images)])
    rows = _staged(ds, 0).take_all()
    assert [r["id"] for r in rows] == _ids(len(images))
    model = make_detector()
    found = 0
    for r, img in zip(rows, images):
        want_input, (want_boxes, _, _) = _direct(img, model)
        _, meta = _direct(img)
        np.testing.assert_array_equal(r["input"], want_input)
        np.testing.assert_array_equal(r["orig_size"], meta.orig_size[0])
        np.testing.assert_array_equal(r["offset"], meta.offset[0])
        np.testing.assert_array_equal(np.asarray(r["boxes"]).reshape(-1, 4), want_boxes)
        found += len(want_boxes)
    assert found > len(images)  # the stand-in detects something in most images


def test_fused_pipeline_from_files_to_parquet_and_json(ray_cluster, tmp_path):
    """read_binary_files (PNG bytes, paths as ids) -> Detect on 2 actors -> Parquet and JSON:
    every file once, each row's detections equal to the direct call on the decoded file."""
    images = _images(seed=51)
    src = tmp_path / "images"
    src.mkdir()
    _write_pngs(src, images)
    out = _fused(src, 0).materialize()
    out.write_parquet(str(tmp_path / "parquet"))
    out.write_json(str(tmp_path / "json"))
    import pyarrow.parquet as pq

    tables = {"parquet": pq.read_table(tmp_path / "parquet").to_pylist(),
              "json": [json.loads(line) for p in sorted((tmp_path / "json").iterdir())
                       for line in p.read_text().splitlines() if line.strip()]}
    model = make_detector()
    expected = {}
    for i, img in zip(_ids(len(images)), images):
        _, (boxes, scores, classes) = _direct(img, model)
        expected[str(src / f"{i}.png")] = (boxes, scores, classes)
    for kind, table in tables.items():
        rows = _rows_by_id(table, "path")
        assert set(rows) == set(expected), kind
        for path, (boxes, scores, classes) in expected.items():
            r = rows[path]
            got_boxes = np.array([np.asarray(b, np.float32) for b in r["boxes"]], np.float32).reshape(-1, 4)
            np.testing.assert_array_equal(got_boxes, boxes, err_msg=f"{kind} {path}")
            np.testing.assert_array_equal(np.asarray(r["scores"], np.float32), scores)
            np.testing.assert_array_equal(np.asarray(r["classes"], np.int64), classes)


def test_an_actors_failure_names_the_image(ray_cluster, tmp_path):
    """A corrupt file among good ones: the pipeline raises, and the error names its path."""
    images = _images(12, seed=52)
    src = tmp_path / "images"
    src.mkdir()
    _write_pngs(src, images)
    bad = src / f"{_ids(12)[7]}.png"
    bad.write_bytes(bad.read_bytes()[:40])  # truncated
    with pytest.raises(Exception, match=rf"path='{bad}': could not decode"):
        _fused(src, 0).take_all()


# --- under Ray, on GPU actors -----------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_actors_equal_the_cpu_run(ray_cluster, tmp_path):
    """The same two pipelines on num_gpus=1 actors: inputs, meta and detections equal the
    CPU actors' bit for bit (uint8 linear letterbox, the mapping, decode_yolo and NMS are
    exact; the model is exactly rounded operations)."""
    images = _images(seed=53)
    ds = ray.data.from_items([{"id": i, "image": img} for i, img in zip(_ids(len(images)), images)])
    cpu_rows, gpu_rows = (_staged(ds, g).take_all() for g in (0, 1))
    assert [r["id"] for r in gpu_rows] == _ids(len(images))
    for c, g in zip(cpu_rows, gpu_rows):
        for key in ("input", "orig_size", "resized_size", "offset"):
            np.testing.assert_array_equal(g[key], c[key], err_msg=f"{key} of id {c['id']}")
        np.testing.assert_array_equal(np.asarray(g["boxes"]), np.asarray(c["boxes"]))
    src = tmp_path / "images"
    src.mkdir()
    _write_pngs(src, images)
    cpu_det, gpu_det = (_rows_by_id(_fused(src, g).take_all(), "path") for g in (0, 1))
    assert set(cpu_det) == set(gpu_det) and len(gpu_det) == len(images)
    for path, c in cpu_det.items():
        for key in ("boxes", "scores", "classes"):
            np.testing.assert_array_equal(np.asarray(gpu_det[path][key]), np.asarray(c[key]), err_msg=path)


# --- the classes on their own (no Ray) --------------------------------------------------------
def test_nothing_imports_ray_or_the_integrations_eagerly():
    code = ("import sys, cupyprep, cupyprep.integrations.ray; "
            "print('ray' in sys.modules, 'torch' in sys.modules, "
            "'cupyprep.integrations' in sys.modules)")
    plain = ("import sys, cupyprep; print('cupyprep.integrations' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(Path(cupyprep.__file__).resolve().parent.parent)}
    out = [subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, env=env, check=True).stdout
           for c in (code, plain)]
    assert out == ["False False True\n", "False\n"]


def test_preprocess_takes_every_column_form():
    """Same-size images as an (N, H, W, C) array, grayscale (N, H, W), an object column and
    a list, and PNG bytes: each equals cupyprep.preprocess; other columns pass through."""
    rng = np.random.default_rng(54)
    same = rng.integers(0, 256, (3, 20, 30, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, (2, 9, 11), dtype=np.uint8)
    ragged = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((5, 40), (33, 7), (1, 1))]
    stage = cray.Preprocess(SIZE, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3), dtype="float16")
    cases = [(same, same), (ragged, ragged), (np.array(ragged + [None], object)[:3], ragged)]
    for col, images in cases:
        out = stage({"id": np.arange(3), "image": col, "note": np.array(["a", "b", "c"])})
        want, meta = cupyprep.preprocess(images, SIZE, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3),
                                         dtype="float16")
        np.testing.assert_array_equal(out["input"], want)
        assert list(out["note"]) == ["a", "b", "c"] and list(out["id"]) == [0, 1, 2]
        got = cray.meta_from_columns(out)
        for f in ("orig_size", "resized_size", "offset"):
            np.testing.assert_array_equal(getattr(got, f), getattr(meta, f))
        assert got.size == SIZE
    gray_stage = cray.Preprocess(SIZE, id_column=None)
    np.testing.assert_array_equal(gray_stage({"image": gray})["input"],
                                  cupyprep.preprocess(gray[..., None], SIZE)[0])
    pngs = np.array([cv2.imencode(".png", im)[1].tobytes() for im in ragged], object)
    np.testing.assert_array_equal(stage({"id": np.arange(3), "bytes": pngs})["input"],
                                  cupyprep.preprocess(ragged, SIZE, mean=(0.5, 0.4, 0.3),
                                                      std=(0.2, 0.25, 0.3), dtype="float16")[0])


def test_errors_name_the_row():
    stage = cray.Preprocess(SIZE)
    rng = np.random.default_rng(55)
    good = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(3)]
    ids = np.array(["a.jpg", "b.jpg", "c.jpg"])
    cases = [
        ({"image": good}, "expected an id column 'id'"),
        ({"id": ids, "pixels": good}, "expected an image column 'image' or a bytes column 'bytes'"),
        ({"id": ids, "image": good[:1] + [np.zeros((8, 8, 2), np.uint8)] + good[2:]},
         "id='b.jpg': expected an HW or HWC image with 1, 3 or 4 channels, got shape (8, 8, 2)"),
        ({"id": ids, "image": good[:2] + [np.zeros((8, 8, 3), np.float32)]},
         "id='c.jpg': expected dtype uint8 like the batch's first image, got float32"),
        ({"id": ids, "image": good[:2] + [np.zeros((0, 8, 3), np.uint8)]}, "id='c.jpg'"),
        ({"id": ids, "bytes": np.array([cv2.imencode(".png", g)[1].tobytes() for g in good[:2]]
                                       + [b""], object)}, "id='c.jpg': could not decode"),
    ]
    for batch, words in cases:
        with pytest.raises(ValueError, match=_literal(words)):
            stage(batch)
    with pytest.raises(ValueError, match="device: expected 'auto', 'cpu', 'cuda'"):
        cray.Preprocess(SIZE, device="gpu0")
    with pytest.raises(ValueError, match="head: expected 'yolov5' or 'yolov8'"):
        cray.Detect(make_detector, SIZE, head="ssd")
    with pytest.raises(ValueError, match="missing"):
        cray.MapBack()({"boxes": good})


def _literal(words):
    import re

    return re.escape(words)


def test_map_back_forms_and_detect_on_its_own():
    """MapBack of an object column, of a dense (N, K, 4) column and of points; Detect called
    directly on a batch (what one actor does) equals the direct calls, empty rows
    included."""
    images = _images(6, seed=56) + [np.zeros((30, 20, 3), np.uint8)]  # black: no detections
    pre = cray.Preprocess(SIZE)
    out = pre({"id": np.arange(7), "image": images})
    _, meta = cupyprep.preprocess(images, SIZE)
    rng = np.random.default_rng(57)
    dense = rng.uniform(0, 64, (7, 5, 4)).astype(np.float32)
    pts = [rng.uniform(0, 64, (k, 2)).astype(np.float32) for k in range(7)]
    col = np.empty(7, object)
    col[:] = [d for d in dense]
    pcol = np.empty(7, object)
    pcol[:] = pts
    mapped = cray.MapBack(["boxes", "points", "dense"])({**out, "boxes": col, "points": pcol, "dense": dense})
    assert not set(cray.META_COLUMNS) & set(mapped)
    np.testing.assert_array_equal(np.stack(list(mapped["boxes"])), meta.to_original(dense))
    np.testing.assert_array_equal(mapped["dense"], meta.to_original(dense))
    for got, want in zip(mapped["points"], meta.to_original(pts)):
        np.testing.assert_array_equal(got, want)
    detect = cray.Detect(make_detector, SIZE, device="cpu", **NMS)
    res = detect({"id": np.arange(7), "image": images})
    model = make_detector()
    for i, img in enumerate(images):
        _, (boxes, scores, classes) = _direct(img, model)
        np.testing.assert_array_equal(res["boxes"][i], boxes)
        np.testing.assert_array_equal(res["scores"][i], scores)
        np.testing.assert_array_equal(res["classes"][i], classes)
    assert res["boxes"][6].shape == (0, 4) and res["boxes"][0].shape[0] > 0


def test_the_default_decoder_gives_the_stages_library(monkeypatch):
    """On a GPU actor the default decoder decodes on the device as the stage's library's
    arrays: CuPy for Preprocess, torch for Detect (whose model takes the batch as it is;
    test_gpu_actors_equal_the_cpu_run runs it for real)."""
    seen = []
    monkeypatch.setattr(cupyprep, "decode", lambda sources, **kw: seen.append(kw) or ["decoded"])
    pre = cray.Preprocess(SIZE, device="cpu", warm=False)
    detect = cray.Detect(make_detector, SIZE, device="cpu", warm=False)
    for stage, library in ((pre, "cupy"), (detect, "torch")):
        # as on a GPU actor, where Detect's _set_library picks torch (the decoder reads the
        # stage's device and library at each batch)
        stage.device, stage.library = 0, library
        assert stage.decode([b"png"]) == ["decoded"]
        assert seen.pop() == {"like": library}
    with pytest.raises(ValueError, match="sources\\[0\\]"):  # the CPU's decoder: cv2
        cray.decode_images([b"not an image"], device=False, like="torch")
