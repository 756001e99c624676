"""Lesson 04's fixed facts, read from the stored notebook: the learning-rate slider comes only
after the divergence prediction is revealed (it used to come first, showing the answer), the
stored numbers behind the predictions and the threshold, and the lesson stays with the two
numbers w and b: no matrix rules (they come after it), its transfer exercise a Huber loss."""

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


def test_the_slider_comes_after_the_reveal(nb):
    widget = _index(nb, "bl.widgets.lr_explorer(")
    assert widget > _index(nb, 'bl.reveal("l04-predict-lr")')
    assert widget > _index(nb, 'bl.check_prediction("l04-predict-lr"')
    before = " ".join(c.source for c in nb.cells[:_index(nb, 'bl.reveal("l04-predict-lr")')])
    assert "slider" not in before.lower()


def test_the_numbers_behind_the_predictions(nb):
    step = _text(nb.cells[_index(nb, "w -= lr * w.grad\n    b -= lr * b.grad\nprint")])
    assert "w = 1.4980, b = 0.2261" in step  # 1.50 and 0.23, as the prediction expects
    runs = _text(nb.cells[_index(nb, "for rate in (0.02, 0.03, 0.05)")])
    assert re.search(r"lr = 0\.03: final loss [\d.]+e\+0[5-9]", runs)  # it grew
    threshold = _text(nb.cells[_index(nb, "largest stable lr: {2 / curvature.max()")])
    assert "largest stable lr: 0.0278" in threshold


def test_scalar_w_and_b_only(nb):
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert "l04-linear" not in ids and "l04-huber" in ids
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
