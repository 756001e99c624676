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

The lesson's one execution is nbval's own when the suite runs both: its kernels
start with the lab's thread count (`LessonKernelManager`), and right after nbval
has run a check cell, `after_nbval_cell` (called by tests/conftest.py) puts that
exercise's variants through it in nbval's kernel and compares the cell's output as
above; tests/conftest.py makes a lesson's nbval cells and its exercise tests one
unit of work, cells first. Run without its nbval cells, `play` executes the lesson
itself.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbval.plugin import get_sanitize_patterns
from notebook_runner import NOTEBOOKS, error_of, grade_id

from backproplab.course.kernels import AsyncIPCKernelManager, IPCKernelManager

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
WRONG_DIR = ROOT / "tests" / "wrong_answers"
CHEATS_DIR = ROOT / "tests" / "cheats"

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
    threads: int = 0  # torch's thread count in the kernel, read after the last cell

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


class LessonKernelManager(IPCKernelManager):
    """nbval's kernels (tests/conftest.py): on Unix sockets, with the lab's thread count."""

    def start_kernel(self, **kw: Any) -> None:
        kw.setdefault("env", _kernel_env())
        super().start_kernel(**kw)


_THREADS = "print(__import__('torch').get_num_threads())\n"


# A way to run one cell's source in the lesson's kernel: (source, index, the cell it stands
# in for) -> that cell with the outputs it made.
Execute = Callable[[str, int, nbformat.NotebookNode], nbformat.NotebookNode]


def checks_of(nb: nbformat.NotebookNode) -> dict[int, int]:
    """Each check cell's index -> the index of the solution cell it checks (the code cell
    right after a solution is its check)."""
    found, last_solution = {}, None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if last_solution is not None:
            found[i], last_solution = last_solution, None
        if meta(cell).get("solution"):
            last_solution = i
    return found


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
                            resources={"metadata": {"path": str(path.parent)}},
                            # stopped once the run is read, not asked to exit (a second)
                            shutdown_kernel="immediate")
    checks = checks_of(nb)

    def execute(source: str, index: int, template) -> nbformat.NotebookNode:
        cell = copy.deepcopy(template)
        cell.source, cell.outputs, cell.execution_count = source, [], None
        client.execute_cell(cell, index)
        return cell

    with client.setup_kernel(env=_kernel_env()):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, i)
            _compare(result, i, cell, stored.cells[i], sanitize)
            s = checks.get(i)
            if s is not None and variants.get(grade_id(nb.cells[s])):
                _try_variants(execute, result, nb, s, i, variants[grade_id(nb.cells[s])])
        result.threads = _threads(execute, nb)
    return result


def _threads(execute: Execute, nb: nbformat.NotebookNode) -> int:
    """torch's thread count in the kernel, asked after the lesson's last cell."""
    last = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    cell = execute(_THREADS, last, nb.cells[last])
    return int("".join(o.get("text", "") for o in cell.outputs) or 0)


def _compare(result: LessonRun, i: int, cell, stored, sanitize) -> None:
    tags = set(cell.get("metadata", {}).get("tags", []))
    if tags & _NOT_COMPARED:
        return
    result.compared += 1
    got, want = _comparable(cell.outputs, sanitize), _comparable(stored.outputs, sanitize)
    if got != want:
        result.mismatches.append(f"cell {i} ({cell.get('id')}): got {got!r}\nstored {want!r}")


def _forget(execute: Execute, names: set[str], index: int, template) -> None:
    if names:
        execute("".join(f"globals().pop({n!r}, None)\n" for n in sorted(names)), index,
                template)


def _try_variants(execute: Execute, result: LessonRun, nb, s: int, c: int,
                  variants: list[Variant]) -> None:
    solution, check = nb.cells[s], nb.cells[c]
    names = defined_names(solution.source)
    execute(_SAVE, s, solution)
    for variant in variants:
        _forget(execute, names, s, solution)
        answer = execute(variant.source, s, solution)
        checked = execute(variant.check_source or check.source, c, check)
        result.outcomes.append(Outcome(grade_id(solution), variant, error_of(answer),
                                       error_of(checked)))
    _forget(execute, names, s, solution)
    execute(solution.source, s, solution)
    again = execute(check.source, c, check)
    if error_of(again) is not None:
        result.not_restored.append(f"{grade_id(solution)}: {error_of(again).evalue}")
    execute(_RESTORE, s, solution)


# --------------------------------------------------------------------------
# The same rounds in nbval's own run of a lesson
# --------------------------------------------------------------------------

LIVE: dict[Path, LessonRun] = {}  # the lessons whose nbval run played every round here


@dataclass
class _Playing:
    """A lesson nbval is running here, its rounds played as its cells go: what is read once."""

    stored: nbformat.NotebookNode
    result: LessonRun
    table: dict[str, list[Variant]]
    code: list[int]  # the indices of its code cells, in nbval's order
    checks: dict[int, int]  # check cell -> solution cell (`checks_of`)
    sanitize: Callable[[Any], Any]


_PLAYING: dict[Path, _Playing] = {}


def _wanted(item: Any, path: Path) -> bool:
    """Whether this session also runs the lesson's exercise tests, which read the rounds."""
    return any("test_exercises.py::" in other.nodeid and other.nodeid.endswith(f"[{path.name}]")
               for other in item.session.items)


def after_nbval_cell(item: Any) -> None:
    """After nbval ran cell ``item`` of a lesson: compare its output as `play` does and,
    after a check cell, put its exercise's variants through it in nbval's kernel. The
    lesson's `LessonRun` joins `LIVE` once its last cell has run."""
    path = Path(str(item.path)).resolve()
    if path.parent != NOTEBOOKS.resolve():
        return
    if item.cell_num == 0:
        _PLAYING.pop(path, None)
        if _wanted(item, path):
            stored = nbformat.read(path, as_version=4)
            _PLAYING[path] = _Playing(
                stored, LessonRun(path), variants(path),
                [i for i, c in enumerate(stored.cells) if c.cell_type == "code"],
                checks_of(stored), _sanitizer())
    playing = _PLAYING.get(path)
    if playing is None:
        return
    stored, result = playing.stored, playing.result
    i = playing.code[item.cell_num]
    ran = copy.deepcopy(stored.cells[i])
    ran.outputs = list(item.test_outputs or [])
    _compare(result, i, ran, stored.cells[i], playing.sanitize)
    execute = _nbval_execute(item.parent.kernel, item.config.option.nbval_cell_timeout)
    s = playing.checks.get(i)
    if s is not None and playing.table.get(grade_id(stored.cells[s])):
        _try_variants(execute, result, stored, s, i, playing.table[grade_id(stored.cells[s])])
    if item.cell_num == len(playing.code) - 1:
        result.threads = _threads(execute, stored)
        del _PLAYING[path]
        LIVE[path] = result


def _nbval_execute(kernel: Any, timeout: float) -> Execute:
    """Run a cell's source in nbval's kernel (nbval.kernel.RunningKernel), as nbval runs a
    cell, keeping what it shows."""
    def execute(source: str, index: int, template) -> nbformat.NotebookNode:
        cell = copy.deepcopy(template)
        cell.source, cell.outputs, cell.execution_count = source, [], None
        msg_id = kernel.execute_cell_input(source, allow_stdin=False)
        kernel.await_reply(msg_id, timeout=timeout)
        while True:
            msg = kernel.get_message("iopub", timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                return cell
            if kind in ("stream", "display_data", "execute_result", "error"):
                cell.outputs.append(nbformat.v4.output_from_msg(msg))
    return execute


# --------------------------------------------------------------------------
# What goes through the checks
# --------------------------------------------------------------------------


def meta(cell: nbformat.NotebookNode) -> dict:
    """A cell's nbgrader metadata."""
    return cell.get("metadata", {}).get("nbgrader", {})


def solution_ids(nb: nbformat.NotebookNode) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.cell_type == "code" and meta(c).get("solution")]


def check_after(nb: nbformat.NotebookNode, i: int) -> nbformat.NotebookNode:
    return next(c for c in nb.cells[i + 1:] if c.cell_type == "code")


def _table(folder: Path, lesson: Path, name: str) -> dict[str, list[tuple[str, str]]]:
    path = folder / f"lesson{lesson.name[:2]}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"{folder.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = getattr(module, name, {})
    return {k: [v] if isinstance(v, tuple) else list(v) for k, v in table.items()}


def wrong_answers(lesson: Path) -> dict[str, list[tuple[str, str]]]:
    """tests/wrong_answers/lessonNN.py's WRONG: by solution grade_id, (source, fragment)."""
    return _table(WRONG_DIR, lesson, "WRONG")


def cheats(lesson: Path) -> dict[str, list[tuple[str, str]]]:
    """tests/cheats/lessonNN.py: CHEATS has the format of WRONG, for shortcuts."""
    return _table(CHEATS_DIR, lesson, "CHEATS")


def variants(lesson: Path) -> dict[str, list[Variant]]:
    """Every answer to put through a check of this notebook, by solution grade_id: the
    wrong answers, the shortcuts, and the student version's blank twice: with the
    student version's check, as a learner runs it, and with the lesson's own check,
    hidden tests included, as nbgrader's autograde runs it."""
    nb = nbformat.read(lesson, as_version=4)
    ids = set(solution_ids(nb))
    found: dict[str, list[Variant]] = {}
    for kind, table in (("wrong", wrong_answers(lesson)), ("cheat", cheats(lesson))):
        for key, answers in table.items():
            assert key in ids, f"{kind} answers kept for {key!r}, which {lesson.name} does not ask"
            found.setdefault(key, []).extend(
                Variant(kind, n, source, fragment)
                for n, (source, fragment) in enumerate(answers, 1))
    student = student_cells(lesson)
    for i, cell in enumerate(student.cells):
        if cell.cell_type == "code" and meta(cell).get("solution"):
            check = check_after(student, i)
            found.setdefault(grade_id(cell), []).extend([
                Variant("blank", 1, cell.source, "", check.source),
                Variant("blank", 2, cell.source, "")])
    return found


def student_cells(path: Path) -> nbformat.NotebookNode:
    """The student version of a lesson exactly as `backproplab release` writes it."""
    from backproplab.course import handout

    with tempfile.TemporaryDirectory() as out:
        (dest,) = handout.release(path, Path(out))
        return nbformat.read(dest, as_version=4)


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
