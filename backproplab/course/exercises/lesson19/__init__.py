"""Lesson 19, custom autograd Functions: its exercises and its predictions.

The exercises ask for a ``torch.autograd.Function`` whose backward formula the
learner works out. Each is a `Method`: its observation step (`calling`) records what
the Function does, and the verdict is made from that record, in three steps:

1. the Function through real autograd once, to catch structural slips (one
   gradient per input of forward, None for a plain number; for exercise 2, the
   input changed in place and declared so);
2. backward *alone*, called directly with a stand-in ``ctx`` as a by-hand answer
   is called (autograd switched off and refused, the inputs float64), judged as a
   by-hand answer is: it must agree with autograd to round-off. A backward that
   estimates the derivative (finite differences, ``bl.numerical_grad``) or
   borrows it (``torch.autograd.grad`` inside backward, torch's ``*_backward``
   kernels) fails, saying so; a typical slip in the formula is named;
3. what gradcheck (and gradgradcheck) in float64 make of it.

Exercise 1 (`power`) is a Function of two tensors and a plain number: it also runs
through autograd with x or y not requiring grad, and backward alone on an input with
x < 0 and y = 0 at a whole-number p. Exercise 2 (`softplus`) writes softplus into its
input: the record holds the memory the output uses, x's grad_fn (mark_dirty), what is
saved (the output alone: x's values are gone, so the derivative is derived in terms of
y), and x far from 0. Exercise 3 (`broadcast`) calls backward itself on inputs that
broadcast, every pattern of its list, to see the shapes it returns, and with a or b not
requiring grad. Exercise 4 (`logsumexp`), a fused log-sum-exp, adds rows far from 0, what is
saved, and a double backward that must work. Exercise 5 (`forward`) adds ``jvp``: forward
mode through a Function, called alone as backward is, then through torch.func's jvp and
jacfwd.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from .._spec import Prediction
from .broadcast import BROADCAST
from .forward import GATE
from .logsumexp import LOGSUMEXP
from .power import POWER_MIX
from .softplus import SOFTPLUS

# What the grade's sandbox loads before an answer runs: what gradcheck imports when a
# check fails (its report steps out of torch's dispatch modes), and what torch.func.jvp
# imports on its first call (exercise 5).
PRELOAD = ("torch._subclasses.schema_check_mode", "torch._decomp.decompositions_for_jvp")

EXERCISES = {
    "l19-power-mix": POWER_MIX,
    "l19-softplus-in-place": SOFTPLUS,
    "l19-broadcast-function": BROADCAST,
    "l19-logsumexp": LOGSUMEXP,
    "l19-gate-jvp": GATE,
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


class _SquareMissingTwo(torch.autograd.Function):
    """x**2 with the factor 2 forgotten in backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return x * grad_output


def _raises_answer() -> bool:
    """Does a backward with a wrong formula raise?"""
    try:
        _SquareMissingTwo.apply(torch.ones(2, requires_grad=True)).sum().backward()
    except RuntimeError:
        return True
    return False


class _SquareOnce(torch.autograd.Function):
    """x**2 with a backward marked once_differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output


def _once_answer():
    """The second derivative of SquareOnce(x).sum() + (x**3).sum() at x = [1, 2]."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad(_SquareOnce.apply(x).sum() + (x**3).sum(), x, create_graph=True)
    try:
        (h,) = torch.autograd.grad(g.sum(), x)
    except RuntimeError:
        return "error"
    return h.tolist()


PREDICTIONS = {
    "l19-predict-raises": Prediction(
        question="does a backward with a wrong formula raise?",
        answer=_raises_answer,
        hint="what could autograd compare backward's result with? It has only the numbers "
             "backward hands it.",
        why="autograd trusts whatever backward returns; only a check such as gradcheck can "
            "catch a wrong formula",
    ),
    "l19-predict-once": Prediction(
        question="the second derivative of SquareOnce(x).sum() + (x**3).sum() at x = [1, 2]",
        answer=_once_answer,
        hint="the first gradient is a sum of two parts. Which of them was computed with "
             "recording on, and what does the second pass see of the other one?",
        why="SquareOnce's backward ran with recording off, so its part of the first gradient, "
            "2x, arrived as a constant. The x**3 part, 3x**2, kept its graph, so the second "
            "call had something to walk and returned only its derivative 6x: {answer}, where "
            "the truth is 2 + 6x = [8.0, 14.0]. No error, no warning",
    ),
}
