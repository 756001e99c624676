"""Lesson 13, the classic layers' backward by hand: its exercises and its predictions.

The lesson writes four layers as plain tensor code: a 2-D convolution as a matrix
product on unfolded patches, max-pooling, dropout, and one step of an LSTM
(``layers`` holds its convolution and LSTM code). A check makes a fresh random layer with sizes of
its own, runs it forward in float64, and hands the learner's function the forward
values its exercise names and random numbers standing for the gradient arriving
from above. The reference is autograd's gradient through torch's own layer
(`F.conv2d`, `F.max_pool2d`) or through the lesson's forward code, given the same
numbers (`_spec.vjp`).

- ``l13-conv-dx``: the input gradient of a convolution with stride and padding.
- ``l13-conv-dw``: its weight and bias gradients.
- ``l13-pool``: max-pooling's backward, with ties and overlapping windows.
- ``l13-dropout``: dropout's backward from the mask, in training and in eval mode.
- ``l13-lstm-step``: one LSTM step's backward, from its gates to its pre-activations.
- ``l13-lstm-bptt``: backpropagation through time over a few LSTM steps.
- ``l13-predict-pool-tie`` and ``l13-predict-dropout-eval``: where a tied maximum's
  gradient goes, and what dropout's backward does in eval mode.

Each exercise is a constant of its module (``conv``, ``pool``, ``lstm``); this
module maps the ids to them and holds the predictions.

The slips kept with each exercise are the ones its forward code invites: padding
or stride forgotten, the kernel not turned (or turned where it must not be), a sum
over the batch or the positions left out, a tie settled the other way, a scale
missing or applied in eval, a gate's derivative swapped, and a path of the cell
state or of the hidden state left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import Prediction
from .conv import CONV_DW, CONV_DX
from .lstm import LSTM_BPTT, LSTM_STEP
from .pool import DROPOUT, POOL

EXERCISES = {
    "l13-conv-dx": CONV_DX,
    "l13-conv-dw": CONV_DW,
    "l13-pool": POOL,
    "l13-dropout": DROPOUT,
    "l13-lstm-step": LSTM_STEP,
    "l13-lstm-bptt": LSTM_BPTT,
}

# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------

TIED_WINDOW = [[1.0, 3.0], [3.0, 2.0]]  # the question's one 2x2 window


def _tie_grad() -> list[float]:
    x = torch.tensor([[TIED_WINDOW]], requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    return x.grad.flatten().tolist()


def _eval_grad() -> str:
    x = torch.ones(4, requires_grad=True)
    F.dropout(x, p=0.5, training=False).sum().backward()
    values = set(x.grad.tolist())
    if values == {1.0}:
        return "all 1"
    if values == {2.0}:
        return "all 2"
    return "0 or 2"


PREDICTIONS = {
    "l13-predict-pool-tie": Prediction(
        question="x.grad after F.max_pool2d(x, 2).sum().backward() for the window "
                 "[[1, 3], [3, 2]], row by row",
        answer=_tie_grad,
        hint="lesson 09 met two conventions for a tied maximum. Which one fits an "
             "operation that can return the index of each window's maximum "
             "(return_indices=True)? And if it keeps one index, which does it meet first?",
        why="max_pool2d keeps one index per window, like max(dim=...), and sends the whole "
            "gradient there: {answer}. Reading the window row by row, the 3 in the top row "
            "comes first, and a later entry replaces the kept one only when it is strictly "
            "larger, so a tie stays with the first",
    ),
    "l13-predict-dropout-eval": Prediction(
        question="x.grad after F.dropout(x, p=0.5, training=False).sum().backward() for "
                 "x = torch.ones(4, requires_grad=True)",
        answer=_eval_grad,
        hint="in training, dropout zeroes some entries and scales the others so that the "
             "output's expected value is x. In eval mode nothing is dropped: does the output "
             "still need a scale to have that expected value?",
        why="in eval mode F.dropout returns its input itself: no mask, no 1/(1 - p), not even "
            "a node in the graph, so each entry's gradient is the 1 that sum() sends back: "
            "{answer}. The training-time scale is what lets eval mode do nothing",
        choices=("all 1", "all 2", "0 or 2"),
    ),
}
