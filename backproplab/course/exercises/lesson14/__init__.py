"""Lesson 14, recording on and off: its exercise and its prediction.

The exercise is a method check: the answer is not one gradient but a mechanism that
autograd runs. It (module ``windows``) builds truncated backpropagation through time with
overlapping windows, TBPTT(k1, k2): every k1 steps, the losses of the last k1 steps
backpropagated through the last k2. Its check recomputes every window on new loops and
names the slips by computing them: windows of k1 steps (section 5's chunks), every loss of
the window, no truncation, a window started from zeros, a window one step short or long,
one update too many.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .windows import TBPTT_WINDOWS, overlap_case, window_gradients

__all__ = ["EXERCISES", "PREDICTIONS", "overlap_case", "window_gradients"]

EXERCISES = {
    "l14-windows": TBPTT_WINDOWS,
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


PREDICTIONS = {
    "l14-predict-inplace": Prediction(
        question="which in-place change breaks backward, the add (y = x + 1) or the sigmoid?",
        answer=_inplace_answer,
        hint="the version counter only matters for tensors a backward node saved. Which of the "
             "two backward formulas needs the value of y itself?",
        why="SigmoidBackward0 saved its output y to compute y(1 − y), and mul_ changed y after "
            "it was saved; the addition saved nothing. So the {answer} cell fails",
        choices=("add", "sigmoid"),
    ),
}
