"""Lesson 19's first exercise: ``PowerMix``, a Function of x, y and a plain number p,
its backward derived by hand."""

from __future__ import annotations

from typing import Any

import torch

from ...slips import fresh
from .._spec import Method
from .calling import (
    backward_runs,
    by_hand_trials,
    call_directly,
    double_backward_slip,
    judged_by_hand,
    not_a_function,
    real_run,
    stopped,
    torch_check,
    words,
)
from .calling import second_order as _second_order

# --------------------------------------------------------------------------
# Exercise 1: PowerMix, f(x, y, p) = x**p * y
# --------------------------------------------------------------------------

_POWER = "PowerMix"
_EXPONENTS = (0.5, 1.5, 2.0, 2.5, 3.0, 4.0)


def power_inputs(gen: torch.Generator):
    """(x, y, p, grad_output): x positive (x**p is defined), p a plain number."""
    n = int(torch.randint(2, 7, (1,), generator=gen))
    x = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    p = _EXPONENTS[int(torch.randint(len(_EXPONENTS), (1,), generator=gen))]
    grad_output = torch.randn(n, generator=gen, dtype=torch.float64)
    return x, y, p, grad_output


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
    """A structural slip as a failure; else backward alone on each trial, and what
    gradcheck and double backward make of the Function."""
    x, y, p, _ = inputs["trials"][0]
    failed = not_a_function(power_mix) or real_run(power_mix, (x, y, p), ["x", "y", "p"])
    if failed is not None:
        return failed

    def backward_alone(x, y, p, grad_output):
        grads = call_directly(power_mix, (x, y, p), (grad_output,))
        return grads[0], grads[1]

    runs = backward_runs(backward_alone, inputs["trials"])
    if stopped(runs):
        return {"backward": runs}
    return {"backward": runs,
            "gradcheck": torch_check(torch.autograd.gradcheck, power_mix.apply, (x, y, p)),
            "second": _second_order(power_mix.apply, (x, y, p))}


def _power_want(inputs: dict[str, Any]) -> dict[str, Any]:
    """What a right answer is judged against: each trial's inputs and autograd's result."""
    return {"trials": inputs["trials"],
            "grads": [_power_reference(*fresh(trial)) for trial in inputs["trials"]]}


def _power_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    report = judged_by_hand(
        got["backward"], want["trials"], want["grads"], name="PowerMix.backward",
        outputs=["gradient for x", "gradient for y"], mistakes=_POWER_SLIPS,
        params=("x", "y", "p", "grad_output"),
        advice="Differentiate x**p * y with respect to x (power rule, y a constant) and y (x**p "
               "a constant), then multiply each by grad_output.")
    slip = words(report, _POWER)
    if slip is None and not got["gradcheck"][0]:
        slip = ("gradcheck failed in float64: backward is right when called alone, but through "
                "autograd it does not match finite differences of forward (does forward compute "
                "x**p * y?)" + (f"; it raised {got['gradcheck'][1]}" if got["gradcheck"][1]
                               else ""))
    return slip or double_backward_slip(got["second"])


POWER_MIX = Method(
    name=_POWER,
    make_inputs=lambda gen: {"trials": by_hand_trials(power_inputs, gen)},
    observe=_observe_power,
    reference=_power_want,
    agree=lambda got, want: _power_slip(got, want) is None,
    explain=lambda inputs, got, want: _power_slip(got, want),
    trials=1,
    passed="backward's gradients for x and for y match autograd on 3 new random inputs; "
           "gradcheck: passed in float64",
)
