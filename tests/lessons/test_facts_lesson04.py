"""Lesson 04's fixed facts, read from the stored notebook: the worked gradients of the squared
error are backward's numbers, the optimisation material (the largest stable rate, centring)
is a paragraph whose numbers hold, the stored number behind the prediction, and the lesson
stays with scalar parameters: no matrix rules (they come after it), its transfer exercises a
Gaussian likelihood with a learned spread and a Huber loss, whose forward passes are torch's."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "04-linear-regression.ipynb"


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(LESSON, as_version=4)




def _index(nb, source_fragment: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if source_fragment in c.source)


def test_the_optimisation_material_is_a_paragraph(nb):
    """No curvature analysis, no centring experiment, no prediction on the rate: the divergence
    is shown (0.03's loss grows) and the limit the prose quotes, about 0.028, holds."""
    import torch

    import backproplab as bl

    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert "l04-predict-lr" not in ids
    code = " ".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "eigvalsh" not in code and "xc = x - x.mean()" not in code
    assert "bl.widgets.lr_explorer(" in code
    runs = _text(nb.cells[_index(nb, "for rate in (0.02, 0.03, 0.05)")])
    assert re.search(r"lr = 0\.03: final loss [\d.]+e\+0[5-9]", runs)  # it grew
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "about 0.028" in prose
    x, y = bl.data.linear_data()
    X = torch.cat([x, torch.ones_like(x)], dim=1)
    largest = float(torch.linalg.eigvalsh(2 * X.T @ X / len(X)).max())
    assert round(2 / largest, 3) == 0.028


def test_the_numbers_behind_the_prediction(nb):
    step = _text(nb.cells[_index(nb, "w -= lr * w.grad\n    b -= lr * b.grad\nprint")])
    assert "w = 1.4980, b = 0.2261" in step  # 1.50 and 0.23, as the prediction expects


def test_the_worked_gradients_are_backwards(nb):
    out = _text(nb.cells[_index(nb, "print(f\"mean(2 r x) = ")])
    found = re.findall(r"= (-?[\d.]+)\s+\((?:w|b)\.grad = (-?[\d.]+)\)", out)
    assert len(found) == 2 and all(a == b for a, b in found)


def test_scalar_w_and_b_only(nb):
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert "l04-linear" not in ids and {"l04-grads", "l04-huber"} <= set(ids)
    text = " ".join(c.source for c in nb.cells)
    assert "lesson 08" not in text and "dL/dweight" not in text  # no linear-layer backward


def test_the_huber_forward_is_torchs(nb):
    """The worked cell computes the loss from its two pieces; both numbers agree, and some
    points lie beyond delta (so the exercise's two pieces both matter on the lesson's data)."""
    out = _text(nb.cells[_index(nb, "nn.functional.huber_loss(fitted, y, delta=delta)")])
    found = re.search(r"torch ([\d.]+), from the pieces ([\d.]+)", out)
    assert found and found[1] == found[2]
    beyond = re.search(r"beyond delta = 1.0: (\d+) of 100", out)
    assert beyond and 0 < int(beyond[1]) < 100


def test_the_gaussian_nll_forward_is_torchs(nb):
    """The worked cell computes the loss of Exercise 1 from its formula; torch agrees."""
    out = _text(nb.cells[_index(nb, "nn.functional.gaussian_nll_loss(fitted, y")])
    found = re.search(r"torch ([\d.]+), from the formula ([\d.]+)", out)
    assert found and found[1] == found[2]
