"""Read submitted notebooks and list what a grader would want to see: ``backproplab audit``.

The grade does not come from the students' kernels (``backproplab grade``
reads the source and runs it in a fresh process), so nothing a notebook does
to its own kernel changes it. The audit shows an instructor what was tried
all the same, per student, cell and line:

- each graded exercise's answer, read against **that exercise's** vocabulary
  (`backproplab.course.rules`), exactly as ``backproplab grade`` reads it: the
  definitions above the check cell that the answer is made of
  (`backproplab.course.sources`). Each use outside the vocabulary is listed
  ("outside the exercise's vocabulary: ..."), so a method exercise that walks
  the graph is not blamed for what it is asked to do;
- in every cell a student changed, the shapes that reach around code whatever
  words they are spelt with (`backproplab.course.rules.SHAPES`): an attribute read
  by a ``match`` class pattern, a module used as a value (passed, returned, put in
  a tuple, bound by ``for`` or a default), a string annotation, an attribute of
  the student's own named like something refused (``sys``, ``exec``), a dunder,
  and anything that runs code from a string or a file;
- every other line of a student's cells that reaches into the kernel or the
  grading of the kernel's own checks: rebinding or deleting a name of
  backproplab or torch (``bl.check_by_hand = ...``), patching through
  ``setattr``, ``__dict__``, ``__code__``, ``sys.modules``, ``importlib.reload``,
  ``globals()``, ``builtins`` or ``unittest.mock``; ``get_ipython``, input or
  AST transformers, cell magics, ``exec``/``eval``/``compile``, trace
  functions, ``signal`` and exit handlers; autograd's engine or grad switch
  reached through private names.

With ``against`` (the lessons as handed out, or their instructor versions), cells
exactly as handed out are not read, a check cell whose source differs from the
handed-out one is listed, and the exercises are the instructor's.

>>> import nbformat
>>> nb = nbformat.v4.new_notebook()
>>> nb.cells.append(nbformat.v4.new_code_cell("import backproplab as bl\\nbl.compare = print"))
>>> [f.what for f in findings_in(nb)]
['rebinds bl.compare']
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import rules, sources
from .assignment import CourseError, read_notebook, student_version
from .grade import Graded, graded_exercises
from .grading import find_exercise
from .handout import find_notebooks

__all__ = ["Finding", "audit", "findings_in"]

# Attribute names that belong to the grading machinery, whatever object they are set on.
GRADING_NAMES = {
    "check_by_hand", "check_exercise", "check_prediction", "reveal", "compare", "diagnose",
    "check_grad", "check_function", "check_graph", "assert_ok", "forbid_autograd",
    "count_autograd", "verify", "replaced", "protect", "run_backward", "make_dual",
    "_execution_engine", "_set_grad_enabled", "find_exercise", "find_prediction",
}
# Mentions that are never needed to answer an exercise.
SUSPECT_NAMES = {
    "get_ipython": "reaches the IPython shell (get_ipython)",
    "input_transformers_cleanup": "installs an IPython input transformer",
    "input_transformers_post": "installs an IPython input transformer",
    "ast_transformers": "installs an IPython AST transformer",
    "_execution_engine": "touches autograd's engine (_execution_engine)",
    "settrace": "sets an interpreter trace function",
    "setprofile": "sets an interpreter profile function",
    "__code__": "reads or replaces a function's code (__code__)",
    "__dict__": "reaches a namespace through __dict__",
    "__builtins__": "reaches the builtins",
    "_set_grad_enabled": "switches grad mode through torch._C",
}
SUSPECT_MODULES = {
    "sys.modules": "edits sys.modules",
    "importlib.reload": "reloads a module",
    "builtins": "edits the builtins",
    "unittest.mock": "patches with unittest.mock",
    "signal": "installs a signal handler",
    "atexit": "registers an exit handler",
    "os._exit": "ends the kernel (os._exit)",
}
SUSPECT_CALLS = {
    "setattr": "sets an attribute by name (setattr)",
    "delattr": "deletes an attribute by name (delattr)",
    "exec": "runs code from a string (exec)",
    "eval": "runs code from a string (eval)",
    "compile": "compiles code from a string (compile)",
    "__import__": "imports through __import__",
    "globals": "edits the notebook's globals()",
}
# How each shape of `backproplab.course.rules.SHAPES` is listed.
SHAPE_WORDS = {
    "pattern": "reads an attribute through a class pattern",
    "module-value": "uses a module as a value",
    "annotation": "writes a string annotation, which typing can evaluate as code",
    "own-name": "gives an attribute of its own a refused name",
    "runs-code": "runs code from a string or a file",
    "dunder": "reads a dunder attribute",
}
HARMLESS_MAGICS = {"matplotlib", "time", "timeit", "load_ext", "autoreload"}
_MAGIC = re.compile(r"^\s*(%%?|!)(\w*)")


@dataclass(frozen=True)
class Finding:
    """One suspicious line: where it is and what it does."""

    notebook: str
    cell: int
    grade_id: str | None
    line: int
    what: str

    def __str__(self) -> str:
        label = f" ({self.grade_id})" if self.grade_id else ""
        at = f", line {self.line}" if self.line else ""
        return f"{self.notebook} cell {self.cell}{label}{at}: {self.what}"


def _aliases(tree: ast.AST) -> set[str]:
    """Names bound to backproplab or torch (modules or their members) by imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("backproplab", "torch"):
                    names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in ("backproplab", "torch"):
                names.update(a.asname or a.name for a in node.names)
    return names


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def _targets(node: ast.AST) -> Iterable[ast.AST]:
    if isinstance(node, (ast.Assign,)):
        yield from node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        yield node.target
    elif isinstance(node, ast.Delete):
        yield from node.targets
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield node.target
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        yield from (item.optional_vars for item in node.items if item.optional_vars)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield ast.Name(id=node.name)


def _flatten(target: ast.AST) -> Iterable[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            yield from _flatten(t)
    elif isinstance(target, ast.Starred):
        yield from _flatten(target.value)
    else:
        yield target


def _read_cell(source: str, protected: set[str],
               bound: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, what) for each suspicious line of one cell; ``bound``: what the names the
    notebook's other cells import stand for."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(source.split("\n"), start=1):
        magic = _MAGIC.match(line)
        if magic and line.strip():
            kind, name = magic.groups()
            if kind == "!":
                found.append((number, "runs a shell command (!)"))
            elif name not in HARMLESS_MAGICS:
                found.append((number, f"uses the magic {kind}{name}"))
    code = _without_magics(source)
    python_lines = code.split("\n")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = None
    if tree is not None:
        found += [(f.line, f"{SHAPE_WORDS[f.why]}: {f.used}")
                  for f in rules.read([tree], rules.METHOD, bound) if f.why in SHAPE_WORDS]
        protected = protected | _aliases(tree)
        for node in ast.walk(tree):
            for target in (t for raw in _targets(node) for t in _flatten(raw)):
                verb = "deletes" if isinstance(node, ast.Delete) else "rebinds"
                dotted = _dotted(target)
                base = dotted.split(".")[0]
                if isinstance(target, ast.Attribute) and (
                        base in protected or target.attr in GRADING_NAMES):
                    found.append((node.lineno, f"{verb} {dotted}"))
                elif isinstance(target, ast.Name) and target.id in protected and not isinstance(
                        node, (ast.Import, ast.ImportFrom)):
                    found.append((node.lineno, f"{verb} the name {target.id}"))
                elif isinstance(target, ast.Subscript) and _dotted(target.value).endswith(
                        ("globals()", "__dict__", "modules")):
                    found.append((node.lineno, f"{verb} {_dotted(target.value)}[...]"))
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                if name in SUSPECT_CALLS:
                    found.append((node.lineno, SUSPECT_CALLS[name]))
    for number, line in enumerate(python_lines, start=1):
        words = set(re.findall(r"[A-Za-z_][\w.]*", line))
        for name, what in SUSPECT_NAMES.items():
            if any(w == name or w.endswith("." + name) or w.startswith(name + ".")
                   for w in words):
                found.append((number, what))
        for name, what in SUSPECT_MODULES.items():
            if any(w == name or w.startswith(name + ".") for w in words) or re.search(
                    rf"\bimport\s+{re.escape(name)}\b|\bfrom\s+{re.escape(name)}\b", line):
                found.append((number, what))
    # One line can match several rules; keep each (line, what) once, in order.
    return sorted(set(found))


def findings_in(
    nb: nbformat.NotebookNode,
    name: str = "notebook",
    handed_out: nbformat.NotebookNode | Sequence[nbformat.NotebookNode] | None = None,
) -> list[Finding]:
    """What in one notebook tampers with grading (see the module's documentation).

    ``handed_out``: the lesson as it was handed out (or several versions of it, such
    as the student and the instructor version), to skip cells left as they were."""
    versions = [] if handed_out is None else (
        [handed_out] if isinstance(handed_out, nbformat.NotebookNode) else list(handed_out))
    unchanged = {c.source for v in versions for c in v.cells if c.cell_type == "code"}
    given: dict[str, set[str]] = {}
    for v in versions:
        for c in v.cells:
            meta = c.metadata.get("nbgrader", {})
            if meta.get("grade"):
                given.setdefault(meta.get("grade_id"), set()).add(c.source.strip())
    protected = {"bl", "backproplab", "torch"}
    for tree in _trees(versions or [nb]):  # the lesson's imports
        protected |= _aliases(tree)
    bound = rules.aliases(_trees([*versions, nb]))  # what every cell imports
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if meta.get("grade") and grade_id in given and cell.source.strip() not in given[grade_id]:
            found.append(Finding(name, index, grade_id, 0, "the check cell was edited"))
        if cell.source in unchanged:
            continue
        for line, what in _read_cell(cell.source, protected, bound):
            found.append(Finding(name, index, grade_id, line, what))
    exercises = next((graded_exercises(v) for v in versions if graded_exercises(v)), None)
    for graded in exercises if exercises is not None else graded_exercises(nb):
        found += _outside_vocabulary(nb, name, graded)
    return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))


def _outside_vocabulary(nb: nbformat.NotebookNode, name: str, graded: Graded) -> list[Finding]:
    """Each use outside the exercise's vocabulary in the source its grade reads."""
    try:
        exercise = find_exercise(graded.key)
    except (TypeError, ValueError):
        return []  # not one of the lessons' exercises
    end = next((i for i, c in enumerate(nb.cells)
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == graded.check_id),
               len(nb.cells))
    cells = [(i, c) for i, c in enumerate(nb.cells[:end]) if c.cell_type == "code"]
    pieces = sources.from_notebook([c.source for _, c in cells], graded.names)
    found = []
    for f in rules.read([p.tree for p in pieces], exercise.vocabulary):
        index, cell = cells[pieces[f.tree].cell]
        found.append(Finding(name, index, cell.metadata.get("nbgrader", {}).get("grade_id"),
                             f.line, f"outside {graded.key}'s vocabulary: {f.used} "
                                     f"({rules.REASONS.get(f.why, f.why)})"))
    return found


def _trees(notebooks: Iterable[nbformat.NotebookNode]) -> list[ast.Module]:
    """The syntax trees of the code cells of ``notebooks`` that read as Python."""
    trees = []
    for cell in (c for nb in notebooks for c in nb.cells if c.cell_type == "code"):
        try:
            trees.append(ast.parse(_without_magics(cell.source)))
        except SyntaxError:
            continue
    return trees


def _without_magics(source: str) -> str:
    return "\n".join("" if _MAGIC.match(line) and line.strip() else line
                     for line in source.split("\n"))


def _handed_out(path: Path) -> list[nbformat.NotebookNode]:
    nb = read_notebook(path)
    try:
        return [nb, student_version(nb, str(path))[0]]  # an instructor version and its release
    except CourseError:
        return [nb]  # already a student version


def audit(submitted: str | Path, against: str | Path | None = None) -> list[Finding]:
    """Findings in every notebook under ``submitted``; notebook names are relative to it,
    so nbgrader's ``submitted/<student>/<assignment>/<lesson>.ipynb`` names the student.

    ``against``: the lessons as handed out (a folder), or their instructor versions.
    """
    root = Path(submitted)
    if not root.is_dir():
        raise CourseError(f"SUBMITTED: expected a folder of submitted notebooks, got "
                          f"{str(submitted)!r}, which is not a folder")
    lessons = {}
    if against is not None:
        for path in find_notebooks(against):
            lessons[path.name] = _handed_out(path)
    found = []
    for path in find_notebooks(root):
        nb = read_notebook(path)
        name = str(path.relative_to(root))
        found += findings_in(nb, name, lessons.get(path.name))
    return found
