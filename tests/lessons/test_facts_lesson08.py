"""Lesson 08's facts, read from its stored outputs, so that an edit of
the prose or the code cannot bring back a claim the lesson no longer computes."""

from __future__ import annotations

import json
from pathlib import Path

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
PART1 = NOTEBOOKS / "08-non-scalar-backward.ipynb"


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _output(path: Path, cell_id: str) -> str:
    """Everything a code cell printed or displayed as text, joined."""
    cell = next(c for c in _cells(path) if c.get("id") == cell_id)
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
        parts.append(out.get("evalue", ""))
    return " ".join(" ".join(parts).split())


def _markdown(path: Path) -> str:
    return " ".join(" ".join(_source(c) for c in _cells(path)
                             if c["cell_type"] == "markdown").split())


def _printed_by(path: Path, code_fragment: str) -> str:
    cell = next(c for c in _cells(path) if c["cell_type"] == "code"
                and code_fragment in _source(c))
    return _output(path, cell["id"])


def test_backward_on_a_vector_needs_a_gradient():
    assert "grad can be implicitly created only for scalar outputs" in _output(PART1, "l08-05")


def test_backward_with_v_is_v_times_the_jacobian():
    printed = _output(PART1, "l08-17")
    assert "x.grad = tensor([202., 11., 30.])" in printed
    assert "v @ J = tensor([202., 11., 30.])" in printed


def test_the_gradient_argument_is_a_fixed_weight():
    """Ones give 4 and 2; out's own numbers, detached, give 16 and 2: the gradient of
    (v * out).sum() with v held fixed, half that of (out ** 2).sum()."""
    first, weighted = (_output(PART1, i) for i in ("l08-29", "l08-31"))
    assert first.startswith("tensor([[4., 2., 2., 2., 2.], [2., 4.,")
    assert weighted.startswith("tensor([[16., 2., 2., 2., 2.], [ 2., 16.,")
    assert "inp.grad = None" in _source(next(c for c in _cells(PART1) if c.get("id") == "l08-31"))
    assert "the answer is (16.0, 2.0)" in _output(PART1, "l08-predict-weights-reveal")
    assert "exact match" in _output(PART1, "l08-33")
    # A second backward adding up is lesson 05's prediction: here neither asked nor shown.
    ids = [c.get("id") for c in _cells(PART1)]
    assert "l08-predict-second-call" not in ids and "l08-35" not in ids
    assert not any("zero_()" in _source(c) for c in _cells(PART1)
                   if c["cell_type"] == "code" and "BEGIN SOLUTION" not in _source(c))
    assert "a second call adds up to 8 and 4" not in _markdown(PART1)


def test_the_prediction_question_gives_nothing_away():
    question = _source(next(c for c in _cells(PART1) if c.get("id") == "l08-30"))
    assert "16" not in question and "(v * out)" not in question
    check = _source(next(c for c in _cells(PART1)
                         if c.get("id") == "l08-predict-weights-check"))
    assert check == 'bl.check_prediction("l08-predict-weights", weights_guess)'


def test_the_banded_jacobian_is_three_wide_and_built_in_three_passes():
    """The exercise's function: every output reads its two neighbours and itself, so its
    Jacobian has three diagonals; the check counts three backward calls."""
    import torch

    cell = next(c for c in _cells(PART1) if c.get("id") == "l08-45")
    space: dict = {"torch": torch}
    source = _source(cell).split("\n\n\nx_line")[0]
    exec(source, space)  # the ripple function alone
    for n in (4, 8, 11):
        x = torch.linspace(-1.0, 1.0, n)
        J = torch.autograd.functional.jacobian(space["ripple"], x)
        offsets = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        assert (J[offsets > 1] == 0).all() and (J[offsets <= 1] != 0).all()
    assert "three backward calls, and the right Jacobian" in _output(
        PART1, "l08-band-jacobian-check")
