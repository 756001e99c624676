"""The grade, decided where the learner's code cannot reach: ``backproplab grade``.

For every submitted notebook and every graded exercise of the lesson it
submits (a check cell with points that calls ``check_exercise``, read from the
instructor's version, never from the submission):

1. the answer's source is found (`backproplab.course.sources.from_notebook`):
   the definitions of the names the check cell hands over, and those they need,
   from the cells above the check; nothing that is not a definition;
2. that source is read against the exercise's vocabulary
   (`backproplab.course.rules`); anything outside it scores 0, with its name.
   The reading teaches what "by hand" means; it is not what protects the grade;
3. the source runs in the student's sandbox (`backproplab.course.sandbox`:
   bubblewrap, nothing of the instructor's in reach), in a child process of its
   own: a by-hand answer is called there on inputs made here from the
   instructor's secret, a method exercise's answer is observed there, and what
   comes back is plain data. Every verdict is made here, by one judge per kind
   (`judge_by_hand`, `judge_method`), never by the answer's process. Every seed
   the instructor's check cell names must pass, hidden ones included.

The grader outlives whatever an answer does: a child that dies, hangs, sends
too much or garbage costs that answer its points. The verdicts go to a CSV
(`write_csv`, written whole and renamed into place) and, for nbgrader, into its
gradebook as the score of each exercise's check cell (`write_gradebook`), once
every sandbox is gone.
"""

from __future__ import annotations

import ast
import concurrent.futures
import copy
import csv
import dataclasses
import hashlib
import os
import re
import threading
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ..check import Report
from . import rules, sources
from .assignment import CourseError, read_notebook
from .byhand import ByHand, judge_by_hand
from .grading import find_exercise, grading_seed, judge_method
from .handout import find_notebooks
from .sandbox import INSTALL, Answer, Sandbox, SandboxError, WireError, encode
from .sandbox import available as sandbox_available
from .slips import fail

__all__ = ["Graded", "Verdict", "answer_source", "cell_name", "grade", "grade_one",
           "graded_exercises", "plain_text", "write_csv", "write_gradebook"]

COLUMNS = ("student", "notebook", "exercise", "points", "max_points", "verdict", "reason",
           "isolation")


@dataclass(frozen=True)
class Graded:
    """A graded exercise of a lesson: its check cell's id, the exercise, its points, and
    each check call's answer names and written seed."""

    check_id: str
    key: str
    points: float
    calls: tuple[tuple[tuple[str, ...], int], ...]
    check_source: str = ""  # the instructor's check cell: what it defines comes first

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for names, _ in self.calls for n in names))


@dataclass(frozen=True)
class Verdict:
    """One row of the grades: who, which exercise, the points and why."""

    student: str
    notebook: str
    exercise: str
    points: float
    max_points: float
    verdict: str
    reason: str
    assignment: str = ""
    check_id: str = ""
    isolation: str = "bubblewrap"  # or "none": graded with --no-isolation


def graded_exercises(nb: nbformat.NotebookNode) -> list[Graded]:
    """The graded exercises of an instructor's lesson, in order (predictions, which carry
    no points, are not among them)."""
    found = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or not meta.get("points"):
            continue
        keys = [n.args[0].value for n in ast.walk(ast.parse(sources.without_magics(cell.source)))
                if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
                and _called(n.func) == "check_exercise"]
        if keys:
            calls = sources.answer_calls(cell.source, keys[0])
            found.append(Graded(meta["grade_id"], keys[0], float(meta["points"]),
                                tuple((tuple(names), seed) for names, seed in calls),
                                cell.source))
    return found


def _called(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _check_position(nb: nbformat.NotebookNode, graded: Graded) -> int:
    """Where the submission's check cell is (its end when the learner deleted it)."""
    for i, cell in enumerate(nb.cells):
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == graded.check_id:
            return i
    return len(nb.cells)


def _files(pieces: Sequence[sources.Piece], indices: Sequence[int]) -> list[tuple[str, str]]:
    """Per cell, its chosen statements at their own lines (the rest blank): what runs."""
    kept: dict[int, set[int]] = {}
    texts: dict[int, str] = {}
    for p in pieces:
        stmt = p.tree.body[0]
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        kept.setdefault(p.cell, set()).update(range(first, (stmt.end_lineno or first) + 1))
        texts[p.cell] = p.text
    files = []
    for cell in sorted(kept):
        lines = texts[cell].split("\n")
        text = "\n".join(line if k + 1 in kept[cell] else "" for k, line in enumerate(lines))
        files.append((f"<cell {indices[cell]}>", text + "\n"))
    return files


def cell_name(nb: nbformat.NotebookNode, index: int) -> str:
    """A cell as an instructor finds it in JupyterLab, which numbers no cells: its number
    and the heading it sits under.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Exercise 2"),
    ...                                      nbformat.v4.new_code_cell("x = 1")])
    >>> cell_name(nb, 1)
    'cell 1 (under "Exercise 2")'
    """
    for cell in reversed(nb.cells[:index + 1]):
        if cell.cell_type == "markdown":
            heading = next((line.lstrip("#").strip() for line in cell.source.splitlines()
                            if line.startswith("#")), None)
            if heading:
                return f'cell {index} (under "{heading[:60]}")'
    return f"cell {index}"


def _parameters(pieces: Sequence[sources.Piece], name: str) -> tuple[str, ...]:
    for p in reversed(pieces):
        stmt = p.tree.body[0]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return tuple(a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args))
    return ()


def answer_source(nb: nbformat.NotebookNode, graded: Graded
                  ) -> tuple[list[sources.Piece], list[tuple[str, str]], list[int]] | str:
    """What the grade runs of ``nb``'s answer to ``graded``: its pieces, the text of each
    cell they come from (the pieces at their own lines, the rest blank), and the cells'
    indices; or, when a name the check hands over has no definition, why not."""
    end = _check_position(nb, graded)
    cells = [(i, c.source) for i, c in enumerate(nb.cells[:end]) if c.cell_type == "code"]
    # What the instructor's check cell itself defines before its call (a dict of the
    # answer's pieces, say) is read from the instructor's lesson, never the submission.
    cells.append((end, graded.check_source))
    unreadable: list[tuple[int, int, str]] = []
    pieces = sources.from_notebook([s for _, s in cells], graded.names, unreadable)
    defined = {n for p in pieces for n in sources.defined(p.tree)}
    missing = [n for n in graded.names if n not in defined]
    indices = [i for i, _ in cells]
    if missing:
        note = sources.unreadable_note(unreadable, [cell_name(nb, i) for i in indices])
        return f"no definition of {', '.join(missing)} above the check" + (
            f": {note}" if note else "")
    return pieces, _files(pieces, indices), indices


# CPython 3.11 before 3.11.8 can raise a spurious SystemError ("AST constructor recursion
# depth mismatch") when two threads build syntax trees at once (python/cpython#106905), so
# grade's threads read answers one at a time; only the sandboxed runs overlap.
_READING = threading.Lock()


def grade_one(box: Sandbox, nb: nbformat.NotebookNode, graded: Graded, *,
              secret: str | None = None, exercise: Any = None) -> tuple[float, str, str]:
    """(points, verdict, reason) for one exercise of one submitted notebook, its answer run
    in ``box`` (one student's sandbox). ``exercise`` is the exercise to judge by (by
    default the one ``graded`` names; `grade` passes one whose references are cached)."""
    exercise = exercise if exercise is not None else find_exercise(graded.key)
    with _READING:
        source = answer_source(nb, graded)
        if isinstance(source, str):
            return 0.0, "missing", source
        pieces, files, indices = source
        found = rules.read([p.tree for p in pieces], exercise.vocabulary)
    if found:
        where = ", ".join(dict.fromkeys(
            f"{cell_name(nb, indices[pieces[f.tree].cell])} line {f.line}" for f in found[:4]))
        words = {"asks_for": exercise.task.asks_for} if isinstance(exercise, ByHand) else {}
        return 0.0, "refused", f"{where}: {rules.refusal(found, exercise.vocabulary, **words)}"
    params = _parameters(pieces, graded.names[0])
    try:
        with box.answer(graded.key, files, graded.names) as run:
            for _, seed in graded.calls:
                report = _judged(run, exercise, grading_seed(graded.key, seed, secret), params)
                bad = next((c for c in report.checks if not c.ok), None)
                if bad is not None:
                    return 0.0, bad.verdict, f"{bad.name}: {bad.message}"
    except SandboxError as err:
        return 0.0, err.kind, str(err)
    return graded.points, "pass", ""


def _judged(run: Answer, exercise: Any, seed: int, params: Sequence[str]) -> Report:
    """The verdict on one check call, made here from what the answer's run sent back."""
    try:
        if isinstance(exercise, ByHand):
            return judge_by_hand(exercise, run.call, seed=seed, params=params)
        return judge_method(exercise, run.observe, seed=seed)
    except SandboxError:
        raise
    except Exception as err:  # what came back was not what the check can read
        return fail(getattr(exercise, "name", "answer"),
                    f"the check could not read what the answer's run sent back "
                    f"({type(err).__name__})", "error")


# The grader's own runs (inputs, references, slips, explanations, comparisons) seed and
# draw from torch's process-wide random generator (a dropout mask; a layer built, then
# given weights from the trial's generator): students graded in threads take turns, or one
# thread's draws land between another's seed and its layer, and a reference comes out wrong.
_OWN_RUNS = threading.RLock()


def _cached(exercise: Any, cache: dict) -> Any:
    """``exercise`` with its reference and slips computed once per input, for the whole
    class: every student's answer to a seed's trial meets the same inputs. Every function
    of the exercise the grader runs runs one at a time."""
    def memo(function: Callable[..., Any]) -> Callable[..., Any]:
        def cached(*args: Any) -> Any:
            with _OWN_RUNS:
                try:
                    key = (id(function), hashlib.sha256(encode(list(args))).digest())
                except WireError:
                    return function(*args)
                if key not in cache:
                    cache[key] = function(*args)
                return copy.deepcopy(cache[key])
        return cached

    def alone(function: Callable[..., Any]) -> Callable[..., Any]:
        def one_at_a_time(*args: Any) -> Any:
            with _OWN_RUNS:
                return function(*args)
        return one_at_a_time

    if isinstance(exercise, ByHand):
        return dataclasses.replace(
            exercise, reference=memo(exercise.reference), make_inputs=alone(exercise.make_inputs),
            mistakes={k: memo(v) for k, v in exercise.mistakes.items()})
    if getattr(exercise, "observe", None) is not None:
        agree = exercise.agree and alone(exercise.agree)
        return dataclasses.replace(
            exercise, reference=memo(exercise.reference), explain=alone(exercise.explain),
            make_inputs=alone(exercise.make_inputs), agree=agree,
            mistakes={k: memo(v) for k, v in exercise.mistakes.items()})
    return exercise


def _submitted(root: Path) -> list[tuple[str, str, Path]]:
    """(student, assignment, path) for each notebook: nbgrader's
    ``<student>/<assignment>/<lesson>.ipynb``, or ``<student>/<lesson>.ipynb``."""
    found = []
    for path in find_notebooks(root):
        parts = path.relative_to(root).parts
        student = parts[0] if len(parts) > 1 else ""
        assignment = parts[1] if len(parts) > 2 else ""
        found.append((student, assignment, path))
    return found


def grade(submitted: str | Path, against: str | Path, *, secret: str | None = None,
          jobs: int = 1, timeout: float = 300.0, memory: int = 4 << 30,
          only: Container[str] | None = None, isolation: bool = True,
          progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """The verdict on every graded exercise of every notebook under ``submitted``, against
    the instructor's lessons in ``against`` (matched by file name); with ``only``, on the
    exercises it names. Each student's answers run in a sandbox of their own
    (`backproplab.course.sandbox`; ``isolation=False`` runs them without bubblewrap), and
    ``jobs`` students are graded at once. It returns once every sandbox is gone."""
    root = Path(submitted)
    if not root.is_dir():
        raise CourseError(f"SUBMITTED: expected a folder of submitted notebooks, got "
                          f"{str(submitted)!r}, which is not a folder")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise CourseError(f"jobs: expected a whole number of processes >= 1, got {jobs!r}")
    if isolation and not sandbox_available():
        raise CourseError(INSTALL)
    lessons = {p.name: graded_exercises(read_notebook(p)) for p in find_notebooks(against)}
    students: dict[str, list[tuple[str, str, nbformat.NotebookNode, Graded]]] = {}
    for student, assignment, path in _submitted(root):
        if path.name in lessons:
            nb = read_notebook(path)
            students.setdefault(student, []).extend(
                (assignment, path.name, nb, g) for g in lessons[path.name]
                if only is None or g.key in only)
    cache: dict = {}
    judged = {g.key: _cached(find_exercise(g.key), cache)
              for graded in lessons.values() for g in graded if only is None or g.key in only}
    shown = "bubblewrap" if isolation else "none"

    def one_student(student: str) -> list[Verdict]:
        done = []
        with Sandbox(isolation=isolation, timeout=timeout, memory=memory) as box:
            for assignment, name, nb, graded in students[student]:
                try:
                    points, verdict, reason = grade_one(box, nb, graded, secret=secret,
                                                        exercise=judged[graded.key])
                except Exception as err:  # the grader's own fault: this row, not the class
                    points, verdict, reason = 0.0, "error", f"the grader failed ({err!r:.200})"
                row = Verdict(student, name, graded.key, points, graded.points, verdict,
                              plain_text(reason), assignment, graded.check_id, shown)
                if progress is not None:
                    progress(row)
                done.append(row)
        return done

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return [row for rows in pool.map(one_student, list(students)) for row in rows]


# A terminal's escape sequences (CSI, OSC, and two-byte ones), and every control character.
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|.)"
                      r"|[\x00-\x1f\x7f-\x9f]")


def plain_text(text: str) -> str:
    """A reason as one plain line: terminal escape sequences and control characters
    removed, runs of spaces folded (a message can never paint the terminal).

    >>> plain_text("\\x1b[32mpass\\x1b[0m\\nnext")
    'pass next'
    """
    return " ".join(_ESCAPES.sub(" ", str(text)).split())


def write_csv(verdicts: Iterable[Verdict], path: str | Path) -> None:
    """The verdicts as CSV: student, notebook, exercise, points, max_points, verdict, reason,
    isolation. Written to a temporary file beside ``path`` and then renamed over it, so
    ``path`` only ever holds a whole table."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for v in verdicts:
            out.writerow([v.student, v.notebook, v.exercise, f"{v.points:g}",
                          f"{v.max_points:g}", v.verdict, plain_text(v.reason), v.isolation])
    os.replace(temporary, path)


def write_gradebook(verdicts: Iterable[Verdict], gradebook: str, course_id: str) -> int:
    """Each verdict's points as the score of its check cell in nbgrader's gradebook (the
    assignment must be in it: ``nbgrader generate_assignment``). A submission nbgrader has
    not autograded is entered first, as ``nbgrader autograde`` would. Returns how many
    scores were set."""
    from nbgrader.api import Gradebook, MissingEntry

    url = gradebook if "://" in gradebook else f"sqlite:///{Path(gradebook).resolve()}"
    written = 0
    with Gradebook(url, course_id=course_id) as gb:
        for v in verdicts:
            notebook = Path(v.notebook).stem
            try:
                cell = gb.find_grade(v.check_id, notebook, v.assignment, v.student)
            except MissingEntry:
                try:
                    gb.find_assignment(v.assignment)
                except MissingEntry:
                    raise CourseError(f"--nbgrader: the assignment {v.assignment!r} is not in "
                                      "the gradebook; run nbgrader generate_assignment first")\
                        from None
                gb.update_or_create_student(v.student)
                gb.update_or_create_submission(v.assignment, v.student)
                cell = gb.find_grade(v.check_id, notebook, v.assignment, v.student)
            cell.auto_score = v.points
            cell.needs_manual_grade = False
            written += 1
        gb.db.commit()
    return written
