"""Every lesson has the shape the course promises (see README, Lessons)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

LESSONS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))


@pytest.fixture(params=LESSONS, ids=lambda p: p.name)
def lesson(request) -> nbformat.NotebookNode:
    return nbformat.read(request.param, as_version=4)


def _markdown(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def test_opens_with_a_title_and_a_short_aim(lesson):
    first = _markdown(lesson)[0]
    assert first.startswith("# ") and "**Aim.**" in first
    aim = first.split("**Aim.**", 1)[1].strip()
    assert 1 <= aim.count(". ") + 1 <= 4, "the aim is two or three sentences"


def test_has_a_predict_then_run_moment(lesson):
    assert any("Predict, then run" in m for m in _markdown(lesson))


def test_has_a_picture(lesson):
    images = [
        o for c in lesson.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert images, "a lesson shows at least one figure"


def test_ends_with_a_recap_after_the_exercises(lesson):
    headings = [m for m in _markdown(lesson) if m.lstrip().startswith("#")]
    assert headings[-1].lstrip().startswith("## Recap")
    recap_at = next(i for i, c in enumerate(lesson.cells) if c.source.startswith("## Recap"))
    graded = [i for i, c in enumerate(lesson.cells) if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and max(graded) < recap_at


MAX_CELLS = 90


def test_is_short_enough_to_keep_its_force(lesson):
    """A lesson past 90 cells is two lessons, or one with steps too small to teach."""
    assert len(lesson.cells) <= MAX_CELLS, f"{len(lesson.cells)} cells"
