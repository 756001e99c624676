"""Lesson 07, backward twice (``retain_graph``): its exercises and its predictions.

Both exercises are about the method, so their checks are `Method` checks:

- ``l07-two-derivatives``: two gradients from one unrolled loop. The check
  counts the calls of ``step`` (one forward pass only) and compares both
  gradients with autograd's, on new sequences and new step functions.
- ``l07-one-pass``: the gradient of a weighted sum of losses in one backward
  pass that leaves the graph free. The check counts the passes with
  `count_autograd` and looks at the saved tensors afterwards.

Each message names the slip it found, and only when that slip explains the
numbers.
"""

from __future__ import annotations

import torch

from ...graph import describe
from ._spec import Method, Prediction, Report, attempt, compare, count_autograd, failed, passed
from ._spec import failed as _fail
from ._spec import first_line as _first_line


def _close(a, b) -> bool:
    """Whether two float64 answers agree (loosely enough for float32 work too)."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-5,
                                                      atol=1e-7))


# --------------------------------------------------------------------------
# Exercise 1: two gradients from one unrolled loop
# --------------------------------------------------------------------------

# The step functions the check tries: the lesson's tanh cell first, then others,
# so that an answer which rebuilds the loop with its own formula fails.
STEPS = (
    ("tanh(w*h + x)", lambda w, h, x: torch.tanh(w * h + x)),
    ("sin(w*h) + x", lambda w, h, x: torch.sin(w * h) + x),
    ("w*h*tanh(x) + 0.5", lambda w, h, x: w * h * torch.tanh(x) + 0.5),
)


def _sequence(gen: torch.Generator):
    """A new sequence: (w, h0, xs), float64, of length 3 to 7."""
    length = int(torch.randint(3, 8, (1,), generator=gen))
    xs = torch.randn(length, generator=gen, dtype=torch.float64)
    w = torch.rand((), generator=gen, dtype=torch.float64) + 0.3
    h0 = torch.randn((), generator=gen, dtype=torch.float64) * 0.5
    return w, h0, xs


def _unrolled_grad(step, w, h0, xs, stop: int) -> torch.Tensor:
    """d h_stop / dw, with a graph of its own (the reference)."""
    w = w.detach().clone().requires_grad_()
    h = h0
    for x_t in xs[:stop]:
        h = step(w, h, x_t)
    return torch.autograd.grad(h, w)[0]


def _two_grads_error(err: Exception, where: str) -> str:
    if isinstance(err, RuntimeError) and "second time" in str(err):
        return ("the second gradient found the shared graph freed: the first call must keep it "
                f"with retain_graph=True ({_first_line(err).split('(')[0].strip()}).")
    return f"raised {type(err).__name__} {where}: {_first_line(err)}"


def _check_two_grads(two_grads, seed: int) -> Report:
    name = "two_grads"
    if not callable(two_grads):
        return _fail(name, f"expected a function two_grads(step, w, h0, xs), got "
                           f"{type(two_grads).__name__}")
    gen = torch.Generator().manual_seed(seed)
    for k in range(2):
        label, step = STEPS[(seed + k) % len(STEPS)]
        w0, h0, xs = _sequence(gen)
        length = len(xs)
        calls = []

        def counted_step(w, h, x_t, _step=step, _calls=calls):
            _calls.append(1)
            return _step(w, h, x_t)

        w = w0.clone().requires_grad_()
        where = f"(step h = {label}, {length} inputs)"
        got, failure = attempt(name, two_grads, counted_step, w, h0, xs,
                               raised=lambda err, where=where: _two_grads_error(err, where))
        if failure is not None:
            return failure
        if len(calls) != length:
            return _fail(name, f"step was called {len(calls)} times for {length} inputs {where}: "
                               "run the loop once and take both gradients from that one graph.")
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            size = f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""
            return _fail(name, "expected a pair (d h_2 / dw, d h_final / dw), got "
                               f"{type(got).__name__}{size}")
        at_two = _unrolled_grad(step, w0, h0, xs, 2)
        at_end = _unrolled_grad(step, w0, h0, xs, length)
        first, last = got
        if _close(first, at_two) and _close(last, at_two + at_end):
            return _fail("d h_final / dw", f"{where}: it holds the two gradients added together "
                         "(d h_2/dw + d h_final/dw). Two backward calls add into w.grad: take "
                         "each gradient with torch.autograd.grad, which returns it instead.",
                         "mismatch")
        if _close(first, at_end) and _close(last, at_two):
            return _fail(name, f"{where}: the two gradients are swapped: first d h_2 / dw, then "
                               "d h_final / dw.", "mismatch")
        if _close(first, _unrolled_grad(step, w0, h0, xs, 1)):
            return _fail("d h_2 / dw", f"{where}: it is the gradient of the state after ONE step. "
                         "h_2 is the state after two steps (states[1] if you collect them in a "
                         "list from the first step on).", "mismatch")
        for label_out, mine, ref in (("d h_2 / dw", first, at_two), ("d h_final / dw", last,
                                                                        at_end)):
            report = compare(label_out, mine, ref, rtol=1e-5, atol=1e-7)
            if not report.ok:
                return failed(label_out, f"{where}: {report[0].message}", report[0].verdict)
    return passed(name, "one forward pass (step called once per input) and both "
                                  "gradients match autograd on 2 new sequences")


# --------------------------------------------------------------------------
# Exercise 2: a weighted objective in one backward pass
# --------------------------------------------------------------------------

_LOSSES = (
    ("sum(t**2)", lambda t: (t**2).sum()),
    ("sum(t)", lambda t: t.sum()),
    ("mean(exp(3t))", lambda t: (t * 3).exp().mean()),
    ("sum(sin(t) * t)", lambda t: (torch.sin(t) * t).sum()),
)


def _objective(gen: torch.Generator):
    """(x, losses' formulas, weights): a new trunk input and new weights."""
    n = int(torch.randint(3, 7, (1,), generator=gen))
    x = torch.randn(n, generator=gen, dtype=torch.float64)
    count = int(torch.randint(2, 5, (1,), generator=gen))
    order = torch.randperm(len(_LOSSES), generator=gen)[:count].tolist()
    weights = [round(float(w), 2) for w in torch.randn(count, generator=gen) * 2]
    return x, [_LOSSES[i] for i in order], weights


def _check_one_pass(weighted_backward, seed: int) -> Report:
    name = "weighted_backward"
    if not callable(weighted_backward):
        return _fail(name, f"expected a function weighted_backward(losses, weights), got "
                           f"{type(weighted_backward).__name__}")
    gen = torch.Generator().manual_seed(seed)
    x0, formulas, weights = _objective(gen)
    x = x0.clone().requires_grad_()
    trunk = torch.tanh(x)
    losses = [loss(trunk) for _, loss in formulas]
    with count_autograd() as seen:
        _, failure = attempt(name, weighted_backward, losses, list(weights), raised=lambda err: (
            f"raised {type(err).__name__}: {_first_line(err)}"))
    if failure is not None:
        return failure
    if seen.reverse != 1:
        return _fail(name, f"{seen.reverse} backward passes; the exercise asks for one: add the "
                           "weighted losses up and call backward once on the total.")
    kept = [s.name for node in describe(losses).nodes for s in node.saved if not s.freed]
    if kept:
        return _fail(name, "the trunk's saved tensors are still alive after your pass: "
                           "retain_graph=True keeps the graph's memory for nothing here.")
    if x.grad is None:
        return _fail("x.grad", "is None after your function: its backward pass must reach the "
                               "leaves (call .backward() on the total, not torch.autograd.grad).")
    x_ref = x0.clone().requires_grad_()
    t_ref = torch.tanh(x_ref)
    parts = [loss(t_ref) for _, loss in formulas]
    reference = torch.autograd.grad(sum(w * p for w, p in zip(weights, parts, strict=True)),
                                    x_ref, retain_graph=True)[0]
    unweighted = torch.autograd.grad(sum(parts), x_ref)[0]
    what = " + ".join(f"{w:g}*{f}" for w, (f, _) in zip(weights, formulas, strict=True))
    if not _close(x.grad, reference) and _close(x.grad, unweighted):
        return _fail("x.grad", f"for {what} (t = tanh(x)): it is the gradient of the plain sum "
                               "of the losses; the weights are missing (multiply each loss by "
                               "its weight before adding).", "mismatch")
    report = compare("x.grad", x.grad, reference, rtol=1e-5, atol=1e-7)
    if not report.ok:
        return failed("x.grad", f"for {what} (t = tanh(x)): {report[0].message}", report[0].verdict)
    return passed(name, f"one backward pass, graph released, x.grad matches autograd "
                                  f"for {what}")


EXERCISES = {
    "l07-two-derivatives": Method(check=_check_two_grads),
    "l07-one-pass": Method(check=_check_one_pass),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _again_answer() -> bool:
    """Does a second y.backward() raise?"""
    x = torch.tensor(2.0, requires_grad=True)
    y = x**2
    y.backward()
    try:
        y.backward()
    except RuntimeError:
        return True
    return False


def _inplace_answer() -> str:
    """What the second backward does after w changed in place between the calls."""
    w = torch.tensor(3.0, requires_grad=True)
    y = w**2
    y.backward(retain_graph=True)
    first = w.grad.clone()
    old = 2 * w.detach().clone()
    with torch.no_grad():
        w -= 0.1 * w.grad
    try:
        y.backward()
    except RuntimeError:
        return "error"
    added = w.grad - first
    return "old" if torch.equal(added, old) else "new"


def _z_after_y_answer() -> bool:
    """Does z.backward() work after y.backward() when both share PowBackward0?"""
    x = torch.tensor(2.0, requires_grad=True)
    y = x**2
    z = y * x
    y.backward()
    try:
        z.backward()
    except RuntimeError:
        return False
    return True


PREDICTIONS = {
    "l07-predict-again": Prediction(
        question="does a second y.backward() raise an error?",
        answer=_again_answer,
        hint="look at the freed flag of PowBackward0's saved tensor in the cell above, and ask "
             "what that node needs to compute 2x.",
        why="the first backward freed the x that PowBackward0 saved; the second walk reaches the "
            "node, finds its saved tensor gone and stops with an error rather than compute "
            "something wrong",
    ),
    "l07-predict-inplace": Prediction(
        question="the second y.backward() after an in-place update of w",
        answer=_inplace_answer,
        hint="retain_graph kept the saved tensor itself, and that tensor is w. What does autograd "
             "know about a saved tensor that was changed after it was saved?",
        why="PowBackward0 saved w itself, not a copy, together with w's version counter (0). The "
            "in-place update made it version 1, so the saved value is no longer the one the "
            "forward pass used; autograd notices the mismatch and raises instead of using either "
            "value",
        choices=("error", "old", "new"),
    ),
    "l07-predict-second": Prediction(
        question="does z.backward() work after y.backward()?",
        answer=_z_after_y_answer,
        hint="follow z's walk back: which node does it share with y, and what did y's backward "
             "pass do to that node's saved tensor?",
        why="z's walk back passes through PowBackward0, whose saved x the first call freed",
    ),
}
