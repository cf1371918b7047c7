"""``out=`` the input itself, or a view overlapping it (in-place use, as ``cv2.warpAffine(src,
M, size, dst=src)`` allows): every op gives what it gives into a fresh output."""
from __future__ import annotations

import numpy as np
import pytest

import cupyprep
from conftest import random_image

ROT = cupyprep.get_rotation_matrix_2d((20.0, 15.0), 33.0, 0.9)
PERSP = np.array([[1.0, 0.1, 2.0], [-0.05, 0.95, 1.0], [1e-3, 2e-3, 1.0]])

# (name, call with out, which output view of the input buffer x to write into)
CASES = [
    ("warp_affine", lambda x, out: cupyprep.warp_affine(x, ROT, (31, 41), out=out), lambda x: x),
    ("warp_affine_batch", lambda x, out: cupyprep.warp_affine(x, ROT, (31, 41), out=out), "batch"),
    ("warp_perspective_cubic",
     lambda x, out: cupyprep.warp_perspective(x, PERSP, (31, 41), interpolation="cubic", out=out), lambda x: x),
    ("resize", lambda x, out: cupyprep.resize(x[:, :20], (31, 21), out=out), lambda x: x[:, 20:]),
    ("resize_same", lambda x, out: cupyprep.resize(x, (31, 41), interpolation="nearest", out=out), lambda x: x),
    ("swap_rb", lambda x, out: cupyprep.swap_rb(x, out=out), lambda x: x),
    ("to_gray", lambda x, out: cupyprep.to_gray(x, out=out), lambda x: x[..., 1]),
    ("normalize", lambda x, out: cupyprep.normalize(x, (1.0, 2.0, 3.0), scale=0.5, layout="HWC", dtype="uint8",
                                                    out=out), lambda x: x),
    ("preprocess", lambda x, out: cupyprep.preprocess(x, (31, 41), mode="stretch", layout="NHWC", dtype="uint8",
                                                      scale=1.0, swap_rb=True, out=out)[0], "batch"),
    ("preprocess_ragged", lambda x, out: cupyprep.preprocess([x[0], x[1, :20]], (31, 41), layout="NHWC",
                                                             dtype="uint8", scale=1.0, out=out)[0], "batch"),
]


@pytest.mark.parametrize("name, op, view", CASES, ids=[c[0] for c in CASES])
def test_out_overlapping_the_input(kernels, name, op, view):
    batched = view == "batch"
    host = random_image(np.random.default_rng(len(name)), ((2,) if batched else ()) + (31, 41, 3), np.uint8)
    want = kernels.get(op(kernels.put(host), None))
    x = kernels.put(host)
    out = x if batched else view(x)
    got = op(x, out)
    assert got is out
    np.testing.assert_array_equal(kernels.get(out), want, err_msg=name)


@pytest.mark.parametrize("name, op, view", CASES, ids=[c[0] for c in CASES])
def test_cpu_out_overlapping_the_input(name, op, view):
    """The CPU backend (NumPy arrays outside the emulator) computes into a new array and
    then copies into out, so in-place use gives the same as a fresh output there too."""
    batched = view == "batch"
    host = random_image(np.random.default_rng(len(name)), ((2,) if batched else ()) + (31, 41, 3), np.uint8)
    want = op(host.copy(), None)
    x = host.copy()
    out = x if batched else view(x)
    assert op(x, out) is out
    np.testing.assert_array_equal(out, want, err_msg=name)
