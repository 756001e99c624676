"""Facts lesson 01 states, checked against its stored outputs.

A later edit of the lesson cannot bring back an old claim without failing here:
`.double()` and `.to()` copy only when something changes, `retain_grad` is left
to its home (lesson 15), the linear-layer backward is not asked here, the
predictions are asked before anything answers them, a graph keeps a constant
factor but not an added constant (what Exercise 2 reads back), and the lesson
says nothing about gradients that meet at a node adding up (lesson 02 teaches
that, and runs a whole backward pass by walking): its exercises only walk the
graph. What the checks say of a walk that misses the leaves holds too: a leaf's
node is named in full, and only leaves have no inputs in the formula graphs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from notebook_runner import NOTEBOOKS
from stored import markdown_before, printed

from backproplab.course import assignment as course

LESSON = NOTEBOOKS / "01-computational-graph.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _text(cell) -> str:
    return "".join(cell["source"])


def _printed(cell_id: str) -> str:
    return printed(BY_ID[cell_id])


def _markdown_before(solution_grade_id: str) -> str:
    return markdown_before(CELLS, solution_grade_id)


def test_a_conversion_copies_only_when_the_dtype_or_device_changes():
    printed = _printed("k-3")
    assert "a.double(): is_leaf = False  grad_fn = ToCopyBackward0" in printed
    assert "a.to('cpu') is a: True" in printed
    assert "a.float() is a: True" in printed
    prose = "\n".join(_text(c) for c in CELLS if c["cell_type"] == "markdown")
    assert "`.double()` or `.to(device)` on a leaf gives a non-leaf copy" not in prose
    assert "only when the dtype or device changes" in prose


def test_retain_grad_is_left_to_its_home():
    from backproplab.course.exercises import lesson01

    everything = json.dumps(CELLS) + Path(lesson01.__file__).read_text()
    assert "retain_grad" not in everything


def test_a_graph_keeps_a_constant_factor_but_not_an_added_constant():
    """What Exercise 2's statement, solution and recap say, on the locked torch."""
    import torch

    p = torch.tensor(0.5, requires_grad=True)
    left, right = torch.tensor(2.5) * p, p * 2.5
    assert [fn is None for fn, _ in left.grad_fn.next_functions] == [True, False]
    assert left.grad_fn._saved_self.item() == 2.5 and left.grad_fn._saved_other is None
    assert right.grad_fn._saved_other.item() == 2.5 and right.grad_fn._saved_self is None
    added = p - 1
    assert [a for a in dir(added.grad_fn) if a.startswith("_saved_")] == ["_saved_alpha"]
    assert (p**3).grad_fn._saved_exponent == 3
    recap = _text(BY_ID["l01-53"])
    assert "a constant factor is\n  kept" in recap and "an added constant is not" in recap


def test_a_leaf_node_is_named_in_full():
    """What Exercise 1's check says when a walk finds no leaf, and what the cell above the
    exercise prints: name() of a leaf's node is not the bare class name."""
    import torch

    node = (torch.ones(1, requires_grad=True) * 2).grad_fn.next_functions[0][0]
    assert node.name() == "torch::autograd::AccumulateGrad"
    assert type(node).__name__ == "AccumulateGrad" and hasattr(node, "variable")
    assert "'torch::autograd::AccumulateGrad'" in _printed("l01-70")


def test_only_leaves_have_no_inputs_in_the_formula_graphs():
    """What Exercise 2's check says when a walk unpacks an empty next_functions."""
    import torch

    from backproplab.course.exercises.lesson01 import formula

    for seed in range(20):
        for probe in formula.make_inputs(torch.Generator().manual_seed(seed))["probes"]:
            leaves = {n: torch.tensor(v, dtype=torch.float64).requires_grad_()
                      for n, v in probe["values"].items()}
            todo = [formula.build(probe["tree"], leaves).grad_fn]
            while todo:
                node = todo.pop()
                assert bool(node.next_functions) != hasattr(node, "variable"), probe["tree"]
                todo += [fn for fn, _ in node.next_functions if fn is not None]


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


def test_paths_adding_up_is_left_to_the_chain_rule_lesson():
    from backproplab.course.exercises import lesson01

    code_and_prose = "\n".join(_text(c) for c in CELLS)
    outputs = "\n".join(_printed(c["id"]) for c in CELLS if c["cell_type"] == "code")
    module = Path(lesson01.__file__).read_text()
    for text in (code_and_prose, outputs, module):
        assert not re.search(r"\badds? up\b|\bsummed\b|contributions|\+=", text, re.I)
    prose = "\n".join(_text(c) for c in CELLS if c["cell_type"] == "markdown")
    assert not re.search(r"along (?:more than one|two|several) (?:paths|edges)", prose, re.I)
    assert set(lesson01.EXERCISES) == {"l01-find-leaves", "l01-formula"}
    graded = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in CELLS}
    assert not any(g and "backward" in g for g in graded)


def test_a_formula_may_use_methods_and_torch_names_for_the_operators():
    """``(p - q).sin()`` and ``torch.subtract(v, p)`` are Python that computes the same as
    ``torch.sin(p - q)`` and ``v - p``; a method or a name outside the list is refused as
    Python would refuse it, and nothing is run as code."""
    from backproplab.course.exercises.lesson01 import value

    at = {"p": 0.7, "q": -1.2, "v": 2.5}
    same = [("torch.sin(p - q) * 0.5", "(p - q).sin() * 0.5"),
            ("v - p", "torch.subtract(v, p)"), ("v * p", "torch.multiply(v, p)"),
            ("torch.exp(v) + p ** 2", "v.exp() + p.pow(2)"),
            ("2 * torch.sin(v - p)", "(v - p).sin().mul(2)")]
    for plain, other in same:
        assert value(other, at) == value(plain, at), other
    for text, error in (("v.__class__()", AttributeError), ("(v).system()", AttributeError),
                        ("os.system(v)", NameError), ("v.", SyntaxError)):
        with pytest.raises(error):
            value(text, at)
