"""The package's structure: imports point one way (the kernel registry at the bottom, the
public ops above the launch layer), no module reaches into another's private names,
every constant written both in Python and in a kernel source agrees, the old module paths
still import, and one function says which warp kernel runs and why."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import cupyprep
from cupyprep import _kernels, _specs, _warping
from cupyprep._specs import warp as warp_spec
from conftest import tune

PACKAGE = Path(cupyprep.__file__).resolve().parent

# Each module's layer: a module imports only modules of lower layers. The kernel registry
# (_specs) is the leaf; the compile layer builds on it; the launch, stream, torch and
# memory layers on that; the argument checks and the helpers several ops share above them;
# the public ops above those; the package's front above them, and the adapters to other
# systems (integrations: Ray, ...), which use the public API and which the front never
# imports, on top.
LAYERS = {
    "_specs": 0,
    "cpu": 0,
    "_kernels": 1,
    "_launch": 2, "_streams": 2, "_allocators": 2,
    "_torch": 3,
    "_transfers": 4,
    "_arrays": 5,
    "_validate": 6, "_matrix_math": 6, "_random": 6, "_decoders": 6, "_plans": 6, "_nms_plan": 6,
    "_resizing": 7, "_warping": 7, "_nms_pipeline": 7, "_preprocess_meta": 7, "_draw_plan": 7,
    "_loader_sources": 7, "_staging": 7,
    "resize": 8, "warp": 8, "matrices": 8, "faces": 8, "augment": 8, "color": 8,
    "normalize": 8, "preprocess": 8, "nms": 8, "boxes": 8, "roi_align": 8, "interop": 8,
    "display": 8, "flip_pad": 8, "crop": 8, "photometric": 8, "filter": 8, "decode": 8,
    "pipeline": 9, "cv2compat": 9, "geometry": 9, "detection": 9, "demo": 9,
    "testing": 10,
    "__init__": 11,
    "integrations": 12,
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        yield rel.parts[0].removesuffix(".py"), rel, ast.parse(path.read_text())


def _imported(rel, tree):
    """(top-level cupyprep module, names taken from it, line) for each relative import."""
    depth = len(rel.parts) - 1  # a module inside a subpackage imports with more dots
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = list(rel.parts[:-1])[:max(0, depth - (node.level - 1))]
            target = parts + (node.module.split(".") if node.module else [])
            if target:
                yield target[0].removesuffix(".py"), [a.name for a in node.names], node.lineno
            else:  # "from . import a, b": the modules themselves
                for alias in node.names:
                    yield alias.name, [], node.lineno


def test_every_module_has_a_layer():
    assert {top for top, _, _ in _modules()} <= set(LAYERS), "add the new module to LAYERS"


def test_imports_point_down_the_layers():
    """Op modules import the launch layer, never the other way round; the registry
    (_specs) and the compile layer (_kernels) import no op module."""
    wrong = []
    for top, rel, tree in _modules():
        for target, _, line in _imported(rel, tree):
            if target != top and LAYERS[target] >= LAYERS[top]:
                wrong.append(f"{rel}:{line} imports {target} (layer {LAYERS[target]} >= {LAYERS[top]})")
    assert not wrong, "\n".join(wrong)


def test_specs_import_nothing_above_them():
    for top, rel, tree in _modules():
        if top == "_specs":
            assert {t for t, _, _ in _imported(rel, tree)} <= {"_specs"}, rel
            assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import)
                        and any(a.name.startswith("cupyprep") for a in n.names)], rel


def test_no_module_takes_another_modules_private_names():
    """``from .x import _name`` and ``x._name`` across modules are what made the old
    layout hard to change: helpers two ops share live in a shared module under a public
    name."""
    wrong = []
    for top, rel, tree in _modules():
        aliases = {}
        for target, names, line in _imported(rel, tree):
            wrong += [f"{rel}:{line} takes {target}.{n}" for n in names
                      if n.startswith("_") and not n.startswith("__") and target != top]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level and not node.module:
                aliases.update({a.asname or a.name: a.name for a in node.names})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and aliases[node.value.id] != top
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                wrong.append(f"{rel}:{node.lineno} reads {aliases[node.value.id]}.{node.attr}")
    assert not wrong, "\n".join(wrong)


def test_ops_of_plain_expressions_run_in_the_launch_context():
    """A public function that computes with CuPy / torch expressions on its inputs
    (``_arrays.inputs_of``) runs in its first device input's launch context
    (``_arrays.on_input_device``): on the device and stream the kernels of the ops use, not
    on whatever CuPy has current."""
    missing = []
    for top, rel, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            calls = {c.func.attr for c in ast.walk(node)
                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
            decorated = {ast.unparse(d) for d in node.decorator_list}
            if "inputs_of" in calls and "_arrays.on_input_device" not in decorated:
                missing.append(f"{rel}:{node.lineno} {node.name}")
    assert not missing, "\n".join(missing)


def test_constants_shared_with_cuda_agree():
    """Every constant a kernel source and its spec both write down is the same number."""
    constants = _specs.cuda_constants()
    assert len(constants) >= 8
    for filename, name, value in constants:
        text = _kernels.read_source(filename)
        found = re.findall(rf"\bconstexpr\b[^;]*\b{name}\s*=\s*(\d+)", text)
        assert found, f"{name} not found in kernels/{filename}"
        assert {int(v) for v in found} == {int(value)}, (filename, name, found, value)


def test_registry_lists_every_source_and_only_known_files():
    files = {f for f, _ in _kernels.variants()}
    assert files == set(_kernels.kernel_files())
    for family in _specs.FAMILIES.values():
        assert family.SPEC.variants(), family.SPEC.name


def test_old_module_paths_still_import():
    from cupyprep.detection import batched_nms, box_convert, multiclass_nms, nms, roi_align  # noqa: F401
    from cupyprep.geometry import (  # noqa: F401
        ARCFACE_112, BORDER_MODES, align_faces, get_rotation_matrix_2d, random_affine, resize,
        warp_affine, warp_perspective)
    from cupyprep.preprocess import PreprocessMeta, preprocess  # noqa: F401
    from cupyprep.pipeline import Loader, LoaderMeta  # noqa: F401
    assert cupyprep.geometry.warp_affine is cupyprep.warp_affine
    assert cupyprep.detection.nms is cupyprep.nms
    for name in cupyprep.__all__:
        assert hasattr(cupyprep, name), name


def test_tuning_is_validated_when_changed():
    import dataclasses

    with pytest.raises(ValueError, match="staged_group"):
        dataclasses.replace(warp_spec.SPEC, staged_group=9)


# --- which warp kernel runs, and why ----------------------------------------------------------
W5 = dict(kernel="linear", dtype=np.uint8, channels=3, border_mode="constant", perspective=False,
          pixels_dense=True, aligned=True, tiles=4096)


@pytest.mark.parametrize("change, path, words", [
    ({}, "staged", "uint8 linear affine"),
    ({"channels": 4}, "staged", "4 channels"),
    ({"border_mode": "reflect101"}, "dense", "border_mode 'reflect101'"),
    ({"perspective": True}, "dense", "perspective"),
    ({"kernel": "nearest"}, "dense", "nearest interpolation"),
    ({"dtype": np.float32}, "dense", "float32 pixels"),
    ({"channels": 1}, "dense", "1 channels"),
    ({"aligned": False}, "dense", "multiple of 4"),
    ({"aligned": lambda: False}, "dense", "multiple of 4"),
    ({"tiles": 2**31}, "dense", "tiles"),
    ({"pixels_dense": False}, "strided", "not contiguous"),
    ({"kernel": "linear_fixed", "channels": 2}, "strided", "fixed-point remap"),
])
def test_choose_path_says_which_kernel_and_why(change, path, words):
    chosen = _warping.choose_path(**{**W5, **change})
    assert chosen.name == path
    assert words in chosen.reason


def test_choose_path_follows_the_tuning(monkeypatch):
    tune(monkeypatch, warp_spec, staged=False)
    assert _warping.choose_path(**W5) == ("dense", "the staged kernel is off (WarpSpec.staged)")
    tune(monkeypatch, warp_spec, dense=False)
    assert _warping.choose_path(**W5).name == "strided"


@pytest.mark.emulated
@pytest.mark.parametrize("border, channels, expected", [
    ("constant", 3, "warp_staged.cu"), ("replicate", 3, "warp.cu"), ("constant", 2, "warp.cu")])
def test_the_warp_launches_the_chosen_path(launched, border, channels, expected):
    from cupyprep.testing import emulate

    img = np.arange(20 * 24 * channels, dtype=np.uint8).reshape(20, 24, channels)
    M = np.array([[0.9, 0.1, 1.0], [-0.1, 0.9, 2.0]])
    with emulate():
        cupyprep.warp_affine(img, M, (16, 18), border_mode=border)
    assert [f for f, _ in launched] == [expected]
