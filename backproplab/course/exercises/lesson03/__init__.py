"""Lesson 03, build your own autograd: its exercises and its predictions.

The exercises are about the learner's own engine, so their check cells hand
over the engine's pieces along with the answer:

- Exercise 1 (``l03-ops``) passes ``(exp, log, power, Value, backward, tanh)``.
  For each new operation f the check builds ``f(u) * u + f(u)``, ``u = x * w + b``,
  from new random numbers (a new exponent for the power each time), runs the
  lesson's ``backward`` and compares the three leaf gradients with torch's. u
  reaches the output along two paths, so a rule that sets ``a.grad`` with ``=``
  loses one. The rules run with autograd switched off, as a gradient by hand
  runs, and the grader judges them as it judges one (`judge_by_hand`): each
  slip (module ``slips``) is named only when the learner's gradients equal it
  on every trial. Last, tanh is built from the learner's exp and power,
  ``(e - 1) * (e + 1)**-1`` with ``e = exp(2u)``, and must give the gradients
  of the engine's own tanh node.
- Exercise 2 (``l03-softmax-ce``) passes ``(cross_entropy, Value, backward)``:
  a softmax cross-entropy of 3 logits built from those operations. The check
  compares the loss with ``F.cross_entropy`` and the logits' gradients, from
  the engine's backward (autograd refused), with torch's, on new logits and
  targets; the graph behind the loss must hold the learner's exp and log nodes,
  so a rule written for the whole loss is not the engine's backward.
- Exercise 3 (``l03-paths``) passes the learner's ``count_paths``: the number of
  paths from the output down to a leaf, which is the leaf's gradient when every local
  derivative is 1, counted as backward computes a gradient (module ``paths``). The check
  watches the calls it makes (recursion is refused) and the reads of ``.parents`` (a walk
  of the paths one by one is stopped), on new random graphs, a chain of squares,
  c = a * a + a (and a leaf it does not use: 0 paths), a ladder of 2**120 paths and a
  chain 10,000 operations deep.

Exercises 1 and 2 live in module ``engine``, Exercise 3 in ``paths``: each observes
what the learner's code did as plain data, and the grader judges it.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .engine import CROSS_ENTROPY, OPS_AND_TANH
from .paths import PATHS

__all__ = ["EXERCISES", "PREDICTIONS"]

EXERCISES = {
    "l03-ops": OPS_AND_TANH,
    "l03-softmax-ce": CROSS_ENTROPY,
    "l03-paths": PATHS,
}

# --------------------------------------------------------------------------- predictions


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a * a + a).backward()
    return a.grad.item()


PREDICTIONS = {
    "l03-predict-paths": Prediction(
        question="a.grad for c = a*a + a at a = 3",
        answer=_paths_answer,
        hint="count every path from c back to a: the product uses a twice, and each of those "
             "uses carries the other factor; the sum adds one more path.",
        why="three paths reach a: two through the product, each carrying the other factor "
            "(3 each), and one straight through the sum (1): 3 + 3 + 1 = {answer}",
    ),
}
