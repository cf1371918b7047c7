"""The suite's own structure: every test that compares with torchvision runs somewhere.
CI's CPU torch has no torchvision build, and the device run takes ``-m "gpu or
torchvision"``, so such a test must carry one of those two marks (or it runs nowhere)."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _falls_back(node):
    """A ``try`` that catches ImportError: code that runs without what it imports."""
    return isinstance(node, ast.Try) and any(
        h.type is not None and "ImportError" in ast.unparse(h.type) for h in node.handlers)


def _walk(nodes):
    """The nodes below ``nodes``, but not into a ``try`` that falls back without its import."""
    for node in nodes:
        if _falls_back(node):
            continue
        yield node
        yield from _walk(ast.iter_child_nodes(node))


def _mentions_torchvision(node):
    """Whether the function's code (not its docstring, nor a ``try`` with a fallback for
    ImportError) names torchvision: an import, an ``importorskip("torchvision...")``, or a
    string naming it."""
    body = node.body[1:] if (node.body and isinstance(node.body[0], ast.Expr)
                             and isinstance(node.body[0].value, ast.Constant)) else node.body
    for sub in _walk(body):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.startswith("torchvision"):
            return True
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in sub.names] + ([sub.module] if isinstance(sub, ast.ImportFrom) else [])
            if any(n and n.split(".")[0] == "torchvision" for n in names):
                return True
    return False


def _marks(node):
    """The ``pytest.mark.<name>`` decorators of a function."""
    out = set()
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Attribute) and d.value.attr == "mark":
            out.add(d.attr)
    return out


def _calls(node):
    return {sub.func.id for sub in ast.walk(node) if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)}


def unmarked_torchvision_tests(path):
    """The test functions of a file that reach torchvision (directly or through a helper of
    the file) with neither a gpu nor a torchvision mark, the file's ``pytestmark`` counted."""
    tree = ast.parse(path.read_text())
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers = {f.name for f in functions if not f.name.startswith("test") and _mentions_torchvision(f)}
    module_marks = set()
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets):
            module_marks |= {s.attr for s in ast.walk(n.value) if isinstance(s, ast.Attribute)}
    bad = []
    for f in functions:
        if not f.name.startswith("test"):
            continue
        if (_mentions_torchvision(f) or _calls(f) & helpers) and not (_marks(f) | module_marks) & {"gpu", "torchvision"}:
            bad.append(f.name)
    return bad


def test_every_torchvision_comparison_is_marked_to_run():
    files = [p for p in sorted(TESTS.glob("test_*.py")) if p.name != Path(__file__).name]
    bad = {p.name: b for p in files if (b := unmarked_torchvision_tests(p))}
    assert bad == {}


def test_the_check_finds_an_unmarked_comparison(tmp_path):
    src = tmp_path / "test_x.py"
    src.write_text(
        "import pytest\n"
        "def _tv():\n    return pytest.importorskip('torchvision')\n"
        "def test_a():\n    '''compares with torchvision'''\n    _tv()\n"
        "@pytest.mark.torchvision\ndef test_b():\n    _tv()\n"
        "@pytest.mark.gpu\n@pytest.mark.parametrize('k', [1])\ndef test_c(k):\n    import torchvision\n"
        "def test_d():\n    '''only its docstring says torchvision'''\n"
        "def test_e():\n    from torchvision.ops import nms\n"
        "def test_f():\n    try:\n        import torchvision\n    except ImportError:\n        pass\n")
    assert unmarked_torchvision_tests(src) == ["test_a", "test_e"]
