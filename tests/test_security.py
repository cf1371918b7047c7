"""What reaches the compiler, the disk caches and the file system: kernel names come only
from the registry's fixed tables (never from a user's string); a corrupt cache entry is
not used; a file path is opened as given, never expanded or joined to another."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

import cupyprep
from cupyprep import _kernels, _specs
from op_cases import image_ops, post_ops

# what a C++ name expression of the registry may contain: names, numbers, template brackets
NAME_EXPR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(<[A-Za-z0-9_, :]*>)?$")

HOSTILE = ['linear>(); system("x"); //', "linear\n#include </etc/passwd>", "../../etc/passwd",
           "float, 3> evil<int", "'; drop", "LINEAR", " linear", ""]


def test_every_registered_name_expression_is_a_plain_cpp_name():
    pairs = _specs.variants()
    assert len(pairs) > 100
    files = set(_kernels.kernel_files())
    for filename, expr in pairs:
        assert filename in files, filename
        assert NAME_EXPR.match(expr), expr


# the image ops that take only some of the dtypes the loop below passes
_ONLY = {"to_gray": (np.uint8,), "hsv_gain": (np.uint8,), "color_jitter": (np.uint8, np.float32)}


@pytest.mark.emulated
def test_every_name_expression_an_op_asks_for_is_in_the_registry(launched):
    """Every op family's calls (dtypes, channels, modes, lists) fetch only variants the
    registry enumerates: what goes into a template argument comes from its tables."""
    from cupyprep.testing import emulate

    registered = set(_specs.variants())
    rng = np.random.default_rng(3)
    with emulate():
        for dtype in (np.uint8, np.uint16, np.float16, np.float32):
            x = (rng.random((2, 30, 40, 3)) * 200).astype(dtype)
            for name, call in image_ops():
                if dtype in _ONLY.get(name, (dtype,)):
                    call(x)
        for _, inputs, call in post_ops():
            if _ not in ("batched_nms", "nms_large"):  # slow on the emulator; nms_small covers them
                call(*inputs)
    assert launched and {pair for pair in launched} <= registered, \
        sorted(set(launched) - registered)[:5]


def string_arguments():
    img = np.zeros((6, 7, 3), np.uint8)
    m = np.eye(2, 3)
    boxes = np.zeros((2, 4), np.float32)
    return [
        ("interpolation", lambda v: cupyprep.resize(img, (4, 4), interpolation=v)),
        ("layout", lambda v: cupyprep.resize(img, (4, 4), layout=v)),
        ("interpolation", lambda v: cupyprep.warp_affine(img, m, (4, 4), interpolation=v)),
        ("border_mode", lambda v: cupyprep.warp_affine(img, m, (4, 4), border_mode=v)),
        ("border_mode", lambda v: cupyprep.warp_perspective(img, np.eye(3), (4, 4), border_mode=v)),
        ("mode", lambda v: cupyprep.preprocess(img, (8, 8), mode=v)),
        ("dtype", lambda v: cupyprep.preprocess(img, (8, 8), dtype=v)),
        ("layout", lambda v: cupyprep.preprocess(img, (8, 8), layout=v)),
        ("interpolation", lambda v: cupyprep.preprocess(img, (8, 8), interpolation=v)),
        ("dtype", lambda v: cupyprep.normalize(img, dtype=v)),
        ("layout", lambda v: cupyprep.normalize(img, layout=v)),
        ("in_fmt", lambda v: cupyprep.box_convert(boxes, v, "xyxy")),
        ("out_fmt", lambda v: cupyprep.box_convert(boxes, "xyxy", v)),
    ]


@pytest.mark.emulated
@pytest.mark.parametrize("case", range(len(string_arguments())))
def test_a_hostile_string_argument_is_refused_before_any_kernel(case, launched):
    from cupyprep.testing import emulate

    name, call = string_arguments()[case]
    with emulate():
        for value in HOSTILE:
            with pytest.raises((ValueError, TypeError)) as info:
                call(value)
            assert name in str(info.value), (value, str(info.value))
    assert launched == []


@pytest.mark.parametrize("filename", ["../pyproject.toml", "/etc/passwd", "sub/resize.cu", "..", ""])
def test_kernel_sources_are_read_only_from_the_kernel_folder(filename):
    with pytest.raises(ValueError, match="filename: expected the name of a file in kernels/"):
        _kernels.read_source(filename)


# --- disk caches ------------------------------------------------------------------------------
@pytest.mark.emulated
@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_corrupt_emulator_cache_entry_is_rebuilt(tmp_path, damage):
    """The emulator's cache is keyed by a hash of the source and everything else that
    goes into a build; an entry that does not load is built again."""
    from cupyprep.testing import Emulator

    filename, expr = _specs.variants("color")[0]
    Emulator(cache_dir=tmp_path).get_function(filename, expr)
    (meta,) = tmp_path.glob("*.json")
    assert len(meta.stem) == 40 and re.fullmatch(r"[0-9a-f]+", meta.stem)
    text = meta.read_text()
    meta.write_text({"garbage": "{not json", "truncated": text[: len(text) // 2], "empty": ""}[damage])
    em = Emulator(cache_dir=tmp_path)
    fn = em.get_function(filename, expr)
    assert em.compile_count == 1  # not loaded: built again
    json.loads(meta.read_text())  # and the entry written anew
    with cupyprep.testing.emulate(cache_dir=tmp_path):
        x = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
        np.testing.assert_array_equal(cupyprep.swap_rb(x), x[..., ::-1])
    assert fn is not None


def test_cupys_disk_cache_refuses_an_entry_whose_hash_does_not_match(tmp_path):
    """The device path uses CuPy's disk cache (CUPY_CACHE_DIR): files named by a hash of
    the source, options, architecture and name expressions, each holding a hash of its
    contents that is checked on loading; an entry that fails the check is compiled again."""
    compiler_cache = pytest.importorskip("cupy.cuda._compiler_cache")
    backend = compiler_cache.DiskKernelCacheBackend(str(tmp_path))
    backend.save("k.cubin", b"\x7fELF a compiled kernel", "source")
    assert backend.load("k.cubin") == b"\x7fELF a compiled kernel"
    path = tmp_path / "k.cubin"
    data = path.read_bytes()
    for damaged in (data[:-3], data[:-3] + b"xyz", b"", data[:10]):
        path.write_bytes(damaged)
        assert backend.load("k.cubin") is None


@pytest.mark.gpu
def test_gpu_a_corrupt_cupy_cache_file_is_compiled_again(tmp_path, monkeypatch):
    import cupy
    from cupy.cuda import compiler

    monkeypatch.setattr(compiler, "_kernel_cache_backend",
                        type(compiler._kernel_cache_backend)(str(tmp_path)))
    monkeypatch.setattr(_kernels, "_cuda_cache", {})
    # a source of its own (a unique comment), so that no compile of this process (CuPy keeps
    # modules in memory too) or of another test answers from elsewhere than the disk cache
    read = _kernels.read_source
    tag = f"// {tmp_path.name}\n"
    monkeypatch.setattr(_kernels, "read_source", lambda name: tag + read(name))
    filename, expr = _specs.variants("color")[0]
    _kernels.get_function(filename, expr)
    files = list(tmp_path.glob("*.cubin"))
    assert files
    for f in files:
        f.write_bytes(f.read_bytes()[:50] + b"corrupt")
    monkeypatch.setattr(_kernels, "_cuda_cache", {})
    _kernels.get_function(filename, expr)
    x = cupy.arange(2 * 3 * 3, dtype=cupy.uint8).reshape(2, 3, 3)
    np.testing.assert_array_equal(cupy.asnumpy(cupyprep.swap_rb(x)), cupy.asnumpy(x)[..., ::-1])


# --- file paths ---------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["*.png", "~/a.png", "$HOME/a.png", "a.png?x=1", "file://{dir}/a.png",
                                     "a%d.png", "a.png\0b.png"])
def test_a_loader_path_is_opened_as_given(tmp_path, monkeypatch, pattern):
    """No globbing, no ~ or $VAR expansion, no URLs, no printf patterns: the name given is
    the file opened (it does not exist here, so it fails, naming it)."""
    cv2 = pytest.importorskip("cv2")
    (tmp_path / "a.png").write_bytes(cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes())
    (tmp_path / "a0.png").write_bytes((tmp_path / "a.png").read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = pattern.format(dir=tmp_path)
    with pytest.raises((FileNotFoundError, ValueError)) as info, \
            cupyprep.Loader([path], (8, 8), device="cpu") as loader:
        next(loader)
    assert "source element 0" in str(info.value)
    assert repr(path)[1:-1] in str(info.value) or "null" in str(info.value)
    assert os.path.exists(tmp_path / "a.png")  # the file that a expansion would have found
