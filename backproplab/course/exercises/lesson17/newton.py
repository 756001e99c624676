"""Lesson 17, Exercise 1 (``l17-newton-step``): -f'(x) / f''(x) with both derivatives from
autograd (its passes counted), on new functions (a polynomial plus a sine, which no
finite-difference stencil fits exactly) and points."""

from __future__ import annotations

import math

import torch

from ...slips import ESTIMATE_RTOL
from .._spec import (
    Method,
    as_plain,
    call_answer,
    close,
    compared,
    count_autograd,
    every_case,
    failure,
    randint,
    relative,
)
from .._spec import first_line as _first_line


def _function(gen: torch.Generator) -> dict:
    """A polynomial of degree 3 or 4 (its top coefficient well away from 0) plus
    ``wave * sin(t)`` (``wave`` well away from 0), and 3 to 5 points where f'' is at least
    0.1 in size.

    The sine is there so that no polynomial is f: a finite-difference stencil, exact on a
    polynomial of low degree, is then not exact. f'' is kept off 0 because the step divides
    by it: near 0, round-off alone would move the step."""
    while True:
        coefs = torch.randn(randint(3, 5, gen) + 1, generator=gen, dtype=torch.float64)
        coefs[-1] = coefs[-1].sign() * (coefs[-1].abs() + 0.5)
        wave = float(torch.randn(1, generator=gen, dtype=torch.float64))
        points = torch.randn(randint(3, 6, gen), generator=gen, dtype=torch.float64)
        case = {"coefficients": coefs, "wave": math.copysign(abs(wave) + 0.5, wave),
                "points": points}
        if derivative(case, 2).abs().min() >= 0.1:
            return case


def function(case: dict):
    """f(t) = sum_k c_k t**k + wave * sin(t), as a function of a tensor t."""
    coefs, wave = case["coefficients"], case["wave"]
    return lambda t: sum(c * t**k for k, c in enumerate(coefs)) + wave * torch.sin(t)


# sin and its first two derivatives.
_SINE = (torch.sin, torch.cos, lambda t: -torch.sin(t))


def derivative(case: dict, n: int) -> torch.Tensor:
    """d^n f / dt^n at the case's points (n is 1 or 2), worked out term by term."""
    t = case["points"]
    total = case["wave"] * _SINE[n](t)
    for k, c in enumerate(case["coefficients"]):
        if k >= n:
            total = total + c * math.perm(k, n) * t ** (k - n)
    return total


def _show(case: dict) -> str:
    return (f"a degree-{len(case['coefficients']) - 1} polynomial plus {case['wave']:.3g} "
            f"sin(t), at {len(case['points'])} points")


def _graph_error(where: str, seen, needs_grad: str, keeps_graph: str):
    """An error's text. When a pass found nothing to differentiate, the advice says what was
    missing, told by the error and by the passes run when it came: ``keeps_graph`` when a
    pass after the first started from a value without a graph (a gradient computed without
    create_graph=True, or detached), ``needs_grad`` otherwise (an input not requiring grad)."""
    def text(err: Exception) -> str:
        first = _first_line(err)
        if "does not require grad" not in first:
            return f"{where}: raised {type(err).__name__}: {first}"
        later = first.startswith("element 0 of tensors") and seen.reverse > 1
        return f"{where}: {first}. {keeps_graph if later else needs_grad}"
    return text


def _newton_inputs(gen: torch.Generator) -> dict:
    """Three new functions (`_function`) and the points of each."""
    return {"functions": [_function(gen) for _ in range(3)]}


def _observe_newton(newton_step, inputs: dict) -> list | dict:
    """For each function: how many autograd passes the answer ran (reverse and forward
    mode together), and the step it returned."""
    seen_all = []
    for case in inputs["functions"]:
        with count_autograd() as seen:
            got, failed = call_answer(
                newton_step, function(case), case["points"].clone(),
                not_callable=f"expected a function newton_step(f, x), got "
                             f"{type(newton_step).__name__}",
                raised=_graph_error(
                    f"for {_show(case)}", seen,
                    needs_grad="x arrives as a plain tensor: make it require grad "
                               "(x.detach().requires_grad_()) before calling f, so that f's "
                               "value has a graph to differentiate.",
                    keeps_graph="f'' is the derivative of f', so f' must keep its graph: "
                                "compute it with create_graph=True, and do not detach it."))
        if failed is not None:
            return failed
        seen_all.append({"passes": seen.reverse + seen.forward, "step": as_plain(got)})
    return seen_all


def _steps(inputs: dict, ratio) -> list:
    """``ratio(f', f'')`` at each function's points: the step and its slips."""
    return [{"step": ratio(derivative(case, 1), derivative(case, 2))}
            for case in inputs["functions"]]


def _newton_agree(got: dict, want: dict) -> bool:
    """Two autograd passes at least (f', then f'' from it), and the step."""
    return got["passes"] >= 2 and close(got["step"], want["step"])


def _too_few_passes(where: str, mine: dict, right: torch.Tensor) -> dict:
    """Fewer than two autograd passes: f' and f'' did not both come from autograd. Told as an
    estimate when the step is near the exact one but not to round-off, as a finite
    difference's is."""
    ran = "no autograd pass ran" if mine["passes"] == 0 else "one autograd pass ran"
    ask = (" The exercise asks for f' and f'' from autograd, a pass for each: f' with "
           "create_graph=True, then f'' from f'.")
    off = relative(mine["step"], right)
    if off <= ESTIMATE_RTOL and not close(mine["step"], right):
        return failure("estimate", f"{where}: {ran}, and the step agrees with the exact one "
                       f"only to about {off:.0e} of its size, as a numerical estimate such as "
                       "finite differences does." + ask)
    return failure("method", f"{where}: {ran} (the check counts them)." + ask)


def _explain_newton(inputs: dict, got: list, want: list) -> str | dict:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not _newton_agree(g, w))
    mine, right = got[at], want[at]["step"]
    where = f"for {_show(inputs['functions'][at])}"
    if mine["passes"] < 2:
        return _too_few_passes(where, mine, right)
    return compared("Newton step", mine["step"], right, "a tensor like x", where=where)


NEWTON = Method(
    name="newton_step",
    make_inputs=_newton_inputs,
    observe=_observe_newton,
    reference=lambda inputs: _steps(inputs, lambda d1, d2: -d1 / d2),
    explain=_explain_newton,
    mistakes={
        "the sign is flipped: Newton's step is -f'(x) / f''(x).":
            lambda inputs: _steps(inputs, lambda d1, d2: d1 / d2),
        "the ratio is upside down: divide f' by f'', not f'' by f'.":
            lambda inputs: _steps(inputs, lambda d1, d2: -d2 / d1),
        "the ratio is upside down, and its sign flipped: Newton's step is -f'(x) / f''(x), "
        "f' divided by f''.": lambda inputs: _steps(inputs, lambda d1, d2: d2 / d1),
        "every step is N times the right one, N the number of points: f'' came out divided "
        "by N against f', as a second pass started from a mean (d1.mean()) gives. Each "
        "point's f'' is the derivative of its own f': start the second pass from their sum "
        "(d1.sum()).": lambda inputs: _steps(inputs, lambda d1, d2: -d1 / (d2 / len(d1))),
    },
    trials=1,
    agree=every_case(_newton_agree),
    passed="-f'/f'' matches on 3 new functions (a polynomial plus a sine), from two autograd "
           "passes or more (f', then f'' from it)",
)
