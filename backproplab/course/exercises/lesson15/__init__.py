"""Lesson 15, tools for looking inside backward: its exercise and its prediction.

The exercise is a method check (module ``vanishing``): it searches with hooks for the
layer where the gradient vanishes in a broken network; its check counts the hooks
registered, the backward passes and the hooks left behind, and knows the slips of that
hunt: .grad read on a non-leaf, the walk started from the input, grad_output taken for
grad_input, the old register_backward_hook (a zeroed Linear layer among the broken networks
shows it).
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .networks import Gate, broken_network, input_grad_norms
from .vanishing import VANISHING

__all__ = ["EXERCISES", "PREDICTIONS", "Gate", "broken_network", "input_grad_norms"]

EXERCISES = {
    "l15-vanishing": VANISHING,
}

# --------------------------------------------------------------------------- predictions


def _pileup_answer():
    """w.grad at step 3 when a doubling hook is registered on w inside the loop."""
    w = torch.tensor(1.0, requires_grad=True)
    for _step in range(3):
        w.register_hook(lambda grad: grad * 2)
        w.grad = None
        (3 * w).backward()
    return w.grad.item()


PREDICTIONS = {
    "l15-predict-pileup": Prediction(
        question="w.grad at step 3, with the doubling hook registered inside the loop",
        answer=_pileup_answer,
        hint="register_hook adds a hook; it does not replace the ones already on w. How many "
             "hooks does w carry during the third backward, and what does each one do?",
        why="each step adds one more hook, so the third backward runs three of them: "
            "3 · 2 · 2 · 2 = {answer}",
    ),
}
