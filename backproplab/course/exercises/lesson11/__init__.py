"""Lesson 11, pitfalls and tools: its exercises and its predictions.

Both exercises are method checks: the answer is not one gradient but a mechanism
that autograd runs. Exercise 1 (module ``windows``) builds truncated backpropagation
through time with overlapping windows, TBPTT(k1, k2): every k1 steps, the losses of
the last k1 steps backpropagated through the last k2. Its check recomputes every
window on new loops and names the slips by computing them: windows of k1 steps
(section 6's chunks), every loss of the window, no truncation, a window started from
zeros, a window one step short or long, one update too many. Exercise 2 (module
``vanishing``) searches with hooks for the layer where the gradient vanishes in a
broken network; its check counts the hooks registered, the backward passes and the
hooks left behind, and knows the slips of that hunt: .grad read on a non-leaf, the
walk started from the input, grad_output taken for grad_input.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .vanishing import VANISHING, Gate, broken_network, input_grad_norms
from .windows import TBPTT_WINDOWS, overlap_case, window_gradients

__all__ = ["EXERCISES", "PREDICTIONS", "Gate", "broken_network", "input_grad_norms",
           "overlap_case", "window_gradients"]

EXERCISES = {
    "l11-windows": TBPTT_WINDOWS,
    "l11-vanishing": VANISHING,
}

# --------------------------------------------------------------------------- predictions


def _inplace_answer():
    """Which in-place change breaks backward: after x + 1 or after x.sigmoid()?"""

    def fails(make_y):
        leaf = torch.tensor([1.0, 2.0], requires_grad=True)
        out = make_y(leaf)
        out.mul_(2)
        try:
            out.sum().backward()
            return False
        except RuntimeError:
            return True

    return "sigmoid" if fails(torch.sigmoid) else "add"


def _pileup_answer():
    """w.grad at step 3 when a doubling hook is registered on w inside the loop."""
    w = torch.tensor(1.0, requires_grad=True)
    for _step in range(3):
        w.register_hook(lambda grad: grad * 2)
        w.grad = None
        (3 * w).backward()
    return w.grad.item()


PREDICTIONS = {
    "l11-predict-inplace": Prediction(
        question="which in-place change breaks backward, the add (y = x + 1) or the sigmoid?",
        answer=_inplace_answer,
        hint="the version counter only matters for tensors a backward node saved. Which of the "
             "two backward formulas needs the value of y itself?",
        why="SigmoidBackward0 saved its output y to compute y(1 − y), and mul_ changed y after "
            "it was saved; the addition saved nothing. So the {answer} cell fails",
        choices=("add", "sigmoid"),
    ),
    "l11-predict-pileup": Prediction(
        question="w.grad at step 3, with the doubling hook registered inside the loop",
        answer=_pileup_answer,
        hint="register_hook adds a hook; it does not replace the ones already on w. How many "
             "hooks does w carry during the third backward, and what does each one do?",
        why="each step adds one more hook, so the third backward runs three of them: "
            "3 · 2 · 2 · 2 = {answer}",
    ),
}
