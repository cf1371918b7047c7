"""The wheel carries every kernel source, and the installed loader finds them there."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_without_torch_or_cupy():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['cupy'] = None\n"
            "import numpy as np, cupyprep\n"
            "print(cupyprep.resize(np.zeros((4, 4, 3), np.uint8), (2, 2)).shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "(2, 2, 3)" in out.stdout


def test_numpy_without_opencv_names_the_extra():
    code = ("import sys; sys.modules['cv2'] = None\n"
            "import numpy as np, cupyprep\n"
            "cupyprep.resize(np.zeros((4, 4, 3), np.uint8), (2, 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "cupyprep[cpu]" in out.stderr


@pytest.mark.slow
def test_wheel_contains_every_kernel(tmp_path):
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    res = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = sorted(p.name for p in (ROOT / "kernels").iterdir() if p.suffix in (".cu", ".cuh"))
    assert sources
    for name in sources:
        assert f"cupyprep/kernels/{name}" in names, name
    # installed, the loader reads the packaged copies
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                          "--target", str(target), str(wheel)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    code = "from cupyprep import _kernels; print(_kernels.kernel_dir()); print(len(_kernels.read_source('resize.cu')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.split()[0]) == target / "cupyprep" / "kernels"
