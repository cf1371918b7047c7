"""benchmarks/sanitize.sh, the runner of the GPU suite under compute-sanitizer, with a
stand-in for the tool (no GPU needed): the options each tool gets, the per-tool summary of
this run's logs, the files most GPU tests first and their shards, and that a stopped run
leaves nothing running."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "sanitize.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("ps") is None,
                                reason="needs bash and ps")

FAKE = """#!/bin/bash
# stands in for compute-sanitizer: notes its options and environment, prints a summary
echo "$CUPYPREP_TEST_SANITIZER|$*" >> "{calls}"
echo "${{CUPYPREP_TEST_NO_POOL:-}}/${{PYTORCH_NO_CUDA_MEMORY_CACHING:-}}/${{CUPYPREP_TEST_NO_HW_DECODE:-}}/\
${{CUPYPREP_TEST_ASYNC_POOL:-}}/${{PYTORCH_CUDA_ALLOC_CONF:-}}" >> "{calls}.env"
while [ "$1" != python ]; do shift; done
echo "========= COMPUTE-SANITIZER"
[ -n "{sleep}" ] && {{ sleep {sleep} & wait; }}
[ -n "{kernel}" ] && printf '%s\n' "========= Uninitialized __global__ memory read of size 1 bytes" \
  "=========     at {kernel}+0x4d0" "=========     by thread (0,0,0) in block (0,0,0)"
echo "3 passed, 1 skipped in 0.10s"
echo "========= ERROR SUMMARY: 2 errors"
"""


# the runner's settings and the variables it gives the tests
SETTINGS = ("POOLS", "HW_DECODE", "CUPYPREP_TEST_NO_POOL", "PYTORCH_NO_CUDA_MEMORY_CACHING",
            "CUPYPREP_TEST_ASYNC_POOL", "PYTORCH_CUDA_ALLOC_CONF", "CUPYPREP_TEST_NO_HW_DECODE")


def fake_tool(tmp_path, sleep="", kernel=""):
    calls = tmp_path / "calls.txt"
    tool = tmp_path / "fake-sanitizer"
    tool.write_text(FAKE.format(calls=calls, sleep=sleep, kernel=kernel))
    tool.chmod(0o755)
    return tool, calls


def settings_seen(calls):
    """What the runs since the last look gave the tests, one line per run (the stand-in's
    ``.env`` file, removed so the next run starts a new one): the variables of SETTINGS'
    tail, in the stand-in's order, joined by "/"."""
    env_file = Path(f"{calls}.env")
    if not env_file.exists():
        return []
    lines = env_file.read_text().splitlines()
    env_file.unlink()
    return lines


def run(tmp_path, tool, *args, env=None, timeout=120):
    # (python on PATH is this interpreter: the script collects the default files with it)
    full = {k: v for k, v in os.environ.items() if k not in SETTINGS}  # (none inherited)
    full.update(COMPUTE_SANITIZER=str(tool), OUT_DIR=str(tmp_path / "logs"), JOBS="2",
                PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    full.update(env or {})
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=timeout)


def collected_gpu_ids(*args):
    """The GPU test ids pytest collects from ``args`` (as the script collects them)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "gpu", *args], cwd=ROOT, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "::" in line]


def test_each_tool_runs_each_file_with_its_options_and_the_summary_counts_this_run(tmp_path):
    tool, calls = fake_tool(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "memcheck-test_old.log").write_text("========= ERROR SUMMARY: 99 errors\n")
    proc = run(tmp_path, tool, "memcheck", "racecheck", "--", "tests/test_color.py", "tests/test_resize.py")
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 4
    for line in lines:
        name, options = line.split("|")
        assert f"--tool {name} " in options and "--show-backtrace device" in options
        assert ("--leak-check full" in options) == (name == "memcheck")
        assert options.endswith(("tests/test_color.py", "tests/test_resize.py"))
    # an earlier run's log in the same folder is not counted
    assert "memcheck: 4 errors; 6 tests passed in 2 of 2 runs that ended with a summary" in proc.stdout
    assert "racecheck: 4 errors; 6 tests passed in 2 of 2 runs that ended with a summary" in proc.stdout


def test_pools_off_by_default_and_on_only_without_the_leak_check(tmp_path):
    tool, calls = fake_tool(tmp_path)
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py")
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["1/1///"]
    proc = run(tmp_path, tool, "initcheck", "racecheck", "--", "tests/test_color.py", env={"POOLS": "on"})
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["////", "////"]
    proc = run(tmp_path, tool, "initcheck", "memcheck", "--", "tests/test_color.py", env={"POOLS": "on"})
    assert proc.returncode == 2 and "memcheck's leak check needs the pools off" in proc.stderr
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", env={"POOLS": "yes"})
    assert proc.returncode == 2 and "POOLS: expected on, off or async, got 'yes'" in proc.stderr
    assert settings_seen(calls) == []  # (refused before any run)


def test_pools_on_without_tools_runs_the_three_without_a_leak_check(tmp_path):
    tool, calls = fake_tool(tmp_path)
    proc = run(tmp_path, tool, "--", "tests/test_color.py", env={"POOLS": "on"})
    assert proc.returncode == 0, proc.stderr
    assert sorted(line.split("|")[0] for line in calls.read_text().splitlines()) == \
        ["initcheck", "racecheck", "synccheck"]


def test_no_setting_is_inherited(tmp_path):
    """Each setting sets or clears every variable the tests read: a variable left in the
    environment by an earlier run does not change this one."""
    tool, calls = fake_tool(tmp_path)
    left = {"CUPYPREP_TEST_ASYNC_POOL": "1", "CUPYPREP_TEST_NO_HW_DECODE": "1",
            "CUPYPREP_TEST_NO_POOL": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", env=left)
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["1/1///"]
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", env={**left, "POOLS": "on"})
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["////"]


def test_async_pools_and_memcheck_tracks_stream_ordered_races(tmp_path):
    tool, calls = fake_tool(tmp_path)
    proc = run(tmp_path, tool, "memcheck", "initcheck", "--", "tests/test_color.py", env={"POOLS": "async"})
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["///1/backend:cudaMallocAsync"] * 2
    options = dict(line.split("|") for line in calls.read_text().splitlines())
    assert "--leak-check full --track-stream-ordered-races all" in options["memcheck"]
    assert "--track-stream-ordered-races" not in options["initcheck"]
    calls.unlink()
    run(tmp_path, tool, "memcheck", "--", "tests/test_color.py")
    assert "--track-stream-ordered-races" not in calls.read_text()


def test_the_summary_names_the_kernels_of_the_reports(tmp_path):
    kernel = "void nvjpeg::ycbcr_to_format_kernel_roi<(nvjpegChromaSubsampling_t)2>(nvjpegImage_t)"
    tool, _ = fake_tool(tmp_path, kernel=kernel)
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", "tests/test_resize.py")
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout.split("--- the kernels the printed reports name", 1)[1].splitlines()[1:]
    assert tail == ["void nvjpeg::ycbcr_to_format_kernel_roi: initcheck-test_color initcheck-test_resize"]
    tool, _ = fake_tool(tmp_path)
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py")
    assert proc.returncode == 0 and "--- the kernels" not in proc.stdout


def test_hw_decode_off_reaches_the_tests(tmp_path):
    tool, calls = fake_tool(tmp_path)
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", env={"HW_DECODE": "off"})
    assert proc.returncode == 0, proc.stderr
    assert settings_seen(calls) == ["1/1/1//"]
    proc = run(tmp_path, tool, "initcheck", "--", "tests/test_color.py", env={"HW_DECODE": "no"})
    assert proc.returncode == 2 and "HW_DECODE: expected on or off, got 'no'" in proc.stderr


def test_default_files_most_gpu_tests_first_and_shards_split_them(tmp_path):
    tool, calls = fake_tool(tmp_path)
    counts = {}
    for test_id in collected_gpu_ids("tests"):
        name = test_id.split("::")[0]
        counts[name] = counts.get(name, 0) + 1
    order = sorted(counts, key=lambda f: (-counts[f], f))
    assert len(order) > 6
    proc = run(tmp_path, tool, "synccheck", env={"SHARD": "2/3", "JOBS": "1"})
    assert proc.returncode == 0, proc.stderr
    got = [line.rsplit(" ", 1)[1] for line in calls.read_text().splitlines()]
    assert got == order[1::3]


def test_a_stopped_run_stops_its_tools_and_leaves_nothing_running(tmp_path):
    tool, calls = fake_tool(tmp_path, sleep="59.7")  # (a length nothing else sleeps)
    start = time.monotonic()
    proc = subprocess.run(["timeout", "3", "bash", str(SCRIPT), "memcheck", "--", "tests/test_color.py",
                           "tests/test_resize.py", "tests/test_warp.py"], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, COMPUTE_SANITIZER=str(tool), OUT_DIR=str(tmp_path / "logs"), JOBS="2"),
                          timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == 124 and "stopped" in proc.stdout
    assert len(calls.read_text().splitlines()) == 2  # the third run never started
    time.sleep(0.5)
    left = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    assert str(tool) not in left and "sleep 59.7" not in left


def test_chunks_run_every_test_of_a_long_file_once(tmp_path):
    tool, calls = fake_tool(tmp_path)
    files = ["tests/test_color.py", "tests/test_inplace.py"]
    ids = collected_gpu_ids(*files)
    color = [i for i in ids if i.startswith("tests/test_color.py::")]
    chunk = 20
    assert len(color) > 2 * chunk and 0 < len(ids) - len(color) <= chunk
    proc = run(tmp_path, tool, "synccheck", "--", *files, env={"CHUNK": str(chunk)})
    assert proc.returncode == 0, proc.stderr
    runs = [line.split("|")[1] for line in calls.read_text().splitlines()]
    parts = -(-len(color) // chunk)
    assert len(runs) == parts + 1
    # a short file runs as the file; each part of a long one gets its ids (some hold spaces)
    assert sum(r.endswith(" tests/test_inplace.py") for r in runs) == 1
    passed = [i for r in runs for i in color if r.endswith(" " + i) or (" " + i + " ") in r]
    assert sorted(passed) == sorted(color)
    logs = sorted(p.name for p in (tmp_path / "logs").glob("synccheck-*.log"))
    assert logs == sorted([f"synccheck-test_color-part{k}.log" for k in range(1, parts + 1)] +
                          ["synccheck-test_inplace.log"])
    assert f"tests passed in {parts + 1} of {parts + 1} runs" in proc.stdout
