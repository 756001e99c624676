"""Lesson 07's facts, read from the stored outputs, so that an edit cannot bring back the old
claims: retain_graph=True does not protect a saved tensor changed in place, and the memory
measurements live in lesson 16, not here."""

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
    """Saved memory against batch size is measured in lesson 16; 07 keeps no table of its own."""
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


def test_a_second_backward_raises_only_through_a_node_that_saved_tensors(cells):
    """Section 1, the idea's one home: the sum of t + 1 saved nothing and runs twice (its
    .grad adding up); t * 2 saved the 2 and raises."""
    printed = _text(cells["l07-53"])
    assert "(t + 1).sum(): the second backward ran, t.grad = tensor([2., 2.])" in printed
    assert "(t * 2).sum(): Trying to backward through the graph a second time" in printed


def test_the_version_counter_guards_only_what_a_node_saved(cells):
    """Lesson 07 is the version counter's home: a saved output changed in place trips it,
    a tensor no node saved does not."""
    printed = " ".join(_text(cells["l07-55"]).split())
    assert "x + 1 then mul_: backward ran, x.grad = tensor([2., 2.])" in printed
    assert "x.tanh() then mul_: one of the variables needed for gradient computation has " \
           "been modified by an inplace operation" in printed
    assert "version counter" in cells["l07-44"].source


def test_the_engine_exercise_gives_the_engine_the_check_builds():
    """Exercise 3's two engine cells are the check's own copy, word for word, and its
    solution passes on the visible and the hidden seed; no prediction of lesson 07 asks
    whether a second backward adds (lesson 05's question)."""
    from backproplab.course.exercises import lesson07
    from backproplab.course.exercises.lesson07.engine import ENGINE_SOURCE

    nb = {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}
    assert nb["l07-50"].source + "\n\n\n" + nb["l07-51"].source == ENGINE_SOURCE.rstrip()
    printed = " ".join(_text(nb["l07-engine-frees-check"]).split())
    assert printed.count("runs where torch runs and raises where torch raises") == 2
    assert "l07-two-derivatives" not in nb and "l07-two-derivatives" not in lesson07.EXERCISES
    for key, prediction in lesson07.PREDICTIONS.items():
        assert "adds" not in prediction.question and "accumulat" not in prediction.why, key
