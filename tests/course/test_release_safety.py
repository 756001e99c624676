"""`backproplab release` never loses work: it refuses, or writes everything, or nothing.

Each case checks what a user would: the exit status, one line on stderr with
no traceback, the source notebooks unchanged, and DEST left as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from backproplab.course import assignment as course
from backproplab.course import handout

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))[:3]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    for lesson in LESSONS:
        shutil.copy(lesson, folder / lesson.name)
    return folder


def _cli(*args: object, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "backproplab", *map(str, args)],
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )


def _refused(done: subprocess.CompletedProcess, fragment: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and fragment in done.stderr, done.stderr


def test_one_lesson_onto_another_is_refused(src: Path):
    first, second = sorted(src.glob("*.ipynb"))[:2]
    before = _snapshot(src)
    _refused(_cli("release", first, second), "is a lesson with its solutions")
    _refused(_cli("release", "--force", first, second), "even with --force")
    assert _snapshot(src) == before


def test_an_edited_student_copy_is_kept_unless_forced(src: Path, tmp_path: Path):
    dest = tmp_path / "out"
    assert _cli("release", src, dest).returncode == 0
    copy = dest / LESSONS[1].name
    nb = nbformat.read(copy, as_version=4)
    nb.cells[0].source += "\n\nA student's note."
    nbformat.write(nb, copy)
    edited = copy.read_bytes()
    _refused(_cli("release", src, dest), "was edited after backproplab wrote it")
    assert copy.read_bytes() == edited
    assert _cli("release", "--force", src, dest).returncode == 0
    assert copy.read_bytes() != edited


def test_written_notebooks_are_readable_by_others(src: Path, tmp_path: Path):
    for command in ("release", "learn"):
        dest = tmp_path / command
        assert _cli(command, src, dest).returncode == 0
        modes = {p.stat().st_mode & 0o777 for p in dest.rglob("*.ipynb")}
        assert modes == {0o644}, (command, modes)


def test_a_file_that_is_not_a_student_version_is_kept_unless_forced(src: Path, tmp_path: Path):
    dest = tmp_path / "out"
    dest.mkdir()
    mine = dest / LESSONS[1].name
    mine.write_text("my notes")
    _refused(_cli("release", src, dest), "--force")
    assert mine.read_text() == "my notes" and sorted(p.name for p in dest.iterdir()) == [mine.name]
    done = _cli("release", "--force", src, dest)
    assert done.returncode == 0 and handout.is_student_version(mine)


def test_its_own_student_versions_are_replaced(src: Path, tmp_path: Path):
    dest = tmp_path / "out"
    assert _cli("release", src, dest).returncode == 0
    assert all(handout.is_student_version(p) for p in dest.glob("*.ipynb"))
    done = _cli("release", src, dest)
    assert done.returncode == 0 and done.stdout.count("released ") == len(LESSONS)


def test_a_folder_where_a_notebook_should_go_is_refused(src: Path, tmp_path: Path):
    dest = tmp_path / "out"
    (dest / LESSONS[0].name).mkdir(parents=True)
    _refused(_cli("release", "--force", src, dest), "is a folder")
    assert [p.name for p in dest.iterdir()] == [LESSONS[0].name]


def test_a_path_under_a_file_is_refused(src: Path, tmp_path: Path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    _refused(_cli("release", src, blocker / "sub"), "is a file, not a folder")
    assert blocker.read_text() == "x"


def test_a_failed_write_leaves_dest_untouched(src: Path, tmp_path: Path, monkeypatch):
    dest = tmp_path / "out"
    calls = []
    real = tempfile.mkstemp

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(dest / LESSONS[1].name))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", failing)
    with pytest.raises(course.CourseError, match="No space left on device"):
        handout.release(src, dest)
    assert not dest.exists()  # the folder it made is gone again, and nothing half-written

    dest.mkdir()
    (dest / "keep.txt").write_text("keep")
    calls.clear()
    with pytest.raises(course.CourseError):
        handout.release(src, dest)
    assert _snapshot(dest) == {"keep.txt": b"keep"}


def test_an_ascii_terminal_gets_every_notebook_and_no_traceback(src: Path, tmp_path: Path):
    shutil.move(src / LESSONS[0].name, src / f"00-é{LESSONS[0].name}")
    done = _cli("release", src, tmp_path / "out", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert len(list((tmp_path / "out").glob("*.ipynb"))) == len(LESSONS)


def test_a_bad_log_fails_before_anything_is_written(src: Path, tmp_path: Path):
    with pytest.raises(TypeError, match="log"):
        handout.release(src, tmp_path / "out", log=3)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [None, 3, ["notebooks"]])
def test_release_names_a_bad_path_argument(value, tmp_path: Path):
    with pytest.raises(TypeError, match="src"):
        handout.release(value, tmp_path / "out")
