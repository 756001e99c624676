"""Lesson 14's corrected facts, read from the stored outputs, so an edit cannot bring the
old claims back: torch.autograd.functional.hvp costs 3 reverse passes and vhp 2; jacrev's
"one pass" holds for the default chunk_size only; per-example gradients average to the
batch gradient only when the examples do not interact (batch normalization).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import flat_text as _text

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "14-forward-mode-and-torch-func.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}




def test_hvp_costs_three_reverse_passes_and_vhp_two(cells):
    out = _text(cells["l14-28"])
    assert "functional.hvp Hv = [4.0, -4.0, -4.0] (3 reverse, 0 forward)" in out
    assert "functional.vhp Hv = [4.0, -4.0, -4.0] (2 reverse, 0 forward)" in out
    assert "✓ functional.hvp vs H @ v: exact match" in out
    prose = cells["l14-27"].source
    assert "double-backward trick" in prose
    assert "it takes the\n   reverse-over-reverse route" not in prose
    assert "`hvp` 3" in " ".join(cells["l14-55"].source.split())


def test_jacrev_counts_depend_on_chunk_size(cells):
    out = _text(cells["l14-63"])
    counts = {chunk: int(n) for chunk, n in
              re.findall(r"jacrev\(chunk_size=(\w+)\): (\d+) reverse pass", out)}
    assert counts == {"None": 1, "8": 3, "5": 4, "1": 20}
    assert "with vectorize=True: 1 reverse pass" in out
    assert "jacfwd has a chunk_size argument: False" in out
    assert "always report" not in cells["l14-19"].source
    assert "default" in cells["l14-19"].source


def test_batch_norm_breaks_the_mean_of_per_example_gradients(cells):
    assert "vmap in training mode: Expected more than 1 value per channel when training" in (
        _text(cells["l14-67"]))
    out = cells["l14-69"].outputs[0]["text"]
    assert "same forward pass as training mode: True" in out
    rows = dict(re.findall(r"^\s+(\S+)\s+(.+)$", out, re.M))
    batch, gap = (part.strip() for part in rows["0.bias"].split("|"))
    assert batch == "below 1e-12" and float(gap) > 0.1  # no gradient in training mode
    assert float(rows["0.weight"].split("|")[1]) > 0.1
    for name in ("1.weight", "1.bias", "3.weight", "3.bias"):
        assert rows[name].split("|")[1].strip() == "below 1e-12"
    assert "mean of per-example vs batch gradient: below 1e-12" in _text(cells["l14-71"])


def test_predictions_reveal_the_counted_answers(cells):
    assert "the answer is (64, 1)" in _text(cells["l14-58"])
    assert "the answer is (20, 1, 1)" in _text(cells["l14-61"])
    assert "the answer is ('jacrev', 'jacfwd', 'jacrev')" in _text(cells["l14-73"])
    for check in ("l14-57", "l14-60", "l14-predict-modes-check"):
        meta = cells[check].metadata["nbgrader"]
        assert meta["points"] == 0 and cells[check].source.startswith("bl.check_prediction(")


def test_the_bar_chart_is_wide_enough_for_its_labels(cells):
    assert "figsize=(8.5, 3.4)" in cells["l14-20"].source
    assert "<Figure size 850x340 with 1 Axes>" in _text(cells["l14-20"])
