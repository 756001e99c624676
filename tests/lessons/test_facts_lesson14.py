"""Lesson 14's facts, read from the stored outputs: a hidden state that is never detached,
the version counter only pointed back to (lesson 07), and the exercise's overlapping
truncation windows checked with its chunks slip named."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "14-recording-on-and-off.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def test_an_undetached_hidden_state(cells):
    assert "Trying to backward through the graph a second time" in _text(cells["k-8"])
    walked = [int(n) for n in re.findall(r"walks (\d+) nodes", _text(cells["l14-64"]))]
    assert walked == [16, 31, 46]  # retain_graph: every backward walks all the chunks so far
    cut = [int(n) for n in re.findall(r"walks (\d+) nodes", _text(cells["k-10"]))]
    assert cut == [16, 16, 16]
    full = float(re.search(r"w.grad: ([\d.]+)", _text(cells["l14-64"]))[1])
    truncated = float(re.search(r"w.grad: ([\d.]+)", _text(cells["k-10"]))[1])
    assert full != truncated and abs(full - truncated) < 1e-4
    assert f"{truncated:.6f}" in cells["l14-66"].source and f"{full:.6f}" in cells["l14-66"].source


def test_the_version_counter_is_pointed_back_to(cells):
    """Lesson 07 teaches the version counter; this lesson keeps its own in-place pitfalls."""
    assert "l14-16" not in cells and "l14-17" not in cells
    assert "Lesson 07" in cells["l14-15"].source
    assert not any("_version" in c.source for c in cells.values() if c.cell_type == "code")


def _windows(W, xs, k1, k2, *, detach_every_update=False):
    """The exercise's answer, built another way than the lesson's solution: every window
    recomputed from the state that enters it (or section 5's chunks, when asked)."""
    import torch

    states = [torch.zeros(W.shape[0], dtype=W.dtype)]
    with torch.no_grad():
        for x_t in xs:
            states.append(torch.tanh(W @ states[-1] + x_t))
    grads = []
    for t in range(k1, len(xs) + 1, k1):
        start = t - k1 if detach_every_update else max(0, t - k2)
        W_leaf = W.clone().requires_grad_()
        h, loss = states[start], 0
        for s in range(start + 1, t + 1):
            h = torch.tanh(W_leaf @ h + xs[s - 1])
            if s > t - k1:
                loss = loss + (h**2).sum()
        grads.append(torch.autograd.grad(loss, W_leaf)[0])
    return grads


def test_the_overlapping_windows_exercise_is_checked_and_its_chunks_slip_named(cells):
    from backproplab.course.grading import find_exercise

    check = find_exercise("l14-windows").check
    for seed in (0, 23):
        assert check(_windows, seed)
        report = check(lambda *args: _windows(*args, detach_every_update=True), seed)
        assert not report and "TBPTT(k1, k1)" in report[0].message
    assert _text(cells["l14-windows-check"]).count("the gradient of every update matches") == 2
    task = cells["m-15"].source
    assert "TBPTT(k1, k2)" in task and "Section 5" in task
