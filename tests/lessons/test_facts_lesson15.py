"""Lesson 15's facts about hooks and the pitfall it alone teaches, read from the stored
outputs: per-tensor clipping vs torch's global clip_grad_norm_, a hook registered inside a
loop piling up (and both fixes), the post-accumulate-grad hook (what it sees, and an
optimizer step inside backward), `total_loss += loss`, and the exercise's hunt for a
vanishing gradient naming its slips on broken networks whose culprit moves."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "15-tools-inside-backward.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def _norm_rows(cells) -> dict[str, dict[str, float]]:
    """The clipping table: row label -> its numbers by column."""
    columns = ("weight", "bias", "together", "weight/bias")
    rows = {}
    for line in _text(cells["l15-51"]).splitlines():
        found = re.match(r"(before|per tensor|global)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$",
                         line.strip())
        if found:
            rows[found[1]] = dict(zip(columns, map(float, found.groups()[1:]), strict=True))
    return rows


def test_per_tensor_and_global_clipping_differ(cells):
    rows = _norm_rows(cells)
    before, each, together = rows["before"], rows["per tensor"], rows["global"]
    assert before["weight"] > 1 and before["bias"] > 1
    # Per tensor: every tensor ends at max_norm; the balance between them changes.
    assert each["weight"] == each["bias"] == 1.0 and each["weight/bias"] == 1.0
    # Global: one factor for all, the direction kept, the total at max_norm.
    assert together["together"] == 1.0
    assert together["weight/bias"] == before["weight/bias"] != 1.0
    assert f"{before['weight/bias']:.2f}" in cells["l15-52"].source


def test_a_hook_registered_in_the_loop_piles_up(cells):
    lines = _text(cells["l15-54"]).strip().splitlines()
    assert lines == ["step 1: the hook ran 1 time, w.grad = 6",
                     "step 2: the hook ran 2 times, w.grad = 12",
                     "step 3: the hook ran 3 times, w.grad = 24"]
    fixed = _text(cells["l15-56"]).strip().splitlines()
    assert len(fixed) == 6 and all(line.endswith("hook calls 1, w.grad = 6") for line in fixed)
    assert "handle.remove()" in cells["l15-56"].source


def test_post_accumulate_hook_sees_the_accumulated_grad(cells):
    text = _text(cells["l15-58"])
    assert text.split("backward 2:")[1].split() == [
        "register_hook", "sees", "the", "new", "gradient:", "3.0",
        "post-accumulate", "hook", "sees", "w.grad:", "6.0"]


def test_an_optimizer_step_inside_backward_matches_step_after(cells):
    text = _text(cells["l15-60"])
    assert "['2.bias', '2.weight', '0.bias', '0.weight']" in text  # last layer first
    assert "gradients left afterwards: [None, None, None, None]" in text
    assert "same weights as backward() then opt.step(): True" in text


def test_total_loss_holds_every_graph(cells):
    rows = re.findall(r"after batch (\d): +(\d+) nodes, +(\d+) saved tensors held",
                      _text(cells["k-6"]))
    evaluation, training = rows[:3], rows[3:]
    nodes = [int(n) for _, n, _ in evaluation]
    held = [int(k) for _, _, k in evaluation]
    assert nodes[0] < nodes[1] < nodes[2] and held[0] > 0 and held == [held[0] * k
                                                                        for k in (1, 2, 3)]
    assert f"{held[0]} more per batch" in cells["l15-62"].source
    assert [int(n) for _, n, _ in training] == nodes  # the nodes stay after backward
    assert all(k == "0" for _, _, k in training)  # the saved tensors are freed
    fixed = _text(cells["l15-63"])
    assert "with .item():   float" in fixed and "requires_grad: False | grad_fn: None" in fixed


def test_no_use_of_lesson_12s_byte_counts(cells):
    """Saved bytes are lesson 16's: this lesson counts saved tensors (lessons 01 and 07)."""
    assert not any("saved_memory" in c.source for c in cells.values())


def _hunt(model, x, threshold, *, use="grad_input", walk="from the loss", remove=True,
          full=True):
    """The exercise's answer, with a slip switched on when asked."""
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            grads = grad_input if use == "grad_input" else grad_output
            norms[name] = grads[0].norm().item()
        register = layer.register_full_backward_hook if full else layer.register_backward_hook
        handles.append(register(record))
    model(x).sum().backward()
    if remove:
        for handle in handles:
            handle.remove()
    names = [name for name, _ in model.named_children()]
    for name in (reversed(names) if walk == "from the loss" else names):
        if norms[name] < threshold:
            return name
    return None


@pytest.mark.parametrize("slip, words", [
    (dict(walk="from the input"), "wrong way"),
    (dict(use="grad_output"), "grad_output"),
    (dict(remove=False), "still registered"),
    (dict(full=False), "old form"),  # every check has a Linear culprit, where it shows
])
def test_the_vanishing_hunt_names_its_slips(slip, words):
    from backproplab.course.grading import find_exercise

    check = find_exercise("l15-vanishing").check
    for seed in (0, 41):
        assert check(_hunt, seed)
        report = check(lambda *args: _hunt(*args, **slip), seed)
        assert not report and words in report[0].message


def test_the_broken_networks_vary_the_culprit():
    import torch

    from backproplab.course.exercises.lesson15 import broken_network

    gen = torch.Generator().manual_seed(3)
    culprits = {broken_network(gen, kind)[3]
                for kind in ("gate", "sigmoid", "tanh", "linear") * 3}
    assert len(culprits) >= 3  # not one fixed place a lookup could learn
    assert broken_network(gen, "healthy")[3] is None


def test_a_global_module_hook_is_a_hook_and_one_left_behind_is_named():
    """``register_module_full_backward_hook`` hooks every module: the check counts it as
    a hook (every registration makes a handle) and counts one left behind."""
    from backproplab.course.grading import find_exercise

    handles = []

    def hunt(model, x, threshold, remove=True):
        from torch.nn.modules.module import register_module_full_backward_hook

        names = {layer: name for name, layer in model.named_children()}
        norms = {}

        def record(module, grad_input, grad_output):
            if module in names:
                norms[names[module]] = grad_input[0].norm().item()

        handles.append(register_module_full_backward_hook(record))
        model(x).sum().backward()
        if remove:
            handles.pop().remove()
        return next((n for n in reversed(list(names.values())) if norms[n] < threshold), None)

    check = find_exercise("l15-vanishing").check
    try:
        assert check(hunt, 0)
        report = check(lambda *args: hunt(*args, remove=False), 0)
        assert not report and "still registered" in report[0].message
    finally:
        for handle in handles:
            handle.remove()


def test_every_check_has_the_networks_that_expose_a_measure_or_a_walk():
    """On every seed: the first layer is a culprit (a walk by index that stops before 0
    misses it); a gate lets the gradient back at 1.4 to 1.7 times the threshold, its largest
    entry and the batch's norm over sqrt(batch) under it (a squared norm, model(x).mean(),
    one entry, an average of the samples' norms name it); sample 0 alone vanishes; a gate
    lets it back at 1.4 to 1.7 times under the threshold, the only layer under it, its
    entries' sizes and its samples' norms added up above it (an L1 norm, a sum of the
    samples' norms miss it)."""
    import torch

    from backproplab.course.exercises.lesson15 import _facts, input_grad_norms
    from backproplab.course.exercises.lesson15.networks import _network, _vanishing_inputs

    for seed in range(20):
        *_, first, near, one_row, under = _vanishing_inputs(
            torch.Generator().manual_seed(seed))["networks"]
        names, norms, culprit = _facts(first)
        assert culprit == names[0] == "fc1"
        names, norms, culprit = _facts(near)
        model, x = _network(near["layers"]), near["x"].clone().requires_grad_()
        (g,) = torch.autograd.grad(model(x).sum(), x)
        assert culprit is None and names[0] == "gate0"
        assert 1.4 < norms["gate0"] / near["threshold"] < 1.7
        assert g.abs().max() < near["threshold"] / 1.4
        assert g.norm() / len(x) ** 0.5 < near["threshold"] / 1.4
        names, norms, culprit = _facts(one_row)
        sample0 = input_grad_norms(_network(one_row["layers"]), one_row["x"][:1])
        assert culprit is None and min(sample0.values()) < one_row["threshold"] / 100
        names, norms, culprit = _facts(under)
        model, x = _network(under["layers"]), under["x"].clone().requires_grad_()
        (g,) = torch.autograd.grad(model(x).sum(), x)
        assert culprit == names[0] == "gate0"
        assert 1.4 < under["threshold"] / norms["gate0"] < 1.7
        assert all(norms[n] > 100 * under["threshold"] for n in names[1:])
        assert g.abs().sum() > 1.4 * under["threshold"]
        assert g.norm(dim=1).sum() > 1.4 * under["threshold"]
