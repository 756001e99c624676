"""`backproplab learn`: learner copies with blank exercises and solutions one click away."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from backproplab.course import assignment as course
from backproplab.course import handout

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "notebooks" / "02-chain-rule.ipynb"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "lessons"
    folder.mkdir()
    shutil.copy(LESSON, folder / LESSON.name)
    return folder


def _cells_after_solutions(book):
    for i, cell in enumerate(book.cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            yield cell, book.cells[i + 1]


def test_copies_have_blanks_and_collapsed_solutions(src: Path, tmp_path: Path):
    (written,) = handout.learn(src, tmp_path / "mine")
    book = nbformat.read(written, as_version=4)
    original = nbformat.read(LESSON, as_version=4)
    solutions = [c for c in original.cells if c.metadata.get("nbgrader", {}).get("solution")]
    pairs = list(_cells_after_solutions(book))
    assert len(pairs) == len(solutions) >= 3
    for (blank, reveal), full in zip(pairs, solutions, strict=True):
        if "predict" in full.metadata["nbgrader"]["grade_id"]:
            # A guess is left blank, and its answer waits for the reveal cell.
            assert "= ...  # your guess" in blank.source and "BEGIN" not in blank.source
            assert "Show a solution" not in reveal.source
            continue
        assert "raise NotImplementedError()" in blank.source
        assert "BEGIN SOLUTION" not in blank.source
        assert reveal.cell_type == "markdown"
        assert reveal.source.startswith("<details><summary>Show a solution</summary>")
        body = [line for line in full.source.splitlines() if "SOLUTION" not in line]
        assert all(line in reveal.source for line in body)
        assert "BEGIN SOLUTION" not in reveal.source  # nbgrader would read it as a marker
    text = written.read_text()
    assert "HIDDEN TESTS" not in text and all(
        not c.get("outputs") for c in book.cells if c.cell_type == "code")
    nbformat.validate(book)


def test_running_it_again_keeps_the_learners_work(src: Path, tmp_path: Path, capsys):
    dest = tmp_path / "mine"
    handout.learn(src, dest)
    mine = dest / LESSON.name
    mine.write_text(mine.read_text().replace("aa_guess = ...", "aa_guess = 3.0", 1))
    before = mine.read_bytes()
    shutil.copy(ROOT / "notebooks" / "05-gradient-accumulation.ipynb", src)
    written = handout.learn(src, dest, log=print)
    assert [p.name for p in written] == ["05-gradient-accumulation.ipynb"]
    assert mine.read_bytes() == before
    out = capsys.readouterr().out
    assert "added 05-gradient-accumulation.ipynb" in out and f"kept your {LESSON.name}" in out


def test_refuses_a_destination_inside_the_lessons(src: Path):
    with pytest.raises(course.CourseError, match="inside"):
        handout.learn(src, src / "mine")


def test_the_command_line(src: Path, tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "backproplab", "learn", str(src), str(tmp_path / "mine")],
        capture_output=True, text=True,
    )
    assert done.returncode == 0 and done.stdout.startswith("added 02-chain-rule.ipynb")
    again = subprocess.run(
        [sys.executable, "-m", "backproplab", "learn", str(src), str(tmp_path / "mine")],
        capture_output=True, text=True,
    )
    assert again.returncode == 0 and again.stdout.startswith("kept your 02-chain-rule.ipynb")
