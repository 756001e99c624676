"""The nbgrader route, end to end, with the real nbgrader (the `course` extra).

A throwaway course directory gets every lesson as one assignment:
`nbgrader generate_assignment` must produce the same student cells as
`backproplab release`, and `nbgrader autograde` must give the solution
version full marks and the blank student version none.

nbgrader is optional locally (the test skips without it) but required in CI:
when the CI variable is set a missing nbgrader is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from backproplab import course

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

    # "alice" hands in the solutions, "bob" the untouched student versions.
    for student, folder_from in (("alice", None), ("bob", root / "release" / ASSIGNMENT)):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        for lesson in lessons:
            shutil.copy(lesson if folder_from is None else folder_from / lesson.name,
                        folder / lesson.name)
    _nbgrader(root, "autograde", ASSIGNMENT, "--create", "--force")

    points = sum(
        c.metadata["nbgrader"]["points"]
        for lesson in lessons
        for c in course.read_notebook(lesson).cells
        if c.metadata.get("nbgrader", {}).get("grade")
    )
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        alice = gb.find_submission(ASSIGNMENT, "alice")
        bob = gb.find_submission(ASSIGNMENT, "bob")
        scores = {
            "alice": (alice.score, alice.max_score),
            "bob": (bob.score, bob.max_score),
        }
    assert scores == {"alice": (points, points), "bob": (0, points)}
