"""One live kernel per lesson: the stored outputs, and every wrong answer, shortcut
and blank student answer put through its check.

A lesson is executed once, top to bottom, in a fresh kernel with torch's
default thread count (as in a learner's lab). Every cell's output is compared
with the stored one, as strict nbval compares it. Right after an exercise's
check cell has run with the solution, each variant of that exercise goes
through the same check in the same kernel, so the check meets exactly the
state a learner's notebook gives it (every cell above run, this cell holding
the variant):

1. the names the solution cell defines are deleted, so a variant that forgets
   one meets a NameError as it would in a fresh kernel;
2. the variant runs in the solution's place, then the check cell;
3. after the last variant the solution and its check run again (the check
   must pass, proving the kernel was restored), and the random number
   generators are set back to where the first run left them, so the cells
   below print what they printed when the lesson was stored.

Variants are the wrong answers (tests/wrong_answers/), the shortcuts
(tests/cheats/) and the blank of the student version (with the student
version's own check cell, and with the lesson's, hidden tests included).
Before, every "round" of variants re-executed the whole lesson in a new
kernel: 172 executions for 17 lessons instead of 17.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbval.plugin import get_sanitize_patterns
from notebook_runner import NOTEBOOKS, error_of, grade_id

from backproplab.course.kernels import AsyncIPCKernelManager

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"

# nbval's strict mode compares every output key but these (nbval.plugin, IPyNbFile).
_SKIP = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
         "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}
_NOT_COMPARED = {"nbval-ignore-output", "nbval-skip"}

# Snapshot and restore of the generators a lesson may draw from without a seed of its own.
_SAVE = """\
import random as _r
import torch as _t
_bl_rounds_rng = (_t.get_rng_state(), _r.getstate())
try:
    import numpy as _n
    _bl_rounds_rng += (_n.random.get_state(),)
except ImportError:
    pass
del _r, _t
"""
_RESTORE = """\
import random as _r
import torch as _t
_t.set_rng_state(_bl_rounds_rng[0]); _r.setstate(_bl_rounds_rng[1])
if len(_bl_rounds_rng) > 2:
    import numpy as _n
    _n.random.set_state(_bl_rounds_rng[2]); del _n
del _r, _t, _bl_rounds_rng
"""


@dataclass
class Variant:
    """One answer put in a solution cell's place, and what its check must say."""

    kind: str  # "wrong", "cheat" or "blank"
    number: int  # 1-based, within its kind and exercise
    source: str
    fragment: str  # what the check's message must contain ("" for a blank)
    check_source: str | None = None  # the check cell to run, when not the lesson's own


@dataclass
class Outcome:
    grade_id: str
    variant: Variant
    answer_error: nbformat.NotebookNode | None  # raised by the variant's own cell
    check_error: nbformat.NotebookNode | None  # raised by the check cell


@dataclass
class LessonRun:
    """What one live execution of a lesson found."""

    path: Path
    outcomes: list[Outcome] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    compared: int = 0

    def of(self, kind: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.variant.kind == kind]


def defined_names(source: str) -> set[str]:
    """The top-level names a cell binds (functions, classes, assignments, imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue  # names inside a body are local to it
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            elif isinstance(child, ast.stmt | ast.expr | ast.excepthandler | ast.withitem
                            | ast.comprehension | ast.arguments | ast.keyword):
                stack.append(child)
    return names


def _sanitizer():
    patterns = get_sanitize_patterns(SANITIZE.read_text())

    def sanitize(value):
        if not isinstance(value, str):
            return value
        for regex, replace in patterns:
            value = re.sub(regex, replace, value)
        return value

    return sanitize


def _comparable(outputs, sanitize) -> dict[str, list]:
    """Outputs keyed as nbval keys them: streams joined by name, data by MIME type."""
    keyed: dict[str, list] = defaultdict(list)
    streams: dict[str, str] = {}
    for out in outputs:
        if out.get("output_type") == "stream":
            streams[out["name"]] = streams.get(out["name"], "") + out["text"]
            continue
        for key, value in out.items():
            if key == "data":
                for mime, data in value.items():
                    if mime not in _SKIP:
                        keyed[mime].append(sanitize(data))
            elif key not in _SKIP:
                keyed[key].append(sanitize(value))
    for name, text in streams.items():
        keyed[name].append(sanitize(text))
    return dict(keyed)


def _kernel_env() -> dict[str, str]:
    """The lab's thread count (torch's default), with idle threads that sleep instead of
    spinning: the suite runs two kernels on two cores, and spinning threads would fight."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def play(path: Path, variants: dict[str, list[Variant]], timeout: int = 300) -> LessonRun:
    """Execute the lesson at ``path`` once, putting ``variants`` (by solution grade_id)
    through their checks; see the module docstring."""
    stored = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(stored)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    result = LessonRun(path)
    sanitize = _sanitizer()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            kernel_manager_class=AsyncIPCKernelManager,
                            resources={"metadata": {"path": str(path.parent)}})
    solution_at: dict[int, int] = {}  # check cell index -> its solution cell index
    last_solution = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if last_solution is not None:
            solution_at[i], last_solution = last_solution, None
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            last_solution = i

    with client.setup_kernel(env=_kernel_env()):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, i)
            _compare(result, i, cell, stored.cells[i], sanitize)
            s = solution_at.get(i)
            if s is not None and variants.get(grade_id(nb.cells[s])):
                _try_variants(client, result, nb, s, i, variants[grade_id(nb.cells[s])])
    return result


def _compare(result: LessonRun, i: int, cell, stored, sanitize) -> None:
    tags = set(cell.get("metadata", {}).get("tags", []))
    if tags & _NOT_COMPARED:
        return
    result.compared += 1
    got, want = _comparable(cell.outputs, sanitize), _comparable(stored.outputs, sanitize)
    if got != want:
        result.mismatches.append(f"cell {i} ({cell.get('id')}): got {got!r}\nstored {want!r}")


def _run(client, source: str, index: int, template) -> nbformat.NotebookNode:
    cell = copy.deepcopy(template)
    cell.source, cell.outputs, cell.execution_count = source, [], None
    client.execute_cell(cell, index)
    return cell


def _forget(client, names: set[str], index: int, template) -> None:
    if names:
        _run(client, "".join(f"globals().pop({n!r}, None)\n" for n in sorted(names)),
             index, template)


def _try_variants(client, result: LessonRun, nb, s: int, c: int, variants: list[Variant]):
    solution, check = nb.cells[s], nb.cells[c]
    names = defined_names(solution.source)
    _run(client, _SAVE, s, solution)
    for variant in variants:
        _forget(client, names, s, solution)
        answer = _run(client, variant.source, s, solution)
        checked = _run(client, variant.check_source or check.source, c, check)
        result.outcomes.append(Outcome(grade_id(solution), variant, error_of(answer),
                                       error_of(checked)))
    _forget(client, names, s, solution)
    _run(client, solution.source, s, solution)
    again = _run(client, check.source, c, check)
    if error_of(again) is not None:
        result.not_restored.append(f"{grade_id(solution)}: {error_of(again).evalue}")
    _run(client, _RESTORE, s, solution)


def student_cells(path: Path) -> nbformat.NotebookNode:
    """The student version of a lesson exactly as `backproplab release` writes it."""
    from backproplab.course import handout

    with tempfile.TemporaryDirectory() as out:
        (dest,) = handout.release(path, Path(out))
        return nbformat.read(dest, as_version=4)


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
