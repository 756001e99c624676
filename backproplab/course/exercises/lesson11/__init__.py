"""Lesson 11, a tensor engine of your own: its exercises and its prediction.

The exercises are about the learner's engine, so their check cells hand over the
engine's pieces with the answer, as lesson 03's do:

- Exercise 1 (``l11-matmul``) passes ``(broadcast_matmul, Tensor, backward)``: a
  matrix product for every pair of shapes ``torch.matmul`` takes. The check runs
  one trial per kind of shape (a size-1 batch dimension, batch dimensions missing
  in front, a 1-D operand on either side, two vectors to a scalar, size-1
  dimensions on both sides), with new sizes each time: the forward value must be
  torch's, then the lesson's ``backward`` runs from ``(out * G).sum()`` with autograd
  refused, as `check_by_hand` runs an answer, and the two leaves' gradients must be
  torch's, in the by-hand judge's view. Each slip is named only when it holds on every
  trial.
- Exercise 2 (``l11-cumsum``) passes ``(cumsum, Tensor, backward)``: a cumulative sum
  along a dimension, as one node, its rule derived (no lesson shows it). Each trial has
  four cases: 1-D, 2-D along the last dimension, 3-D along the middle one (as -2) and
  along the first, each sum over at least 3 entries.
- Exercise 3 (``l11-amax``) passes ``(amax, Tensor, backward)``: the largest entry
  along a dimension, as one node. Inputs are small integers, so ties are common;
  torch's ``amax`` splits the gradient evenly between the tied entries.

Each exercise is a module here (``matmul``, ``cumsum``, ``amax``), a `Method` whose
observation (what the answer made and did, recorded where it runs) is judged in the
grader; ``shared`` holds what they share (amax and cumsum are both checked by
``shared.one_node``). This module holds the lesson's exercises and
its prediction.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .amax import AMAX
from .cumsum import CUMSUM
from .matmul import MATMUL
from .shared import F64

# The engine is the lesson: its Tensor sets its own operators (``Tensor.__add__ = add``),
# so each exercise reads the answer with the ENGINE vocabulary.
EXERCISES = {
    "l11-matmul": MATMUL,
    "l11-cumsum": CUMSUM,
    "l11-amax": AMAX,
}

# --------------------------------------------------------------------------- prediction


def _arrivals_answer():
    """How many gradients torch's engine waits for at y's node, for
    loss = (y * y + y).sum(), y = relu(x @ w): the edges into ReluBackward0."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen, dtype=F64)
    w = torch.randn(3, 2, generator=gen, dtype=F64, requires_grad=True)
    y = (x @ w).relu()
    loss = (y * y + y).sum()
    count, seen, todo = 0, set(), [loss.grad_fn]
    while todo:
        for fn, _ in todo.pop().next_functions:
            count += fn is y.grad_fn
            if fn is not None and fn not in seen:
                seen.add(fn)
                todo.append(fn)
    return count


PREDICTIONS = {
    "l11-predict-arrivals": Prediction(
        question="gradients arriving at y for loss = (y * y + y).sum()",
        answer=_arrivals_answer,
        hint="count the places where y is an input of an operation: each one sends a "
             "gradient back to y, and the product has y as both of its inputs.",
        why="the product y * y has y as both of its inputs and sends one gradient back for "
            "each, and the sum sends one more: {answer}. torch's engine counts these edges "
            "for every node before the pass, and runs ReluBackward0 once the last one has "
            "arrived",
    ),
}
