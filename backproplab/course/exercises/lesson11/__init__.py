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
- Exercise 2 (``l11-backward``) passes ``(backward_by_counting, Tensor)``. The check
  builds graphs with the lesson's operations (a tensor used several times, a random
  graph of many paths, a chain 5,000 operations deep), replaces every node's rule
  by one that records when it runs and what it is given, runs the learner's
  backward and compares every leaf's gradient with torch's. The records name the
  slips: a rule run twice, a rule run before every gradient for its node arrived,
  a gradient replaced where it should be added, a leaf that keeps one of its
  gradients. Python's calls are watched as in lesson 03's sort exercise: recursion
  and the lesson's own ``backward`` or ``topo_order`` are refused.
- Exercise 3 (``l11-amax``) passes ``(amax, Tensor, backward)``: the largest entry
  along a dimension, as one node. Inputs are small integers, so ties are common;
  torch's ``amax`` splits the gradient evenly between the tied entries.

Each exercise is a module here (``matmul``, ``counting``, ``amax``), a `Method` whose
observation (what the answer made and did, recorded where it runs) is judged in the
grader; ``shared`` holds what they share. This module holds the lesson's exercises and
its prediction.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .amax import AMAX
from .counting import COUNTING
from .matmul import MATMUL
from .shared import F64

# The engine is the lesson: its Tensor sets its own operators (``Tensor.__add__ = add``),
# so each exercise reads the answer with the ENGINE vocabulary.
EXERCISES = {
    "l11-matmul": MATMUL,
    "l11-backward": COUNTING,
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
