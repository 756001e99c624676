"""Lesson 22, where calculus runs out: its exercises and its predictions.

- ``l22-complex-vjps``: the vector-Jacobian products of ``z * w``, ``|z|**2`` and
  ``exp(z)`` in torch's convention (``.grad`` is ∂L/∂x + i ∂L/∂y), for complex
  ``z``, ``w`` and upstream gradients. The slips: a conjugate left out, the
  conjugate of torch's answer (the other convention), the factor 2 of ``|z|**2``.
- ``l22-complex-linear``: ``x @ W + b`` with complex ``x`` and ``W``: the conjugate
  transposes (``.mH``) where lesson 09's real rule has plain ones.
- ``l22-hinge-kinks``: the gradient of a hinge loss on clipped scores plus a
  group-lasso penalty, on integer data, so that every trial has a margin exactly at
  relu's kink, a score exactly at hardtanh's bound and a pair of weights exactly at the
  norm's zero: the answer must follow torch's choice at each and stay finite. The scores
  are clipped by hardtanh, whose choice at its bounds is the same in torch 2.13 and 2.15 (clamp
  sends 1 there in torch 2.13 and 0 in 2.15).
- ``l22-safe-softplus``: a method exercise. The learner rewrites ``soft_relu``, a
  ``torch.where`` whose unused branch overflows, so that its gradient has no NaN;
  where the answer runs, autograd differentiates the learner's forward on inputs in
  every region, and the grader compares values and gradients with the safe reference
  (the gradient with respect to beta within the round-off of its two terms).
- Three predictions: ``abs`` at its kink, ReLU spelled two ways at 0, and the
  ``.grad`` of ``|z|**2`` at ``z = 1+2j``.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .complex import COMPLEX_LINEAR, COMPLEX_VJPS
from .hinge import HINGE
from .softplus import SAFE_SOFTPLUS

F64 = torch.float64

EXERCISES = {
    "l22-complex-vjps": COMPLEX_VJPS,
    "l22-complex-linear": COMPLEX_LINEAR,
    "l22-hinge-kinks": HINGE,
    "l22-safe-softplus": SAFE_SOFTPLUS,
}

# --------------------------------------------------------------------------- Predictions


def _grad_of(f, value):
    x = torch.tensor(value, dtype=F64, requires_grad=True)
    f(x).backward()
    return x.grad.item()


def _abs_answer() -> float:
    return _grad_of(lambda pred: (pred - 3.0).abs(), 3.0)


def _relu_answer() -> list[float]:
    return [_grad_of(torch.relu, 0.0),
            _grad_of(lambda x: torch.maximum(x, torch.zeros_like(x)), 0.0)]


def _complex_answer() -> complex:
    z = torch.tensor(1 + 2j, dtype=torch.complex128, requires_grad=True)
    (z.abs() ** 2).backward()
    return z.grad.item()


PREDICTIONS = {
    "l22-predict-abs": Prediction(
        question="pred.grad of the L1 loss (pred - 3.0).abs() when pred is exactly 3.0",
        answer=_abs_answer,
        hint="|u| has slope -1 on one side of its corner and +1 on the other, and every slope "
             "in between fits under the corner. torch picks one of them by a rule made for "
             "descent: what step should a prediction that sits exactly on its target get?",
        why="every slope between -1 and 1 is a subgradient of |u| at its corner, and torch "
            "takes the one of smallest size, {answer} (abs's backward multiplies by sgn(u), "
            "and sgn(0) is 0). A prediction on its target gets no push either way",
    ),
    "l22-predict-relu": Prediction(
        question="x.grad at x = 0 for torch.relu(x) and for "
                 "torch.maximum(x, torch.zeros_like(x)), in that order",
        answer=_relu_answer,
        hint="the two compute the same numbers, but each op has its own backward. Look at "
             "what each takes as inputs (a number, or a second tensor?) and apply the rule to "
             "all of an op's tensor inputs at once.",
        why="relu compares x with a fixed number: a convex kink, smallest subgradient 0. "
            "maximum has two tensor inputs, and the smallest subgradient of the pair is "
            "(1/2, 1/2), so x gets 0.5 although the zeros need no gradient. Together: {answer}",
    ),
    "l22-predict-complex": Prediction(
        question="z.grad after (z.abs() ** 2).backward() at z = 1+2j",
        answer=_complex_answer,
        hint="write z = x + iy, so the loss is x² + y². .grad is one complex number built from "
             "the loss's two real derivatives, arranged so that z - lr * z.grad goes downhill.",
        why="the loss is x² + y², so ∂L/∂x = 2x = 2 and ∂L/∂y = 2y = 4, and torch stores "
            "∂L/∂x + i ∂L/∂y = {answer}. That is 2 ∂L/∂z* = 2z: the conjugate Wirtinger "
            "derivative, times 2",
    ),
}
