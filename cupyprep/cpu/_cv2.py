from __future__ import annotations

import contextlib
import functools


@functools.lru_cache(maxsize=None)
def cv2_module():
    """OpenCV, or an ImportError that says which extra installs it."""
    try:
        import cv2
    except ImportError as exc:
        raise ImportError(
            "cupyprep's CPU backend (used for numpy and CPU torch inputs) needs OpenCV: "
            "pip install 'cupyprep[cpu]'"
        ) from exc
    return cv2


@contextlib.contextmanager
def without_ipp(cv2):
    """OpenCV's own code rather than Intel IPP's for the calls inside: ``cv2.ipp.setUseIPP``
    is per thread, so this thread's setting is turned off and put back after, and other
    threads' calls are untouched.

    The CPU backend makes every OpenCV call inside this: the kernels reproduce OpenCV's own
    arithmetic, and IPP rounds otherwise (float32 / uint16 linear and cubic resizes, uint8
    cubic, float32 color conversions, some warps); docs/exactness.md gives the figures.

    OpenCV's own out-of-memory error (``cv2.error`` with ``StsNoMem``) comes out as a
    MemoryError, as NumPy's and the kernels' do."""
    before = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        yield
    except cv2.error as exc:
        if getattr(exc, "code", None) == cv2.Error.StsNoMem:
            raise MemoryError(f"OpenCV could not allocate an output: {exc}") from exc
        raise
    finally:
        cv2.ipp.setUseIPP(before)
