"""Lesson 10's facts, read from the stored outputs, so that an edit cannot bring back an old
claim or drop a shown one: the gradient through logit_maxes is 0 up to round-off, every row
of dlogits sums to 0 (and is probs - one_hot over N), the fused and compact forms equal the
learner's steps, the embedding's scatter-add happens inside one backward pass, a bias before
batch norm gets no gradient, and the learner's functions train the model as autograd does.
The lesson's exercises are steps of the backward pass, at least 15 of them, each with named
wrong answers."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

from backproplab.lessons import lesson10

ROOT = Path(__file__).parents[2]
LESSON = ROOT / "notebooks" / "10-backprop-through-a-classifier.ipynb"


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(LESSON, as_version=4)




def _output_of(nb, fragment: str) -> str:
    """The stored output of the one code cell whose source holds ``fragment``."""
    found = [c for c in nb.cells if c.cell_type == "code" and fragment in c.source]
    assert len(found) == 1, f"{len(found)} code cells hold {fragment!r}"
    return _text(found[0])


def _tensors(text: str) -> list[torch.Tensor]:
    """The tensors printed in ``text``, as float64 tensors."""
    found = []
    for body in re.findall(r"tensor\((\[\[.*?\]\])", text, re.S):
        rows = re.findall(r"\[([^\[\]]+)\]", body)
        found.append(torch.tensor([[float(v) for v in row.split(",")] for row in rows],
                                  dtype=torch.float64))
    return found


def test_the_gradient_through_logit_maxes_is_zero_next_to_dlogits(nb):
    out = _output_of(nb, "largest |dlogit_maxes| below 1e-15")
    assert "largest |dlogit_maxes| below 1e-15: True" in out
    largest = float(re.search(r"largest \|dlogits\|:\s+([\d.]+)", out).group(1))
    assert largest > 1e-3  # twelve orders of magnitude above
    assert "the answer is 0.0" in _output_of(nb, 'bl.reveal("l10-predict-maxes")')


def test_shifting_a_row_of_logits_leaves_its_softmax_unchanged(nb):
    same, shifted = _tensors(_output_of(nb, "first_rows - 7"))
    assert torch.equal(same, shifted)


def test_each_row_of_dlogits_is_probs_minus_one_hot_and_sums_to_zero(nb):
    out = _output_of(nb, "N * dlogits[:3]")
    assert "every row of dlogits sums to 0 (within 1e-15): True" in out
    labels = [int(v) for v in re.search(r"y\[:3\] = \[([\d, ]+)\]", out).group(1).split(",")]
    probs, scaled = _tensors(out)
    one_hot = torch.nn.functional.one_hot(torch.tensor(labels), probs.shape[1]).double()
    assert torch.allclose(scaled, probs - one_hot, atol=2e-4)
    assert (scaled.gather(1, torch.tensor(labels)[:, None]) < 0).all()  # the right class: up


def test_the_fused_and_compact_forms_equal_the_learners_steps(nb):
    fused = _output_of(nb, "dlogits_fused = ")
    compact = _output_of(nb, "dhpre_compact = ")
    for out, name in ((fused, "fused"), (compact, "compact")):
        assert f"✓ {name} vs your steps" in out and f"✓ {name} vs autograd" in out


def test_every_chained_section_matches_autograd(nb):
    chains = [_text(c) for c in nb.cells if c.cell_type == "code"
              and "against_autograd(" in c.source and "def against_autograd" not in c.source]
    assert len(chains) == 4
    total = 0
    for out in chains:
        matched, of = map(int, re.search(r"(\d+) of (\d+) match autograd", out).groups())
        assert matched == of
        total += of
    assert total >= 25  # every intermediate and parameter of the model


def test_a_bias_before_batch_norm_gets_no_gradient(nb):
    out = _output_of(nb, "largest |db1| below 1e-15")
    assert "largest |db1| below 1e-15: True" in out
    assert float(re.search(r"largest \|dW1\|: ([\d.]+)", out).group(1)) > 1e-2
    assert "the answer is 0.0" in _output_of(nb, 'bl.reveal("l10-predict-db1")')


def test_the_scatter_add_happens_inside_one_backward_pass(nb):
    out = _output_of(nb, "small_table.register_hook")
    assert "the lookup's backward node: IndexBackward0" in out
    assert "gradients that reached the table: 1" in out
    (table,) = _tensors(out)
    assert table[3].tolist() == [101.0, 202.0] and table[2].tolist() == [0.0, 0.0]
    assert "✓ index_add_: exact match" in out
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "inside one backward pass" in prose
    # The old sentence tied the scatter-add to lesson 05's separate backward() calls.
    assert "exactly as two `backward()` calls" not in prose
    assert "one lookup's gradient only: True" in _output_of(nb, "assigned[ids] += dlookup")


def test_batch_norm_trains_with_the_biased_variance(nb):
    out = _output_of(nb, "momentum=1.0")
    assert "running_var equals the biased variance:    False" in out
    assert "running_var equals the unbiased variance:  True" in out
    out = _output_of(nb, "hpre_u.grad / autograd")
    low, high = map(float, re.search(r"([\d.]+) to ([\d.]+)", out).groups())
    root = float(re.search(r"sqrt\(\(N - 1\) / N\) = ([\d.]+)", out).group(1))
    assert low <= root + 1e-5 and high >= root - 1e-5 and high < 1


def test_the_learners_functions_train_the_model_as_autograd_does(nb):
    out = _output_of(nb, "auto_losses.append")
    assert "differ by less than 1e-12 at every step: True" in out
    mine, theirs = re.search(r"([\d.]+) with your gradients, ([\d.]+) with autograd", out).groups()
    assert mine == theirs
    start = float(re.search(r"loss at step 1: ([\d.]+)", out).group(1))
    assert float(mine) < start / 10
    train = next(c for c in nb.cells if "def loss_and_grads" in c.source)
    assert "backward_by_steps" not in train.source and "section(v, d)" in train.source


def test_the_lessons_forward_is_the_packages(nb):
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def forward(" in c.source)
    package = inspect.getsource(lesson10.forward).replace('"""', "'''")
    assert cell.source.strip() == package.strip()
    assert f"loss = {lesson10._spiral_pass()[1]['loss'].item():.4f}" in _output_of(
        nb, 'f["loss"].backward()')


def test_the_spiral_legend_is_outside_the_axes(nb):
    cell = next(c for c in nb.cells if "plt.Circle" in c.source)
    assert "bbox_to_anchor=(1.02, 1)" in cell.source


def test_the_backward_steps_are_exercises_with_named_wrong_answers(nb):
    by_hand = [k for k, v in lesson10.EXERCISES.items() if type(v).__name__ == "ByHand"]
    assert len(by_hand) >= 15
    checked = " ".join(c.source for c in nb.cells if c.cell_type == "code")
    assert all(f'bl.check_exercise("{k}"' in checked for k in by_hand)
    spec = importlib.util.spec_from_file_location(
        "wrong13", ROOT / "tests" / "wrong_answers" / "lesson10.py")
    wrong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrong)
    for key in by_hand:
        assert len(wrong.WRONG[key]) >= 2, key
        assert len(lesson10.EXERCISES[key].mistakes) >= 2, key


def test_rules_taught_earlier_are_pointed_back_to(nb):
    """The linear layer's rule and the softmax VJP live in lesson 08 (part 2), tanh' in lesson
    02, the batch coupling of batch norm in lesson 05: this lesson points back to each where it
    uses it, and names no later lesson for retain_grad."""
    cells = {c.id: c.source for c in nb.cells}
    assert "lesson 08" in cells["l10-56"] and "lesson 08" in cells["l10-53"]
    assert "lesson 02" in cells["l10-59"]
    assert "couples the examples" in cells["l10-64"] and "lesson 05" in cells["l10-64"]
    assert "lesson\n11" not in cells["l10-09"] and "lesson 11" not in cells["l10-09"]
    assert "rule of lesson\n  08, part 2" in cells["l10-132"]
