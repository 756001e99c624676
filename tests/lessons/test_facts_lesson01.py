"""Facts lesson 01 states, checked against its stored outputs and its learner copy.

A later edit of the lesson cannot bring back an old claim without failing here:
`.double()` and `.to()` copy only when something changes, a non-leaf gets a
`.grad` with `retain_grad()`, the linear-layer backward is not asked here, the
predictions are asked before anything answers them, and a learner's copy still
refuses the `backward()` shortcut in the saved-cos exercise.
"""

from __future__ import annotations

import copy
import json
import re

import nbformat
import pytest
from notebook_runner import NOTEBOOKS, error_of, grade_id, run

from backproplab import course

LESSON = NOTEBOOKS / "01-computational-graph.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _text(cell) -> str:
    return "".join(cell["source"])


def _printed(cell_id: str) -> str:
    return "".join("".join(o.get("text", "")) for o in BY_ID[cell_id]["outputs"]
                   if o["output_type"] == "stream")


def _markdown_before(solution_grade_id: str) -> str:
    at = next(i for i, c in enumerate(CELLS)
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == solution_grade_id)
    return "\n".join(_text(c) for c in CELLS[:at] if c["cell_type"] == "markdown")


def test_a_conversion_copies_only_when_the_dtype_or_device_changes():
    printed = _printed("k-3")
    assert "a.double(): is_leaf = False  grad_fn = ToCopyBackward0" in printed
    assert "a.to('cpu') is a: True" in printed
    assert "a.float() is a: True" in printed
    prose = "\n".join(_text(c) for c in CELLS if c["cell_type"] == "markdown")
    assert "`.double()` or `.to(device)` on a leaf gives a non-leaf copy" not in prose
    assert "only when the dtype or device changes" in prose


def test_retain_grad_gives_a_non_leaf_its_grad():
    assert "w_kept: is_leaf = False  grad = tensor([0.0100, 0.0100, 0.0100])" in _printed("l01-64")


def test_the_linear_layer_backward_is_not_an_exercise_here():
    solutions = [_text(c) for c in CELLS
                 if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert not any("weight_grad" in s for s in solutions)
    assert "l01-find-leaves" in {c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                                 for c in CELLS}


def test_predictions_are_asked_before_anything_answers_them():
    before_rows = _markdown_before("l01-predict-rows")
    assert not re.search(r"every row|rows? (are|is) (all )?the same|equals? .*dloss/dz",
                         before_rows, re.I)
    check = _text(BY_ID["l01-predict-rows-check"])
    assert check.strip() == 'bl.check_prediction("l01-predict-rows", rows_identical)'
    before_leaves = _markdown_before("l01-predict-leaves")
    assert "is_leaf=True" not in before_leaves and "a: is_leaf" not in before_leaves


def test_the_first_cells_describe_the_learner_copy():
    how = _text(BY_ID["l01-01"])
    for words in ("`# YOUR CODE HERE`", "Run All", "by design", "raises-exception",
                  "nbval-ignore-output", "Show a solution", course.HIDDEN_KEPT[2:]):
        assert words in how, words


SHORTCUTS = {
    # backward() inside the function: refused while the check runs it.
    "inside": ("def grad_from_saved(node):\n    y_cos.backward()\n    return x_cos.grad\n",
               "Tensor.backward()"),
    # backward() in the cell, its result returned: the message names the set-up cell to re-run.
    "outside": ("y_cos.backward()\n\n\ndef grad_from_saved(node):\n    return x_cos.grad\n",
                "re-run the set-up cell that makes x_cos and y_cos"),
}


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(SHORTCUTS))
def test_a_learner_copy_refuses_the_backward_shortcut(where: str):
    source, fragment = SHORTCUTS[where]
    learner, _ = course.learner_version(nbformat.read(LESSON, as_version=4), name=LESSON.name)
    learner = copy.deepcopy(learner)
    at = next(i for i, c in enumerate(learner.cells) if grade_id(c) == "l01-saved-cos")
    learner.cells[at].source = source
    check = next(c for c in learner.cells[at + 1:] if c.cell_type == "code")
    assert grade_id(check) == "l01-saved-cos-check"
    assert course.HIDDEN_KEPT in check.source  # the hidden re-check stays, visible
    run(learner)
    error = error_of(check)
    assert error is not None and error.ename == "AssertionError", error
    assert fragment in " ".join(error.evalue.split())
