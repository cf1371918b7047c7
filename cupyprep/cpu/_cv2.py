from __future__ import annotations

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
