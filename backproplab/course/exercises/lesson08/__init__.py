"""Lesson 08, backward from a non-scalar output: its exercises and its predictions.

The lesson has two notebooks:

- ``08-non-scalar-backward.ipynb``: the ``gradient`` argument of backward is the vector of
  a vector-Jacobian product (VJP); a banded Jacobian built from three backward calls
  (rows that share no column share a pass; module ``band``); the VJP of a function whose outputs all
  depend on all inputs (x / x.sum()), derived by hand.
- ``08-tensor-op-vjps.ipynb``: deriving the VJP of a tensor operation (index notation, one
  entry differentiated, read back as tensor code, shapes first) and the rules it gives for
  matmul, broadcasting, reductions, indexing, reshapes and softmax.

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
# 08-non-scalar-backward: the gradient argument for a chosen loss
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
# 08-non-scalar-backward: the VJP of a coupled function, by hand
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
# 08-tensor-op-vjps: the softmax VJP
# --------------------------------------------------------------------------


def _new_softmax(gen):
    """p = softmax(z) along the last dimension, and a gradient g for it; 2 or 3 dims."""
    dims = int(torch.randint(2, 4, (1,), generator=gen))
    shape = _sizes(gen, dims, 2, 7)
    p = torch.softmax(2 * _randn(gen, *shape), dim=-1)
    return p, _randn(gen, *shape)


def _softmax_vjp_reference(p, g):
    z = p.log().requires_grad_()  # softmax(log p) = p, since each row of p sums to 1
    (dz,) = torch.autograd.grad(torch.softmax(z, dim=-1), z, g)
    return dz


# --------------------------------------------------------------------------
# 08-tensor-op-vjps: out = x * w + b with x (B, T, C), w (C,), b (C,)
# --------------------------------------------------------------------------


def _new_affine(gen):
    B, T, C = _sizes(gen, 3)
    return _randn(gen, B, T, C), _randn(gen, C), _randn(gen, C), _randn(gen, B, T, C)


def _affine_reference(x, w, b, g):
    x, w, b = (t.requires_grad_() for t in (x, w, b))
    return torch.autograd.grad(x * w + b, (x, w, b), g)


# --------------------------------------------------------------------------
# 08-tensor-op-vjps: Y = X @ W with X (B, T, C) and a shared W (C, D)
# --------------------------------------------------------------------------


def _new_batched_matmul(gen):
    B, T, C, D = _sizes(gen, 4)
    return _randn(gen, B, T, C), _randn(gen, C, D), _randn(gen, B, T, D)


def _batched_matmul_reference(X, W, G):
    X, W = X.requires_grad_(), W.requires_grad_()
    return torch.autograd.grad(X @ W, (X, W), G)


# --------------------------------------------------------------------------
# 08-tensor-op-vjps: torch.gather along a dimension, with repeated indices
# --------------------------------------------------------------------------


def _new_gather(gen):
    """x (R, C), a dim (0 and 1 in turn), an index with at least one repeated entry, and g
    shaped like the index.

    The index values stay below both sizes of x, so that a scatter along the other
    dimension runs (and can be recognised as that slip) instead of raising."""
    R, C = _sizes(gen, 2, 3, 6)
    dim = gen.initial_seed() % 2  # consecutive trials gather along both dimensions
    x = _randn(gen, R, C)
    along = int(torch.randint(2, x.shape[dim] + 1, (1,), generator=gen))
    across = int(torch.randint(1, x.shape[1 - dim] + 1, (1,), generator=gen))
    shape = (along, across) if dim == 0 else (across, along)
    index = torch.randint(0, min(R, C), shape, generator=gen)
    index.select(1 - dim, 0)[1] = index.select(1 - dim, 0)[0]  # a repeated index
    return x, dim, index, _randn(gen, *shape)


def _gather_reference(x, dim, index, g):
    x = x.requires_grad_()
    (dx,) = torch.autograd.grad(torch.gather(x, dim, index), x, g)
    return dx


def _put_instead_of_add(x, dim, index, g):
    """dx[index] = g, entry by entry: a repeated index keeps one contribution."""
    return torch.zeros_like(x).scatter(dim, index, g)


def _assign_rows(x, dim, index, g):
    """The same slip written with advanced indexing."""
    dx = torch.zeros_like(x)
    other = torch.arange(index.shape[1 - dim]).unsqueeze(dim).expand_as(index)
    where = (index, other) if dim == 0 else (other, index)
    dx[where] = g
    return dx


# --------------------------------------------------------------------------
# The exercises of both notebooks
# --------------------------------------------------------------------------

_SUMMED = "summed over the wrong dimension"

EXERCISES = {
    # 08-non-scalar-backward
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
    # 08-tensor-op-vjps
    "l08-softmax-vjp": ByHand(
        name="softmax VJP",
        reference=_softmax_vjp_reference,
        make_inputs=_new_softmax,
        without="the softmax's Jacobian (a matrix per row)",
        mistakes={
            "p * g is only the diagonal of the Jacobian: every z_j also moves every other "
            "p_i through the shared denominator, which adds -p_j * (g * p).sum() over the row":
                lambda p, g: p * g,
            "the sign of the second term is flipped: d p_i / d z_j = p_i (delta_ij - p_j)":
                lambda p, g: p * (g + (g * p).sum(-1, keepdim=True)),
            f"{_SUMMED}: the sum (g * p).sum(...) runs along the softmax's dimension, the "
            "last one (dim=-1, keepdim=True)":
                lambda p, g: p * (g - (g * p).sum(0, keepdim=True)),
            "that is the VJP of log_softmax (g - p * g.sum(-1, keepdim=True)), not of softmax":
                lambda p, g: g - p * g.sum(-1, keepdim=True),
        },
        advice="Write p_i = exp(z_i) / sum_k exp(z_k), differentiate one entry, "
               "d p_i / d z_j, then sum g_i times it over i, and read that sum back as "
               "tensor code along the last dimension.",
    ),
    "l08-broadcast-affine": ByHand(
        name="x * w + b",
        outputs=["dL/dx", "dL/dw", "dL/db"],
        reference=_affine_reference,
        make_inputs=_new_affine,
        mistakes={
            "w was broadcast over the batch and time dimensions, so its gradient is a sum "
            "over them (dims 0 and 1); this one keeps the shape (B, T, C)":
                lambda x, w, b, g: (g * w, g * x, g),
            "b was broadcast over the batch and time dimensions, so its gradient is a sum "
            "over them (dims 0 and 1); this one keeps the shape (B, T, C)":
                lambda x, w, b, g: (g * w, (g * x).sum((0, 1)), g),
            f"{_SUMMED}: w and b have shape (C,), so sum over dims 0 and 1 and keep the last":
                lambda x, w, b, g: (g * w, (g * x).sum(-1), g.sum(-1)),
            "summed over the batch dimension only: the time dimension T was broadcast too":
                lambda x, w, b, g: (g * w, (g * x).sum(0), g.sum(0)),
            "keepdim=True leaves shape (1, 1, C); w and b have shape (C,)":
                lambda x, w, b, g: (g * w, (g * x).sum((0, 1), keepdim=True),
                                    g.sum((0, 1), keepdim=True)),
            "dL/dx is g times w: out changes by w for each unit of x":
                lambda x, w, b, g: (g, (g * x).sum((0, 1)), g.sum((0, 1))),
            "dL/dw is the sum of g * x, not of g alone: out changes by x for each unit of w":
                lambda x, w, b, g: (g * w, g.sum((0, 1)), g.sum((0, 1))),
        },
        advice="Write one entry, out[n, t, c] = x[n, t, c] * w[c] + b[c], and ask which "
               "entries of out each w[c] reaches: its gradient adds up over all of them.",
    ),
    "l08-batched-matmul": ByHand(
        name="X @ W, batched",
        outputs=["dL/dX", "dL/dW"],
        reference=_batched_matmul_reference,
        make_inputs=_new_batched_matmul,
        mistakes={
            "dW is not summed over the batch: every X[n] is multiplied by the same W, so "
            "W's gradient adds the B per-example products (sum over dim 0)":
                lambda X, W, G: (G @ W.mT, X.mT @ G),
            "dW is transposed: it has W's shape (C, D), X.mT @ G in this order":
                lambda X, W, G: (G @ W.mT, (G.mT @ X).sum(0)),
            f"{_SUMMED}: the batch dimension of X.mT @ G is dim 0":
                lambda X, W, G: (G @ W.mT, (X.mT @ G).sum(1)),
        },
        advice="Write one entry, Y[n, t, d] = sum_c X[n, t, c] W[c, d], differentiate it "
               "with respect to X[n, t, c] and to W[c, d], and check each answer's shape "
               "first: dX like X, dW like W.",
    ),
    "l08-gather": ByHand(
        name="torch.gather backward",
        reference=_gather_reference,
        make_inputs=_new_gather,
        mistakes={
            "= instead of +=: with a repeated index only one contribution survives; each "
            "one must be added (scatter_add_, not scatter_)": _put_instead_of_add,
            "= instead of += (an indexed assignment): with a repeated index only one "
            "contribution survives; each one must be added (scatter_add_, or index_put_ "
            "with accumulate=True)": _assign_rows,
            "scattered along the other dimension: the index says where along dim each "
            "entry was read from":
                lambda x, dim, index, g: torch.zeros_like(x).scatter_add(1 - dim, index, g),
            "that is g itself, the gradient of the output; dL/dx has x's shape":
                lambda x, dim, index, g: g,
        },
        advice="Write one entry of the output in index notation (for dim=0, "
               "out[i, j] = x[index[i, j], j]) and ask which entries of x each out[i, j] "
               "touched: every touch adds g[i, j] there.",
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


def _max_ties_answer():
    x = torch.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    return x.grad


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
    "l08-predict-max-ties": Prediction(
        question="x.grad after x.max().backward() for x = [1, 3, 3, 2]",
        answer=_max_ties_answer,
        hint="only entries equal to the maximum can receive any gradient. Does a max over "
             "the whole tensor pick one of the tied entries, or treat them alike? Either "
             "way, what the tied entries receive adds up to what a single winner would get.",
        why="a max over the whole tensor (like amax) treats the tied entries alike and "
            "splits the gradient evenly between them: {answer}. max(dim=...) is different: "
            "it returns one index and sends all the gradient there",
    ),
}
