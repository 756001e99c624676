"""The course API names what is wrong with its arguments instead of failing deep inside."""

from __future__ import annotations

import math

import nbformat
import pytest

from backproplab.course import assignment as course


def _grade_cell(points):
    cell = nbformat.v4.new_code_cell("assert True")
    cell.metadata["nbgrader"] = {"grade": True, "points": points, "grade_id": "l00-a",
                                 "schema_version": 3, "solution": False, "locked": True}
    nb = nbformat.v4.new_notebook()
    nb.cells.append(cell)
    return nb


@pytest.mark.parametrize("points", [math.nan, math.inf, -1, 0, "1", True, None])
def test_validate_rejects_points_that_are_not_finite_and_positive(points):
    assert any("finite points > 0" in p for p in course.validate(_grade_cell(points)))


def test_validate_reports_nbgrader_metadata_that_is_not_a_mapping():
    nb = _grade_cell(1)
    nb.cells[0].metadata["nbgrader"] = "solution"
    assert course.validate(nb) == ["cell 0: nbgrader metadata must be a mapping, got str"]


@pytest.mark.parametrize("bad", [None, "notebooks", 3, [1, 2]])
def test_notebook_arguments_are_checked(bad):
    with pytest.raises(TypeError, match="nb: expected a notebook"):
        course.validate(bad)
    with pytest.raises(TypeError, match="nb: expected a notebook"):
        course.student_version(bad)


def test_validate_course_wants_a_list_of_paths_not_one_string():
    with pytest.raises(TypeError, match="paths: expected a list of notebook paths"):
        course.validate_course("notebooks")


@pytest.mark.parametrize("lesson", ["(", "2a", 2, ""])
def test_validate_wants_the_lesson_number_as_digits(lesson):
    with pytest.raises(ValueError, match="lesson: expected the lesson number"):
        course.validate(_grade_cell(1), lesson=lesson)


def test_regions_checks_its_arguments():
    with pytest.raises(TypeError, match="source: expected"):
        course.regions(None, course.SOLUTION)
    with pytest.raises(ValueError, match="kind: expected"):
        course.regions("x", ("BEGIN", "END"))


@pytest.mark.parametrize("bad", [None, "## Next", 3])
def test_heading_level_wants_a_cell(bad):
    with pytest.raises(TypeError, match="cell: expected a notebook cell"):
        course.heading_level(bad)


@pytest.mark.parametrize("bad, arg", [(None, "cells"), ("cells", "cells"),
                                      ([nbformat.v4.new_markdown_cell("x"), 2], r"cells\[1\]")])
def test_after_reveal_folds_wants_a_list_of_cells(bad, arg):
    with pytest.raises(TypeError, match=arg + ": expected a notebook"):
        course.after_reveal_folds(bad)
