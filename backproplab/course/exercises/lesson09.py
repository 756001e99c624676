"""Lesson 09, deriving the backward of a tensor operation: its exercises and its prediction.

The method (index notation, one entry differentiated, read back as tensor code, shapes
first) and the rules it gives for matmul, broadcasting, reductions, indexing, reshapes and
softmax. Exercises 2 and 3 are operations no cell shows (a vector scaled to length 1, a
bilinear score), derived with the method. Every by-hand exercise draws new shapes on every
trial, each size different from the others, so that a transposed answer or a sum over the
wrong dimension cannot pass by having the right shape by accident. The slips listed under
``mistakes`` are the ones the lesson warns about; the check names one only when the
learner's answer equals it on every trial.
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
    # consecutive trials alternate 2-D and 3-D: a sum over dim=1, right only in 2-D, fails
    dims = 2 + gen.initial_seed() % 2
    shape = _sizes(gen, dims, 2, 7)
    p = torch.softmax(2 * _randn(gen, *shape), dim=-1)
    return p, _randn(gen, *shape)


def _softmax_vjp_reference(p, g):
    z = p.log().requires_grad_()  # softmax(log p) = p, since each row of p sums to 1
    (dz,) = torch.autograd.grad(torch.softmax(z, dim=-1), z, g)
    return dz


# --------------------------------------------------------------------------
# y = x / |x| along the last dimension
# --------------------------------------------------------------------------


def _new_normalize(gen):
    """x of 2 or 3 dimensions, every size different, and a gradient g for y."""
    # consecutive trials alternate 2-D and 3-D: a sum over dim=1, right only in 2-D, fails
    dims = 2 + gen.initial_seed() % 2
    shape = _sizes(gen, dims, 2, 7)
    return _randn(gen, *shape), _randn(gen, *shape)


def _normalize_reference(x, g):
    x = x.requires_grad_()
    (dx,) = torch.autograd.grad(x / x.norm(dim=-1, keepdim=True), x, g)
    return dx


def _normalize_slip(vjp):
    """dL/dx from ``vjp(g, y, r)``, with y = x / r and r = |x| along the last dimension."""
    def wrong(x, g):
        r = x.norm(dim=-1, keepdim=True)
        return vjp(g, x / r, r)
    return wrong


def _along_dim1(x, g):
    """The whole VJP along dim=1, which is the last dimension of a 2-D x only."""
    r = x.norm(dim=1, keepdim=True)
    y = x / r
    return (g - y * (g * y).sum(1, keepdim=True)) / r


# --------------------------------------------------------------------------
# s = ((x @ W) * y).sum(-1): one bilinear score per example
# --------------------------------------------------------------------------


def _new_bilinear(gen):
    N, C, D = _sizes(gen, 3)
    return _randn(gen, N, C), _randn(gen, C, D), _randn(gen, N, D), _randn(gen, N)


def _bilinear_reference(x, W, y, g):
    x, W, y = (t.requires_grad_() for t in (x, W, y))
    return torch.autograd.grad(((x @ W) * y).sum(-1), (x, W, y), g)


def _bilinear_slip(dx, dW, dy):
    """The three gradients, with gy = g[:, None] * y and gx = g[:, None] * x given to
    each formula."""
    def wrong(x, W, y, g):
        gx, gy = g[:, None] * x, g[:, None] * y
        return dx(x, W, y, g, gx, gy), dW(x, W, y, g, gx, gy), dy(x, W, y, g, gx, gy)
    return wrong


def _right_dx(x, W, y, g, gx, gy):
    return gy @ W.T


def _right_dW(x, W, y, g, gx, gy):
    return x.T @ gy


def _right_dy(x, W, y, g, gx, gy):
    return gx @ W


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
            f"{_SUMMED}: dim=1 is the last dimension only when p is 2-D; the sum runs along "
            "the softmax's dimension, dim=-1":
                lambda p, g: p * (g - (g * p).sum(1, keepdim=True)),
            "that is the VJP of log_softmax (g - p * g.sum(-1, keepdim=True)), not of softmax":
                lambda p, g: g - p * g.sum(-1, keepdim=True),
        },
        advice="Write p_i = exp(z_i) / sum_k exp(z_k), differentiate one entry, "
               "d p_i / d z_j, then sum g_i times it over i, and read that sum back as "
               "tensor code along the last dimension.",
    ),
    "l09-normalize": ByHand(
        name="normalize VJP",
        reference=_normalize_reference,
        make_inputs=_new_normalize,
        mistakes={
            "g / r treats the length r = |x| as a constant: every x_j also changes r, which "
            "takes y * (g * y).sum(...) / r away along the last dimension":
                _normalize_slip(lambda g, y, r: g / r),
            "the sign of the second term is flipped: making x_j larger makes r larger, "
            "which makes every y_i smaller":
                _normalize_slip(lambda g, y, r: (g + y * (g * y).sum(-1, keepdim=True)) / r),
            "the second term lacks two factors of 1 / r: with x in place of y it is "
            "x * (g * x).sum(...) / r**3":
                _normalize_slip(lambda g, y, r: (g - (r * y) * (g * r * y).sum(
                    -1, keepdim=True)) / r),
            "the whole gradient lacks its factor 1 / r: y = x / r, so every entry of the "
            "Jacobian carries one":
                _normalize_slip(lambda g, y, r: g - y * (g * y).sum(-1, keepdim=True)),
            f"{_SUMMED}: the sum (g * y).sum(...) runs along the dimension the length is "
            "taken over, the last one (dim=-1, keepdim=True)":
                _normalize_slip(lambda g, y, r: (g - y * (g * y).sum(0, keepdim=True)) / r),
            f"{_SUMMED}: dim=1 is the last dimension only when x is 2-D; the length and the "
            "sum both run along dim=-1":
                _along_dim1,
        },
        advice="Write y_i = x_i / r with r = sqrt(sum_k x_k ** 2), differentiate one entry "
               "(d y_i / d x_j: x_j appears in x_i when i = j, and in r always), then sum "
               "g_i times it over i, and read that sum back as tensor code along the last "
               "dimension.",
    ),
    "l09-bilinear": ByHand(
        name="bilinear score backward",
        outputs=["dL/dx", "dL/dW", "dL/dy"],
        reference=_bilinear_reference,
        make_inputs=_new_bilinear,
        mistakes={
            "g is missing: each example's score s[n] has its own gradient g[n], which "
            "scales everything that example sends back (g[:, None] * ...)":
                lambda x, W, y, g: (y @ W.T, x.T @ y, x @ W),
            "dW keeps one matrix per example: every example uses the same W, so W's "
            "gradient adds up the N examples' x[n] outer (g[n] y[n])":
                _bilinear_slip(_right_dx, lambda x, W, y, g, gx, gy: x[:, :, None]
                               * gy[:, None, :], _right_dy),
            "dW is transposed: it has W's shape (C, D), x's dimension first":
                _bilinear_slip(_right_dx, lambda x, W, y, g, gx, gy: gy.T @ x, _right_dy),
            "dW lacks g: W's gradient adds up each example's x[n] outer y[n] scaled by its "
            "own g[n] (x.T @ (g[:, None] * y))":
                _bilinear_slip(_right_dx, lambda x, W, y, g, gx, gy: x.T @ y, _right_dy),
        },
        advice="Write one score, s[n] = sum_c sum_d x[n, c] W[c, d] y[n, d], "
               "differentiate it with respect to one entry of each input, and check each "
               "answer's shape first: dx like x, dW like W, dy like y.",
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
