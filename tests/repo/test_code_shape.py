"""The package keeps the shape a reader can follow: the lab in one sitting per module,
no function longer than a screen, every module saying what it offers (``__all__``),
and the two floors apart (the lab never imports the course).

Lines are counted as code: blank lines, comments and docstrings left out.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from codelines import code_lines

PACKAGE = Path(__file__).parents[2] / "backproplab"
MAX_FUNCTION_LINES = 80
MAX_LAB_MODULE_LINES = 450


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _lab(path: Path) -> bool:
    return path.parent == PACKAGE


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    source = 'def f():\n    """Doc\n    string."""\n\n    # why\n    return 1  # note\n'
    assert code_lines(source) == {1, 6}


def test_no_function_is_longer_than_a_screen():
    offenders = []
    for path in _files():
        source = path.read_text(encoding="utf-8")
        lines = code_lines(source)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len([k for k in lines if node.lineno <= k <= node.end_lineno])
                if n > MAX_FUNCTION_LINES:
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} "
                                     f"{node.name}: {n} code lines")
    assert not offenders, (f"functions over {MAX_FUNCTION_LINES} code lines:\n"
                           + "\n".join(offenders))


def test_every_lab_module_reads_in_one_sitting():
    sizes = {path: len(code_lines(path.read_text(encoding="utf-8")))
             for path in _files() if _lab(path)}
    assert len(sizes) > 10  # the lab's modules were found
    offenders = [f"{path.relative_to(PACKAGE.parent)}: {n} code lines"
                 for path, n in sizes.items() if n > MAX_LAB_MODULE_LINES]
    assert not offenders, (f"lab modules over {MAX_LAB_MODULE_LINES} code lines:\n"
                           + "\n".join(offenders))


def test_the_lab_never_imports_the_course():
    offenders = []
    for path in _files():
        if not _lab(path) or path.name in ("__init__.py", "__main__.py"):  # the front doors
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = "." * node.level + (node.module or "")
                names = [a.name for a in node.names]
                if (target.startswith(".course") or target.startswith("backproplab.course")
                        or (target == "." and "course" in names)):
                    offenders.append(f"{path.name}:{node.lineno} from {target} import "
                                     f"{', '.join(names)}")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names
                              if a.name.startswith("backproplab.course")]
    assert not offenders, "the lab imports the course:\n" + "\n".join(offenders)


# The lessons' exercise modules (lessonNN.py, or the modules of a package lessonNN/) are
# data read through EXERCISES and PREDICTIONS, and __main__ (one import and one call) runs
# the command line when imported.
def _lesson_module(path: Path) -> bool:
    return any(p.name.startswith("lesson") and p.parent.name == "exercises"
               for p in (path, path.parent))


_WITH_ALL = [path for path in _files()
             if not _lesson_module(path) and path.name != "__main__.py"]


@pytest.mark.parametrize("path", _WITH_ALL, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_all_lists_exactly_what_a_module_offers(path):
    name = _module_name(path)
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    defined = [
        n for n, obj in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == name
    ]
    unlisted = sorted(set(defined) - set(module.__all__))
    assert not unlisted, f"{name} defines public names its __all__ leaves out: {unlisted}"
