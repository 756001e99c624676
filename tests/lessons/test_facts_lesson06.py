"""Facts lesson 06 states, checked against its stored outputs and its checks.

The loop that forgets to zero is momentum with beta = 1 (shown bitwise), it is
compared by the distance to the best fit over the steps (not one last loss),
None is a right answer to the zero_grad prediction, the detector of where a step
zeroes is checked on steps of every kind (and what the check says each kind
leaves holds on torch), the by-hand exercise on the loop that never zeroes and
has momentum is checked against a real loop and names its slips, no cell derives
the cross-entropy gradient (lesson 10's), micro-batch accumulation is lesson 05's
(no exercise of its own here), and aliasing (lesson 05) and least squares
(lesson 04) are only pointed back to.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from notebook_runner import NOTEBOOKS
from stored import printed

import backproplab as bl
from backproplab.course.grading import find_exercise

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


def _forgot_with_momentum(x, y, w, b, lr, beta, steps, *, extra=0, summed=True):
    """The by-hand answer of Exercise 2, with a slip switched on when asked."""
    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)
    velocity_w, velocity_b = torch.zeros_like(w), torch.zeros_like(b)
    for _ in range(steps + extra):
        r = w * x + b - y
        gw, gb = (2 * r * x).mean(), (2 * r).mean()
        grad_w, grad_b = (grad_w + gw, grad_b + gb) if summed else (gw, gb)
        velocity_w, velocity_b = beta * velocity_w + grad_w, beta * velocity_b + grad_b
        w, b = w - lr * velocity_w, b - lr * velocity_b
    return w, b


def test_the_momentum_exercise_names_its_slips():
    check = find_exercise("l06-momentum").check
    for seed in (0, 77):
        assert check(_forgot_with_momentum, seed)
    slips = {
        "loop that zeroes": dict(summed=False),
        "one step too few": dict(extra=-1),
        "one step too many": dict(extra=1),
    }
    for words, slip in slips.items():
        report = check(lambda *args, slip=slip: _forgot_with_momentum(*args, **slip), 3)
        assert not report and words in report[0].message


def test_the_momentum_check_runs_a_real_loop():
    """The reference is torch's SGD with momentum, never zeroed, not a formula of its own."""
    exercise = find_exercise("l06-momentum")
    x, y, w, b, lr, beta, steps = exercise.make_inputs(torch.Generator().manual_seed(5))
    w_ref, b_ref = exercise.reference(x, y, w, b, lr, beta, steps)
    w_leaf, b_leaf = w.clone().requires_grad_(), b.clone().requires_grad_()
    opt = torch.optim.SGD([w_leaf, b_leaf], lr=lr, momentum=beta)
    for _ in range(steps):
        ((w_leaf * x + b_leaf - y) ** 2).mean().backward()
        opt.step()
    assert torch.equal(w_ref, w_leaf.detach()) and torch.equal(b_ref, b_leaf.detach())
    with torch.no_grad():
        w_hand, b_hand = _forgot_with_momentum(x, y, w, b, lr, beta, steps)
    assert torch.allclose(w_hand, w_ref, rtol=1e-12) and torch.allclose(b_hand, b_ref, rtol=1e-12)


def test_what_the_where_check_says_of_each_place_holds():
    """For each place, what the check's message says the step leaves is what torch does."""
    from backproplab.course.exercises import lesson06

    inputs = lesson06._where_inputs(torch.Generator().manual_seed(3))
    X, y, k, lr = inputs["X"], inputs["y"], inputs["k"], inputs["lr"]

    def make_model():
        return lesson06._where_model(inputs)

    used = make_model()
    F.mse_loss(used(X), y).backward()  # the exercise says a deep copy's .grad starts empty
    assert all(p.grad is None for p in copy.deepcopy(used).parameters())

    def full_gradient(model):
        twin = copy.deepcopy(model)
        F.mse_loss(twin(X), y).backward()
        return [p.grad for p in twin.parameters()]

    def last_part(model):
        twin = copy.deepcopy(model)
        (F.mse_loss(twin(X.chunk(k)[-1]), y.chunk(k)[-1]) / k).backward()
        return [p.grad for p in twin.parameters()]

    def same(a, b):
        return all(torch.allclose(u, v) for u, v in zip(a, b, strict=True))

    for set_to_none in (True, False):
        seen = {}
        for place in lesson06.PLACES:
            model = make_model()
            start = [p.detach().clone() for p in model.parameters()]
            g0, part0 = full_gradient(model), last_part(model)
            step = lesson06._make_step(model, X, y, k, lr, place, set_to_none)
            step()
            moved = not same([p.detach() for p in model.parameters()], start)
            held = [p.grad for p in model.parameters()]
            cleared = all(g is None or not g.any() for g in held)
            g1 = full_gradient(model)
            first = None if cleared else [g.clone() for g in held]
            step()
            second = [p.grad for p in model.parameters()]
            seen[place] = (moved, cleared, first, g0, part0, second, g1)
        moved, cleared, *_ = seen["before step"]
        assert not moved and cleared
        moved, cleared, *_ = seen["end"]
        assert moved and cleared
        _, _, first, g0, _, second, g1 = seen["start"]
        assert same(first, g0) and same(second, g1)
        _, _, first, g0, _, second, g1 = seen["never"]
        assert same(first, g0) and same(second, [a + b for a, b in zip(g0, g1, strict=True)])
        _, _, first, g0, part0, *_ = seen["each micro-batch"]
        assert same(first, part0) and not same(first, g0)


def test_the_where_check_passes_a_detector_and_names_the_one_step_slip():
    from backproplab.course.exercises import lesson06

    def detector(step, model, X, y, k, *, steps=2):
        def full_gradient():
            twin = copy.deepcopy(model)
            F.mse_loss(twin(X), y).backward()
            return [p.grad for p in twin.parameters()]

        def same(a, b):
            return all(torch.allclose(u, v) for u, v in zip(a, b, strict=True))

        before = [p.detach().clone() for p in model.parameters()]
        g0 = full_gradient()
        step()
        if same([p.detach() for p in model.parameters()], before):
            return "before step"
        held = [p.grad for p in model.parameters()]
        if all(g is None or not g.any() for g in held):
            return "end"
        if not same(held, g0):
            return "each micro-batch"
        if steps == 1:
            return "start"
        held = [g.clone() for g in held]
        g1 = full_gradient()
        step()
        summed = [a + b for a, b in zip(held, g1, strict=True)]
        return "never" if same([p.grad for p in model.parameters()], summed) else "start"

    for seed in (0, 1, 2, 8419):
        assert lesson06.WHERE.check(detector, seed)
    report = lesson06.WHERE.check(lambda *args: detector(*args, steps=1), 0)
    assert not report and "after a second step" in report[0].message


def test_no_cross_entropy_gradient_and_no_accumulation_exercise_here():
    """The sigmoid's cross-entropy gradient is lesson 10's; micro-batch accumulation with
    loss / k is lesson 05's: neither is derived or drilled here."""
    from backproplab.course.exercises import lesson06

    text = json.dumps(CELLS) + Path(lesson06.__file__).read_text()
    assert "binary_cross_entropy" not in text and "sigmoid" not in text
    assert "train_accumulated" not in text and "l06-accumulate" not in text
    assert set(lesson06.EXERCISES) == {"l06-where", "l06-momentum"}


def test_aliasing_and_least_squares_point_back():
    """In-place adding into .grad is lesson 05's, least squares lesson 04's: pointers only."""
    recap = "".join(BY_ID["l06-25"]["source"])
    assert "lesson 05" in recap and ".clone()" in recap
    assert "l06-per-example" not in BY_ID
    prose = "".join("".join(BY_ID[c]["source"]) for c in ("l06-12", "l06-13"))
    assert "lesson 04" in prose
