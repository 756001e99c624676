"""Lesson 09, deriving the backward of a tensor operation: its exercises and its prediction.

The method (index notation, one entry differentiated, read back as tensor code, shapes
first) and the rules it gives for matmul, broadcasting, reductions, indexing, reshapes and
softmax. Every by-hand exercise draws new shapes on every trial, each size different from
the others, so that a transposed answer or a sum over the wrong dimension cannot pass by
having the right shape by accident. The slips listed under ``mistakes`` are the ones the
lesson warns about; the check names one only when the learner's answer equals it on every
trial.
"""

from __future__ import annotations

import torch

from ._spec import ByHand, Prediction
from .lesson08 import _randn, _sizes

# --------------------------------------------------------------------------
# the softmax VJP
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
# out = x * w + b with x (B, T, C), w (C,), b (C,)
# --------------------------------------------------------------------------


def _new_affine(gen):
    B, T, C = _sizes(gen, 3)
    return _randn(gen, B, T, C), _randn(gen, C), _randn(gen, C), _randn(gen, B, T, C)


def _affine_reference(x, w, b, g):
    x, w, b = (t.requires_grad_() for t in (x, w, b))
    return torch.autograd.grad(x * w + b, (x, w, b), g)


# --------------------------------------------------------------------------
# Y = X @ W with X (B, T, C) and a shared W (C, D)
# --------------------------------------------------------------------------


def _new_batched_matmul(gen):
    B, T, C, D = _sizes(gen, 4)
    return _randn(gen, B, T, C), _randn(gen, C, D), _randn(gen, B, T, D)


def _batched_matmul_reference(X, W, G):
    X, W = X.requires_grad_(), W.requires_grad_()
    return torch.autograd.grad(X @ W, (X, W), G)


# --------------------------------------------------------------------------
# torch.gather along a dimension, with repeated indices
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
# The exercises
# --------------------------------------------------------------------------

_SUMMED = "summed over the wrong dimension"

EXERCISES = {
    "l09-softmax-vjp": ByHand(
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
    "l09-broadcast-affine": ByHand(
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
    "l09-batched-matmul": ByHand(
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
    "l09-gather": ByHand(
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
# Prediction
# --------------------------------------------------------------------------


def _max_ties_answer():
    x = torch.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    return x.grad


PREDICTIONS = {
    "l09-predict-max-ties": Prediction(
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
