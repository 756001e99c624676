"""Exercises as assignments: the exercise format, and the versions made from it.

Every lesson ends with exercises in nbgrader's format, so an instructor who
runs nbgrader can use the notebooks as they are. This module is the route
without nbgrader: :func:`validate` checks a notebook against the course's
exercise format, :func:`student_version` makes what students get (solutions
replaced by a stub, hidden tests removed, outputs cleared) and
:func:`learner_version` what a self-learner gets. Writing them to disk
without losing anyone's work is :mod:`backproplab.course.handout`'s job
(``backproplab release`` and ``backproplab learn``), and reading what
students hand back is :mod:`backproplab.course.audit`'s.

An exercise is two code cells::

    # solution cell, metadata {"nbgrader": {"solution": true, "grade_id": "ex02-cubic", ...}}
    ### BEGIN SOLUTION
    dfdx = x.grad
    ### END SOLUTION

    # check cell, metadata {"nbgrader": {"grade": true, "points": 1, "locked": true, ...}}
    bl.compare("df/dx", dfdx, torch.tensor(3.0)).assert_ok()
    ### BEGIN HIDDEN TESTS
    assert dfdx.shape == ()
    ### END HIDDEN TESTS

Only ``nbformat`` is needed here: releasing never imports torch.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

__all__ = [
    "CHECKPOINTS",
    "CODE_STUB",
    "HIDDEN",
    "SOLUTION",
    "GUESS_STUB",
    "AFTER_REVEAL",
    "CourseError",
    "after_reveal_folds",
    "fingerprint",
    "heading_level",
    "learner_version",
    "lesson_number",
    "read_notebook",
    "regions",
    "student_version",
    "validate",
    "validate_course",
]

# The same delimiters and code stub nbgrader uses by default (solutions are
# code cells only, so nbgrader's text stub has no use here). Like nbgrader, a line
# is a marker when it *contains* the delimiter, so both tools agree on what a
# marker is (nbgrader would also see "BEGIN SOLUTION" inside a comment).
SOLUTION = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")

_LESSON = re.compile(r"^(\d+)-")
CHECKPOINTS = ".ipynb_checkpoints"

# Student versions carry this mark in their notebook metadata, so release
# knows which files it may replace: its own earlier output, never anything else.
STUDENT_MARK = "backproplab"
_NEED_SOL = " but is not a solution cell (nbgrader metadata solution: true)"
_NEED_GRADE = " but is not a grade cell (nbgrader metadata grade: true)"


class CourseError(ValueError):
    """A notebook or a path that the course tools cannot work with.

    The message is meant for people: it names the file (and cell) at fault.
    """


class _MarkerError(ValueError):
    """Markers in one cell source that do not pair up (no file context yet)."""


# --------------------------------------------------------------------------
# what follows a prediction's reveal

# The cells right after a prediction's reveal discuss its answer. They sit under a
# level-6 heading, "After the reveal", that JupyterLab shows folded (its own flag,
# kept in the cell's metadata), so a learner scrolling to the blank guess does not
# read the answer below it. The fold carries ``{"backproplab": {AFTER_REVEAL: key}}``.
AFTER_REVEAL = "after_reveal"
COLLAPSED = "jp-MarkdownHeadingCollapsed"
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]|$)")


def heading_level(cell: NotebookNode) -> int | None:
    """The level of the highest heading in a markdown cell (1 for ``#``), or None.

    JupyterLab ends a folded heading's section at the next cell with a heading of
    the same or a higher level, and it reads a cell's level this way: any heading in
    the cell counts, lines in fenced code do not.

    >>> heading_level(nbformat.v4.new_markdown_cell("Text\\n\\n### Part\\n## Whole"))
    2
    >>> heading_level(nbformat.v4.new_markdown_cell("```python\\n# a comment\\n```")) is None
    True
    """
    _check_cell(cell, "cell")
    if cell.get("cell_type") != "markdown":
        return None
    levels = [level for _, level in _headings(cell.get("source", ""))]
    return min(levels) if levels else None


def after_reveal_folds(cells: Sequence[NotebookNode]) -> list[tuple[int, int]]:
    """``(fold, end)`` for each "After the reveal" fold in ``cells``: cells
    ``fold + 1`` to ``end - 1`` are the ones JupyterLab hides under it (up to the
    next heading, or to the end of the notebook)."""
    if not isinstance(cells, (list, tuple)):
        raise TypeError(f"cells: expected a notebook's list of cells, got {type(cells).__name__}")
    for k, cell in enumerate(cells):
        _check_cell(cell, f"cells[{k}]")
    return [(i, _next_heading(cells, i + 1)) for i, cell in enumerate(cells)
            if AFTER_REVEAL in cell.get("metadata", {}).get("backproplab", {})]


def _check_cell(cell: object, arg: str) -> None:
    if not isinstance(cell, dict):
        raise TypeError(f"{arg}: expected a notebook cell, got {type(cell).__name__}")


def _headings(source: str) -> list[tuple[int, int]]:
    """(line number, level) of each heading line of markdown ``source``, fenced code left out."""
    found, fenced = [], False
    for n, line in enumerate(source.split("\n")):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (atx := _ATX.match(line)):
            found.append((n, len(atx.group(1))))
    return found


def _next_heading(cells: Sequence[NotebookNode], start: int) -> int:
    """The index of the first cell from ``start`` on with a heading (len(cells) if none)."""
    return next((k for k in range(start, len(cells)) if heading_level(cells[k])), len(cells))


def _reveal_problem(cells: Sequence[NotebookNode], check: int) -> str | None:
    """What is wrong with what follows the reveal after prediction check ``check``."""
    reveal = next((k for k in range(check + 1, len(cells))
                   if cells[k].get("cell_type") == "code"), None)
    if reveal is None or "bl.reveal(" not in cells[reveal].get("source", ""):
        return "the code cell after a prediction's check must reveal it (bl.reveal)"
    if reveal + 1 == len(cells):
        return None
    fold = cells[reveal + 1]
    meta = fold.get("metadata", {})
    if AFTER_REVEAL not in meta.get("backproplab", {}) and heading_level(fold):
        return None  # nothing under the reveal before the next section
    if (AFTER_REVEAL not in meta.get("backproplab", {}) or meta.get(COLLAPSED) is not True
            or heading_level(fold) != 6 or not _ATX.match(fold.get("source", ""))):
        return (f"the cell after the reveal (cell {reveal + 1}) must be a heading, or a fold: "
                f"a markdown cell starting with a level-6 heading, with metadata "
                f"{{{COLLAPSED!r}: true, 'backproplab': {{{AFTER_REVEAL!r}: <prediction id>}}}}")
    end = _next_heading(cells, reveal + 2)
    if end < len(cells) and _text_above_heading(cells[end]):
        # JupyterLab shows a heading cell whole: its text above the heading is not folded.
        return (f"cell {end} ends the fold after the reveal, and its text above the heading "
                f"would show: put that text in a cell of its own, before it")
    return None


def _text_above_heading(cell: NotebookNode) -> str:
    """A markdown cell's text above its first heading, without HTML anchors (invisible)."""
    lines = cell.get("source", "").split("\n")
    first = next((n for n, _ in _headings(cell.get("source", ""))), len(lines))
    above = "\n".join(lines[:first])
    return re.sub(r'<a id="[^"]*"></a>', "", above).strip()


# --------------------------------------------------------------------------
# markers


def regions(source: str, kind: tuple[str, str]) -> list[tuple[int, int]]:
    """Line spans ``(begin, end)`` (both marker lines, inclusive) of one kind.

    >>> regions("a\\n### BEGIN SOLUTION\\nb\\n### END SOLUTION", SOLUTION)
    [(1, 3)]

    ``kind`` is :data:`SOLUTION` or :data:`HIDDEN`. Raises ValueError for a
    nested BEGIN, an END without BEGIN, or a BEGIN never closed. nbgrader
    silently drops a stray END line; we refuse it, because it nearly always
    means a BEGIN was mistyped.
    """
    if not isinstance(source, str):
        raise TypeError(f"source: expected a cell's source as a str, got {type(source).__name__}")
    if kind not in (SOLUTION, HIDDEN):
        raise ValueError(f"kind: expected course.SOLUTION or course.HIDDEN, got {kind!r}")
    begin, end = kind
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate(source.split("\n")):
        if begin in line:
            if start is not None:
                raise _MarkerError(
                    f"{begin} on line {i + 1} is nested inside the one on line {start + 1}"
                )
            start = i
        elif end in line:
            if start is None:
                raise _MarkerError(f"{end} on line {i + 1} has no {begin} before it")
            spans.append((start, i))
            start = None
    if start is not None:
        raise _MarkerError(f"{begin} on line {start + 1} has no {end}")
    return spans


def _check_markers(source: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Both kinds of region in one source, refusing regions that overlap."""
    solutions = regions(source, SOLUTION)
    hidden = regions(source, HIDDEN)
    for s0, s1 in solutions:
        for h0, h1 in hidden:
            if s0 <= h1 and h0 <= s1:
                raise _MarkerError(
                    f"the solution region on lines {s0 + 1}-{s1 + 1} overlaps "
                    f"the hidden-tests region on lines {h0 + 1}-{h1 + 1}"
                )
    return solutions, hidden


def _meta(cell: NotebookNode) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _where(index: int, cell: NotebookNode) -> str:
    grade_id = _meta(cell).get("grade_id")
    return f"cell {index}" + (f" ({grade_id})" if grade_id else "")


# --------------------------------------------------------------------------
# validation


def lesson_number(path: str | Path) -> str | None:
    """The lesson number a notebook's file name starts with, if any.

    >>> lesson_number("notebooks/02-chain-rule.ipynb")
    '02'
    >>> lesson_number("scratch.ipynb") is None
    True
    """
    match = _LESSON.match(Path(path).name)
    return match.group(1) if match else None


def _check_notebook(nb: object, arg: str = "nb") -> None:
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(
            f"{arg}: expected a notebook (nbformat.read(...)), got {type(nb).__name__}"
        )


def validate(nb: NotebookNode, lesson: str | None = None) -> list[str]:
    """Problems with a notebook's exercises; an empty list means all is well.

    ``lesson`` (e.g. ``"02"``) also requires every grade_id to start with
    the lesson number after an optional word (``"ex02-"``, ``"l02-"``),
    which keeps ids unique across the whole course.

    >>> nb = nbformat.v4.new_notebook()
    >>> validate(nb)
    []
    >>> nb.cells.append(nbformat.v4.new_code_cell("### BEGIN SOLUTION\\nx = 1"))
    >>> validate(nb)
    ['cell 0: BEGIN SOLUTION on line 1 has no END SOLUTION']
    """
    _check_notebook(nb)
    if lesson is not None and not (isinstance(lesson, str) and lesson.isdigit()):
        raise ValueError(f"lesson: expected the lesson number as digits, e.g. '02', got {lesson!r}")
    problems: list[str] = []
    seen: dict[str, int] = {}
    cells = list(nb.get("cells", []))
    for i, cell in enumerate(cells):
        where = _where(i, cell)
        raw = cell.get("metadata", {}).get("nbgrader")
        if raw is not None and not isinstance(raw, dict):
            problems.append(
                f"{where}: nbgrader metadata must be a mapping, got {type(raw).__name__}"
            )
            continue
        meta = _meta(cell)
        source = cell.get("source", "")
        try:
            solutions, hidden = _check_markers(source)
        except _MarkerError as err:
            problems.append(f"{where}: {err}")
            solutions, hidden = [], []
        solution, grade = bool(meta.get("solution")), bool(meta.get("grade"))

        # Markers only where nbgrader accepts them: it refuses solution regions
        # outside solution cells and hidden tests outside grade cells.
        if solutions and not solution:
            problems.append(f"{where}: has {SOLUTION[0]}{_NEED_SOL}")
        if hidden and not grade:
            problems.append(f"{where}: has {HIDDEN[0]}{_NEED_GRADE}")
        if not meta:
            continue

        if meta.get("schema_version") != 3:
            version = meta.get("schema_version")
            problems.append(f"{where}: nbgrader schema_version must be 3, got {version!r}")
        grade_id = meta.get("grade_id")
        if not isinstance(grade_id, str) or not grade_id:
            problems.append(f"{where}: nbgrader metadata needs a non-empty grade_id")
        else:
            if grade_id in seen:
                problems.append(
                    f"{where}: grade_id {grade_id!r} is also used by cell {seen[grade_id]}"
                )
            seen.setdefault(grade_id, i)
            # Letters, then the lesson number: "ex02-cubic" and "l02-cubic" both
            # work, and ids from different lessons can never collide.
            if lesson is not None and not re.match(rf"[A-Za-z]*{lesson}-", grade_id):
                problems.append(
                    f"{where}: grade_id {grade_id!r} should start with the lesson number, "
                    f"e.g. 'ex{lesson}-'"
                )

        if solution and grade:
            problems.append(
                f"{where}: is both a solution and a grade cell; "
                "an exercise here is a solution cell followed by a check cell"
            )
        if solution:
            if cell.get("cell_type") != "code":
                problems.append(f"{where}: a solution cell must be a code cell")
            elif not solutions:
                problems.append(
                    f"{where}: a solution cell needs ### {SOLUTION[0]} / ### {SOLUTION[1]} markers"
                )
            code_after = (c for c in cells[i + 1 :] if c.get("cell_type") == "code")
            nxt = next(code_after, None)
            if nxt is None or not _meta(nxt).get("grade"):
                problems.append(
                    f"{where}: the next code cell must be a check cell (metadata grade: true)"
                )
        if grade:
            problems += [f"{where}: {p}" for p in _grade_cell_problems(cells, i)]
    return problems


def _grade_cell_problems(cells: Sequence[NotebookNode], i: int) -> list[str]:
    """What is wrong with grade cell ``i``: its points, its type, and for a prediction's
    check, what follows its reveal."""
    problems = []
    points = _meta(cells[i]).get("points")
    if _checks_prediction(cells, i):
        folded = _reveal_problem(cells, i)
        if folded:
            problems.append(folded)
        # A guess can be changed after the answer is revealed, and nothing in a
        # submitted notebook tells when: predictions give feedback, not points.
        if points != 0 or isinstance(points, bool):
            problems.append("a prediction's check cell carries 0 points "
                            f"(its guess can be changed after the reveal), got {points!r}")
    elif (
        isinstance(points, bool) or not isinstance(points, (int, float))
        or not math.isfinite(points) or points <= 0
    ):
        problems.append(f"a grade cell needs finite points > 0, got {points!r}")
    if cells[i].get("cell_type") != "code":
        problems.append("a grade cell must be a code cell")
    return problems


def _checks_prediction(cells: Sequence[NotebookNode], i: int) -> bool:
    """Whether grade cell ``i`` checks a "predict, then run" guess: the code cell before
    it is a solution cell whose grade_id says "predict"."""
    before = [c for c in cells[:i] if c.get("cell_type") == "code"]
    if not before:
        return False
    meta = _meta(before[-1])
    return bool(meta.get("solution")) and "predict" in str(meta.get("grade_id", ""))


def validate_course(paths: Iterable[str | Path]) -> list[str]:
    """Problems across several notebooks: each one's, plus grade_ids repeated between them.

    Every problem is prefixed with the notebook's file name.
    """
    if isinstance(paths, (str, os.PathLike)):
        raise TypeError(
            "paths: expected a list of notebook paths (find_notebooks(folder) gives one), "
            f"got the single path {str(paths)!r}"
        )
    problems: list[str] = []
    owner: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        try:
            nb = read_notebook(path)
        except CourseError as err:
            problems.append(str(err))
            continue
        problems += [f"{path.name}: {p}" for p in validate(nb, lesson_number(path))]
        for i, cell in enumerate(nb.cells):
            grade_id = _meta(cell).get("grade_id")
            if not isinstance(grade_id, str) or not grade_id:
                continue
            if grade_id in owner and owner[grade_id] != path.name:
                problems.append(
                    f"{path.name}: cell {i}: grade_id {grade_id!r} also used in {owner[grade_id]}"
                )
            owner.setdefault(grade_id, path.name)
    return problems


# --------------------------------------------------------------------------
# student versions


def read_notebook(path: str | Path) -> NotebookNode:
    """Read and schema-check a notebook, or raise CourseError saying why not."""
    path = Path(path)
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except OSError as err:
        raise CourseError(f"{path}: cannot read: {err.strerror or err}") from None
    except nbformat.reader.NotJSONError:
        raise CourseError(f"{path}: not a notebook (the file is not valid JSON)") from None
    except nbformat.ValidationError as err:
        reason = str(err.message).splitlines()[0]
        raise CourseError(f"{path}: not a notebook ({reason})") from None
    except (AttributeError, KeyError, TypeError, ValueError):
        # JSON of the wrong shape (a list, cells that are not a list...) fails
        # deep inside nbformat with messages that would only confuse.
        raise CourseError(
            f"{path}: not a notebook (the JSON does not have a notebook's structure)"
        ) from None
    return nb


def _clear_regions(source: str, spans: Sequence[tuple[int, int]], stub: Sequence[str]) -> str:
    """Replace each span (marker lines included) by ``stub`` at the BEGIN line's indent."""
    lines = source.split("\n")
    out: list[str] = []
    pos = 0
    for begin, end in spans:
        out += lines[pos:begin]
        indent = re.match(r"\s*", lines[begin]).group(0)
        out += [indent + s for s in stub]
        pos = end + 1
    out += lines[pos:]
    return "\n".join(out)


HIDDEN_KEPT = "# A check of the method, hidden from students in a graded course:"


def _unmark_regions(source: str, spans: Sequence[tuple[int, int]], note: str) -> str:
    """Keep each span's lines; its BEGIN line becomes ``note``, its END line goes."""
    lines = source.split("\n")
    begins = {begin for begin, _ in spans}
    ends = {end for _, end in spans}
    out = []
    for i, line in enumerate(lines):
        if i in begins:
            out.append(re.match(r"\s*", line).group(0) + note)
        elif i not in ends:
            out.append(line)
    return "\n".join(out)


def student_version(
    nb: NotebookNode, name: str = "notebook", *, keep_hidden: bool = False
) -> tuple[NotebookNode, int, int]:
    """A student copy of ``nb`` plus its number of exercises and hidden-test blocks removed.

    Solution regions become ``# YOUR CODE HERE`` / ``raise NotImplementedError()``;
    hidden-test regions disappear (with ``keep_hidden``, only their marker
    lines do, replaced by a comment: a self-learner's copy keeps the checks of
    the method, which a graded course hides); code outputs and execution counts are
    cleared. A solution cell must be a code cell with markers, as `validate`
    requires: otherwise CourseError (nbgrader would replace such a cell
    whole, set-up lines included). Metadata and cell ids stay.
    ``nb`` itself is not changed. ``name`` only labels error messages.

    >>> nb = nbformat.v4.new_notebook()
    >>> source = "def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n    ### END SOLUTION"
    >>> cell = nbformat.v4.new_code_cell(source)
    >>> cell.metadata["nbgrader"] = {"solution": True, "grade_id": "ex00-f"}
    >>> nb.cells.append(cell)
    >>> student, exercises, hidden = student_version(nb)
    >>> print(student.cells[0].source)
    def f(x):
        # YOUR CODE HERE
        raise NotImplementedError()
    """
    _check_notebook(nb)
    out = copy.deepcopy(nb)
    exercises = hidden_blocks = 0
    for i, cell in enumerate(out.cells):
        meta = _meta(cell)
        source = cell.get("source", "")
        try:
            solutions, hidden = _check_markers(source)
        except _MarkerError as err:
            raise CourseError(f"{name}: {_where(i, cell)}: {err}") from None
        # Refuse what nbgrader refuses: a region in the wrong kind of cell
        # would otherwise be cleared in one tool and fail in the other.
        if solutions and not meta.get("solution"):
            raise CourseError(f"{name}: {_where(i, cell)}: has {SOLUTION[0]}{_NEED_SOL}")
        if hidden and not meta.get("grade"):
            raise CourseError(f"{name}: {_where(i, cell)}: has {HIDDEN[0]}{_NEED_GRADE}")

        if meta.get("solution"):
            # The same two rules validate applies: a solution is code between markers.
            # (nbgrader would replace an unmarked cell whole, set-up lines and all.)
            if cell.cell_type != "code":
                raise CourseError(f"{name}: {_where(i, cell)}: a solution cell must be a code cell")
            if not solutions:
                raise CourseError(
                    f"{name}: {_where(i, cell)}: a solution cell needs ### {SOLUTION[0]} / "
                    f"### {SOLUTION[1]} markers"
                )
            exercises += 1
            source = _clear_regions(source, solutions, CODE_STUB)
        if hidden:
            # Solution and hidden regions never overlap (checked above), and
            # solution cells are not grade cells in practice, so re-finding
            # the hidden spans in the new source is safe and simple.
            spans = regions(source, HIDDEN)
            if keep_hidden:
                source = _unmark_regions(source, spans, HIDDEN_KEPT)
            else:
                source = _clear_regions(source, spans, ())
                hidden_blocks += len(spans)
        cell.source = source
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return out, exercises, hidden_blocks


def fingerprint(nb: NotebookNode) -> str:
    """A hash of a notebook's cells (type and source), to tell later whether anyone edited
    them: outputs and metadata are left out, since running a notebook changes those."""
    digest = hashlib.sha256()
    for cell in nb.get("cells", []):
        digest.update(f"{cell.get('cell_type')}\0{cell.get('source', '')}\0".encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------
# a self-learner's copies


GUESS_STUB = "...  # your guess"


def _guess_stub(source: str) -> str | None:
    """A prediction's guess cell with each guess blank (``name = ...``), or None when its
    solution is more than plain assignments.

    >>> print(_guess_stub("### BEGIN SOLUTION\\nguess = 2.0\\n### END SOLUTION"))
    guess = ...  # your guess
    """
    lines = source.split("\n")
    out: list[str] = []
    pos = 0
    for begin, end in regions(source, SOLUTION):
        body = lines[begin + 1:end]
        indent = re.match(r"\s*", lines[begin]).group(0)
        try:
            tree = ast.parse("\n".join(line[len(indent):] for line in body))
        except SyntaxError:
            return None
        names = [node.targets[0].id for node in tree.body
                 if isinstance(node, ast.Assign) and len(node.targets) == 1
                 and isinstance(node.targets[0], ast.Name)]
        if not names or len(names) != len(tree.body):
            return None
        out += lines[pos:begin] + [f"{indent}{name} = {GUESS_STUB}" for name in names]
        pos = end + 1
    return "\n".join(out + lines[pos:])


def learner_version(nb: NotebookNode, name: str = "notebook") -> tuple[NotebookNode, int]:
    """A student version with each worked solution one deliberate click away.

    Right after every solution cell comes a markdown cell holding the solution
    in a collapsed "Show a solution" block, except after a prediction's guess:
    its answer comes from the reveal cell after the check, and the guess is
    left as ``name = ...`` (the check then says "no prediction yet"). Checks
    of the method, hidden in a graded course, stay. Returns the notebook and
    its number of exercises.
    """
    student, exercises, _ = student_version(nb, name, keep_hidden=True)
    cells = []
    for original, cell in zip(nb.cells, student.cells, strict=True):
        cells.append(cell)
        if not _meta(original).get("solution"):
            continue
        guess = _guess_stub(original.source)
        if "predict" in str(_meta(original).get("grade_id", "")) and guess is not None:
            # A prediction's answer comes from its reveal cell, after the guess is
            # checked; a "Show a solution" block here would show it first.
            cell.source = guess
            continue
        # The whole cell as the lesson has it, marker lines left out.
        code = "\n".join(
            line for line in original.source.split("\n")
            if SOLUTION[0] not in line and SOLUTION[1] not in line
        )
        reveal = nbformat.v4.new_markdown_cell(
            "<details><summary>Show a solution</summary>\n\n"
            "Try it yourself first; the check cell below tells you what is wrong.\n\n"
            f"```python\n{code}\n```\n\n</details>"
        )
        reveal.id = f"{cell.get('id', 'cell')}-solution"[:64]
        reveal.metadata["backproplab"] = {"solution_of": _meta(original).get("grade_id")}
        cells.append(reveal)
    student.cells = cells
    student.metadata[STUDENT_MARK] = {"student_version": True, "learner": True,
                                      "fingerprint": fingerprint(student)}
    return student, exercises


