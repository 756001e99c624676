"""Facts lesson 06 states, checked against its stored outputs and its checks.

The loop that forgets to zero is momentum with beta = 1 (shown bitwise), it is
compared by the distance to the best fit over the steps (not one last loss),
None is a right answer to the zero_grad prediction, the accumulation loop is checked
by its counts and its weights, the by-hand exercise on the
loop that never zeroes is checked against a real loop and names its slips, and
aliasing (lesson 05) and least squares (lesson 04) are only pointed back to.
"""

from __future__ import annotations

import json
import re

import torch
import torch.nn.functional as F
from notebook_runner import NOTEBOOKS
from stored import printed

import backproplab as bl
from backproplab.lessons import find_exercise

LESSON = NOTEBOOKS / "06-zeroing-gradients.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _printed(cell_id: str) -> str:
    return printed(BY_ID[cell_id])


def test_forgetting_to_zero_is_momentum_one():
    assert _printed("l06-35").strip().endswith(": True")
    prose = "\n".join("".join(c["source"]) for c in CELLS if c["cell_type"] == "markdown")
    assert r"\beta = 1" in prose and "dampening" in prose


def test_runs_are_compared_by_distance_over_the_steps():
    printed = _printed("l06-16")
    rows = re.findall(r"after step (\d+): distance to the best fit (\d+\.\d+) with zero_grad\(\), "
                      r"(\d+\.\d+) without", printed)
    assert [int(r[0]) for r in rows] == [100, 200, 300]
    good = [float(r[1]) for r in rows]
    bad = [float(r[2]) for r in rows]
    assert good == sorted(good, reverse=True)  # the loop that zeroes keeps closing in
    assert all(b > g for b, g in zip(bad, good, strict=True))
    low, high = map(float, re.search(r"range from (\d+\.\d+) to (\d+\.\d+)", printed).groups())
    assert high - low > 1.0  # still swinging after 200 steps
    assert "last loss" not in printed
    plot = BY_ID["l06-17"]
    assert "distance to the best fit" in "".join(plot["source"])
    assert any("image/png" in o.get("data", {}) for o in plot["outputs"])


def _passes(check) -> bool:
    try:
        report = check()
    except AssertionError:
        return False
    return report is None or bool(report)


def test_none_is_a_right_answer_to_the_zero_grad_prediction():
    assert _passes(lambda: bl.check_prediction("l06-predict-zero-grad", None))
    assert _passes(lambda: bl.check_prediction("l06-predict-zero-grad", "None"))
    assert not _passes(lambda: bl.check_prediction("l06-predict-zero-grad", "zeros"))


def _never_zeroed(w, b, X, t, lr, steps, *, first=0, extra=0, summed=True):
    """The by-hand answer of Exercise 2, with a slip switched on when asked."""
    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)
    for _ in range(steps + extra):
        dz = (torch.sigmoid(X @ w + b) - t) / len(t)
        grad_w = grad_w + X.T @ dz if summed else X.T @ dz
        grad_b = grad_b + dz.sum() if summed else dz.sum()
        w = w - lr * grad_w
        b = b - lr * grad_b
    return w, b


def test_the_never_zeroed_exercise_names_its_slips():
    check = find_exercise("l06-never-zeroed").check
    for seed in (0, 77):
        assert check(_never_zeroed, seed)
    slips = {
        "loop that zeroes": dict(summed=False),
        "one step too few": dict(extra=-1),
        "one step too many": dict(extra=1),
    }
    for words, slip in slips.items():
        report = check(lambda *args, slip=slip: _never_zeroed(*args, **slip), 3)
        assert not report and words in report[0].message


def test_the_never_zeroed_check_runs_a_real_loop():
    """The reference is torch's SGD loop without zeroing, not a formula of its own."""
    exercise = find_exercise("l06-never-zeroed")
    w, b, X, t, lr, steps = exercise.make_inputs(torch.Generator().manual_seed(5))
    w_ref, b_ref = exercise.reference(w, b, X, t, lr, steps)
    w_leaf, b_leaf = w.clone().requires_grad_(), b.clone().requires_grad_()
    opt = torch.optim.SGD([w_leaf, b_leaf], lr=lr)
    for _ in range(steps):
        F.binary_cross_entropy_with_logits(X @ w_leaf + b_leaf, t).backward()
        opt.step()
    assert torch.equal(w_ref, w_leaf.detach()) and torch.equal(b_ref, b_leaf.detach())
    with torch.no_grad():
        w_hand, b_hand = _never_zeroed(w, b, X, t, lr, steps)
    assert torch.allclose(w_hand, w_ref, rtol=1e-12) and torch.allclose(b_hand, b_ref, rtol=1e-12)


def test_aliasing_and_least_squares_point_back():
    """In-place adding into .grad is lesson 05's, least squares lesson 04's: pointers only."""
    recap = "".join(BY_ID["l06-25"]["source"])
    assert "lesson 05" in recap and ".clone()" in recap
    assert "l06-per-example" not in BY_ID
    prose = "".join("".join(BY_ID[c]["source"]) for c in ("l06-12", "l06-13"))
    assert "lesson 04" in prose


def test_the_accumulation_loop_is_checked_by_its_counts_and_weights():
    def right(model, X, y, steps, k, lr):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):
                (F.mse_loss(model(X_part), y_part) / k).backward()
            opt.step()

    def zero_every_piece(model, X, y, steps, k, lr):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        for _ in range(steps):
            for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):
                opt.zero_grad()
                (F.mse_loss(model(X_part), y_part) / k).backward()
            opt.step()

    check = find_exercise("l06-accumulate").check
    assert check(right, 0) and check(right, 123)
    report = check(zero_every_piece, 5)
    assert not report and "before every micro-batch" in report[0].message
