"""A pytest plugin for long runs under a tool that slows every call (compute-sanitizer):
after ``PYTEST_BUDGET_S`` seconds the session stops after the test running then, as
``-x`` would, so the process and the tool around it end normally (the tool then prints its
summary, which a killed process would not).

    python -m pytest -p benchmarks._pytest_budget ...      # with PYTEST_BUDGET_S=300
"""
from __future__ import annotations

import os
import time

_START = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):
    import pytest

    budget = float(os.environ.get("PYTEST_BUDGET_S", "0") or 0)
    if budget and time.monotonic() - _START > budget:
        session = _SESSION[0] if _SESSION else None
        if session is not None:
            session.shouldstop = f"time budget of {budget:g} s spent (PYTEST_BUDGET_S)"
    del pytest


_SESSION: list = []


def pytest_sessionstart(session):
    _SESSION.append(session)
