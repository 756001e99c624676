"""Lesson 27's Exercise 2 (``l27-rms-norm-jvp``): forward mode for the RMS norm.

A custom op reaches no forward-mode transform (section 7), so the RMS norm gets forward mode
through an ``autograd.Function`` whose ``jvp`` the learner writes, as a plain function:
``rms_norm_jvp(x, w, eps, x_t, w_t)`` is the tangent of ``y = x * r * w`` when x moves
along x_t and w along w_t (eps is fixed). It is J·v, a different formula from Exercise 1's
backward (uᵀ·J): w sits outside the row's mean here, inside it there. Checked by hand on
new float64 inputs with autograd off, against ``torch.func.jvp`` of the same norm in torch
operations; the slips named are the ones a derivation makes, the backward's formula among
them.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Task
from .op import inverse_rms, rms_inputs, rms_norm_reference


def tangent_inputs(gen: torch.Generator) -> tuple:
    """(x, w, eps, x_t, w_t): new sizes and values, and a tangent for each tensor input."""
    x, w, eps, x_t = rms_inputs(gen)  # the fourth, shaped like x, serves as x's tangent
    w_t = torch.randn(w.shape, generator=gen, dtype=torch.float64)
    return x, w, eps, x_t, w_t


def _reference(x, w, eps, x_t, w_t):
    """torch.func's forward mode through the norm in torch operations."""
    return torch.func.jvp(lambda a, b: rms_norm_reference(a, b, eps), (x, w), (x_t, w_t))[1]


def _slip(r_t_of=None, *, w_moves=True, x_moves=True):
    """The tangent with its r's tangent computed by ``r_t_of`` (right when None), or with
    the path through w or x's direct one left out."""
    def wrong(x, w, eps, x_t, w_t):
        r = inverse_rms(x, eps)
        right = -r**3 * (x * x_t).mean(-1, keepdim=True)
        r_t = right if r_t_of is None else r_t_of(x, x_t, r)
        y_t = (x_t * r if x_moves else 0) + x * r_t
        return y_t * w + (x * r * w_t if w_moves else 0)
    return wrong


def _backward_formula(x, w, eps, x_t, w_t):
    """Exercise 1's dL/dx with the tangent in place of the gradient, and its dL/dw's
    summand: uᵀ·J where J·v was asked for."""
    r = inverse_rms(x, eps)
    gw = x_t * w
    return r * gw - x * r**3 * (gw * x).mean(-1, keepdim=True) + x * r * w_t


JVP_SLIPS = {
    "r treated as a constant: r depends on x (through the row's mean of x**2), so moving x "
    "moves r too, by r_t = -r**3 * mean(x * x_t) over the row":
        _slip(lambda x, x_t, r: 0 * r),
    "w's tangent is missing: w moves along w_t as well, which adds x * r * w_t":
        _slip(w_moves=False),
    "the direct path from x is missing: y = x * r * w moves with x itself (x_t * r * w), "
    "not only through r":
        _slip(x_moves=False),
    "r's tangent sums over the row where it should average: mean(x**2) moves by "
    "2 * mean(x * x_t), with the row's 1/d":
        _slip(lambda x, x_t, r: -r**3 * (x * x_t).sum(-1, keepdim=True)),
    "r's tangent has a stray factor 1/2: the square's 2 (d x**2 = 2 x dx) cancels the "
    "inverse square root's -1/2, leaving -r**3 * mean(x * x_t)":
        _slip(lambda x, x_t, r: -0.5 * r**3 * (x * x_t).mean(-1, keepdim=True)),
    "r's tangent has the wrong power of r: d (m + eps)**(-1/2) = -1/2 (m + eps)**(-3/2) dm, "
    "which is r cubed":
        _slip(lambda x, x_t, r: -r**2 * (x * x_t).mean(-1, keepdim=True)),
    "r's tangent has the wrong sign: r = (m + eps)**(-1/2) falls as m grows":
        _slip(lambda x, x_t, r: r**3 * (x * x_t).mean(-1, keepdim=True)),
    "this is the backward's formula, uᵀ·J with the tangent in place of the gradient: in J·v, "
    "w multiplies the whole tangent of x * r from outside, and the row's mean holds x * x_t "
    "alone":
        _backward_formula,
}

JVP_ADVICE = (
    "Carry the tangents forward: m = mean(x**2) over the row moves by 2 * mean(x * x_t); "
    "r = (m + eps)**(-1/2) by -1/2 * r**3 times that; then y = (x * r) * w by the product "
    "rule, with w_t for w."
)

RMS_JVP = ByHand(
    name="rms_norm_jvp",
    reference=_reference,
    make_inputs=tangent_inputs,
    mistakes=JVP_SLIPS,
    advice=JVP_ADVICE,
    task=Task(asks_for="the tangent by hand", result="the tangent",
              how="Carry the tangents forward through each step and compute them with plain "
                  "tensor operations.",
              reference="torch.func.jvp"),
)
