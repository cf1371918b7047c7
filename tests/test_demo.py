"""README's demo, ``python -m cupyprep.demo``, as a user runs it: on the CPU backend where
there is no GPU, and on a GPU, where it checks its result against the CPU backend's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cupyprep

pytest.importorskip("skimage")
pytest.importorskip("cv2")


def _demo():
    root = Path(cupyprep.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "cupyprep.demo"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_demo_runs_on_the_cpu_backend():
    out = _demo()
    assert "input: (8, 512, 512, 3) uint8" in out
    assert "CPU backend (OpenCV + NumPy): (8, 3, 224, 224) float32" in out


@pytest.mark.gpu
def test_gpu_the_demo_equals_the_cpu_backend():
    out = _demo()
    assert "GPU result equal to the CPU backend bit for bit: True" in out, out
