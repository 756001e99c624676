"""Lesson 11, Exercise 2 (``l11-cumsum``): a cumulative sum along a dimension as one node
of the learner's engine, with the rule the learner derives (no lesson shows it)."""

from __future__ import annotations

import torch

from .shared import F64, draw_size, one_node, shape_text, trial_kind


def _cumsum_inputs(gen):
    """x of a new shape, a dimension and G. Over four cases (seeds seed to seed + 3) every
    kind comes once: 1-D; 2-D along the last dimension; 3-D along the middle one, written
    as -2; 3-D along the first. Every sum runs over at least 3 entries, so that each slip
    below changes the gradient."""
    kind = trial_kind(gen, 4)
    long = draw_size(gen, 3, 7)
    shape, dim = [((long,), 0),
                  ((draw_size(gen, 2, 5), long), 1),
                  ((draw_size(gen, 2, 4), long, draw_size(gen, 2, 4)), -2),
                  ((long, draw_size(gen, 2, 4), draw_size(gen, 2, 4)), 0)][kind]
    X = torch.randn(shape, generator=gen, dtype=F64)
    G = torch.randn(shape, generator=gen, dtype=F64)
    return X, dim, G


def _cumsum_reference(X, dim, G):
    X = X.requires_grad_()
    (grad,) = torch.autograd.grad((torch.cumsum(X, dim) * G).sum(), X)
    return grad


def _from_the_end(G, dim):
    """The cumulative sum of G taken from the last entry back to the first."""
    return G.flip(dim).cumsum(dim).flip(dim)


CUMSUM_SLIPS = {
    "g was summed from the first entry onwards, as the forward sums x: but x_j is part of "
    "every output from j to the end, so its gradient sums g from j to the end":
        lambda X, dim, G: G.cumsum(dim),
    "the sums from the end come out in reversed order: after summing the flipped g, flip "
    "the result back":
        lambda X, dim, G: G.flip(dim).cumsum(dim),
    "x_j's own term is missing: output j sums x_0 to x_j, x_j included, so g_j belongs in "
    "x_j's gradient too":
        lambda X, dim, G: _from_the_end(G, dim) - G,
    "every entry got the whole sum of g, as if every output used every entry of x: output "
    "k uses only x_0 to x_k":
        lambda X, dim, G: G.sum(dim, keepdim=True).expand_as(G),
}

CUMSUM_ADVICE = ("Lesson 09's method: shapes first, then one entry. Write which outputs "
                 "x_j is a term of, add up their gradients, then find a tensor operation "
                 "that does it for every j at once.")


def _shown(X, dim):
    return f"cumsum(x {shape_text(X.shape)}, dim={dim})"


CUMSUM = one_node(
    name="cumsum", make_case=_cumsum_inputs, count=4,
    forward=torch.cumsum, gradient=_cumsum_reference, shown=_shown, slips=CUMSUM_SLIPS,
    advice=CUMSUM_ADVICE, params=("X", "dim", "G"),
    expects="a function of a Tensor and a dimension")
