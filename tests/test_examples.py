"""The examples in examples/ run to their end and print what they should: on the CPU
backend with no device visible (as in CI), and on the GPU with one (``-m gpu``)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from alive import no_hw_decode
from conftest import cupy_pool_off

pytest.importorskip("skimage")
cv2 = pytest.importorskip("cv2")

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def run_example(script, backend, cwd, *args):
    """Run examples/``script`` in a fresh interpreter in ``cwd``; returns its stdout. The
    CPU backend hides every CUDA device from it, so CuPy and torch find none; under the
    sanitizer runs the GPU backend runs it through tests/example_runner.py."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    command = [sys.executable, str(ROOT / "examples" / script), *args]
    if backend == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif cupy_pool_off() or no_hw_decode():
        # benchmarks/sanitize.sh: pools off, and what the script and the libraries keep
        # released before the leak check at exit; or decoding without the hardware engine
        command[1:1] = [str(ROOT / "tests" / "example_runner.py")]
        env["PYTHONPATH"] += os.pathsep + str(ROOT / "tests")
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_augment_batch(tmp_path, backend):
    out = run_example("augment_batch.py", backend, tmp_path, "--out", "grid.png")
    assert f"wrote grid.png ({backend.upper()}): 16 augmented images" in out
    grid = cv2.imread(str(tmp_path / "grid.png"))
    assert grid is not None and grid.ndim == 3 and grid.shape[2] == 3
    assert grid.std() > 10  # photographs, not a blank canvas


@pytest.mark.parametrize("backend", BACKENDS)
def test_detector_input(tmp_path, backend):
    out = run_example("detector_input.py", backend, tmp_path)
    device = "cuda:0" if backend == "gpu" else "cpu"
    assert f"batch: (5, 3, 640, 640) torch.float32 on {device}" in out
    # the letterboxed image areas map back onto each whole photograph (width x height)
    assert ("image area mapped back: [[0, 0, 512, 512], [0, 0, 600, 400], [0, 0, 451, 300], "
            "[0, 0, 640, 427], [0, 0, 512, 512]]") in out
    assert "chelsea     451x300  padding t/b/l/r [107, 107, 0, 0]" in out


@pytest.mark.parametrize("backend", BACKENDS)
def test_face_detector_postprocess(tmp_path, backend):
    out = run_example("face_detector_postprocess.py", backend, tmp_path, "faces.png")
    lines = out.splitlines()
    assert lines[0] == ("GPU (CuPy): 2 face(s)" if backend == "gpu" else "CPU (NumPy): 2 face(s)")
    # the face encoded into the synthetic head comes back in the photograph's pixels
    box = [int(v) for v in lines[1].split("box (")[1].split(")")[0].split(", ")]
    np.testing.assert_allclose(box, [172, 62, 262, 182], atol=4)
    assert (tmp_path / "faces.png").exists() and lines[-1] == "wrote faces.png"


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_and_detect(tmp_path, backend):
    out = run_example("decode_and_detect.py", backend, tmp_path, "--out", "det")
    lines = out.splitlines()
    if backend == "gpu":
        assert lines[0].startswith("decoded 6 JPEG files on the GPU") and lines[0].endswith("cuda:0")
    else:
        assert lines[0] == "decoded 6 JPEG files with OpenCV (CPU backend): cpu"
    device = "cuda:0" if backend == "gpu" else "cpu"
    assert lines[1] == f"batch: (6, 3, 320, 320) torch.float32 on {device}"
    assert lines[2].startswith("detector: ") and lines[2].endswith("(random weights)")
    sizes = {"astronaut": (512, 512), "coffee": (400, 600), "chelsea": (300, 451), "rocket": (427, 640),
             "camera": (512, 512), "immunohistochemistry": (512, 512)}
    for line, (name, (h, w)) in zip(lines[3:], sizes.items()):
        assert line.startswith(f"{name}.jpg") and f" {w}x{h}: " in line, line
        assert "all inside the photograph" in line, line
        count = int(line.split(": ")[1].split(" boxes")[0])
        assert 0 <= count <= 5
        drawn = cv2.imread(str(tmp_path / "det" / f"detections_{name}.png"))
        assert drawn is not None and drawn.shape == (h, w, 3)
    assert len(lines) == 3 + len(sizes)
