"""The soak script, short: every family runs, and host memory does not grow by more than a
few MiB over the calls after warm-up (the full run: python -m benchmarks.soak)."""
from __future__ import annotations

import re

import pytest


@pytest.mark.slow
def test_short_soak(capsys):
    from benchmarks import soak

    soak.main(["--calls", "300", "--warmup", "20"])
    lines = [line for line in capsys.readouterr().out.splitlines() if " calls " in line]
    assert len(lines) >= 15  # every family (of the second wave too), per kind
    for line in lines:
        growth = float(re.search(r"growth \{'rss_mib': (-?[0-9.]+)", line).group(1))
        assert growth <= 8.0, line
