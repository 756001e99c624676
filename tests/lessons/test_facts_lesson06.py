"""Facts lesson 06 states, checked against its stored outputs and its checks.

The loop that forgets to zero is momentum with beta = 1 (shown bitwise), it is
compared by the distance to the best fit over the steps (not one last loss),
None is a right answer to the zero_grad prediction, and the aliasing trap of the
per-example exercise is reached by the natural answer and named.
"""

from __future__ import annotations

import json
import re

import torch
import torch.nn.functional as F
from notebook_runner import NOTEBOOKS

import backproplab as bl
from backproplab.lessons import find_exercise

LESSON = NOTEBOOKS / "06-zeroing-gradients.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _printed(cell_id: str) -> str:
    return "".join("".join(o.get("text", "")) for o in BY_ID[cell_id]["outputs"]
                   if o["output_type"] == "stream")


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


def test_the_aliasing_trap_is_reached_and_named():
    def natural(model, X, y):
        grads = []
        for i in range(len(X)):
            model.weight.grad.zero_()
            F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()
            grads.append(model.weight.grad)
        return grads

    report = find_exercise("l06-per-example").check(natural, 0)
    assert not report
    assert "one and the same tensor" in report[0].message and ".clone()" in report[0].message
    torch.manual_seed(0)  # the check must not depend on the global seed
    assert not find_exercise("l06-per-example").check(natural, 1)


def test_the_aliasing_point_is_qualified_for_create_graph():
    """A held .grad sees later backward calls only while they add in place, which
    create_graph=True does not (lesson 05, cell l05-40, shows both)."""
    recap = "".join(BY_ID["l06-25"]["source"])
    assert "sees every later" in recap and "create_graph=True" in recap
    assert "new tensor" in recap
