"""Lesson 11, Exercise 3 (``l11-amax``): the largest entry along a dimension as one node
of the learner's engine, ties split as torch's ``amax`` splits them."""

from __future__ import annotations

import torch

from .shared import F64, draw_size, one_node, shape_text, trial_kind

KINDS = 6  # kinds of input, one case of each per check


def _amax_inputs(gen):
    """Small integers (ties are common) of a new shape, a dimension, keepdim, and G. Each
    kind once over 6 seeds in a row: without keepdim along the first, a middle and the last
    dimension, so that g's dimension must go back where ``dim`` says (a negative ``dim``
    counts from the end of a's shape, not of g's)."""
    kind = trial_kind(gen, KINDS)
    shape = [(draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), draw_size(gen, 3, 6), 4),
             (draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), 5, draw_size(gen, 2, 4)),
             (draw_size(gen, 2, 4), draw_size(gen, 2, 4), 5),
             (5, draw_size(gen, 2, 4), draw_size(gen, 2, 4))][kind]
    dim, keepdim = [(1, False), (-1, True), (0, True), (1, False),
                    (-1, False),  # g's last dimension back at a's end, not at 1
                    (0, False)][kind]  # g's dimension back in front, not at 1
    X = torch.randint(0, 3, shape, generator=gen).to(F64)
    G = torch.randn(torch.amax(X, dim, keepdim).shape, generator=gen, dtype=F64)
    return X, dim, keepdim, G


def _amax_reference(X, dim, keepdim, G):
    X = X.requires_grad_()
    (grad,) = torch.autograd.grad((torch.amax(X, dim, keepdim) * G).sum(), X)
    return grad


def _amax_slip(share):
    """x.grad when the winners of each slice get ``share(winners, count, size)`` times
    the gradient arriving there."""
    def wrong(X, dim, keepdim, G):
        top = torch.amax(X, dim, keepdim=True)
        winners = (X == top).to(F64)
        g = G if keepdim else G.unsqueeze(dim)
        return g * share(winners, winners.sum(dim, keepdim=True), X.shape[dim])
    return wrong


def _one_winner(X, dim, keepdim, G):
    """x.grad when the whole gradient goes to the first maximum of each slice."""
    index = torch.argmax(X, dim, keepdim=True)
    g = G if keepdim else G.unsqueeze(dim)
    return torch.zeros_like(X).scatter_(dim, index, g)


AMAX_SLIPS = {
    "every tied entry got the whole gradient: torch's amax splits it evenly between the "
    "entries that tie for the maximum":
        _amax_slip(lambda w, n, size: w),
    "the gradient was divided by the size of the dimension, as for a mean: only the "
    "entries that tie for the maximum share it":
        _amax_slip(lambda w, n, size: w / size),
    "the gradient went to one entry per slice: that is max(dim=...)'s convention, which "
    "returns an index; amax splits it evenly between the tied entries":
        _one_winner,
}

AMAX_ADVICE = ("Lesson 09: a reduction becomes a broadcast (put the reduced dimension "
               "back as size 1 when keepdim is False), and only the maxima of each slice get "
               "gradient, tied ones an equal share.")


def _shown(X, dim, keepdim):
    return f"amax(x {shape_text(X.shape)}, dim={dim}, keepdim={keepdim})"


AMAX = one_node(
    name="amax", make_case=_amax_inputs, count=KINDS,  # one of each kind, seeds seed on
    forward=torch.amax, gradient=_amax_reference, shown=_shown, slips=AMAX_SLIPS,
    advice=AMAX_ADVICE, params=("X", "dim", "keepdim", "G"),
    expects="a function of a Tensor, a dimension and keepdim")
