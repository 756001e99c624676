"""Lesson 13, gradients of gradients: its exercises and its predictions.

The exercises use autograd on purpose (the method is the point), so their
checks are `Method` checks on new polynomials, points and orders:

- ``l13-third-derivative``: the n-th derivative by a loop of
  ``torch.autograd.grad`` (the id dates from a third-derivative version),
  including orders above the polynomial's degree, where the derivative is 0
  and autograd hands back a tensor without a graph;
- ``l13-newton-step``: -f'(x) / f''(x) with both derivatives from autograd;
- ``l13-penalty``: the gradient of |grad f|^2 with two backward passes and no
  Hessian (the passes and the torch functions called are counted).
"""

from __future__ import annotations

import math

import torch

from ._spec import Method, Prediction, Report, attempt, compare, count_autograd, failed, passed
from ._spec import failed as _fail
from ._spec import first_line as _first_line


def _close(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-6, atol=1e-9))


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


# --------------------------------------------------------------------------
# Exercise 1: any derivative
# --------------------------------------------------------------------------


def _orders(gen: torch.Generator):
    """(degree, order) pairs: orders within the degree first, then past it by 2 or more."""
    pairs = []
    for _ in range(3):
        degree = int(torch.randint(2, 5, (1,), generator=gen))
        pairs.append((degree, int(torch.randint(1, degree + 1, (1,), generator=gen))))
    degree = int(torch.randint(1, 4, (1,), generator=gen))
    pairs.append((degree, degree + int(torch.randint(2, 4, (1,), generator=gen))))
    return pairs


def _order_error(where: str, n: int, degree: int):
    """What nth_derivative's error says about the loop of grad calls."""
    def text(err: Exception) -> str:
        first = _first_line(err)
        if "implicitly created only for scalar outputs" in first:
            return (f"{where}: {first}. The derivative holds one value per point: "
                    "pass torch.ones_like(g) as grad_outputs (lesson 08), so each "
                    "point gets its own derivative.")
        if "does not require grad" in first and n > degree:
            return (f"{where}: {first}. Past the degree the derivative is a "
                    "constant, and autograd returns it without a graph (section "
                    "4): when g.requires_grad is False, every further derivative "
                    "is 0, so return zeros of x's shape.")
        if "does not require grad" in first:
            return (f"{where}: {first}. The later grad calls need a graph to walk: "
                    "pass create_graph=True to the earlier ones.")
        return f"{where}: raised {type(err).__name__}: {first}"
    return text


def _check_nth_derivative(nth_derivative, seed: int) -> Report:
    name = "nth_derivative"
    if not callable(nth_derivative):
        return _fail(name, f"expected a function nth_derivative(f, x, n), got "
                           f"{type(nth_derivative).__name__}")
    gen = torch.Generator().manual_seed(seed)
    for degree, n in _orders(gen):
        coefs, points = _polynomial(gen, degree)
        where = f"order {n} of {_show(coefs)} at {len(points)} points"
        got, failure = attempt(name, nth_derivative, poly(coefs), points.clone(), n,
                               raised=_order_error(where, n, degree))
        if failure is not None:
            return failure
        expected = poly_derivative(coefs, points, n)
        if not isinstance(got, torch.Tensor):
            return _fail(name, f"{where}: expected a tensor, got {type(got).__name__}")
        if got.shape == expected.shape and not _close(got, expected):
            if n >= 1 and _close(got, poly_derivative(coefs, points, n - 1)):
                return _fail(name, f"{where}: it is the derivative of order {n - 1}, one order "
                                   "too low: the loop must call torch.autograd.grad n times.",
                             "mismatch")
            if _close(got, poly_derivative(coefs, points, n + 1)):
                return _fail(name, f"{where}: it is the derivative of order {n + 1}, one order "
                                   "too high: the loop must call torch.autograd.grad n times.",
                             "mismatch")
        report = compare(f"derivative of order {n}", got.detach(), expected)
        if not report.ok:
            return failed(name, f"{where}: "
                                 f"{report[0].message}", report[0].verdict)
    return passed(name, "matches the derivatives worked out term by term "
                                             "on 4 new polynomials, including an order above "
                                             "the degree")


# --------------------------------------------------------------------------
# Exercise 2: a Newton step
# --------------------------------------------------------------------------


def _graph_error(where: str, advice: str):
    """An error's text, with ``advice`` when a grad call found no graph to walk."""
    def text(err: Exception) -> str:
        first = _first_line(err)
        if "does not require grad" in first:
            return f"{where}: {first}. {advice}"
        return f"{where}: raised {type(err).__name__}: {first}"
    return text


def _check_newton(newton_step, seed: int) -> Report:
    name = "newton_step"
    if not callable(newton_step):
        return _fail(name, f"expected a function newton_step(f, x), got "
                           f"{type(newton_step).__name__}")
    gen = torch.Generator().manual_seed(seed)
    for _ in range(3):
        coefs, points = _polynomial(gen, int(torch.randint(3, 5, (1,), generator=gen)))
        where = f"for {_show(coefs)} at {len(points)} points"
        got, failure = attempt(name, newton_step, poly(coefs), points.clone(), raised=_graph_error(
            where, "f'' is the derivative of f': compute f' with create_graph=True so that it "
                   "has a graph to differentiate."))
        if failure is not None:
            return failure
        d1 = poly_derivative(coefs, points, 1)
        d2 = poly_derivative(coefs, points, 2)
        expected = -d1 / d2
        if isinstance(got, torch.Tensor) and not _close(got, expected):
            if _close(got, -expected):
                return _fail(name, f"{where}: the sign is flipped: Newton's step is -f'(x) / "
                                   "f''(x).", "mismatch")
            if _close(got, -d2 / d1) or _close(got, d2 / d1):
                return _fail(name, f"{where}: the ratio is upside down: divide f' by f'', "
                                   "not f'' by f'.", "mismatch")
        report = compare("Newton step", got.detach() if isinstance(got, torch.Tensor) else got,
                         expected)
        if not report.ok:
            return failed(name, f"{where}: "
                                 f"{report[0].message}", report[0].verdict)
    return passed(name, "-f'/f'' matches on 3 new polynomials")


# --------------------------------------------------------------------------
# Exercise 3: the gradient of |grad f|^2 without a Hessian
# --------------------------------------------------------------------------

_FULL_JACOBIANS = ("hessian", "jacobian", "jacrev", "jacfwd")


def _penalty_problem(gen: torch.Generator):
    """A scalar function of n inputs (n = 4..8) and a point."""
    n = int(torch.randint(4, 9, (1,), generator=gen))
    a = torch.randn(n, n, generator=gen, dtype=torch.float64)
    b = torch.randn(n, generator=gen, dtype=torch.float64)

    def f(t):
        return (torch.tanh(a @ t) ** 2).sum() + (t**4).sum() + (b * t).sum() ** 2

    return f, torch.randn(n, generator=gen, dtype=torch.float64)


def _check_penalty(penalty_grad, seed: int) -> Report:
    name = "penalty_grad"
    if not callable(penalty_grad):
        return _fail(name, f"expected a function penalty_grad(f, x), got "
                           f"{type(penalty_grad).__name__}")
    gen = torch.Generator().manual_seed(seed)
    f, x = _penalty_problem(gen)
    n = len(x)
    where = f"for a function of {n} inputs"
    with count_autograd() as seen:
        got, failure = attempt(name, penalty_grad, f, x.clone(), raised=_graph_error(
            where, "The second pass differentiates the first gradient, so that gradient needs "
                   "a graph: compute it with create_graph=True (and do not detach it)."))
    if failure is not None:
        return failure
    full = sorted({c for c in seen.calls if any(j in c for j in _FULL_JACOBIANS)})
    if full:
        return _fail(name, f"{where}: it calls {', '.join(full)}, building a full Hessian or "
                           "Jacobian. The exercise asks for two passes and no n x n matrix: "
                           "backward from the gradient, weighted by the gradient itself.")
    if seen.reverse > 2:
        return _fail(name, f"{where}: {seen.reverse} backward passes; double backward needs two "
                           "(building the Hessian takes one per input).")
    xr = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(f(xr), xr, create_graph=True)
    (hg,) = torch.autograd.grad(g, xr, grad_outputs=g.detach())
    expected = 2 * hg
    if isinstance(got, torch.Tensor) and _close(got, hg):
        return _fail(name, f"{where}: it is H g, half the answer: d|g|^2/dx = 2 H g, the chain "
                           "rule's factor 2 from the square is missing.", "mismatch")
    report = compare("gradient of the penalty",
                     got.detach() if isinstance(got, torch.Tensor) else got, expected)
    if not report.ok:
        return failed(name, f"{where}: "
                             f"{report[0].message}", report[0].verdict)
    return passed(name, f"2 H g matches {where}, with {seen.reverse} "
                                             "backward passes and no Hessian")


EXERCISES = {
    "l13-third-derivative": Method(check=_check_nth_derivative),
    "l13-newton-step": Method(check=_check_newton),
    "l13-penalty": Method(check=_check_penalty),
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
    "l13-predict-second": Prediction(
        question="can torch.autograd.grad differentiate dy_dx?",
        answer=_second_answer,
        hint="a tensor can only be differentiated through the history autograd recorded for it. "
             "Did anything record the backward pass that made dy_dx?",
        why="by default backward records nothing, so dy_dx has no grad_fn to walk back through",
    ),
    "l13-predict-linear": Prediction(
        question="for y = 3x, does the second torch.autograd.grad work?",
        answer=_linear_answer,
        hint="create_graph records the operations of the backward formula that involve a tensor "
             "requiring grad. What is the backward formula of 3x made of?",
        why="the backward formula of 3x is grad_output * 3, and neither factor depends on x. "
            "Nothing is recorded, dy_dx comes back as a plain 3 with no grad_fn, and the second "
            "call fails, although the true second derivative is simply 0",
    ),
}
