"""Lesson 17, gradients of gradients: its exercises and its predictions.

The first two exercises use autograd on purpose (the method is the point), so
their checks are `Method` checks; the third is derived by hand:

- ``l17-newton-step``: -f'(x) / f''(x) with both derivatives from autograd, on
  new polynomials and points;
- ``l17-weight-penalty``: the gradient with respect to the weights w of the
  input-gradient penalty |d f / d x|^2 (a mixed second derivative), with two
  backward passes and no Hessian (the passes and the torch functions called
  are counted), on new critics and shapes;
- ``l17-hvp-by-hand``: a Hessian-vector product of a one-layer tanh network,
  derived by hand (forward the direction, then backward): a `ByHand` check on new
  shapes with autograd off, against double backward, with the slips named.
"""

from __future__ import annotations

import math

import torch

from ._spec import (
    ByHand,
    Method,
    Prediction,
    as_plain,
    call_answer,
    close,
    compared,
    count_autograd,
    every_case,
    failure,
    kind_of,
)
from ._spec import first_line as _first_line

# --------------------------------------------------------------------------
# Polynomials: new coefficients and points per seed, derivatives term by term
# --------------------------------------------------------------------------


def _polynomial(gen: torch.Generator, degree: int):
    """Coefficients c_0..c_degree (the top one well away from 0) and 3 to 5 points."""
    coefs = torch.randn(degree + 1, generator=gen, dtype=torch.float64)
    coefs[-1] = coefs[-1].sign() * (coefs[-1].abs() + 0.5)
    points = torch.randn(int(torch.randint(3, 6, (1,), generator=gen)), generator=gen,
                         dtype=torch.float64)
    return coefs, points


def poly(coefs):
    """The polynomial sum_k c_k t**k as a function of a tensor t."""
    return lambda t: sum(c * t**k for k, c in enumerate(coefs))


def poly_derivative(coefs, t, n: int) -> torch.Tensor:
    """d^n/dt^n of sum_k c_k t**k, worked out term by term."""
    total = torch.zeros_like(t)
    for k, c in enumerate(coefs):
        if k >= n:
            total = total + c * math.perm(k, n) * t ** (k - n)
    return total


def _show(coefs) -> str:
    return f"a degree-{len(coefs) - 1} polynomial"


def _graph_error(where: str, advice: str):
    """An error's text, with ``advice`` when a grad call found no graph to walk."""
    def text(err: Exception) -> str:
        first = _first_line(err)
        if "does not require grad" in first:
            return f"{where}: {first}. {advice}"
        return f"{where}: raised {type(err).__name__}: {first}"
    return text


def _newton_inputs(gen: torch.Generator) -> dict:
    """Three new polynomials (degree 3 or 4) and the points of each."""
    cases = []
    for _ in range(3):
        coefs, points = _polynomial(gen, int(torch.randint(3, 5, (1,), generator=gen)))
        cases.append({"coefficients": coefs, "points": points})
    return {"polynomials": cases}


def _observe_newton(newton_step, inputs: dict) -> list | dict:
    """What the answer returned for each polynomial."""
    got_all = []
    for case in inputs["polynomials"]:
        coefs, points = case["coefficients"], case["points"]
        got, failed = call_answer(
            newton_step, poly(coefs), points.clone(),
            not_callable=f"expected a function newton_step(f, x), got "
                         f"{type(newton_step).__name__}",
            raised=_graph_error(f"for {_show(coefs)} at {len(points)} points",
                                "f'' is the derivative of f': compute f' with "
                                "create_graph=True so that it has a graph to differentiate."))
        if failed is not None:
            return failed
        got_all.append(as_plain(got))
    return got_all


def _newton_ratio(inputs: dict, ratio) -> list:
    """``ratio(f', f'')`` at each polynomial's points: the step and its slips."""
    return [ratio(poly_derivative(c["coefficients"], c["points"], 1),
                  poly_derivative(c["coefficients"], c["points"], 2))
            for c in inputs["polynomials"]]


def _explain_newton(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not close(g, w))
    case = inputs["polynomials"][at]
    where = f"for {_show(case['coefficients'])} at {len(case['points'])} points"
    return compared("Newton step", got[at], want[at], "a tensor like x", where=where)


NEWTON = Method(
    name="newton_step",
    make_inputs=_newton_inputs,
    observe=_observe_newton,
    reference=lambda inputs: _newton_ratio(inputs, lambda d1, d2: -d1 / d2),
    explain=_explain_newton,
    mistakes={
        "the sign is flipped: Newton's step is -f'(x) / f''(x).":
            lambda inputs: _newton_ratio(inputs, lambda d1, d2: d1 / d2),
        "the ratio is upside down: divide f' by f'', not f'' by f'.":
            lambda inputs: _newton_ratio(inputs, lambda d1, d2: -d2 / d1),
        "the ratio is upside down, and its sign flipped: Newton's step is -f'(x) / f''(x), "
        "f' divided by f''.": lambda inputs: _newton_ratio(inputs, lambda d1, d2: d2 / d1),
    },
    trials=1,
    agree=every_case(close),
    passed="-f'/f'' matches on 3 new polynomials",
)


# --------------------------------------------------------------------------
# Exercise 2: a gradient penalty on the weights
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
    so that a gradient with respect to the wrong tensor cannot have the right shape."""
    n, d = (int(k) for k in torch.randint(2, 6, (2,), generator=gen))
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
                raised=_graph_error(_where(case),
                                    "The second pass differentiates the input-gradient, so "
                                    "that gradient needs a graph: compute it with "
                                    "create_graph=True, with x and w both requiring grad."))
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
    },
    trials=1,
    agree=every_case(_penalty_agree),
    passed="the penalty's gradient with respect to w matches on 2 new critics, with two "
           "backward passes and no Hessian",
)


# --------------------------------------------------------------------------
# Exercise 3: a Hessian-vector product by hand (the R-operator)
# --------------------------------------------------------------------------


def _hvp_inputs(gen: torch.Generator):
    """(x, W, a, V): a batch x (n, d), a layer W (d, h), output weights a (h,) and a
    direction V shaped like W, all of new sizes."""
    n, d, h = (int(k) for k in torch.randint(2, 7, (3,), generator=gen))
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    W = torch.randn(d, h, generator=gen, dtype=torch.float64) * 0.7
    a = torch.randn(h, generator=gen, dtype=torch.float64)
    V = torch.randn(d, h, generator=gen, dtype=torch.float64)
    return x, W, a, V


def _hvp_reference(x, W, a, V):
    """H v by double backward: the gradient with a graph, then backward from it along V."""
    W = W.detach().clone().requires_grad_()
    loss = (torch.tanh(x @ W) @ a).sum()
    (g,) = torch.autograd.grad(loss, W, create_graph=True)
    (hv,) = torch.autograd.grad(g, W, grad_outputs=V)
    return hv


def _hvp_with(second):
    """The R-operator's answer with ``second(T)`` in the place of tanh''(Z)."""
    def hv(x, W, a, V):
        T = torch.tanh(x @ W)
        return x.T @ (second(T) * (x @ V) * a)
    return hv


def _hvp_unpropagated(x, W, a, V):
    T = torch.tanh(x @ W)
    return x.T @ (-2 * T * (1 - T**2) * a)


def _hvp_direction_at_the_end(x, W, a, V):
    T = torch.tanh(x @ W)
    return (x.T @ (-2 * T * (1 - T**2) * a)) * V


def _hvp_gradient(x, W, a, V):
    T = torch.tanh(x @ W)
    return x.T @ ((1 - T**2) * a)


EXERCISES = {
    "l17-newton-step": NEWTON,
    "l17-weight-penalty": WEIGHT_PENALTY,
    "l17-hvp-by-hand": ByHand(
        name="hvp",
        reference=_hvp_reference,
        make_inputs=_hvp_inputs,
        mistakes={
            "tanh'' is missing: the gradient's factor (1 - T**2) depends on W too, and its "
            "derivative along V is tanh''(Z) * (x @ V) with tanh'' = -2 tanh (1 - tanh**2); "
            "you used tanh' = 1 - T**2 in its place": _hvp_with(lambda T: 1 - T**2),
            "the sign of tanh'' is flipped: d/dz (1 - tanh(z)**2) = -2 tanh(z) (1 - tanh(z)**2)":
                _hvp_with(lambda T: 2 * T * (1 - T**2)),
            "the factor 2 of tanh'' is missing: d/dz tanh(z)**2 = 2 tanh(z) tanh'(z)":
                _hvp_with(lambda T: -T * (1 - T**2)),
            "tanh'' = -2 tanh (1 - tanh**2), not -2 tanh: the chain rule multiplies by tanh' "
            "once more": _hvp_with(lambda T: -2 * T),
            "the direction V is not propagated: push it forward first (Zdot = x @ V), then "
            "the change of the gradient follows from Zdot": _hvp_unpropagated,
            "V is multiplied in entry by entry at the end; the direction goes in at the start, "
            "through the layer (Zdot = x @ V), before tanh'' scales it": _hvp_direction_at_the_end,
            "that is the gradient itself, not its change along V": _hvp_gradient,
        },
        advice="Forward the direction, then backward: Zdot = x @ V; the gradient is "
               "x.T @ ((1 - T**2) * a) with T = tanh(x @ W), and only the factor (1 - T**2) "
               "changes with W. Its change along V is tanh''(Z) * Zdot.",
    ),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _second_answer() -> bool:
    """Can torch.autograd.grad differentiate a plain dy/dx again?"""
    x = torch.tensor(2.0, requires_grad=True)
    (first,) = torch.autograd.grad(x**3, x)
    try:
        torch.autograd.grad(first, x)
    except RuntimeError:
        return False
    return True


def _linear_answer() -> bool:
    """For y = 3x, does a second grad work when the first used create_graph=True?"""
    x = torch.tensor(2.0, requires_grad=True)
    (first,) = torch.autograd.grad(3 * x, x, create_graph=True)
    try:
        torch.autograd.grad(first, x)
    except RuntimeError:
        return False
    return True


PREDICTIONS = {
    "l17-predict-second": Prediction(
        question="can torch.autograd.grad differentiate dy_dx?",
        answer=_second_answer,
        hint="a tensor can only be differentiated through the history autograd recorded for it. "
             "Did anything record the backward pass that made dy_dx?",
        why="by default backward records nothing, so dy_dx has no grad_fn to walk back through",
    ),
    "l17-predict-linear": Prediction(
        question="for y = 3x, does the second torch.autograd.grad work?",
        answer=_linear_answer,
        hint="create_graph records the operations of the backward formula that involve a tensor "
             "requiring grad. What is the backward formula of 3x made of?",
        why="the backward formula of 3x is grad_output * 3, and neither factor depends on x. "
            "Nothing is recorded, dy_dx comes back as a plain 3 with no grad_fn, and the second "
            "call fails, although the true second derivative is simply 0",
    ),
}
