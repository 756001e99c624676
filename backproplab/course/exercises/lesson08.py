"""Lesson 08, backward from a non-scalar output: its exercises and its predictions.

The ``gradient`` argument of backward is the vector of a vector-Jacobian product (VJP); a
banded Jacobian built from three backward calls (rows that share no column share a pass:
the check watches the calls, backward only, and names the slips of the three passes by
computing them); the VJP of a function whose outputs all depend on all inputs
(x / x.sum()), derived by hand.

Every by-hand exercise draws new shapes on every trial, each size different from the others,
so that a transposed answer or a sum over the wrong dimension cannot pass by having the
right shape by accident. The slips listed under ``mistakes`` are the ones the lesson warns
about; the check names one only when the learner's answer equals it on every trial.
"""

from __future__ import annotations

import torch

from ._spec import (
    ByHand,
    Method,
    Prediction,
    as_plain,
    call_answer,
    close,
    compared,
    count_autograd,
)


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
# a banded Jacobian from three backward calls
# --------------------------------------------------------------------------

_BAND = "band_jacobian"
_BACKWARD_CALLS = {"Tensor.backward()", "torch.autograd.backward"}


def _stencil_inputs(gen):
    """A new function whose output i reads x[i-1], x[i] and x[i+1] only (zero beyond the
    ends), as its four coefficients, and a point x of a new length, 7 to 12."""
    n = int(torch.randperm(6, generator=gen)[0]) + 7
    coefficients = [float(t) for t in torch.rand(4, generator=gen) + 0.5]
    return {"coefficients": coefficients, "x": torch.randn(n, generator=gen)}


def _stencil(coefficients):
    a, b, c, d = coefficients

    def g(t):
        zero = t.new_zeros(1)
        left, right = torch.cat([zero, t[:-1]]), torch.cat([t[1:], zero])
        return a * t * left + b * torch.sin(right) - c * t**2 + d * left * torch.tanh(right)

    return g


def _from_passes(passes, n):
    """The Jacobian read back from three passes: entry (i, j) of the band from pass i % 3."""
    J = torch.zeros(n, n)
    for i in range(n):
        for j in range(max(i - 1, 0), min(i + 2, n)):
            J[i, j] = passes[i % 3][j]
    return J


def _band_slips(J):
    """What the typical slips return, from the right Jacobian J: name -> tensor."""
    n = J.shape[0]
    passes = [J[c::3].sum(0) for c in range(3)]  # each pass: the rows i % 3 == c, added
    return {
        "accumulated": _from_passes([sum(passes[:c + 1]) for c in range(3)], n),
        "emptied": _from_passes([passes[2]] * 3, n),
        "whole rows": torch.stack([passes[i % 3] for i in range(n)]),
        "transposed": J.T,
    }


_BAND_TOLD = {
    "accumulated": "row i holds the passes up to its own added together: x.grad accumulated "
                   "across your backward calls. Start each pass from an empty .grad "
                   "(x.grad = None, or a fresh leaf).",
    "emptied": "every row was read from the last pass: the passes share one tensor, x.grad, "
               "which zero_() empties in place and the next call fills again. Keep a copy "
               "(x.grad.clone()) or give each pass a fresh leaf.",
    "whole rows": "row i holds the whole result of its pass, but that result also carries the "
                  "other rows of the pass, each in its own columns. Row i owns only columns "
                  "i - 1 to i + 1 of it; the rest of row i is 0.",
    "transposed": "it is transposed: row i is output i, column j is input j.",
}


def _band_count(calls: int, n: int) -> str:
    """What a wrong number of backward calls says about the answer."""
    if calls == n:
        return (f"{n} backward calls, one per output: that is section 2's row by row. A pass "
                "may carry several rows, as long as no two of them share a column.")
    if calls == 2:
        return ("2 backward calls: a pass that carries rows i and i + 2 adds their numbers in "
                "column i + 1, which both of them read, and cannot tell them apart.")
    if calls == 1:
        return ("1 backward call: it adds every row, and in column j up to three of them "
                "(j - 1, j and j + 1) land on the same entry.")
    return f"{calls} backward calls; the exercise asks for three, whatever the length."


def _observe_band(answer, inputs):
    """The autograd calls the answer made (each named by the torch function behind it) and
    the Jacobian it returned."""
    with count_autograd() as seen:
        got, failed = call_answer(answer, _stencil(inputs["coefficients"]),
                                  inputs["x"].clone(), what="it",
                                  not_callable=f"expected a function band_jacobian(g, x), got "
                                               f"{type(answer).__name__}.")
    if failed is not None:
        return failed
    return {"calls": list(seen.calls), "J": as_plain(got)}


def _three_passes(J):
    """The observation of three backward calls that return J."""
    return {"calls": ["Tensor.backward()"] * 3, "J": J}


def _band_reference(inputs):
    return _three_passes(torch.autograd.functional.jacobian(_stencil(inputs["coefficients"]),
                                                            inputs["x"]))


def _passes(calls):
    """The calls, a backward call by either of its names counted as the same."""
    return ["backward" if call in _BACKWARD_CALLS else call for call in calls]


def _band_agree(got, want):
    return _passes(got["calls"]) == _passes(want["calls"]) and close(got["J"], want["J"], "float32")


def _explain_band(inputs, got, want):
    n = inputs["x"].numel()
    where = f"for a function of length {n}"
    other = [call for call in got["calls"] if call not in _BACKWARD_CALLS]
    if other:
        return (f"your code called {other[0]}; the exercise asks for backward calls only, "
                "three of them, each with a gradient argument of your choosing.")
    if len(got["calls"]) != 3:
        return f"{where}, {_band_count(len(got['calls']), n)}"
    return compared(f"the Jacobian {where}", got["J"], want["J"], f"the ({n}, {n}) Jacobian",
                    "float32")


BAND = Method(
    name=_BAND,
    make_inputs=_stencil_inputs,
    observe=_observe_band,
    reference=_band_reference,
    explain=_explain_band,
    mistakes={told: (lambda inputs, slip=slip: _three_passes(_band_slips(
        _band_reference(inputs)["J"])[slip])) for slip, told in _BAND_TOLD.items()},
    agree=_band_agree,
    passed="three backward calls, and the right Jacobian for 2 new functions of new lengths",
)


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
