"""Lesson 17's two `Method` checks, the exercises that use autograd on purpose (its passes
and the torch functions called are counted):

- ``l17-newton-step``: -f'(x) / f''(x) with both derivatives from autograd, on new
  functions (a polynomial plus a sine, which no finite-difference stencil fits exactly)
  and points;
- ``l17-weight-penalty``: the gradient with respect to the weights w of the input-gradient
  penalty |d f / d x|^2 (a mixed second derivative), with two backward passes and no
  Hessian, on new critics and shapes.
"""

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
    kind_of,
    randint,
    relative,
)
from .._spec import first_line as _first_line

# --------------------------------------------------------------------------
# Exercise 1: Newton's step
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Exercise 2: the gradient of an input-gradient penalty
# --------------------------------------------------------------------------

_FULL_JACOBIANS = ("hessian", "jacobian", "jacrev", "jacfwd")

# The critics the check tries: scalar functions of an input batch x and weights w.
CRITICS = (
    ("sum(tanh(x @ w))", lambda x, w: torch.tanh(x @ w).sum()),
    ("sum(sin(x @ w) ** 2)", lambda x, w: (torch.sin(x @ w) ** 2).sum()),
    ("sum(softplus(x @ w)) + sum((x @ w) ** 3) / 6",
     lambda x, w: torch.nn.functional.softplus(x @ w).sum() + ((x @ w) ** 3).sum() / 6),
)


def _critic(gen: torch.Generator):
    """(label, f, x, w): a critic, a batch x (n, d) and weights w (d, h) of new sizes, d != h
    so that a gradient with respect to the wrong tensor cannot have the right shape, and
    n >= 3 so that a penalty averaged over the examples (1/n of the answer) is not the
    square's missing factor 2 (1/2 of it)."""
    n, d = randint(3, 6, gen), randint(2, 6, gen)
    h = d + int(torch.randint(1, 4, (1,), generator=gen))
    label, f = CRITICS[int(torch.randint(len(CRITICS), (1,), generator=gen))]
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    w = torch.randn(d, h, generator=gen, dtype=torch.float64) * 0.6
    return label, f, x, w


def _penalty_grads(f, x, w, first, second, power=2):
    """d/d(second) of |d f / d(first)|**power, by double backward (the reference and its
    slips: first and second are "x" or "w")."""
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    wrt = {"x": x, "w": w}
    (g,) = torch.autograd.grad(f(x, w), wrt[first], create_graph=True)
    return torch.autograd.grad((g**2).sum() if power == 2 else g.sum(), wrt[second])[0]


def _penalty_inputs(gen: torch.Generator) -> dict:
    """Two new critics, each by its place in CRITICS, with its x and w."""
    labels = [label for label, _ in CRITICS]
    cases = []
    for _ in range(2):
        label, _f, x, w = _critic(gen)
        cases.append({"critic": labels.index(label), "x": x, "w": w})
    return {"critics": cases}


def _where(case: dict) -> str:
    return (f"for f = {CRITICS[case['critic']][0]}, x of shape {tuple(case['x'].shape)}, w of "
            f"shape {tuple(case['w'].shape)}")


def _observe_penalty(penalty_grad, inputs: dict) -> list | dict:
    """For each critic: the autograd calls the answer made, how many reverse passes, and
    the gradient it returned."""
    seen_all = []
    for case in inputs["critics"]:
        with count_autograd() as seen:
            got, failed = call_answer(
                penalty_grad, CRITICS[case["critic"]][1], case["x"].clone(), case["w"].clone(),
                not_callable=f"expected a function penalty_grad(f, x, w), got "
                             f"{type(penalty_grad).__name__}",
                raised=_graph_error(
                    _where(case), seen,
                    needs_grad="x and w arrive as plain tensors: make both require grad "
                               "(.detach().requires_grad_()) before calling f; the first pass "
                               "differentiates with respect to x, the second with respect "
                               "to w.",
                    keeps_graph="The second pass differentiates the penalty, made from the "
                                "input-gradient, which has no graph here: the input-gradient "
                                "keeps its graph only when computed with create_graph=True, "
                                "and not detached afterwards."))
        if failed is not None:
            return failed
        seen_all.append({"calls": list(seen.calls), "reverse": seen.reverse,
                         "grad": as_plain(got)})
    return seen_all


def _full(calls: list) -> list:
    """The calls that build a full Hessian or Jacobian."""
    return sorted({c for c in calls if any(j in c for j in _FULL_JACOBIANS)})


def _penalty_agree(got: dict, want: dict) -> bool:
    return (not _full(got["calls"]) and got["reverse"] <= 2
            and close(got["grad"], want["grad"]))


def _penalty(inputs: dict, first: str, second: str, power: int = 2, by: float = 1.0) -> list:
    """The observation of an answer giving d/d(second) |d f / d(first)|**power, times by."""
    return [{"grad": by * _penalty_grads(CRITICS[c["critic"]][1], c["x"], c["w"], first,
                                         second, power)} for c in inputs["critics"]]


def _batch_mean(inputs: dict) -> list:
    """The observation of an answer averaging each example's penalty over the batch: the
    reference over n, the number of examples."""
    return [{"grad": want["grad"] / len(case["x"])}
            for case, want in zip(inputs["critics"], _penalty(inputs, "x", "w"), strict=True)]


def _explain_penalty(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not _penalty_agree(g, w))
    case, mine = inputs["critics"][at], got[at]
    where = _where(case)
    if _full(mine["calls"]):
        return (f"{where}: it calls {', '.join(_full(mine['calls']))}, building a full Hessian "
                "or Jacobian. The exercise asks for two passes and no matrix of second "
                "derivatives.")
    if mine["reverse"] > 2:
        return (f"{where}: {mine['reverse']} backward passes; two are enough: one for the "
                "input-gradient (with a graph), one from the penalty.")
    grad, x, w = mine["grad"], case["x"], case["w"]
    if not isinstance(grad, torch.Tensor):
        return f"{where}: expected a tensor shaped like w, got {kind_of(grad)}"
    if grad.shape == x.shape and grad.shape != w.shape:
        return failure("mismatch", f"{where}: the result is shaped like x, {tuple(x.shape)}: "
                       "the penalty is trained through the weights, so its gradient is taken "
                       "with respect to w (the first pass is the one with respect to x).")
    return compared("gradient of the penalty", grad, want[at]["grad"], "a tensor", where=where)


WEIGHT_PENALTY = Method(
    name="penalty_grad",
    make_inputs=_penalty_inputs,
    observe=_observe_penalty,
    reference=lambda inputs: _penalty(inputs, "x", "w"),
    explain=_explain_penalty,
    mistakes={
        "it penalises the gradient with respect to w; the penalty is on the gradient with "
        "respect to the input x, differentiated with respect to w.":
            lambda inputs: _penalty(inputs, "w", "w"),
        "it is half the answer: d|g|^2 = 2 g dg, the chain rule's factor 2 from the square "
        "is missing.": lambda inputs: _penalty(inputs, "x", "w", by=0.5),
        "it is the gradient of the sum of the input-gradient's entries, not of their "
        "squares: the penalty is |g|^2 = (g ** 2).sum().":
            lambda inputs: _penalty(inputs, "x", "w", power=1),
        "it is the answer divided by n, the number of examples: each example's penalty "
        "averaged over the batch. The penalty is |g|^2 for the whole batch, (g ** 2).sum(), "
        "every example's squares added up.": _batch_mean,
    },
    trials=1,
    agree=every_case(_penalty_agree),
    passed="the penalty's gradient with respect to w matches on 2 new critics, with two "
           "backward passes and no Hessian",
)
