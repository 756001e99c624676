"""Exercise format, student versions and the release command.

Every notebook in notebooks/ (found at test time, so new lessons are picked
up) plus a small fixture lesson goes through the same checks:

- the exercise format holds (backproplab.course.validate);
- the student version leaks no solution line and no hidden test;
- the student version runs top to bottom up to the first exercise, where it
  stops with NotImplementedError, and every check cell fails;
- the source notebook, as stored, passes every check cell.

Each notebook is released once per test session (a module fixture caches it).
The lessons' student versions are executed by the live run of
tests/lessons/test_exercises.py and by nbgrader's autograde in tests/course/test_nbgrader.py;
the fixture's here.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from notebook_runner import run

import backproplab
from backproplab.__main__ import main
from backproplab.course import assignment as course
from backproplab.course import handout

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "course" / "00-fixture.ipynb"
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# The fixture is always in: with no lessons written yet the checks still run.
COURSE = [*LESSONS, FIXTURE]
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _errors(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


# --------------------------------------------------------------------------
# shared release + execution, one per notebook


class Run:
    """One notebook: its source and its student version. (The student version is
    executed by the live run of tests/lessons/test_exercises.py and by nbgrader's autograde of
    the blank submission in tests/course/test_nbgrader.py.)"""

    def __init__(self, path: Path, out: Path) -> None:
        self.path = path
        self.source = course.read_notebook(path)
        (self.dest,) = handout.release(path, out)
        self.student = nbformat.read(self.dest, as_version=4)
        self.executed: nbformat.NotebookNode | None = None  # see `_executed`


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Callable[[Path], Run]:
    cache: dict[Path, Run] = {}

    def get(path: Path) -> Run:
        if path not in cache:
            cache[path] = Run(path, tmp_path_factory.mktemp("student"))
        return cache[path]

    return get


# --------------------------------------------------------------------------
# the format, on every notebook


def test_fixture_is_found_and_lessons_are_numbered() -> None:
    assert FIXTURE.is_file()
    for path in LESSONS:
        assert course.lesson_number(path), f"{path.name}: lesson files are named NN-topic.ipynb"


@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_exercise_format(path: Path) -> None:
    nb = course.read_notebook(path)
    assert course.validate(nb, course.lesson_number(path)) == []
    assert any(_meta(c).get("solution") for c in nb.cells), f"{path.name} has no exercise"


def test_grade_ids_unique_across_course() -> None:
    # Each notebook's own problems are test_exercise_format's business.
    problems = course.validate_course(COURSE)
    assert [p for p in problems if " also used in " in p] == []


# --------------------------------------------------------------------------
# each validation rule fails on a notebook that breaks it


def _fixture() -> nbformat.NotebookNode:
    return course.read_notebook(FIXTURE)


def _cell(nb, grade_id: str):
    return next(c for c in nb.cells if _meta(c).get("grade_id") == grade_id)


def _append(cell, text: str) -> None:
    cell.source += "\n" + text


def _no_end(nb):
    _cell(nb, "ex00-slope").source = "### BEGIN SOLUTION\nslope = 3.0"


def _stray_end(nb):
    _append(_cell(nb, "ex00-slope"), "### END SOLUTION")


def _nested(nb):
    _cell(nb, "ex00-slope").source = "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"


def _hidden_no_end(nb):
    _append(_cell(nb, "ex00-slope-check"), "### BEGIN HIDDEN TESTS\nassert slope")


def _overlap(nb):
    cell = _cell(nb, "ex00-slope")
    cell.metadata["nbgrader"]["grade"] = True
    cell.metadata["nbgrader"]["points"] = 1
    cell.source = (
        "### BEGIN SOLUTION\nslope = 3.0\n### BEGIN HIDDEN TESTS\n### END SOLUTION\n"
        "### END HIDDEN TESTS"
    )


def _duplicate_id(nb):
    _cell(nb, "ex00-square-grad-check").metadata["nbgrader"]["grade_id"] = "ex00-slope-check"


def _wrong_prefix(nb):
    _cell(nb, "ex00-slope").metadata["nbgrader"]["grade_id"] = "ex01-slope"


def _no_check_after(nb):
    check = _cell(nb, "ex00-slope-check")
    check.metadata.pop("nbgrader")
    # the hidden-test markers must go too, or a second rule would fire
    check.source = "assert slope == 3.0"


def _solution_last(nb):
    nb.cells = nb.cells[: nb.cells.index(_cell(nb, "ex00-square-grad")) + 1]


def _zero_points(nb):
    _cell(nb, "ex00-slope-check").metadata["nbgrader"]["points"] = 0


def _missing_points(nb):
    _cell(nb, "ex00-slope-check").metadata["nbgrader"].pop("points")


def _solution_in_plain_cell(nb):
    _append(nb.cells[2], "### BEGIN SOLUTION\ny = 1\n### END SOLUTION")


def _solution_in_markdown(nb):
    _append(nb.cells[0], "### BEGIN SOLUTION\nthe answer\n### END SOLUTION")


def _hidden_in_solution_cell(nb):
    _append(_cell(nb, "ex00-slope"), "### BEGIN HIDDEN TESTS\nassert slope\n### END HIDDEN TESTS")


def _no_markers(nb):
    _cell(nb, "ex00-slope").source = "slope = 3.0"


def _old_schema(nb):
    _cell(nb, "ex00-slope").metadata["nbgrader"]["schema_version"] = 1


def _empty_id(nb):
    _cell(nb, "ex00-slope").metadata["nbgrader"]["grade_id"] = ""


def _solution_and_grade(nb):
    meta = _cell(nb, "ex00-slope").metadata["nbgrader"]
    meta.update(grade=True, points=1)


def _markdown_check(nb):
    check = _cell(nb, "ex00-square-grad-check")
    nb.cells[nb.cells.index(check)] = nbformat.v4.new_markdown_cell(
        "check", metadata=check.metadata
    )


BREAKS = {
    "no END SOLUTION": (_no_end, "has no END SOLUTION"),
    "END without BEGIN": (_stray_end, "has no BEGIN SOLUTION before it"),
    "nested BEGIN": (_nested, "is nested inside"),
    "no END HIDDEN TESTS": (_hidden_no_end, "has no END HIDDEN TESTS"),
    "regions overlap": (_overlap, "overlaps"),
    "duplicate grade_id": (_duplicate_id, "is also used by cell"),
    "grade_id without lesson prefix": (_wrong_prefix, "should start with the lesson number"),
    "no check cell after solution": (_no_check_after, "next code cell must be a check cell"),
    "solution cell is last": (_solution_last, "next code cell must be a check cell"),
    "zero points": (_zero_points, "points > 0"),
    "missing points": (_missing_points, "points > 0"),
    "solution markers in a plain cell": (_solution_in_plain_cell, "is not a solution cell"),
    "solution markers in markdown": (_solution_in_markdown, "is not a solution cell"),
    "hidden tests outside a grade cell": (_hidden_in_solution_cell, "is not a grade cell"),
    "solution cell without markers": (_no_markers, "needs ### BEGIN SOLUTION"),
    "schema version": (_old_schema, "schema_version must be 3"),
    "empty grade_id": (_empty_id, "non-empty grade_id"),
    "solution and grade at once": (_solution_and_grade, "both a solution and a grade cell"),
    "markdown check cell": (_markdown_check, "must be a code cell"),
}


def test_fixture_is_valid() -> None:
    assert course.validate(_fixture(), "00") == []


@pytest.mark.parametrize("name", BREAKS)
def test_validate_catches(name: str) -> None:
    breaker, fragment = BREAKS[name]
    nb = _fixture()
    breaker(nb)
    problems = course.validate(nb, "00")
    assert any(fragment in p for p in problems), problems
    # problems name the cell, with its grade_id when it has one
    assert all(p.startswith("cell ") for p in problems), problems


def _prediction(after: list) -> nbformat.NotebookNode:
    """A notebook with one prediction: question, guess, check, reveal, then `after`."""
    nb = nbformat.v4.new_notebook()
    guess = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nguess = 2.0\n### END SOLUTION")
    guess.metadata["nbgrader"] = {"solution": True, "grade_id": "l02-predict-match",
                                  "schema_version": 3}
    check = nbformat.v4.new_code_cell('bl.check_prediction("l02-predict-match", guess)')
    check.metadata["nbgrader"] = {"grade": True, "points": 0, "grade_id": "l02-check",
                                  "schema_version": 3}
    nb.cells = [nbformat.v4.new_markdown_cell("### Predict\n\nWhat is it?"), guess, check,
                nbformat.v4.new_code_cell('bl.reveal("l02-predict-match")'), *after]
    return nb


def _fold(level: str = "######", collapsed: bool = True) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(f"{level} After the reveal\n\nFolded.")
    cell.metadata["backproplab"] = {course.AFTER_REVEAL: "l02-predict-match"}
    if collapsed:
        cell.metadata["jp-MarkdownHeadingCollapsed"] = True
    return cell


def test_what_follows_a_reveal_is_folded_or_a_new_section() -> None:
    """The prose under a reveal states the answer: validate wants it under a folded
    level-6 heading (JupyterLab then hides it up to the next heading), unless the
    reveal ends its section."""
    said = nbformat.v4.new_markdown_cell("The answer is 2, because the paths add up.")
    heading = nbformat.v4.new_markdown_cell("## Next")
    assert course.validate(_prediction([_fold(), said, heading]), "02") == []
    assert course.validate(_prediction([heading, said]), "02") == []
    assert course.validate(_prediction([]), "02") == []
    for after in ([said, heading], [_fold(collapsed=False), said], [_fold("###"), said]):
        problems = course.validate(_prediction(after), "02")
        assert len(problems) == 1 and "must be a heading, or a fold" in problems[0], problems
    late = nbformat.v4.new_markdown_cell("So it is 2.\n\n## Next")
    problems = course.validate(_prediction([_fold(), said, late]), "02")
    assert len(problems) == 1 and "text above the heading" in problems[0], problems
    anchored = nbformat.v4.new_markdown_cell('<a id="next"></a>\n## Next')
    assert course.validate(_prediction([_fold(), said, anchored]), "02") == []
    nb = _prediction([_fold(), said, heading])
    assert course.after_reveal_folds(nb.cells) == [(4, 6)]
    nb.cells[3].source = "print(2.0)"
    assert "must reveal it" in course.validate(nb, "02")[0]


def test_marker_problem_names_cell_and_grade_id() -> None:
    nb = _fixture()
    _no_end(nb)
    index = nb.cells.index(_cell(nb, "ex00-slope"))
    assert f"cell {index} (ex00-slope): " in course.validate(nb)[0]


def test_validate_course_catches_ids_repeated_between_notebooks(tmp_path: Path) -> None:
    for name in ("00-a.ipynb", "00-b.ipynb"):
        nbformat.write(_fixture(), tmp_path / name)
    problems = course.validate_course(sorted(tmp_path.glob("*.ipynb")))
    assert any("00-b.ipynb" in p and "also used in 00-a.ipynb" in p for p in problems), problems


def test_lesson_number() -> None:
    assert course.lesson_number("notebooks/11-pitfalls.ipynb") == "11"
    assert course.lesson_number("pitfalls.ipynb") is None


# --------------------------------------------------------------------------
# student_version, cell by cell


def _solution_cell(source: str, cell_type: str = "code"):
    make = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "ex00-a"}
    return cell


def _one_cell(cell):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(cell)
    return nb


def test_stub_keeps_indentation_and_surrounding_lines() -> None:
    source = (
        "def f(x):\n    y = x\n    ### BEGIN SOLUTION\n    return 2 * y\n    ### END SOLUTION\n"
    )
    student, exercises, hidden = course.student_version(_one_cell(_solution_cell(source)))
    expected = "def f(x):\n    y = x\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    assert student.cells[0].source == expected
    assert (exercises, hidden) == (1, 0)


def test_release_refuses_what_validate_refuses() -> None:
    # A markdown solution and a solution cell without markers: validate reports both, and
    # student_version refuses both rather than replace a whole cell (set-up lines and all).
    markdown = _solution_cell("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", "markdown")
    unmarked = _solution_cell("x = 1")
    for cell, fragment in ((markdown, "must be a code cell"), (unmarked, "needs ### BEGIN")):
        nb = _one_cell(cell)
        assert any(fragment in p for p in course.validate(nb))
        with pytest.raises(course.CourseError, match=fragment):
            course.student_version(nb)


def test_student_version_keeps_everything_else() -> None:
    source = _fixture()
    before = copy.deepcopy(source)
    student, exercises, hidden = course.student_version(source)
    assert source == before, "the input notebook must not change"
    assert (exercises, hidden) == (2, 1)
    assert student.metadata == source.metadata
    for old, new in zip(source.cells, student.cells, strict=True):
        assert (new.id, new.cell_type, new.metadata) == (old.id, old.cell_type, old.metadata)
        if new.cell_type == "code":
            assert new.outputs == [] and new.execution_count is None
        if not _meta(old):
            assert new.source == old.source
    check = _cell(student, "ex00-slope-check")
    assert check.source == 'assert slope == 3.0, f"expected 3.0, got {slope}"\nprint("ok")'


def test_student_version_refuses_unbalanced_markers() -> None:
    nb = _fixture()
    _no_end(nb)
    index = nb.cells.index(_cell(nb, "ex00-slope"))
    with pytest.raises(course.CourseError, match=rf"lesson\.ipynb: cell {index} \(ex00-slope\)"):
        course.student_version(nb, name="lesson.ipynb")


# --------------------------------------------------------------------------
# the command line


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    nbformat.write(_fixture(), folder / "00-fixture.ipynb")
    return folder


def test_cli_release_folder(src: Path, tmp_path: Path, capsys) -> None:
    (src / ".ipynb_checkpoints").mkdir()
    nbformat.write(_fixture(), src / ".ipynb_checkpoints" / "00-fixture-checkpoint.ipynb")
    code, out, err = _cli(capsys, "release", src, tmp_path / "out")
    assert (code, err) == (0, "")
    assert out == "released 00-fixture.ipynb: 2 graded exercises, 1 hidden test block removed\n"
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["00-fixture.ipynb"]


def test_cli_release_one_notebook(src: Path, tmp_path: Path, capsys) -> None:
    notebook = src / "00-fixture.ipynb"
    assert _cli(capsys, "release", notebook, tmp_path / "out")[0] == 0
    assert (tmp_path / "out" / "00-fixture.ipynb").is_file()
    assert _cli(capsys, "release", notebook, tmp_path / "student.ipynb")[0] == 0
    assert (tmp_path / "student.ipynb").is_file()


@pytest.mark.parametrize("where", ["same", "inside", "onto-source"])
def test_cli_refuses_to_write_into_src(src: Path, capsys, where: str) -> None:
    args = {
        "same": (src, src),
        "inside": (src, src / "student"),
        "onto-source": (src / "00-fixture.ipynb", src),
    }[where]
    before = (src / "00-fixture.ipynb").read_bytes()
    code, out, err = _cli(capsys, "release", *args)
    assert code == 2 and "refusing" in err and "Traceback" not in err
    assert (src / "00-fixture.ipynb").read_bytes() == before
    assert not (src / "student").exists()


def test_cli_src_inside_dest_is_fine_when_nothing_is_overwritten(src: Path, capsys) -> None:
    code, _, _ = _cli(capsys, "release", src, src.parent)
    assert code == 0 and (src.parent / "00-fixture.ipynb").is_file()


def test_cli_missing_folder(tmp_path: Path, capsys) -> None:
    code, out, err = _cli(capsys, "release", tmp_path / "nowhere", tmp_path / "out")
    assert code == 2 and "nowhere: no such folder or notebook" in err
    assert not (tmp_path / "out").exists()


def test_cli_empty_folder(tmp_path: Path, capsys) -> None:
    code, _, err = _cli(capsys, "release", tmp_path, tmp_path.parent / "out-empty")
    assert code == 2 and "no notebooks" in err


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{not json", "not valid JSON"), (json.dumps({"cells": 3}), "not a notebook")],
    ids=["bad-json", "not-nbformat"],
)
def test_cli_not_a_notebook(src: Path, tmp_path: Path, capsys, text: str, fragment: str) -> None:
    (src / "01-broken.ipynb").write_text(text)
    code, out, err = _cli(capsys, "release", src, tmp_path / "out")
    assert code == 2 and "01-broken.ipynb" in err and fragment in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists(), "nothing is written when any notebook is bad"


def test_cli_unbalanced_markers(src: Path, tmp_path: Path, capsys) -> None:
    nb = _fixture()
    _hidden_no_end(nb)
    nbformat.write(nb, src / "00-fixture.ipynb")
    index = nb.cells.index(_cell(nb, "ex00-slope-check"))
    code, out, err = _cli(capsys, "release", src, tmp_path / "out")
    assert code == 2 and out == ""
    assert f"00-fixture.ipynb: cell {index} (ex00-slope-check): BEGIN HIDDEN TESTS" in err


def test_cli_validate(src: Path, capsys) -> None:
    assert _cli(capsys, "validate", src) == (0, "1 notebook checked: no problems\n", "")
    nb = _fixture()
    _zero_points(nb)
    nbformat.write(nb, src / "00-fixture.ipynb")
    code, out, _ = _cli(capsys, "validate", src)
    assert code == 1 and "00-fixture.ipynb: cell" in out and "points > 0" in out


def test_cli_help_runs_as_module() -> None:
    for args in (["--help"], ["release", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "backproplab", *args], capture_output=True, text=True
        )
        assert done.returncode == 0 and "release" in done.stdout, done.stderr
    # A bare call shows the help rather than a usage error.
    done = subprocess.run([sys.executable, "-m", "backproplab"], capture_output=True, text=True)
    assert done.returncode == 0 and "release" in done.stdout and "validate" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "backproplab", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"backproplab {backproplab.__version__}"


def test_cli_help_does_not_import_torch() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['backproplab', '--help']\n"
        "try:\n    runpy.run_module('backproplab', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'matplotlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "False False", done.stderr


def test_grading_never_loads_nbformat() -> None:
    """A check is graded without nbformat (about a second to import, for its JSON schema
    checker): the learner's first check in every lesson, and every worker process of
    lesson 23's checks, would wait for it. The course's own submodules load by name."""
    code = (
        "import sys\n"
        "import backproplab as bl\n"
        "bl.check_exercise, bl.check_prediction\n"
        "from backproplab.course import byhand, grading, live, rules, sandbox, slips, sources\n"
        "from backproplab.course.exercises import lesson02, lesson23\n"
        "print('nbformat' in sys.modules)\n"
        "from backproplab.course.assignment import student_version\n"
        "print('nbformat' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "True"], done.stdout + done.stderr


def test_every_public_name_resolves() -> None:
    for name in backproplab.__all__:
        assert getattr(backproplab, name) is not None, name
    assert set(backproplab.__all__) <= set(dir(backproplab))
    assert len(backproplab.__doc__.splitlines()) < 40  # help(backproplab) is a short map


# --------------------------------------------------------------------------
# student versions of every lesson


def _region_lines(nb, kind: tuple[str, str]) -> tuple[set[str], set[str]]:
    """(lines inside regions of ``kind``, lines outside any region), stripped."""
    inside: set[str] = set()
    outside: set[str] = set()
    for cell in nb.cells:
        lines = cell.source.split("\n")
        spans = course.regions(cell.source, course.SOLUTION) + course.regions(
            cell.source, course.HIDDEN
        )
        mine = course.regions(cell.source, kind)
        covered = {i for a, b in spans for i in range(a, b + 1)}
        for a, b in mine:
            inside.update(line.strip() for line in lines[a + 1 : b])
        outside.update(line.strip() for i, line in enumerate(lines) if i not in covered)
    return inside, outside


def _nontrivial(line: str) -> bool:
    # Blank lines, lone brackets and comments may legitimately stay.
    return len(line) >= 4 and not line.startswith("#") and any(ch.isalnum() for ch in line)


def _student_lines(nb) -> set[str]:
    return {line.strip() for cell in nb.cells for line in cell.source.split("\n")}


@pytest.mark.parametrize("kind", ["solution", "hidden"])
@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_student_version_leaks_nothing(path: Path, kind: str, runs) -> None:
    run = runs(path)
    inside, outside = _region_lines(
        run.source, course.SOLUTION if kind == "solution" else course.HIDDEN
    )
    secret = {line for line in inside - outside if _nontrivial(line)}
    leaked = secret & _student_lines(run.student)
    assert not leaked, f"{path.name}: {kind} lines in the student version: {sorted(leaked)}"
    text = "\n".join(cell.source for cell in run.student.cells)
    assert not [m for m in MARKERS if m in text], f"{path.name}: a marker survived"


# The lessons' student versions run in the live execution of tests/lessons/test_exercises.py
# (each blank through its check) and in nbgrader's autograde of a blank submission
# (tests/course/test_nbgrader.py); the fixture lesson, which neither sees, runs here.


def _executed(one: Run) -> nbformat.NotebookNode:
    """The student version executed, once for the tests below, which only read it.
    Errors allowed: keep going past the stubs so every check cell runs."""
    if one.executed is None:
        one.executed = run(copy.deepcopy(one.student), one.dest.parent, timeout=300)
    return one.executed


@pytest.mark.slow
@pytest.mark.parametrize("path", [FIXTURE], ids=_ids([FIXTURE]))
def test_student_version_stops_at_first_exercise(path: Path, runs) -> None:
    run = runs(path)
    cells = _executed(run).cells
    first = next(i for i, c in enumerate(cells) if _meta(c).get("solution"))
    failed = next(
        (
            i
            for i, c in enumerate(cells)
            if _errors(c) and "raises-exception" not in c.metadata.get("tags", [])
        ),
        None,
    )
    assert failed is not None, f"{path.name}: the student version ran without an error"
    error = _errors(cells[failed])[0]
    where = f"{path.name}: first error in cell {failed}: {error['ename']}: {error['evalue']}"
    if course.CODE_STUB[0] in run.student.cells[first].source.split("\n"):
        # A top-level stub raises in the solution cell itself.
        assert failed == first, f"{where}; expected it in the first solution cell {first}"
        assert error["ename"] == "NotImplementedError", where
        return
    # The stub is indented (inside a function or method): it raises only when
    # the check cell calls it, and a checker may report it as a failed check.
    check = next(i for i in range(first + 1, len(cells)) if _meta(cells[i]).get("grade"))
    assert failed in (first, check), f"{where}; expected it in cell {first} or {check}"
    assert "NotImplementedError" in f"{error['ename']} {error['evalue']}", where


@pytest.mark.slow
@pytest.mark.parametrize("path", [FIXTURE], ids=_ids([FIXTURE]))
def test_student_version_fails_every_check(path: Path, runs) -> None:
    run = runs(path)
    grade = [c for c in _executed(run).cells if _meta(c).get("grade")]
    assert grade
    passing = [_meta(c)["grade_id"] for c in grade if not _errors(c)]
    assert not passing, f"{path.name}: these checks pass on the blank student version: {passing}"


@pytest.mark.parametrize("path", COURSE, ids=_ids(COURSE))
def test_source_passes_every_check(path: Path) -> None:
    nb = course.read_notebook(path)
    for cell in nb.cells:
        meta = _meta(cell)
        if meta.get("grade") or meta.get("solution"):
            gid = meta["grade_id"]
            assert cell.execution_count is not None, f"{path.name}: {gid} is stored unexecuted"
            assert not _errors(cell), f"{path.name}: {gid} fails in the stored notebook"
