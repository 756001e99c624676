"""Lesson 24, the backward in lower precision: its exercises and its prediction.

- ``l24-scale-range`` (by hand): for a linear layer with a mean-squared-error loss, the
  range of loss scales, as powers of two, that lift the smallest entry of the output
  gradient into float16's normal numbers without letting the weight or bias gradient
  pass float16's largest number. Checked like a gradient by hand (`ByHand`): new shapes
  and new residual sizes on every trial, autograd off, the reference from autograd in
  float64. Its slips are about the chain rule of the mean and about float16's limits.
- ``l24-compensated-step`` (method): a weight update that keeps 16-bit weights and a
  16-bit compensation (Kahan's summation), so that updates smaller than half a gap are
  not lost. The observation replays section 4's 1000 float16 steps and runs float16 and
  bfloat16 trainings side by side, keeping the weights the learner's step returns; the
  verdict compares section 4's with its float32 master weights, and every final weight of
  the trainings with the exact sum of its updates (within two gaps), drawing the updates
  again along the learner's path; anything but 16-bit tensors returned is refused. A
  slip is named only when the learner's step equals the slip's on a probe.

The prediction runs a Linear(3, 4) under float16 autocast and counts the rows of its
weight gradient that come out all zero.
"""

from __future__ import annotations

import torch
from torch import nn

from .._spec import Prediction, seeded
from .compensated import COMPENSATED
from .scale import SCALE_RANGE

EXERCISES = {
    "l24-scale-range": SCALE_RANGE,
    "l24-compensated-step": COMPENSATED,
}

# --------------------------------------------------------------------------- prediction

ROW_FACTORS = (3e-3, 5e-5, 4e-7, 2e-8)


def zero_rows_experiment() -> torch.Tensor:
    """The prediction's experiment: Linear(3, 4) on torch.ones(8, 3) under float16
    autocast, loss (y * c).sum() with c = ROW_FACTORS; the weight gradient."""
    with seeded(17):
        layer = nn.Linear(3, 4)
    with torch.autocast("cpu", dtype=torch.float16):
        y = layer(torch.ones(8, 3))
    (y * torch.tensor(ROW_FACTORS)).sum().backward()
    return layer.weight.grad


PREDICTIONS = {
    "l24-predict-zero-rows": Prediction(
        question="how many rows of the weight gradient are all zero",
        answer=lambda: int((zero_rows_experiment() == 0).all(dim=1).sum()),
        hint="follow the gradient backwards: which tensor does autograd round to float16 "
             "first, before any sum over the batch, and which of the four numbers does "
             "float16 still hold, counting its subnormal numbers?",
        why="dL/dy = c in every row of the batch, and it is rounded to float16 where "
            "autocast's cast of y sits, before the sum over the batch: 2e-8 is below half "
            "of float16's smallest subnormal (2**-24 = 5.96e-8 / 2) and becomes 0, so that "
            "row is 0 even though 8 x 2e-8 = 1.6e-7 would fit; 4e-7 and 5e-5 are below the "
            "smallest normal 6.1e-5 but survive as subnormals, with fewer digits: {answer}",
        choices=(0, 1, 2, 3, 4),
    ),
}
