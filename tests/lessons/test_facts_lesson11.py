"""Lesson 11's facts about hooks and the two pitfalls it alone teaches, read from the stored
outputs: per-tensor clipping vs torch's global clip_grad_norm_, a hook registered inside a
loop piling up (and both fixes), the post-accumulate-grad hook (what it sees, and an optimizer
step inside backward), `total_loss += loss` and a hidden state that is never detached."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "11-pitfalls-and-tools.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}




def _norm_rows(cells) -> dict[str, dict[str, float]]:
    """The clipping table: row label -> its numbers by column."""
    columns = ("weight", "bias", "together", "weight/bias")
    rows = {}
    for line in _text(cells["l11-51"]).splitlines():
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
    assert f"{before['weight/bias']:.2f}" in cells["l11-52"].source


def test_a_hook_registered_in_the_loop_piles_up(cells):
    lines = _text(cells["l11-54"]).strip().splitlines()
    assert lines == ["step 1: the hook ran 1 time, w.grad = 6",
                     "step 2: the hook ran 2 times, w.grad = 12",
                     "step 3: the hook ran 3 times, w.grad = 24"]
    fixed = _text(cells["l11-56"]).strip().splitlines()
    assert len(fixed) == 6 and all(line.endswith("hook calls 1, w.grad = 6") for line in fixed)
    assert "handle.remove()" in cells["l11-56"].source


def test_post_accumulate_hook_sees_the_accumulated_grad(cells):
    text = _text(cells["l11-58"])
    assert text.split("backward 2:")[1].split() == [
        "register_hook", "sees", "the", "new", "gradient:", "3.0",
        "post-accumulate", "hook", "sees", "w.grad:", "6.0"]


def test_an_optimizer_step_inside_backward_matches_step_after(cells):
    text = _text(cells["l11-60"])
    assert "['2.bias', '2.weight', '0.bias', '0.weight']" in text  # last layer first
    assert "gradients left afterwards: [None, None, None, None]" in text
    assert "same weights as backward() then opt.step(): True" in text


def test_total_loss_holds_every_graph(cells):
    rows = re.findall(r"after batch (\d): +(\d+) nodes, +([\d,]+) bytes", _text(cells["k-6"]))
    evaluation, training = rows[:3], rows[3:]
    nodes = [int(n) for _, n, _ in evaluation]
    held = [int(b.replace(",", "")) for _, _, b in evaluation]
    assert nodes[0] < nodes[1] < nodes[2] and held[0] > 0 and held == [held[0] * k
                                                                        for k in (1, 2, 3)]
    assert [int(n) for _, n, _ in training] == nodes  # the nodes stay after backward
    assert all(b == "0" for _, _, b in training)  # the saved tensors are freed
    fixed = _text(cells["l11-63"])
    assert "with .item():   float" in fixed and "requires_grad: False | grad_fn: None" in fixed


def test_an_undetached_hidden_state(cells):
    assert "Trying to backward through the graph a second time" in _text(cells["k-8"])
    walked = [int(n) for n in re.findall(r"walks (\d+) nodes", _text(cells["l11-64"]))]
    assert walked == [16, 31, 46]  # retain_graph: every backward walks all the chunks so far
    cut = [int(n) for n in re.findall(r"walks (\d+) nodes", _text(cells["k-10"]))]
    assert cut == [16, 16, 16]
    full = float(re.search(r"w.grad: ([\d.]+)", _text(cells["l11-64"]))[1])
    truncated = float(re.search(r"w.grad: ([\d.]+)", _text(cells["k-10"]))[1])
    assert full != truncated and abs(full - truncated) < 1e-4
    assert f"{truncated:.6f}" in cells["l11-66"].source and f"{full:.6f}" in cells["l11-66"].source
