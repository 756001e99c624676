"""Lesson 17, gradients of gradients: its exercises and its predictions.

The first two exercises use autograd on purpose (the method is the point), so
their checks are `Method` checks (both in module ``newton``); the third is derived by
hand, here:

- ``l17-newton-step``: -f'(x) / f''(x) with both derivatives from autograd (its
  passes are counted), on new functions (a polynomial plus a sine, which no
  finite-difference stencil fits exactly) and points;
- ``l17-weight-penalty``: the gradient with respect to the weights w of the
  input-gradient penalty |d f / d x|^2 (a mixed second derivative), with two
  backward passes and no Hessian (the passes and the torch functions called
  are counted), on new critics and shapes;
- ``l17-hvp-by-hand``: a Hessian-vector product of a one-layer tanh network,
  derived by hand (forward the direction, then backward): a `ByHand` check on new
  shapes with autograd off, against double backward, with the slips named.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Prediction
from .newton import NEWTON, WEIGHT_PENALTY

__all__ = ["EXERCISES", "PREDICTIONS"]


# --------------------------------------------------------------------------
# Exercise 3: a Hessian-vector product by hand (the R-operator)
# --------------------------------------------------------------------------


def _hvp_inputs(gen: torch.Generator):
    """(x, W, a, V): a batch x (n, d), a layer W (d, h), output weights a (h,) and a
    direction V shaped like W, all of new sizes."""
    n, d, h = (int(k) for k in torch.randint(2, 7, (3,), generator=gen))
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    W = torch.randn(d, h, generator=gen, dtype=torch.float64) * 0.7
    a = torch.randn(h, generator=gen, dtype=torch.float64)
    V = torch.randn(d, h, generator=gen, dtype=torch.float64)
    return x, W, a, V


def _hvp_reference(x, W, a, V):
    """H v by double backward: the gradient with a graph, then backward from it along V."""
    W = W.detach().clone().requires_grad_()
    loss = (torch.tanh(x @ W) @ a).sum()
    (g,) = torch.autograd.grad(loss, W, create_graph=True)
    (hv,) = torch.autograd.grad(g, W, grad_outputs=V)
    return hv


def _hvp_with(second):
    """The R-operator's answer with ``second(T)`` in the place of tanh''(Z)."""
    def hv(x, W, a, V):
        T = torch.tanh(x @ W)
        return x.T @ (second(T) * (x @ V) * a)
    return hv


def _hvp_unpropagated(x, W, a, V):
    T = torch.tanh(x @ W)
    return x.T @ (-2 * T * (1 - T**2) * a)


def _hvp_direction_at_the_end(x, W, a, V):
    T = torch.tanh(x @ W)
    return (x.T @ (-2 * T * (1 - T**2) * a)) * V


def _hvp_gradient(x, W, a, V):
    T = torch.tanh(x @ W)
    return x.T @ ((1 - T**2) * a)


EXERCISES = {
    "l17-newton-step": NEWTON,
    "l17-weight-penalty": WEIGHT_PENALTY,
    "l17-hvp-by-hand": ByHand(
        name="hvp",
        reference=_hvp_reference,
        make_inputs=_hvp_inputs,
        mistakes={
            "tanh'' is missing: the gradient's factor (1 - T**2) depends on W too, and its "
            "derivative along V is tanh''(Z) * (x @ V) with tanh'' = -2 tanh (1 - tanh**2); "
            "you used tanh' = 1 - T**2 in its place": _hvp_with(lambda T: 1 - T**2),
            "the sign of tanh'' is flipped: d/dz (1 - tanh(z)**2) = -2 tanh(z) (1 - tanh(z)**2)":
                _hvp_with(lambda T: 2 * T * (1 - T**2)),
            "the factor 2 of tanh'' is missing: d/dz tanh(z)**2 = 2 tanh(z) tanh'(z)":
                _hvp_with(lambda T: -T * (1 - T**2)),
            "tanh'' = -2 tanh (1 - tanh**2), not -2 tanh: the chain rule multiplies by tanh' "
            "once more": _hvp_with(lambda T: -2 * T),
            "the direction V is not propagated: push it forward first (Zdot = x @ V), then "
            "the change of the gradient follows from Zdot": _hvp_unpropagated,
            "V is multiplied in entry by entry at the end; the direction goes in at the start, "
            "through the layer (Zdot = x @ V), before tanh'' scales it": _hvp_direction_at_the_end,
            "that is the gradient itself, not its change along V": _hvp_gradient,
        },
        advice="Forward the direction, then backward: Zdot = x @ V; the gradient is "
               "x.T @ ((1 - T**2) * a) with T = tanh(x @ W), and only the factor (1 - T**2) "
               "changes with W. Its change along V is tanh''(Z) * Zdot.",
    ),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _second_answer() -> bool:
    """Can torch.autograd.grad differentiate a plain dy/dx again?"""
    x = torch.tensor(2.0, requires_grad=True)
    (first,) = torch.autograd.grad(x**3, x)
    try:
        torch.autograd.grad(first, x)
    except RuntimeError:
        return False
    return True


def _linear_answer() -> bool:
    """For y = 3x, does a second grad work when the first used create_graph=True?"""
    x = torch.tensor(2.0, requires_grad=True)
    (first,) = torch.autograd.grad(3 * x, x, create_graph=True)
    try:
        torch.autograd.grad(first, x)
    except RuntimeError:
        return False
    return True


PREDICTIONS = {
    "l17-predict-second": Prediction(
        question="can torch.autograd.grad differentiate dy_dx?",
        answer=_second_answer,
        hint="a tensor can only be differentiated through the history autograd recorded for it. "
             "Did anything record the backward pass that made dy_dx?",
        why="by default backward records nothing, so dy_dx has no grad_fn to walk back through",
    ),
    "l17-predict-linear": Prediction(
        question="for y = 3x, does the second torch.autograd.grad work?",
        answer=_linear_answer,
        hint="create_graph records the operations of the backward formula that involve a tensor "
             "requiring grad. What is the backward formula of 3x made of?",
        why="the backward formula of 3x is grad_output * 3, and neither factor depends on x. "
            "Nothing is recorded, dy_dx comes back as a plain 3 with no grad_fn, and the second "
            "call fails, although the true second derivative is simply 0",
    ),
}
