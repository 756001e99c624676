"""Lesson 19, custom autograd Functions: its exercises, its predictions, and the check of
Exercise 1.

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

Exercise 1 (here) is ``PowerMix``, a Function of x, y and a plain number p: it also runs
through autograd with x or y not requiring grad, and backward alone on an input with
x < 0 and y = 0 at a whole-number p. Exercise 2 (`softplus`) writes softplus into its
input: the record holds the memory the output uses, x's grad_fn (mark_dirty), what is
saved (the output alone: x's values are gone, so the derivative is derived in terms of
y), and x far from 0. Exercise 3 (`broadcast`) calls backward itself on inputs that
broadcast, every pattern of its list, to see the shapes it returns, and with a or b not
requiring grad. Exercise 4 (`logsumexp`), a fused log-sum-exp, adds rows far from 0, what
is saved, and a double backward that must work. Exercise 5 (in `calling`, beside the
calls it extends) adds ``jvp``: forward mode through a Function, called alone as backward
is, then through torch.func's jvp and jacfwd.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ...slips import fresh
from .._spec import Method, Prediction, compare, is_failure
from .._spec import first_line as _first_line
from .broadcast import BROADCAST
from .calling import (
    GATE,
    backward_runs,
    by_hand_trials,
    call_directly,
    judged_by_hand,
    kept_when_applied,
    not_a_function,
    real_run,
    stash_caution,
    stopped,
    through_autograd,
    torch_check,
    words,
)
from .logsumexp import LOGSUMEXP
from .softplus import SOFTPLUS

# What the grade's sandbox loads before an answer runs: what gradcheck imports when a
# check fails (its report steps out of torch's dispatch modes), and what torch.func.jvp
# imports on its first call (exercise 5).
PRELOAD = ("torch._subclasses.schema_check_mode", "torch._decomp.decompositions_for_jvp")

# --------------------------------------------------------------------------
# Exercise 1: PowerMix, f(x, y, p) = x**p * y
# --------------------------------------------------------------------------

_POWER = "PowerMix"
_LABELS = ["x", "y", "p"]
_EXPONENTS = (0.5, 1.5, 2.0, 2.5, 3.0, 4.0)
_WHOLE_EXPONENTS = (2.0, 3.0, 4.0)


def power_inputs(gen: torch.Generator):
    """(x, y, p, grad_output): x positive (x**p is defined), p a plain number."""
    n = int(torch.randint(2, 7, (1,), generator=gen))
    x = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    p = _EXPONENTS[int(torch.randint(len(_EXPONENTS), (1,), generator=gen))]
    grad_output = torch.randn(n, generator=gen, dtype=torch.float64)
    return x, y, p, grad_output


def edge_inputs(gen: torch.Generator):
    """(x, y, p, grad_output) at a whole-number p, where x**p * y and both its derivatives
    are defined for every x and y; in every check, because random draws may miss them:
    x has a negative entry (a formula through log(x) gives nan there), y has a 0 (one
    that divides by y gives nan there). x is never 0: dividing by x (p * x**p / x for
    p * x**(p - 1)) is a fair way to write the power rule."""
    n = int(torch.randint(3, 7, (1,), generator=gen))
    x = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    negative, zero = torch.randperm(n, generator=gen)[:2].tolist()
    x[negative], y[zero] = -x[negative], 0.0
    p = _WHOLE_EXPONENTS[int(torch.randint(len(_WHOLE_EXPONENTS), (1,), generator=gen))]
    grad_output = torch.randn(n, generator=gen, dtype=torch.float64)
    return x, y, p, grad_output


def _power_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The three random trials of backward alone, and the edge trial, drawn from a
    generator of its own (seeded 1000 after the check's seed)."""
    edge = edge_inputs(torch.Generator().manual_seed(1000 + gen.initial_seed()))
    return {"trials": by_hand_trials(power_inputs, gen), "edge": edge}


def _power_reference(x, y, p, grad_output):
    x, y = x.requires_grad_(), y.requires_grad_()
    return torch.autograd.grad(x**p * y, (x, y), grad_output)


_POWER_SLIPS = {
    "backward ignores grad_output: the chain rule multiplies each local derivative by the "
    "incoming gradient": lambda x, y, p, g: (p * x ** (p - 1) * y, x**p),
    "the power rule's factor p is missing: d(x**p)/dx = p * x**(p - 1)":
        lambda x, y, p, g: (g * x ** (p - 1) * y, g * x**p),
    "the exponent was not lowered: d(x**p)/dx = p * x**(p - 1), not p * x**p":
        lambda x, y, p, g: (g * p * x**p * y, g * x**p),
    "the factor y is missing: d(x**p * y)/dx = p * x**(p - 1) * y":
        lambda x, y, p, g: (g * p * x ** (p - 1), g * x**p),
    "the two gradients are swapped: backward returns x's gradient first, then y's":
        lambda x, y, p, g: (g * x**p, g * p * x ** (p - 1) * y),
    "the gradient for y is d(x**p * y)/dy = x**p, not y":
        lambda x, y, p, g: (g * p * x ** (p - 1) * y, g * y),
}


def _observe_power(power_mix: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """A structural slip as a failure: through autograd with x and y requiring grad, then
    with only one of them (backward still returns one entry per input). Else backward
    alone on each trial and on the edge trial, the gradient that reached x or y when the
    other needed none, and what gradcheck and double backward make of the Function."""
    x, y, p, grad_output = inputs["trials"][0]
    failed = not_a_function(power_mix) or real_run(power_mix, (x, y, p), _LABELS)
    if failed is not None:
        return failed
    alone = {}
    for constant in ("y", "x"):  # y first: section 5's ScaledProduct has a y without grad
        ran = through_autograd(power_mix, (x, y, p), _LABELS, grad_output, constant)
        if is_failure(ran):
            return ran
        alone[constant] = ran

    def backward_alone(x, y, p, grad_output):
        grads = call_directly(power_mix, (x, y, p), (grad_output,))
        return grads[0], grads[1]

    runs = backward_runs(backward_alone, inputs["trials"])
    edge = backward_runs(backward_alone, [inputs["edge"]])
    if stopped(runs) or stopped(edge):
        return {"backward": runs, "edge": edge}
    return {"backward": runs, "edge": edge, "alone": alone,
            "gradcheck": torch_check(torch.autograd.gradcheck, power_mix.apply, (x, y, p)),
            "second": _second_order(power_mix.apply, (x, y, p)),
            "kept": kept_when_applied(power_mix, (x, y, p))}


def _power_want(inputs: dict[str, Any]) -> dict[str, Any]:
    """What a right answer is judged against: each trial's inputs and autograd's result."""
    return {"trials": inputs["trials"], "edge": inputs["edge"],
            "grads": [_power_reference(*fresh(trial)) for trial in inputs["trials"]],
            "edge_grads": _power_reference(*fresh(inputs["edge"]))}


def _second_order(apply: Callable[..., Any], inputs: Sequence[Any]) -> dict[str, Any]:
    """How double backward goes through the Function, as gradgradcheck would meet it:
    ``kind`` is "raised" (``why`` says what), "once" (an Error node: once_differentiable),
    "constant" (the first gradients have no graph) or "graph"; then ``passed`` is
    gradgradcheck's result."""
    xs = [t.detach().clone().requires_grad_() if isinstance(t, torch.Tensor) else t
          for t in inputs]
    wrt = [t for t in xs if isinstance(t, torch.Tensor)]
    try:
        out = apply(*xs)
        # grad_outputs that require grad, as gradgradcheck uses: a backward that only
        # detaches a saved tensor still has a graph then, and is caught as wrong.
        grads = torch.autograd.grad(out, wrt, torch.ones_like(out, requires_grad=True),
                                    create_graph=True, allow_unused=True)
    except Exception as err:  # not differentiable: a fact, not the learner's error
        return {"kind": "raised", "why": f"{type(err).__name__}: {_first_line(err)}"}
    if any(g is not None and g.grad_fn is not None and "Error" in g.grad_fn.name()
           for g in grads):
        return {"kind": "once", "why": "backward is marked @once_differentiable"}
    if all(g is None or not g.requires_grad for g in grads):
        return {"kind": "constant", "why": "its result has no grad_fn"}
    passed, why = torch_check(torch.autograd.gradgradcheck, apply, inputs)
    return {"kind": "graph", "passed": passed, "why": why}


def _double_backward_slip(second: dict[str, Any]) -> str | None:
    """The words for a backward whose second derivatives are wrong. Not being
    differentiable at all (raised, once_differentiable, no graph) is not a slip here."""
    if second["kind"] != "graph" or second["passed"]:
        return None
    if re.search(r"once_differentiable|does not require grad|does not have a grad_fn",
                 second["why"]):
        return None
    return ("gradgradcheck: backward gives the right first derivatives, but differentiating "
            "backward itself gives wrong second derivatives (does backward use a detached "
            "copy of a saved tensor?)" + (f": {second['why']}" if second["why"] else ""))



_ADVICE = ("Differentiate x**p * y with respect to x (power rule, y a constant) and y (x**p a "
           "constant), then multiply each by grad_output.")


def _judged(runs, trials, grads, advice: str) -> str | None:
    """`judged_by_hand`'s words on recorded calls of backward alone, or None."""
    return words(judged_by_hand(
        runs, trials, grads, name="PowerMix.backward", outputs=["gradient for x", "gradient for y"],
        mistakes=_POWER_SLIPS, params=("x", "y", "p", "grad_output"), advice=advice), _POWER)


def _edge_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """What backward alone gets wrong on the edge trial, or None; judged with the random
    trials, on which it is right already (the judge compares several trials)."""
    edge = want["edge"]
    return _judged([*got["backward"], *got["edge"]], [*want["trials"], edge],
                   [*want["grads"], want["edge_grads"]], (
        f"That input has an x < 0 and a y = 0, at the whole number p = {edge[2]}, where x**p * y "
        "and both its derivatives are defined for every x and y; a formula through log(x), or "
        "one that divides by y, is not. " + _ADVICE))


def _alone_slip(alone: dict[str, Any], grads) -> str | None:
    """What is wrong with the gradient that reached x (or y) when the other input needed
    none, or None. ``grads`` are autograd's for both, on the same inputs."""
    for constant, label, want in (("y", "x", grads[0]), ("x", "y", grads[1])):
        got = alone[constant][label]
        when = (f"with {constant} not requiring grad "
                f"(ctx.needs_input_grad[{_LABELS.index(constant)}] False)")
        if got is None:
            return (f"{when}, no gradient reached {label}: backward returned None in {label}'s "
                    "place. ctx.needs_input_grad has one entry per input of forward, in its "
                    f"order (x, y, p): {label}'s is ctx.needs_input_grad[{_LABELS.index(label)}].")
        if not isinstance(got, torch.Tensor):
            return f"{when}, backward returned {got!r} for {label}; expected a tensor like {label}."
        report = compare(f"gradient for {label}", got, want, rtol=1e-12,
                         atol=1e-12 * float(want.abs().max()), accumulation=False)
        if not report.ok:
            return f"{when}: {words(report, _POWER)}"
    return None


def _power_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    slip = (_judged(got["backward"], want["trials"], want["grads"], _ADVICE)
            or _edge_slip(got, want))
    if slip is None:
        slip = _alone_slip(got["alone"], want["grads"][0])
    if slip is None and not got["gradcheck"][0]:
        slip = ("gradcheck failed in float64: backward is right when called alone, but through "
                "autograd it does not match finite differences of forward (does forward compute "
                "x**p * y?)" + (f"; it raised {got['gradcheck'][1]}" if got["gradcheck"][1]
                               else ""))
    return slip or _double_backward_slip(got["second"])


POWER_MIX = Method(
    name=_POWER,
    make_inputs=_power_inputs,
    observe=_observe_power,
    reference=_power_want,
    wrong=_power_slip,
    caution=stash_caution,
    trials=1,
    passed="backward's gradients for x and for y match autograd on 3 new random inputs and on "
           "one with x < 0 and y = 0 at a whole-number p, and through autograd when only x or "
           "only y requires grad; gradcheck: passed in float64",
)

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
