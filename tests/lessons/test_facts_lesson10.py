"""Lesson 10's corrected facts, read from the stored outputs, so that an edit cannot bring
back the old claim that std 0.01 "starves every layer, whatever the activation": with the
sigmoid the last hidden layer's gradient matches Xavier's while the first layer's is ~1e-17,
and the activations stay at 0.5 (what shrinks is their spread and the backward signal)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "10-mlp-training.ipynb"
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}




def _init_table(cells) -> dict[tuple[str, str], tuple[float, float]]:
    """(activation, init) -> (first layer, last hidden) mean |weight grad|, as printed."""
    rows = {}
    for line in _text(cells["l10-38"]).splitlines():
        found = re.match(rf"\s*(Sigmoid|Tanh|ReLU)\s+(std 0\.01|Xavier|Kaiming)\s+({NUMBER})"
                         rf"\s+({NUMBER})\s*$", line)
        if found:
            rows[(found[1], found[2])] = (float(found[3]), float(found[4]))
    return rows


def test_the_table_has_every_activation_and_init(cells):
    assert len(_init_table(cells)) == 9


def test_std_001_spares_the_sigmoids_last_layer(cells):
    table = _init_table(cells)
    first, last = table[("Sigmoid", "std 0.01")]
    xavier_last = table[("Sigmoid", "Xavier")][1]
    assert last == pytest.approx(2.0e-02, rel=0.05)
    assert xavier_last == pytest.approx(2.3e-02, rel=0.05)
    assert xavier_last / 2 < last < xavier_last * 2  # the same size as Xavier's
    assert first < 1e-15  # about 1e-17: the first layer gets nothing
    # The prose and the recap quote these numbers.
    for cid in ("l10-40", "l10-44"):
        prose = cells[cid].source
        assert "2.0e-02" in prose and "2.3e-02" in prose, cid
    assert "2.9e-17" in cells["l10-40"].source and f"{first:.1e}" == "2.9e-17"


def test_std_001_starves_tanh_and_relu_everywhere(cells):
    table = _init_table(cells)
    for activation in ("Tanh", "ReLU"):
        first, last = table[(activation, "std 0.01")]
        assert first < 1e-10 and last < 1e-10, activation


def test_the_old_claim_is_gone(cells):
    text = " ".join(c.source for c in cells.values() if c.cell_type == "markdown")
    assert "starves every layer" not in text.replace("does not starve every layer", "")
    assert "whatever the activation" not in text


def test_sigmoid_outputs_stay_at_half_while_spread_and_signal_shrink(cells):
    rows = []
    for line in _text(cells["l10-53"]).splitlines():
        found = re.match(rf"\s*(\d)\s+({NUMBER})\s+({NUMBER}|below 1e-12)\s+({NUMBER})\s*$",
                         line)
        if found:
            spread = 0.0 if found[3] == "below 1e-12" else float(found[3])
            rows.append((int(found[1]), float(found[2]), spread, float(found[4])))
    assert [r[0] for r in rows] == list(range(1, 9))
    assert all(r[1] == 0.5 for r in rows)  # the activations stay at sigmoid(0)
    spreads = [r[2] for r in rows]
    signals = [r[3] for r in rows]
    assert spreads[0] < 1e-2
    assert all(b < a / 10 or b == 0 for a, b in zip(spreads, spreads[1:], strict=False))
    # The backward signal grows towards the output: ~100x per layer.
    assert all(b > 10 * a for a, b in zip(signals, signals[1:], strict=False))
    text = _text(cells["l10-53"])
    assert re.search(r"last hidden layer's weight gradient: std 0\.01 2\.0e-02, Xavier 2\.3e-02",
                     text)
    assert re.search(r"first layer's weight gradient:\s+std 0\.01 2\.9e-17", text)


def test_the_prediction_asks_the_corrected_fact(cells):
    assert "bl.check_prediction(\"l10-predict-std\"" in cells["l10-predict-std-check"].source
    assert "sigmoid_last_10x_smaller = False" in cells["l10-predict-std"].source


def test_the_legend_sits_beside_the_bars(cells):
    assert "bbox_to_anchor=(1.01, 1)" in cells["l10-39"].source
    assert "bbox_to_anchor=(1.01, 1)" in cells["l10-13"].source


def test_one_linear_layer_exercise_and_the_bce_gradient_is_derived(cells):
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in cells.values()}
    assert "l10-hidden" not in ids  # the linear-layer backward is asked in lesson 04 only
    assert "l10-bce" in ids
    worked = " ".join(c.source for c in cells.values()
                      if c.cell_type == "code" and not c.metadata.get("nbgrader"))
    assert "torch.sigmoid(z) - ys" not in worked  # Part 2 no longer hands out dL/dz


def test_the_networks_backward_is_the_learners_to_write(cells):
    """Part 2 shows the forward pass and the loss only; the backward is Exercise 3 (no worked
    cell computes a weight gradient by hand), and the linear layer's rule and tanh' point back
    to their homes."""
    assert cells["l10-mlp"].metadata["nbgrader"]["solution"]
    worked = " ".join(c.source for c in cells.values()
                      if c.cell_type == "code" and "nbgrader" not in c.metadata)
    assert ".T @" not in worked and "autograd.grad(loss, z" not in worked
    assert "lesson 02" in cells["l10-20"].source and "lesson 09" in cells["l10-20"].source
    assert "loss before training: 0.7310" in _text(cells["l10-19"])
    assert "loss after 500 steps: 0.0879" in _text(cells["l10-26"])
    assert "points on the right side: 200 of 200" in _text(cells["l10-27"])


def test_part_2_trains_on_its_own_data_not_on_xor(cells):
    """XOR lives in lesson 03: lesson 10 points back to it in one line and trains on a disc of
    200 points it makes itself."""
    data = cells["l10-15"].source
    assert "xor_data" not in data and "torch.rand(200, 2" in data and "< 0.75" in data
    assert "inside the circle: 92" in _text(cells["l10-15"])
    text = " ".join(c.source for c in cells.values())
    assert text.count("XOR") == 1 and "Lesson 03's engine" in cells["l10-14"].source
