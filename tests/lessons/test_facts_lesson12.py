"""Lesson 12's facts, read from the stored outputs, so that an edit cannot bring back an old
claim or drop a shown one: the gradient through logit_maxes is 0 up to round-off, every row
of dlogits sums to 0 (and is probs - one_hot over N), the fused and compact forms equal the
learner's steps, a bias before batch norm gets no gradient, and the learner's functions train
the model as autograd does. The lesson's exercises take a few forward lines each and return the
gradient at every tensor of them: cross-entropy's and batch norm's steps are all the learner's,
in at most ten exercises, each with named wrong answers; the linear layers, tanh and the
scatter-add are rules of earlier lessons, pointed back to and not asked again."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

import backproplab as bl
from backproplab.course.exercises import lesson12
from backproplab.course.exercises.lesson12 import model

ROOT = Path(__file__).parents[2]
LESSON = ROOT / "notebooks" / "12-backprop-through-a-classifier.ipynb"


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
    assert "the answer is 0.0" in _output_of(nb, 'bl.reveal("l12-predict-maxes")')
    # Shown under the reveal's fold, where the answer may be read.
    cells = nb.cells
    at = next(i for i, c in enumerate(cells) if "largest |dlogit_maxes|" in c.source)
    fold = next(i for i, c in enumerate(cells) if c.id == "l12-predict-maxes-after")
    assert fold < at and not any(c.source.lstrip().startswith("#")
                                 for c in cells[fold + 1:at])


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
    assert "the answer is 0.0" in _output_of(nb, 'bl.reveal("l12-predict-db1")')


def test_the_scatter_add_is_lesson_09s_and_not_shown_again(nb):
    """Indexing's backward and the slip of assigning instead of adding live in lesson 09;
    here the embedding's exercise transfers it, and no worked cell shows index_add_."""
    worked = " ".join(c.source for c in nb.cells if c.cell_type == "code"
                      and "nbgrader" not in c.metadata)
    assert "index_add_" not in worked and "register_hook" not in worked
    section = next(c.source for c in nb.cells if c.source.startswith("## 6."))
    assert "lesson 09" in section and "indexing" in section
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    assert "l12-predict-rows" not in ids and "l12-embedding" in ids


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
    package = inspect.getsource(model.forward).replace('"""', "'''")
    assert cell.source.strip() == package.strip()
    x, y = bl.data.spiral_data()
    x = x.double()
    loss = model.forward(model.spiral_model(), x, model.spiral_tokens(x), y)["loss"]
    run = next(c for c in nb.cells if c.cell_type == "code" and "autograd.grad(" in c.source)
    assert "retain_grad" not in run.source  # lesson 15's tool, not needed here
    assert f"loss = {loss.item():.4f}" in _text(run)


def test_the_spiral_legend_is_outside_the_axes(nb):
    cell = next(c for c in nb.cells if "plt.Circle" in c.source)
    assert "bbox_to_anchor=(1.02, 1)" in cell.source


def test_the_steps_are_merged_into_fewer_larger_exercises(nb):
    """Cross-entropy's eight steps and batch norm's nine gradients are all the learner's, in
    three and two exercises; the lesson keeps to 90 cells and at most ten exercises, each
    with at least two named wrong answers."""
    assert len(nb.cells) <= 90
    by_hand = [k for k, v in lesson12.EXERCISES.items() if type(v).__name__ == "ByHand"]
    assert 6 <= len(by_hand) <= 10
    checked = " ".join(c.source for c in nb.cells if c.cell_type == "code")
    assert all(f'bl.check_exercise("{k}"' in checked for k in by_hand)
    asked = [n for k in ("l12-pick-log", "l12-normalise", "l12-shift")
             for n in lesson12.EXERCISES[k].outputs]
    assert asked == ["dlogprobs", "dprobs", "dcounts_sum_inv", "dcounts_sum", "dcounts",
                     "dshifted", "dlogit_maxes", "dlogits"]
    asked = [n for k in ("l12-scale-normalise", "l12-centre")
             for n in lesson12.EXERCISES[k].outputs]
    assert sorted(asked) == sorted(["dxhat", "dgain", "dbias", "dinvstd", "dvar", "ddiff2",
                                    "ddiff", "dmean", "dhpre"])
    spec = importlib.util.spec_from_file_location(
        "wrong13", ROOT / "tests" / "wrong_answers" / "lesson12.py")
    wrong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrong)
    for key in by_hand:
        assert len(wrong.WRONG[key]) >= 2, key
        assert len(lesson12.EXERCISES[key].mistakes) >= 2, key


def test_the_linear_layers_are_lesson_08s_rule_written_out(nb):
    """No exercise asks for a linear layer's backward again: both layers are worked, with the
    pointer back; the class-weighted cross-entropy is the exercise in its place."""
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    assert "l12-linear" not in ids and "l12-weighted" in ids
    cells = {c.id: c.source for c in nb.cells}
    assert "lesson 09's rule" in cells["l12-55"] and "lesson 02" in cells["l12-55"]
    assert '"W2": v["h"].T @ d["logits"]' in cells["l12-63"]
    assert '"W1": v["xin"].T @ d["hpre"]' in cells["l12-116"]


def test_rules_taught_earlier_are_pointed_back_to(nb):
    """The softmax VJP lives in lesson 09, the BCE gradient at the logits in lesson
    10, the batch coupling of batch norm in lesson 05: this lesson points back to each where
    it uses it, and names no later lesson."""
    cells = {c.id: c.source for c in nb.cells}
    assert "lesson 09" in cells["l12-53"] and "lesson 10" in cells["l12-53"]
    assert "couples the examples" in cells["l12-64"] and "lesson 05" in cells["l12-64"]
    assert "lesson 14" not in cells["l12-09"]
    assert "rule of lesson\n  09" in cells["l12-132"]
