"""The nbgrader route, end to end, with the real nbgrader (the `course` extra).

A throwaway course directory gets every lesson as one assignment:
`nbgrader generate_assignment` must produce the same student cells as
`backproplab release`, and `nbgrader autograde` must give the solution
version full marks and the blank student version none.

nbgrader is optional locally (the test skips without it) but required in CI:
when the CI variable is set a missing nbgrader is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from backproplab import course
from backproplab.__main__ import main

try:
    from nbgrader.api import Gradebook
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip(
        "nbgrader is not installed (pip install 'backproplab[course]')", allow_module_level=True
    )

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "course" / "00-fixture.ipynb"
COURSE_ID = "backproplab"
ASSIGNMENT = "ps1"


def _lessons() -> list[Path]:
    """Every lesson (one assignment holds them all), or the fixture when there are none."""
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")) or [FIXTURE]


def _nbgrader(course_dir: Path, *args: str) -> str:
    # A private config dir keeps a user's own nbgrader/jupyter config out. nbgrader
    # starts `alembic` by name, so the interpreter's own bin folder goes first on PATH:
    # a course's CI often runs a venv's python by its path, without activating the venv.
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(course_dir / ".jupyter"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
    }
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def _sources(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def _cheats() -> dict[str, list[tuple[str, str]]]:
    """Every lesson's shortcuts (tests/cheats/lessonNN.py), by grade_id."""
    table: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((ROOT / "tests" / "cheats").glob("lesson*.py")):
        spec = importlib.util.spec_from_file_location(f"cheats_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for key, value in getattr(module, "CHEATS", {}).items():
            table.setdefault(key, []).extend([value] if isinstance(value, tuple) else value)
    return table


def _swapped(lesson: Path, cheats: dict, turn) -> tuple[nbformat.NotebookNode, set[str]]:
    """The solution version with every by-hand answer replaced by a numerical estimate:
    finite differences ("numerical estimate") and bl.numerical_grad ("numerical_grad")
    in turn; and the grade_ids of the checks that must then fail."""
    nb = course.read_notebook(lesson)
    failing = set()
    cells = nb.cells
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        table = cheats.get(meta.get("grade_id"), [])
        found = {fragment: src for src, fragment in reversed(table)
                 if fragment in ("numerical estimate", "numerical_grad")}
        if meta.get("solution") and found:
            kind = ("numerical estimate", "numerical_grad")[next(turn) % 2]
            cell.source = found.get(kind) or next(iter(found.values()))
            check = next(c for c in cells[i + 1:] if c.cell_type == "code")
            failing.add(check.metadata["nbgrader"]["grade_id"])
    return nb, failing


WARNING_LINE = "    x = torch.tensor(x)  # torch warns: copy-constructing a tensor from a tensor"


def _with_a_warning(lesson: Path) -> nbformat.NotebookNode:
    """The solutions, with lesson 02's cubic answer made to raise a torch warning."""
    nb = course.read_notebook(lesson)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "l02-cubic":
            lines = cell.source.split("\n")
            at = next(k for k, line in enumerate(lines) if "BEGIN SOLUTION" in line)
            cell.source = "\n".join(lines[:at + 1] + [WARNING_LINE] + lines[at + 1:])
    return nb


def test_nbgrader_release_and_autograde(tmp_path: Path) -> None:
    lessons = _lessons()
    root = tmp_path / "course"
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    (root / ".jupyter").mkdir()
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        # lessons import torch; a loaded machine can be slow to start a kernel
        "c.Execute.timeout = 300\n"
        "c.Execute.startup_timeout = 300\n"
    )
    for lesson in lessons:
        shutil.copy(lesson, root / "source" / ASSIGNMENT / lesson.name)

    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    for lesson in lessons:
        theirs = nbformat.read(root / "release" / ASSIGNMENT / lesson.name, as_version=4)
        ours, exercises, _ = course.student_version(course.read_notebook(lesson))
        # nbgrader adds its own metadata (checksums, locks); the text must agree.
        assert _sources(theirs) == _sources(ours), lesson.name
        assert exercises == sum(
            1 for c in theirs.cells if c.metadata.get("nbgrader", {}).get("solution")
        ), lesson.name

    # alice: the solutions, with one honest answer that makes torch print a warning;
    # bob: the untouched student versions; fiona: every by-hand answer as a numerical
    # estimate, her own finite differences and bl.numerical_grad taking turns (every
    # exercise meets both in tests/cheats/, run by test_exercises.py). Each lesson runs
    # once per student, so three students keep the run short.
    cheats = _cheats()
    failing: dict[str, set[str]] = {"alice": set(), "bob": set()}
    turn = iter(range(10_000))
    failing["fiona"] = set()
    for student in ("alice", "bob", "fiona"):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        for lesson in lessons:
            if student == "alice":
                nbformat.write(_with_a_warning(lesson), folder / lesson.name)
            elif student == "bob":
                shutil.copy(root / "release" / ASSIGNMENT / lesson.name, folder / lesson.name)
            else:
                nb, fails = _swapped(lesson, cheats, turn)
                failing[student] |= fails
                nbformat.write(nb, folder / lesson.name)
    log = _nbgrader(root, "autograde", ASSIGNMENT, "--create", "--force")
    # A check cell whose value were a number would be read as partial credit.
    assert "partial credit" not in log

    checks = {
        c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
        for lesson in lessons
        for c in course.read_notebook(lesson).cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    points = sum(checks.values())
    expected = {
        "alice": points, "bob": 0,
        "fiona": points - sum(checks[g] for g in failing["fiona"]),
    }
    if lessons != [FIXTURE]:
        # Numerical estimates lose every by-hand point, and a prediction is worth nothing.
        assert len(failing["fiona"]) >= len(lessons)
        assert all(points == 0 for g, points in checks.items() if "predict" in g)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        scores = {
            student: gb.find_submission(ASSIGNMENT, student).score for student in expected
        }
        per_cell = {
            (g.cell.name, nb.name): g.score
            for nb in gb.find_submission(ASSIGNMENT, "fiona").notebooks
            for g in nb.grades
        } if lessons != [FIXTURE] else {}
    wrong_cells = [k for k, score in per_cell.items() if k[0] in failing["fiona"] and score]
    assert not wrong_cells, f"finite differences earned points in {wrong_cells}"
    assert scores == expected

    # The audit finds nothing in honest work, and lists fiona's bl.numerical_grad.
    honest = root / "submitted" / "alice"
    assert main(["audit", str(honest), "--against", str(root / "source" / ASSIGNMENT)]) == 0
    if failing["fiona"]:
        assert main(["audit", str(root / "submitted" / "fiona")]) == 1

    # The README's last two steps: feedback per student, and the grades as CSV.
    _nbgrader(root, "generate_feedback", ASSIGNMENT, "--force")
    assert (root / "feedback" / "alice" / ASSIGNMENT).is_dir()
    _nbgrader(root, "export")
    grades = (root / "grades.csv").read_text()
    assert "alice" in grades and "fiona" in grades
