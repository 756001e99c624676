"""Lesson 07's facts, read from the stored outputs, so that an edit cannot bring back the old
claims: retain_graph=True does not protect a saved tensor changed in place, and the memory
measurements live in lesson 12, not here."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "07-retain-graph.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def test_the_memory_measurements_live_in_lesson_12(cells):
    """Saved memory against batch size is measured in lesson 12; 07 keeps no table of its own."""
    for cell in cells.values():
        assert "saved_memory" not in cell.source and "Adam state" not in cell.source
        if cell.cell_type == "markdown":
            assert "most of the memory a training step uses" not in cell.source


def test_retain_graph_does_not_protect_against_in_place_changes(cells):
    setup = _text(cells["l07-41"])
    assert "w._version = 0" in setup and "w._version = 1" in setup
    assert "raises-exception" in cells["l07-43"].metadata.get("tags", [])
    error = _text(cells["l07-43"])
    assert "RuntimeError" in error and "modified by an inplace operation" in error
    assert "is at version 1; expected version 0" in error
    assert "retain_graph=True" in cells["l07-41"].source


def test_the_two_pass_step_leaves_what_one_pass_gives(cells):
    """The exercise's two-pass step on section 4's y = x**2, z = y * x at x = 2: main's
    gradient 4 divided by main's value 4, plus z's 12."""
    assert "two passes: x.grad = tensor(13.)" in _text(cells["l07-45"])
    x = torch.tensor(2.0, requires_grad=True)
    y = x**2
    (y / y.item() + y * x).backward()
    assert x.grad.item() == 13.0
    solution = cells["l07-one-backward"].source
    assert solution.count(".backward(") == 1 and "retain_graph" not in solution


def test_the_two_player_step_is_stopped_by_the_version_counter(cells):
    """Exercise 3's broken step: A's in-place step before loss_b's backward raises, the
    version error of section 3, not the freed-graph error of section 1."""
    assert "raises-exception" in cells["l07-47"].metadata.get("tags", [])
    error = _text(cells["l07-47"])
    assert "modified by an inplace operation" in error
    assert "is at version 1; expected version 0" in error
    assert "second time" not in error
