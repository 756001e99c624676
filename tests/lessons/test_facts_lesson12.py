"""Lesson 12's corrected facts, read from the stored outputs, so an edit cannot bring the
old claims back: truncated BPTT biases the gradient (its error for two values of k),
checkpoint's default in torch 2.13 is the reentrant variant, preserve_rng_state matters with
dropout, save_on_cpu is a pair of saved-tensor hooks, the uneven blocks make the choice of
what to checkpoint matter, the input batch is named as such and leaf memory in bytes, and
lesson 11's pitfalls (`total += loss`, an undetached state) are not repeated here.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import flat_text as _text

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "12-what-backward-keeps.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}




def _all_source(cells) -> str:
    return "\n".join(c.source for c in cells.values())


def test_truncation_biases_the_gradient(cells):
    out = _text(cells["l12-55"])
    found = re.search(r"measures ([\d.]+) for k = 10 and ([\d.]+) for k = 100", out)
    assert found, out
    short, long = float(found.group(1)), float(found.group(2))
    assert (short, long) == (0.0880, 0.0292)
    assert short > long > 0.01  # shorter chunks drop more, and k = 100 still drops some
    assert "8.8 % for k = 10 and still by 2.9 % for k = 100" in " ".join(
        cells["l12-33"].source.split())
    assert "biased" in cells["l12-48"].source
    reach = _text(cells["l12-49"])
    assert "j = 1: 1.8e+00, j = 10: 3.0e-02" in reach


def test_checkpoint_default_is_reentrant_in_2_13(cells):
    out = _text(cells["l12-39"])
    assert "the use_reentrant parameter should be passed explicitly" in out
    assert "None of the inputs have requires_grad=True" in out
    assert "use_reentrant left out: output requires grad: False" in out
    assert "use_reentrant=False: output requires grad: True" in out


def test_preserve_rng_state_keeps_dropout_gradients_right(cells):
    out = _text(cells["l12-41"])
    assert "preserve_rng_state=True : gradients equal to the plain run: True" in out
    assert "preserve_rng_state=False: gradients equal to the plain run: False" in out


def test_save_on_cpu_is_a_hook_pair(cells):
    out = _text(cells["l12-35"])
    assert "save_on_cpu is a pair of saved-tensor hooks: True" in out
    assert "gradients unchanged: True" in out


def test_uneven_blocks_make_the_choice_matter(cells):
    out = cells["l12-45"].outputs[0]["text"]
    plans = {m.group(1).strip(): (int(m.group(2).replace(",", "")),
                                  int(m.group(3).replace(",", "")))
             for m in re.finditer(r"^(\D+?)\s+([\d,]+)\s+([\d,]+)$", out, re.M)}
    assert plans["the cheap ones"] == (163_840, 16_384)
    assert plans["the wide ones"] == (98_304, 131_072)
    assert "first block ran 2 times" in _text(cells["l12-17"])
    check = _text(cells["l12-32"])
    assert "the least any choice within the budget needs" in check


def test_bytes_are_called_bytes_and_the_input_batch_is_named(cells):
    out = _text(cells["l12-03"])
    assert "20 bytes of them in leaf tensors" in out
    assert "(20 of them" not in out
    assert "input batch" in cells["l12-04"].source
    assert "60 bytes per example" in cells["l12-06"].source


def test_lesson_11_pitfalls_are_pointed_to_not_repeated(cells):
    source = _all_source(cells)
    assert "lesson 11's pitfall" in source
    assert "total = total + " not in source and "total += mlp" not in source
    assert "lesson 11's pitfall, fixed" not in source


def test_predictions_follow_the_five_cell_pattern(cells):
    for check, reveal, answer in (("l12-37", "l12-38", "the answer is 2"),
                                  ("l12-26", "l12-52", "the answer is 'formula'")):
        assert cells[check].metadata["nbgrader"]["points"] == 0
        assert answer in _text(cells[reveal])


def test_the_input_batch_is_a_leaf_without_an_accumulate_grad_node(cells):
    """Lesson 01's rule holds: the batch is a leaf; what it lacks is an AccumulateGrad node."""
    out = _text(cells["l12-56"])
    assert "batch.is_leaf: True batch.requires_grad: False" in out
    assert "4 AccumulateGrad nodes, for: 0.bias, 0.weight, 2.bias, 2.weight" in out
    prose = cells["l12-04"].source
    assert "not a leaf" not in prose and "is a leaf" in prose and "`AccumulateGrad`" in prose


def test_checkpoint_without_use_reentrant_warns_and_runs_reentrant_in_2_13(cells):
    """What the installed torch does, not what the warning says a future version will do."""
    out = _text(cells["l12-57"])
    assert "use_reentrant left out: CheckpointFunctionBackward (UserWarning, not an error)" in out
    assert "use_reentrant=True: CheckpointFunctionBackward" in out
    assert "use_reentrant=False: TanhBackward0" in out
    prose = cells["l12-18"].source
    assert "will insist" not in prose and "does not raise" in prose


def test_non_reentrant_checkpoint_stores_its_inputs_itself(cells):
    """The frame saves the block's input; the hooks replace only what the block saves inside."""
    out = _text(cells["l12-58"])
    assert "plain: 5 saved tensor(s) reach our hook; the block's input among them: True" in out
    assert ("checkpointed: 1 saved tensor(s) reach our hook; the block's input among them: True"
            in out)
    prose = cells["l12-40"].source
    assert "_CheckpointFrame" in prose and "keeps the block's inputs through saved-tensor hooks" \
        not in prose
