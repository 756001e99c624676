"""The grade, decided where the learner's code cannot reach: ``backproplab grade``.

For every submitted notebook and every graded exercise of the lesson it
submits (a check cell with points that calls ``check_exercise``, read from the
instructor's version, never from the submission):

1. the answer's source is found (`backproplab.course.sources.from_notebook`):
   the definitions of the names the check cell hands over, and those they need,
   from the cells above the check; nothing that is not a definition;
2. that source is read against the exercise's vocabulary
   (`backproplab.course.rules`); anything outside it scores 0, with its name;
3. the source runs in a fresh process (`backproplab.course.sandbox`) that has
   nothing else: a by-hand answer is called there on inputs the grader makes
   from the instructor's secret and is judged here (`judge_by_hand`); a method
   exercise's check runs there on the answer. Every seed the instructor's check
   cell names must pass, hidden ones included, for the exercise's points.

The verdicts go to a CSV (`write_csv`) and, for nbgrader, into its gradebook as
the score of each exercise's check cell (`write_gradebook`).
"""

from __future__ import annotations

import ast
import concurrent.futures
import csv
import threading
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from . import rules, sources
from .assignment import CourseError, read_notebook
from .byhand import judge_by_hand
from .grading import ByHand, find_exercise
from .handout import find_notebooks
from .sandbox import Sandbox, SandboxError
from .secret import grading_seed

__all__ = ["Graded", "Verdict", "answer_source", "grade", "grade_one", "graded_exercises",
           "write_csv", "write_gradebook"]

COLUMNS = ("student", "notebook", "exercise", "points", "max_points", "verdict", "reason")


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
    pieces = sources.from_notebook([s for _, s in cells], graded.names)
    defined = {n for p in pieces for n in sources.defined(p.tree)}
    missing = [n for n in graded.names if n not in defined]
    if missing:
        return f"no definition of {', '.join(missing)} above the check"
    indices = [i for i, _ in cells]
    return pieces, _files(pieces, indices), indices


# CPython 3.11 before 3.11.8 can raise a spurious SystemError ("AST constructor recursion
# depth mismatch") when two threads build syntax trees at once (python/cpython#106905), so
# grade's threads read answers one at a time; only the sandboxed runs overlap.
_READING = threading.Lock()


def grade_one(nb: nbformat.NotebookNode, graded: Graded, *, secret: str | None = None,
              timeout: float = 300.0, memory: int = 4 << 30) -> tuple[float, str, str]:
    """(points, verdict, reason) for one exercise of one submitted notebook."""
    exercise = find_exercise(graded.key)
    with _READING:
        source = answer_source(nb, graded)
        if isinstance(source, str):
            return 0.0, "missing", source
        pieces, files, indices = source
        found = rules.read([p.tree for p in pieces], exercise.vocabulary)
    if found:
        where = ", ".join(dict.fromkeys(f"cell {indices[pieces[f.tree].cell]} line {f.line}"
                                        for f in found[:4]))
        return 0.0, "refused", f"{where}: {rules.refusal(found, exercise.vocabulary)}"
    try:
        with Sandbox(timeout=timeout, memory=memory) as box:
            box.load(files, graded.names)
            for _, seed in graded.calls:
                checks = _run(box, exercise, graded, grading_seed(graded.key, seed, secret),
                              _parameters(pieces, graded.names[0]))
                bad = next((c for c in checks if not c[1]), None)
                if bad is not None:
                    return 0.0, bad[2], f"{bad[0]}: {bad[3]}"
    except SandboxError as err:
        return 0.0, err.kind, str(err)
    return graded.points, "pass", ""


def _run(box: Sandbox, exercise: Any, graded: Graded, seed: int,
         params: Sequence[str]) -> list[tuple[str, bool, str, str]]:
    if not isinstance(exercise, ByHand):
        return box.method(graded.key, seed)
    report = judge_by_hand(exercise, box.call, seed=seed, params=params)
    return [(c.name, c.ok, c.verdict, c.message) for c in report.checks]


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
          only: Container[str] | None = None,
          progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """The verdict on every graded exercise of every notebook under ``submitted``, against
    the instructor's lessons in ``against`` (matched by file name); with ``only``, on the
    exercises it names."""
    root = Path(submitted)
    if not root.is_dir():
        raise CourseError(f"SUBMITTED: expected a folder of submitted notebooks, got "
                          f"{str(submitted)!r}, which is not a folder")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise CourseError(f"jobs: expected a whole number of processes >= 1, got {jobs!r}")
    lessons = {p.name: graded_exercises(read_notebook(p)) for p in find_notebooks(against)}
    work = []
    for student, assignment, path in _submitted(root):
        if path.name in lessons:
            nb = read_notebook(path)
            work += [(student, assignment, path.name, nb, g) for g in lessons[path.name]
                     if only is None or g.key in only]

    def one(item: tuple[str, str, str, nbformat.NotebookNode, Graded]) -> Verdict:
        student, assignment, name, nb, graded = item
        points, verdict, reason = grade_one(nb, graded, secret=secret, timeout=timeout,
                                            memory=memory)
        done = Verdict(student, name, graded.key, points, graded.points, verdict,
                       " ".join(reason.split()), assignment, graded.check_id)
        if progress is not None:
            progress(done)
        return done

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, work))


def write_csv(verdicts: Iterable[Verdict], path: str | Path) -> None:
    """The verdicts as CSV: student, notebook, exercise, points, max_points, verdict, reason."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for v in verdicts:
            out.writerow([v.student, v.notebook, v.exercise, f"{v.points:g}",
                          f"{v.max_points:g}", v.verdict, v.reason])


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
