"""Shared fixtures: where kernels run (the CPU emulator in CI, a GPU when present),
test images, and the tolerance table."""
from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from alive import apply_run_settings, async_pools, pools_off  # noqa: E402

try:  # property-based tests (test_properties.py): how many cases each test draws
    from hypothesis import HealthCheck, settings

    # "ci" (the default): a fixed set of cases per test, the same on every run;
    # "deep" (--hypothesis-profile=deep, for a GPU run): many more, freshly drawn
    settings.register_profile(
        "ci", max_examples=200, derandomize=True, deadline=None, database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    settings.register_profile("deep", parent=settings.get_profile("ci"), max_examples=2000,
                              derandomize=False)
    settings.load_profile("ci")
except ImportError:
    pass


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def cupy_pool_off() -> bool:
    """CuPy's default pool is not in use: off (``CUPYPREP_TEST_NO_POOL=1``) or replaced by
    the stream-ordered one (:func:`async_pools`), both set by benchmarks/sanitize.sh."""
    return pools_off() or async_pools()


def torch_caching_off() -> bool:
    """torch's caching allocator is not in use: off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``)
    or replaced by ``cudaMallocAsync`` (:func:`async_pools`), both set by
    benchmarks/sanitize.sh."""
    return os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1" or async_pools()


def pytest_configure(config):
    # the sanitizer runs' settings (benchmarks/sanitize.sh): CuPy without its pools (each
    # block's maker noted where an alive report is asked for) or with the stream-ordered
    # one, and decoding without the hardware engine
    try:
        apply_run_settings(device=cuda_available(), track=bool(os.environ.get("CUPYPREP_TEST_ALIVE_DIR")))
    except ImportError:  # (no CuPy)
        pass


def pytest_sessionfinish(session, exitstatus):
    # CUPYPREP_TEST_NO_POOL=1 (benchmarks/sanitize.sh): before the process exits, let go of
    # every block cupyprep keeps on purpose (uploaded tables, graph memory, launch plans)
    # and collect garbage, so the leak check at exit reports only blocks nothing owns
    alive_dir = os.environ.get("CUPYPREP_TEST_ALIVE_DIR")
    if (not cupy_pool_off() and not alive_dir) or not cuda_available():
        return
    from alive import release_kept_blocks

    release_kept_blocks()
    if alive_dir:  # which device arrays outlive the session, and who holds them
        from alive import report_alive

        report_alive(alive_dir, session)


def counting(monkeypatch, owner, name):
    """Record each call of ``owner.name`` (still calling it): the structure tests of the
    launch plans count lookups, device queries and uploads with it."""
    calls = []
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def torch_graphs_need_caching():
    """Skip a test that captures a torch CUDA graph allocating inside the capture when
    torch's caching allocator is off (benchmarks/sanitize.sh): torch then allocates with
    cudaMalloc, which a capturing stream refuses; or replaced by ``cudaMallocAsync``
    (``POOLS=async``): these tests are written for the caching allocator's graph pools."""
    if torch_caching_off():
        pytest.skip("torch captures allocations into a CUDA graph through its caching allocator's "
                    "graph pools, which this run turns off or replaces")


def needs_pools():
    """Skip a test that reads CuPy's pool or torch's caching allocator (their counts, their
    reuse of blocks, device memory flat across calls), or allocates inside a CuPy capture,
    when benchmarks/sanitize.sh has turned both off (``CUPYPREP_TEST_NO_POOL=1``,
    ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``) for the leak check."""
    if cupy_pool_off() or torch_caching_off():
        pytest.skip("reads or needs CuPy's pool and torch's caching allocator, which the "
                    "sanitizer runs turn off")


def not_under_sanitizer(why="compute-sanitizer runs each launch to its end before returning: "
                             "no call can return while the GPU is busy"):
    """Skip a test under compute-sanitizer (benchmarks/sanitize.sh sets
    ``CUPYPREP_TEST_SANITIZER``): by default one that times the GPU against the host (an op
    returning while a long kernel still runs), as the tools run each kernel to its end
    before the launching call returns; ``why`` says another reason."""
    if os.environ.get("CUPYPREP_TEST_SANITIZER"):
        pytest.skip(why)


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class KernelSide:
    """Where a test's kernels run: ``put`` moves a NumPy array there, ``get`` brings a
    result back as NumPy, ``empty`` allocates an output there filled with poison."""

    def __init__(self, name):
        self.name = name

    def put(self, a):
        if self.name == "gpu":
            import cupy

            return cupy.asarray(a)
        return np.array(a, copy=True)

    def get(self, a):
        if self.name == "gpu":
            import cupy

            return cupy.asnumpy(a)
        return np.asarray(a)

    def poisoned(self, shape, dtype):
        """An output buffer whose every element is a value no kernel writes by accident."""
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            host = np.full(shape, np.nan, dtype)
        else:
            host = np.full(shape, np.iinfo(dtype).max // 3 + 7, dtype)
        return self.put(host)


@pytest.fixture(
    params=[
        pytest.param("emulated", marks=pytest.mark.emulated),
        pytest.param("gpu", marks=pytest.mark.gpu),
    ]
)
def kernels(request):
    """Run the test body's cupyprep calls on kernels: emulated on the CPU, or on a GPU.

    Under emulation NumPy arrays take the kernel path; compute references with OpenCV /
    NumPy directly (or ``cupyprep.cpu``), not through the public ops.
    """
    side = KernelSide(request.param)
    if request.param == "emulated":
        from cupyprep.testing import emulate

        with emulate():
            yield side
    else:
        yield side


@pytest.fixture(autouse=True)
def fresh_launch_plans():
    """Each test plans its calls afresh: a plan stored by an earlier test (same geometry,
    other tuning or launch shape patched in) would otherwise skip what the test patches."""
    from cupyprep import _plans

    _plans.clear_all()
    yield


POISON = -31337.0  # no op with a poisoned_outputs test makes it from its inputs


@pytest.fixture
def poisoned_outputs(monkeypatch):
    """Every float array an op allocates for its result starts as POISON, so an element a
    kernel leaves unwritten shows (for ops that take no ``out``)."""
    from cupyprep import _arrays

    allocate = _arrays.Prepared.output

    def output(self, out, shape, dtype, name="out"):
        native, view = allocate(self, out, shape, dtype, name)
        if out is None and np.dtype(dtype).kind == "f":
            view.fill(POISON)
        return native, view

    monkeypatch.setattr(_arrays.Prepared, "output", output)


def tune(monkeypatch, spec_module, **changes):
    """Run the test with a kernel family's tuning changed (``spec_module.SPEC``, a frozen
    dataclass in ``cupyprep._specs``, replaced for the test's duration)."""
    import dataclasses

    monkeypatch.setattr(spec_module, "SPEC", dataclasses.replace(spec_module.SPEC, **changes))


@pytest.fixture
def launched(monkeypatch):
    """The (file, kernel name expression) pairs fetched for launch during the test."""
    from cupyprep import _kernels

    seen = []
    get_function = _kernels.get_function

    def spy(filename, expr):
        seen.append((filename, expr))
        return get_function(filename, expr)

    monkeypatch.setattr(_kernels, "get_function", spy)
    return seen


@pytest.fixture
def torch_cuda():
    """torch with CUDA (the test is skipped without it)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


# --- images -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def photo(name="astronaut"):
    """A real photograph from scikit-image (RGB uint8 unless it is a gray one)."""
    from skimage import data

    return np.ascontiguousarray(getattr(data, name)())


def random_image(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if dtype == np.uint16:
        return rng.integers(0, 65536, shape, dtype=np.uint16)
    return rng.uniform(-1.0, 2.0, shape).astype(dtype)


# --- tolerances -------------------------------------------------------------------------
# Largest absolute difference allowed between a kernel and the CPU backend when both are
# specified to compute the same float32 arithmetic. Integers: exact. Floats: a few ulp of
# the value range used by random_image ([-1, 2]); float16 is one half-ulp at 2 (rounding of
# one float32 result can land either side of a float16 tie only when the float32 results
# differ).
TOLERANCE = {
    np.dtype(np.uint8): 0,
    np.dtype(np.uint16): 0,
    np.dtype(np.float16): 2.0 ** -10,
    np.dtype(np.float32): 1e-6,
}


def assert_close(actual, expected, dtype=None, atol=None, reason=None):
    """Compare with the table's tolerance for ``dtype`` (or an explicit, explained one)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if atol is None:
        atol = TOLERANCE[np.dtype(dtype or expected.dtype)]
    else:
        assert reason, "a tolerance other than the table's needs a written reason"
    assert not np.isnan(actual.astype(np.float64)).any() or np.isnan(
        expected.astype(np.float64)
    ).any(), "NaN in the result (an element the kernel did not write?)"
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    worst = float(np.nanmax(diff)) if diff.size else 0.0
    assert worst <= atol, (
        f"max |diff| {worst} > {atol} at {np.unravel_index(np.nanargmax(diff), diff.shape)}"
    )
