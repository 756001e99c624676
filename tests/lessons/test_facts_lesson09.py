"""Lesson 09's facts, read from its stored outputs, so that an edit of the prose or the code
cannot bring back a claim the lesson no longer computes."""

from __future__ import annotations

from pathlib import Path

import pytest
from lessons.test_facts_lesson08 import _cells, _markdown, _output, _printed_by, _source

LESSON = Path(__file__).parents[2] / "notebooks" / "09-tensor-op-vjps.ipynb"


def test_every_rule_agrees_with_autograd_except_the_slips_shown():
    """Each ✗ printed by a rule cell is one of the lesson's deliberate slips."""
    slips = {
        "✗ dX = G @ W (W not transposed): shape (3, 3) is right",
        "✗ da = (G * c).sum(1): shape (3,), but the gradient's shape is (3, 1)",
        "✗ dx[idx] = G: shape (5, 2) is right",
        "✗ permute: dx = G.permute(perm): shape (3, 4, 2), but the gradient's shape is (2, 3, 4)",
    }
    lines = [" ".join(line.split()) for cell in _cells(LESSON)
             if cell["cell_type"] == "code" and "agree(" in _source(cell)
             for out in cell["outputs"] for line in "".join(out.get("text", "")).splitlines()]
    crosses = {line.split(", values differ")[0] for line in lines if line.startswith("✗")}
    assert crosses == slips
    ticks = sum(_output(LESSON, c["id"]).count("✓") for c in _cells(LESSON)
                if c["cell_type"] == "code" and "agree(" in _source(c))
    assert ticks >= 30


def test_matmul_rule_on_random_shapes():
    printed = _printed_by(LESSON, "N, D, M = sizes(3)")
    assert printed.count("✓ dX for X") == 3 and printed.count("✓ dW for X") == 3


def test_no_custom_function():
    """Custom Functions are lesson 19's: this lesson neither writes one nor sets one as work."""
    assert not [c for c in _cells(LESSON) if "autograd.Function" in _source(c)]


def test_a_missing_sum_turns_the_bias_into_a_matrix():
    assert "the bias now has shape (4, 3)" in _printed_by(LESSON, "b = b - 0.1 * G")
    assert "turned a (3,) bias into (4, 3)" in _markdown(LESSON)


def test_max_with_ties():
    printed = _printed_by(LESSON, '("x.max()", lambda t: t.max())')
    assert "x.max() x.grad = [0.0, 0.5, 0.5, 0.0]" in printed
    assert "x.amax(dim=0) x.grad = [0.0, 0.5, 0.5, 0.0]" in printed
    assert "x.max(dim=0).values x.grad = [0.0, 1.0, 0.0, 0.0]" in printed
    assert "x.max(dim=0).indices = 1" in printed
    assert "the answer is [0.0, 0.5, 0.5, 0.0]" in _output(LESSON, "l09-predict-max-ties-reveal")
    recap = _markdown(LESSON).split("## Recap", 1)[1]
    assert "`max(dim=0)` sends it all to index 1" in recap


def test_repeated_indices_add_up():
    printed = _printed_by(LESSON, "dx_assigned[idx] = G")
    assert "= G[0] + G[2]" in printed and "alone" in printed


def test_softmax_jacobian_sizes_in_text_and_recap():
    printed = _printed_by(LESSON, "B, T, C = 32, 128, 50257")
    assert "1.03e+13 Jacobian entries, 41 TB in float32" in printed
    assert "2.06e+08 entries in g" in printed
    assert "1.03e+13 entries (41 TB in float32)" in _markdown(LESSON)


@pytest.mark.parametrize("anchor", ["rule-method", "rule-batched-matmul", "rule-broadcast",
                                    "rule-reduction", "rule-index", "rule-reshape",
                                    "rule-softmax"])
def test_each_rule_has_an_anchor_that_later_lessons_link_to(anchor):
    text = _markdown(LESSON)
    assert f'<a id="{anchor}"></a>' in text and f"(#{anchor})" in text
