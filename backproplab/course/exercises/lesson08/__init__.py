"""Lesson 08, backward from a non-scalar output: its exercises and its predictions.

The ``gradient`` argument of backward is the vector of a vector-Jacobian product (VJP); a
banded Jacobian built from three backward calls (rows that share no column share a pass;
module ``band``); the VJP of a function whose outputs all depend on all inputs
(x / x.sum()), derived by hand.

Every by-hand exercise draws new shapes on every trial, each size different from the others,
so that a transposed answer or a sum over the wrong dimension cannot pass by having the
right shape by accident. The slips listed under ``mistakes`` are the ones the lesson warns
about; the check names one only when the learner's answer equals it on every trial.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Prediction
from .band import BAND


def _sizes(gen, k, low=2, high=6):
    """``k`` different sizes between ``low`` and ``high``."""
    order = torch.randperm(high - low + 1, generator=gen)[:k]
    return [int(s) + low for s in order]


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


# --------------------------------------------------------------------------
# the gradient argument for a chosen loss
# --------------------------------------------------------------------------


def _last_row_mean_weights(y):
    return torch.func.grad(lambda t: t[-1].mean())(y)


def _new_matrix(gen):
    rows, cols = _sizes(gen, 2)
    return (_randn(gen, rows, cols),)


def _row_weights(y, row, value):
    v = torch.zeros_like(y)
    v[row] = value
    return v


# --------------------------------------------------------------------------
# the VJP of a coupled function, by hand
# --------------------------------------------------------------------------


def _new_shares(gen):
    """Positive weights x of a new length (3 to 9) and a vector v of the same length."""
    (n,) = _sizes(gen, 1, 3, 9)
    return torch.rand(n, generator=gen, dtype=torch.float64) + 0.5, _randn(gen, n)


def _shares_vjp_reference(x, v):
    """vᵀJ of shares(x) = x / x.sum(), from autograd."""
    x = x.detach().clone().requires_grad_()
    return torch.autograd.grad(x / x.sum(), x, v)[0]


def _shares_jv(x, v):
    """J v: the Jacobian's rows times v, where backward needs its columns."""
    total = x.sum()
    return (v - x / total * v.sum()) / total


# --------------------------------------------------------------------------
# The exercises
# --------------------------------------------------------------------------

EXERCISES = {
    "l08-band-jacobian": BAND,
    "l08-mean-gradient": ByHand(
        name="gradient argument for y[-1].mean()",
        reference=_last_row_mean_weights,
        make_inputs=_new_matrix,
        mistakes={
            "ones in the last row give the gradient of the row's sum; its mean divides each "
            "entry by the number of entries in the row":
                lambda y: _row_weights(y, -1, 1.0),
            "1 / y.numel() everywhere is the gradient of the mean of the whole matrix; only "
            "the last row counts here":
                lambda y: torch.full_like(y, 1 / y.numel()),
            "the weights sit in the first row (y[0]); the loss uses the last row, y[-1]":
                lambda y: _row_weights(y, 0, 1 / y.shape[1]),
            "divided by the number of rows: a row of y has y.shape[1] entries":
                lambda y: _row_weights(y, -1, 1 / y.shape[0]),
        },
        advice="Entry v[i, j] is how much y[i, j] counts in the loss: write the loss as a "
               "weighted sum of the entries of y and read the weights off.",
    ),
    "l08-shares-vjp": ByHand(
        name="shares_vjp",
        reference=_shares_vjp_reference,
        make_inputs=_new_shares,
        without="the (n, n) Jacobian",
        mistakes={
            "only the diagonal of J is there: every share y_i also depends on every x_j "
            "through the sum S, which adds -x_i / S**2 to J[i, j] for every j":
                lambda x, v: v / x.sum(),
            "that is J v (each row of J times v); backward needs vᵀJ, whose entry j sums "
            "v_i * J[i, j] down column j, over the outputs i": _shares_jv,
            "the sign of the coupling term is flipped: d(1/S)/dS = -1/S**2":
                lambda x, v: (v + (v * x).sum() / x.sum()) / x.sum(),
            "the 1/S is missing: every term of J[i, j] carries at least one 1/S":
                lambda x, v: v - (v * x).sum() / x.sum(),
            "the coupling term needs 1/S**2 (the derivative of 1/S is -1/S**2), not 1/S":
                lambda x, v: v / x.sum() - (v * x).sum() / x.sum(),
        },
        advice="Write y_i = x_i / S with S = sum_j x_j, differentiate y_i with respect to "
               "x_j (the quotient rule: one term when i = j, one through S for every j), then "
               "sum v_i * J[i, j] over i without building J.",
    ),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _weights_answer():
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(out.detach())
    return (inp.grad[0, 0].item(), inp.grad[0, 1].item())


PREDICTIONS = {
    "l08-predict-weights": Prediction(
        question="inp.grad after out.backward(out.detach()) (on the diagonal, off it)",
        answer=_weights_answer,
        hint="the gradient argument weighs each entry of out by a plain number, held fixed. "
             "Each entry of inp reaches one entry of out: its gradient is its local "
             "derivative times the weight on that entry.",
        why="backward(v) gives the gradient of (v * out).sum() with v held fixed. inp[i, j] "
            "reaches only out[j, i], with local derivative 2 (inp[i, j] + 1), and the weight "
            "on that entry is its own value, (inp[i, j] + 1) squared: {answer}",
    ),
}
