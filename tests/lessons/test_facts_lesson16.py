"""Lesson 16's corrected facts, read from the stored outputs, so an edit cannot bring the
old claims back: truncated BPTT biases the gradient (its error for two values of k),
checkpoint's default in torch 2.13 is the reentrant variant, preserve_rng_state matters with
dropout, save_on_cpu is a pair of saved-tensor hooks, the uneven blocks make the choice of
what to checkpoint matter (and Exercise 4's stacks are ones where ranking the blocks by
bytes per multiply-add is not the cheapest plan), the input batch is named as such and leaf
memory in bytes, lesson 14's pitfalls and truncation's mechanism are pointed back to, not
repeated, every graded exercise sits under the Exercises heading, and the checkpointing built
from saved-tensor hooks is checked for what it keeps, how often it recomputes, and its mask.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import flat_text as _text

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "16-what-backward-keeps.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}




def _all_source(cells) -> str:
    return "\n".join(c.source for c in cells.values())


def test_truncation_biases_the_gradient(cells):
    out = _text(cells["l16-55"])
    found = re.search(r"measures ([\d.]+) for k = 10 and ([\d.]+) for k = 100", out)
    assert found, out
    short, long = float(found.group(1)), float(found.group(2))
    assert (short, long) == (0.0880, 0.0292)
    assert short > long > 0.01  # shorter chunks drop more, and k = 100 still drops some
    assert "8.8 % for k = 10 and still by 2.9 % for k = 100" in " ".join(
        cells["l16-33"].source.split())
    assert "biased" in cells["l16-48"].source
    reach = _text(cells["l16-49"])
    assert "j = 1: 1.8e+00, j = 10: 3.0e-02" in reach


def test_checkpoint_default_is_reentrant_in_2_13(cells):
    out = _text(cells["l16-39"])
    assert "the use_reentrant parameter should be passed explicitly" in out
    assert "None of the inputs have requires_grad=True" in out
    assert "use_reentrant left out: output requires grad: False" in out
    assert "use_reentrant=False: output requires grad: True" in out


def test_preserve_rng_state_keeps_dropout_gradients_right(cells):
    out = _text(cells["l16-41"])
    assert "preserve_rng_state=True : gradients equal to the plain run: True" in out
    assert "preserve_rng_state=False: gradients equal to the plain run: False" in out


def test_save_on_cpu_is_a_hook_pair(cells):
    out = _text(cells["l16-35"])
    assert "save_on_cpu is a pair of saved-tensor hooks: True" in out
    assert "gradients unchanged: True" in out


def test_uneven_blocks_make_the_choice_matter(cells):
    out = cells["l16-45"].outputs[0]["text"]
    plans = {m.group(1).strip(): (int(m.group(2).replace(",", "")),
                                  int(m.group(3).replace(",", "")), m.group(4))
             for m in re.finditer(r"^(\D+?)\s+([\d,]+)\s+([\d,]+)\s+(True|False)$", out, re.M)}
    # Measured by hooks on the Linear layers: a block's last product is not run again.
    assert plans["the cheap ones"] == (163_840, 8_192, "True")
    assert plans["the wide ones"] == (98_304, 65_536, "True")
    assert plans["all"] == (32_768, 73_728, "True")
    assert "first block ran 2 times" in _text(cells["l16-17"])
    check = _text(cells["l16-32"])
    assert "the least any choice within the budget needs" in check


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_budget_exercise_asks_more_than_the_ranking(cells, seed):
    """Exercise 4's stacks are drawn so that section 3's ranking, taken as a plan (the most
    bytes per multiply-add first until the budget is met), overshoots with its last block
    and costs more than the cheapest choice; their cheapest choice keeps exactly the budget
    (60 % of the plain bytes, so "below 60 %" misses it); the check's one-run count of what
    each block keeps equals what checkpointing that block alone saves, measured; and the
    lesson no longer says that the ranking is the rule."""
    from backproplab.course.exercises.lesson16.budget import budget_stack, kept_bytes, run_stack

    blocks, x, found = budget_stack(seed)
    assert found["by_ratio_cost"] > found["cheapest"]
    assert found["by_ratio_kept"] < found["budget"]  # the last block saves more than needed
    assert found["on_budget"] and found["budget"] * 100 == found["plain"] * 60
    plain = kept_bytes(blocks, lambda: run_stack(blocks, x, set()))[1]
    assert plain == found["plain"]
    assert found["saves"] == [plain - kept_bytes(blocks, lambda i=i: run_stack(blocks, x, {i}))[1]
                              for i in range(len(blocks))]
    assert "turns that into a rule" not in cells["l16-46"].source
    assert "Exercise 4's question" in cells["l16-46"].source


@pytest.mark.parametrize("seed", [0, 1])
def test_the_budget_check_reckons_a_choice_as_a_run_measures_it(seed):
    """Exercise 4's check judges a choice from one plain run of the stack: a choice keeps the
    plain run's bytes less what each chosen block saves, and backward recomputes each chosen
    block once, every Linear of it but the last (`multiply_adds`). Real checkpointed runs
    agree, for the cheapest choices and the ranking's."""
    from backproplab.course.exercises.lesson16.budget import (
        _budget_seed,
        _cheapest_choices,
        budget_stack,
        kept_bytes,
        run_stack,
    )

    blocks, x, found = budget_stack(seed)
    choices = _cheapest_choices({"stack": _budget_seed(seed)})
    assert choices and found["by_ratio"] not in choices
    for chosen in [*choices, found["by_ratio"]]:
        calls, products = [0] * len(blocks), [0]
        hooks = [b.register_forward_pre_hook(
            lambda module, args, i=i, calls=calls: calls.__setitem__(i, calls[i] + 1))
            for i, b in enumerate(blocks)]
        hooks += [m.register_forward_hook(
            lambda module, args, out, products=products: products.__setitem__(
                0, products[0] + module.in_features * module.out_features))
            for m in blocks.modules() if isinstance(m, torch.nn.Linear)]
        try:
            out, kept = kept_bytes(blocks, lambda c=chosen: run_stack(blocks, x, set(c)))
            calls[:], products[0] = [0] * len(blocks), 0  # what backward runs again
            out.sum().backward()
        finally:
            for hook in hooks:
                hook.remove()
        assert kept == found["plain"] - sum(found["saves"][i] for i in chosen)
        assert calls == [int(i in chosen) for i in range(len(blocks))]
        assert products[0] == sum(found["costs"][i] for i in chosen) > 0


def test_the_truncation_check_states_what_a_right_answer_measures():
    """Exercise 5's pass words give the numbers a right answer returns on the loop of 8
    units and 400 steps, which the check has it measure."""
    import torch

    from backproplab.course.exercises.lesson16 import MEASURED, loop_gradient, new_loop

    W, xs = new_loop(torch.Generator().manual_seed(15), units=8, steps=400)
    full = loop_gradient(W, xs)
    for k, shown in MEASURED.items():
        cut = loop_gradient(W, xs, k)
        assert f"{((cut - full).norm() / full.norm()).item():.4f}" == shown


def test_every_byte_count_check_meets_every_activation():
    """The byte formula's check runs five trials on generators whose seeds follow each other:
    on every seed each activation comes with a hidden layer, so that a slip about one of them
    (ReLU taken to keep a 1-byte mask) fails on every seed; and the GELU network shares its
    batch size with a network of another activation, so that an answer right for one of them
    only is never said to ignore the batch size."""
    import torch

    from backproplab.course.exercises.lesson16 import ACTIVATIONS, BYTES, _new_mlp_shape

    assert BYTES.trials == 5
    for seed in range(300):
        shapes = [_new_mlp_shape(torch.Generator().manual_seed(seed + k)) for k in range(5)]
        hidden = {activation for _, widths, activation in shapes if len(widths) > 2}
        assert hidden == set(ACTIVATIONS), (seed, shapes)
        gelu = next(batch for batch, _, activation in shapes if activation == "gelu")
        assert any(b == gelu for b, _, a in shapes if a != "gelu"), (seed, shapes)


def test_bytes_are_called_bytes_and_the_input_batch_is_named(cells):
    out = _text(cells["l16-03"])
    assert "20 bytes of them in leaf tensors" in out
    assert "(20 of them" not in out
    assert "input batch" in cells["l16-04"].source
    assert "60 bytes per example" in cells["l16-06"].source


def test_lesson_11s_pitfalls_and_truncation_are_pointed_to_not_repeated(cells):
    """Lesson 14 teaches the undetached state and truncation's mechanism; this lesson
    measures what truncation saves and its bias, and points back for the rest."""
    assert "Lesson 14 cut a hidden state's graph with `h = h.detach()`" in cells["l16-20"].source
    assert "lesson 14's truncation" in cells["l16-33"].source
    source = _all_source(cells)
    assert "total = total + " not in source and "total += mlp" not in source
    assert "total_loss +=" not in source and "retain_graph=True" not in source
    outputs = "\n".join(_text(c) for c in cells.values() if c.cell_type == "code")
    assert "backward through the graph a second time" not in outputs


def test_every_graded_exercise_sits_under_the_exercises_heading(cells):
    order = list(cells)
    heading = next(k for k, c in cells.items() if c.source.startswith("## Exercises"))
    graded = [k for k, c in cells.items() if c.metadata.get("nbgrader", {}).get("solution")
              and "predict" not in c.metadata["nbgrader"]["grade_id"]]
    assert "l16-23" in graded  # bytes_formula
    assert all(order.index(k) > order.index(heading) for k in graded)


def _built(block, x, *, keep_rng=True, recomputed=None):
    """Checkpointing from saved-tensor hooks, as the lesson's answer builds it; with
    ``recomputed`` given, its recomputed tensors go there (and stay there) instead of
    into a new list of this call's own."""
    from torch.autograd.graph import saved_tensors_hooks

    rng_state, saves = torch.get_rng_state(), []
    recomputed = [] if recomputed is None else recomputed

    def pack(t):
        saves.append(None)
        return len(saves) - 1

    def unpack(i):
        if not recomputed:
            with torch.random.fork_rng(), torch.enable_grad():
                if keep_rng:
                    torch.set_rng_state(rng_state)
                with saved_tensors_hooks(lambda t: recomputed.append(t) or t, lambda t: t):
                    block(x.detach().requires_grad_(x.requires_grad))
        return recomputed[i]

    with saved_tensors_hooks(pack, unpack):
        return block(x)


def test_checkpointing_built_from_hooks_is_checked_and_names_its_slips(cells):
    from backproplab.course.grading import find_exercise

    check = find_exercise("l16-checkpoint-by-hooks").check
    for seed in (0, 29):
        assert check(_built, seed)
        report = check(lambda block, x: _built(block, x, keep_rng=False), seed)
        assert not report and "new mask" in report[0].message
        report = check(lambda block, x: block(x), seed)  # everything kept
        assert not report and "still in memory" in report[0].message
    out = _text(cells["l16-29"])
    assert out.count("nothing made inside the block kept between forward and backward") == 2


def test_predictions_follow_the_five_cell_pattern(cells):
    for check, reveal, answer in (("l16-37", "l16-38", "the answer is 2"),
                                  ("l16-26", "l16-52", "the answer is 'formula'")):
        assert cells[check].metadata["nbgrader"]["points"] == 0
        assert answer in _text(cells[reveal])


def test_the_input_batch_is_a_leaf_without_an_accumulate_grad_node(cells):
    """Lesson 01's rule holds: the batch is a leaf; what it lacks is an AccumulateGrad node."""
    out = _text(cells["l16-56"])
    assert "batch.is_leaf: True batch.requires_grad: False" in out
    assert "4 AccumulateGrad nodes, for: 0.bias, 0.weight, 2.bias, 2.weight" in out
    prose = cells["l16-04"].source
    assert "not a leaf" not in prose and "is a leaf" in prose and "`AccumulateGrad`" in prose


def test_checkpoint_without_use_reentrant_warns_and_runs_reentrant_in_2_13(cells):
    """What the installed torch does, not what the warning says a future version will do."""
    out = _text(cells["l16-57"])
    assert "use_reentrant left out: CheckpointFunctionBackward (UserWarning, not an error)" in out
    assert "use_reentrant=True: CheckpointFunctionBackward" in out
    assert "use_reentrant=False: TanhBackward0" in out
    prose = cells["l16-18"].source
    assert "will insist" not in prose and "does not raise" in prose


def test_non_reentrant_checkpoint_stores_its_inputs_itself(cells):
    """The frame saves the block's input; the hooks replace only what the block saves inside."""
    out = _text(cells["l16-58"])
    assert "plain: 5 saved tensor(s) reach our hook; the block's input among them: True" in out
    assert ("checkpointed: 1 saved tensor(s) reach our hook; the block's input among them: True"
            in out)
    prose = cells["l16-40"].source
    assert "_CheckpointFrame" in prose and "keeps the block's inputs through saved-tensor hooks" \
        not in prose


def test_a_check_run_again_names_what_an_earlier_run_left_in_the_answer():
    """A function that keeps its recomputed tensors from one call to the next meets them in
    the check's own second call, and, when the check cell runs again, in its first: both
    times the message names the keeping, the second time where the tensors were held."""
    from backproplab.course.grading import find_exercise

    def leaky(block, x, recomputed=[]):  # noqa: B006 (the slip under test)
        return _built(block, x, recomputed=recomputed)

    check = find_exercise("l16-checkpoint-by-hooks").check
    first = check(leaky, 0)
    assert not first and "a second call on the same block and input fails" in first[0].message
    again = check(leaky, 0)
    assert not again and "the first call fails" in again[0].message
    held = len(leaky.__defaults__[0])
    assert held and f"its default argument recomputed already held {held} tensors" in \
        again[0].message
    assert "start from nothing of an earlier one" in again[0].message
