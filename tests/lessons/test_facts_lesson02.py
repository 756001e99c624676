"""Facts lesson 02 states, checked against its stored outputs and its learner copy.

The text about the traced graph matches its figure (saved tensors are listed as
the pass found them, and shown freed only by a description made afterwards),
no cell before a prediction answers it, the rule exercise names the very
nodes its check builds graphs from and points to this lesson's sections for
the rules it shows, and a learner's copy still refuses calling the node and
the `backward()` shortcut in that exercise.
"""

from __future__ import annotations

import json

import nbformat
import pytest
import rounds
from notebook_runner import NOTEBOOKS, grade_id
from stored import markdown_before, printed

from backproplab.course import assignment as course
from backproplab.course.exercises import lesson02

LESSON = NOTEBOOKS / "02-chain-rule.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _text(cell) -> str:
    return "".join(cell["source"])


def _printed(cell_id: str) -> str:
    return printed(BY_ID[cell_id])


def _markdown_before(solution_grade_id: str) -> str:
    return markdown_before(CELLS, solution_grade_id)


def test_the_figure_text_says_what_the_figure_shows():
    figure_text = _text(BY_ID["l02-18"])
    assert "freed" not in figure_text  # the drawing lists the saved tensors as the pass began
    after = _printed("l02-44")
    assert after.count("(freed)") == 3  # self of PowBackward0; self and other of MulBackward0


def test_paths_are_not_said_to_add_up_before_the_question():
    before = _markdown_before("l02-predict-paths").lower()
    assert "add up" not in before and "summed" not in before and "1 + 1" not in before


def test_exactness_is_not_said_before_its_question():
    before = _markdown_before("l02-predict-match")
    assert "Exact:" not in before and "Exact," not in before


def test_tanh_prime_is_derived_here_and_its_node_keeps_the_output():
    derivation = _text(BY_ID["l02-46"])
    assert r"1 - \tanh^2(u)" in derivation and "quotient rule" in derivation
    printed = _printed("l02-47")
    assert "TanhBackward0  saved: result" in printed
    rows = [line.split(":", 1)[1].strip() for line in printed.splitlines()
            if line.startswith(("autograd:", "1 - tanh(u)^2:"))]
    assert len(rows) == 2 and rows[0] == rows[1]  # autograd's gradient is 1 - tanh^2


def test_the_slow_intercept_is_left_to_its_own_lesson():
    prose = "\n".join(_text(c) for c in CELLS if c["cell_type"] == "markdown")
    assert "intercept" not in prose


def test_the_shared_result_exercise_is_a_product_of_two_paths():
    slips = lesson02.EXERCISES["l02-shared"].mistakes
    for words in ("only the sine's path", "only the subtraction's path", "product rule",
                  "sign of df/dz"):
        assert any(words in slip for slip in slips), words
    assert "f = (u - z)" in _text(BY_ID["m-10"])


def _task_of(solution_grade_id: str) -> str:
    at = next(i for i, c in enumerate(CELLS)
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == solution_grade_id)
    return next(_text(c) for c in reversed(CELLS[:at]) if c["cell_type"] == "markdown")


def test_the_rule_exercise_is_the_last_and_names_the_nodes_its_check_uses():
    graded = [c["metadata"]["nbgrader"]["grade_id"] for c in CELLS
              if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert graded[-1] == "l02-rule"
    task = _task_of("l02-rule")
    for name in lesson02.rule.OPS:
        assert f"`{name}`" in task, name
    # it builds on this lesson and lesson 01: pointers, not a second derivation
    assert "Lesson 01 showed" in task and "Section 4" in task
    assert "(section 7)" in task and "section 8's rule" in task
    # one node's part only: the order of the pass and the counting are not asked for here
    assert "count" not in task.lower() and "topological" not in task
    example = next(c for c in CELLS if "out_ex = " in _text(c))
    shown = _printed(example["id"])  # the example graph has every kind of node, with what it saved
    for name in lesson02.rule.OPS:
        assert name in shown, name
    for name in ("ExpBackward0", "SqrtBackward0", "TanhBackward0"):
        assert f"{name}  saved: result" in shown, name
    assert "SinBackward0  saved: self" in shown and "DivBackward0  saved: other" in shown


SHORTCUTS = {
    # The node called like a function: torch's own formula, noticed by the profiler.
    "call": ("def node_rule(node, grad):\n    return list(node(grad))\n",
             "called a node itself"),
    # A node that kept its output: backward through that output runs the node.
    "backward": ("def node_rule(node, grad):\n"
                 "    leaves = [fn.variable for fn, _ in node.next_functions]\n"
                 "    node._saved_result.backward(grad)\n"
                 "    return [leaf.grad for leaf in leaves]\n", "Tensor.backward()"),
}


@pytest.fixture(scope="module")
def learner_run(tmp_path_factory) -> tuple[nbformat.NotebookNode, rounds.LessonRun]:
    """A learner's copy of the lesson, executed once with each shortcut put through the
    rule exercise's check in turn, in the kernel the cells above it left
    (tests/rounds.py); the copy, and what the run found."""
    learner, _ = course.learner_version(nbformat.read(LESSON, as_version=4), name=LESSON.name)
    path = tmp_path_factory.mktemp("learner") / LESSON.name
    nbformat.write(learner, path)
    variants = [rounds.Variant("cheat", n, source, fragment)
                for n, (source, fragment) in enumerate(SHORTCUTS.values(), 1)]
    return learner, rounds.play(path, {"l02-rule": variants})


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(SHORTCUTS))
def test_a_learner_copy_refuses_the_rule_shortcut(where: str, learner_run):
    source, fragment = SHORTCUTS[where]
    learner, played = learner_run
    at = next(i for i, c in enumerate(learner.cells) if grade_id(c) == "l02-rule")
    check = next(c for c in learner.cells[at + 1:] if c.cell_type == "code")
    assert grade_id(check) == "l02-rule-check"
    assert course.HIDDEN_KEPT in check.source  # the hidden re-check stays, visible
    (outcome,) = [o for o in played.outcomes if o.variant.source == source]
    error = outcome.check_error
    assert error is not None and error.ename == "AssertionError", error
    assert fragment in " ".join(error.evalue.split())
