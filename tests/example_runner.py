"""``python tests/example_runner.py examples/x.py [args]``: runs the example as ``python
examples/x.py [args]`` would, for the sanitizer runs (benchmarks/sanitize.sh, through
tests/test_examples.py): with the pools off (``CUPYPREP_TEST_NO_POOL=1``), CuPy's pools off,
as in the test process, and at the end the script's globals dropped and what cupyprep and
the libraries keep released, so the leak check at the process's exit reports only blocks
nothing owns (a script's arrays in its globals, or a pool's cache, at exit are no leak);
with ``CUPYPREP_TEST_ASYNC_POOL=1``, CuPy's stream-ordered pool; with
``CUPYPREP_TEST_NO_HW_DECODE=1``, decoding without the JPEG hardware engine."""
from __future__ import annotations

import os
import runpy
import sys


def main():
    script, *args = sys.argv[1:]
    from alive import apply_run_settings, release_kept_blocks

    leak_check = apply_run_settings()
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as python script.py has it
    names = runpy.run_path(script, run_name="__main__")
    names.clear()
    if leak_check:
        release_kept_blocks()


if __name__ == "__main__":
    main()
