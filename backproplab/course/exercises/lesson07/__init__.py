"""Lesson 07, backward twice (``retain_graph``): its exercises and its predictions.

All three exercises are about the method, so their checks are `Method` checks:

- ``l07-one-backward``: a training step that takes two backward passes (main's
  gradient rescaled by main's value in between, then aux's added) rebuilt as
  one pass. The check counts the passes with `count_autograd`, looks at the
  saved tensors afterwards (no ``retain_graph``) and compares the gradients
  with the two-pass step's on a new network.
- ``l07-two-players``: two players (weights A and B) whose losses share one
  forward pass, each stepped along its own loss's gradient, where a step
  before the second gradient trips the version counter. The check runs the
  step on new problems and names the slips by rerunning them (the losses
  summed, the counter dodged with ``.data``, the gradients swapped, a step
  uphill, a step that rebinds a name).
- ``l07-engine-frees``: the learner's ``Saved`` box and ``backward`` for a small
  tensor engine, checked in :mod:`.engine` against torch, case by case.

Each message names the slip it found, and only when that slip explains the
numbers.
"""

from __future__ import annotations

import torch

from ....graph import describe
from .._spec import Method, Prediction, Report, attempt, compare, count_autograd, failed, passed
from .._spec import failed as _fail
from .._spec import first_line as _first_line
from .engine import check_engine
from .engine import close as _close

# --------------------------------------------------------------------------
# Exercise 1: a two-pass step rebuilt as one backward pass
# --------------------------------------------------------------------------

# The auxiliary losses the check tries; each reads the shared hidden layer h.
AUX = (
    ("mean(h**2)", lambda h, out: (h**2).mean()),
    ("mean(out**2) / 4", lambda h, out: (out**2).mean() / 4),
    ("mean(sin(h) * h)", lambda h, out: (torch.sin(h) * h).mean()),
)


def two_pass_step(main, aux, params) -> None:
    """The step the exercise restructures: main's gradient rescaled by main's value
    between the passes, then aux's gradient added (the notebook shows the same code)."""
    main.backward(retain_graph=True)
    for p in params:
        p.grad /= main.item()
    aux.backward()


def _network(gen: torch.Generator):
    """(the inputs, a builder): a one-hidden-layer tanh network of new sizes; the builder
    makes new leaves and the two losses on them, (leaves, main, aux, h)."""
    n, d, width = (int(k) for k in torch.randint(3, 7, (3,), generator=gen))
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    target = torch.randn(n, generator=gen, dtype=torch.float64)
    W = torch.randn(d, width, generator=gen, dtype=torch.float64) * 0.8
    w = torch.randn(width, generator=gen, dtype=torch.float64)
    label, aux_of = AUX[int(torch.randint(len(AUX), (1,), generator=gen))]

    def build():
        leaves = [W.clone().requires_grad_(), w.clone().requires_grad_()]
        h = torch.tanh(x @ leaves[0])
        out = h @ leaves[1]
        return leaves, ((out - target) ** 2).mean(), aux_of(h, out), h

    return f"{n} examples, {d} inputs, {width} hidden units, aux = {label}", build


def _weighted(build, main_weight, aux_weight) -> list[torch.Tensor]:
    """The leaves' gradients of main_weight(main) * main + aux_weight(main) * aux."""
    leaves, main, aux, _ = build()
    m = main.item()
    return list(torch.autograd.grad(main_weight(m) * main + aux_weight(m) * aux, leaves))


# Slips: (main's weight, aux's weight) as functions of main's value m, and what to say.
_SLIPS = (
    (lambda m: 1.0, lambda m: 1.0,
     "it is the gradient of main + aux: the two-pass step divides main's gradient by main's "
     "value before aux's gradient is added"),
    (lambda m: 1 / m, lambda m: 1 / m,
     "both losses are divided by main's value; the two-pass step rescales main's gradient "
     "only, before aux's pass adds its own"),
    (lambda m: 1.0, lambda m: 1 / m,
     "the rescaling went to aux; in the two-pass step it is main's gradient that is divided "
     "by main's value"),
    (lambda m: m, lambda m: 1.0,
     "main's loss is multiplied by its value; the two-pass step divides by it"),
    (lambda m: 0.0, lambda m: 1.0,
     "only aux's gradient arrived. If you divided main by itself (main / main), that is the "
     "constant 1, whose gradient is 0: the weight must be a plain number (main.item()) with "
     "no graph through it"),
)


def _check_one_backward(one_backward, seed: int) -> Report:
    name = "one_backward"
    if not callable(one_backward):
        return _fail(name, f"expected a function one_backward(main, aux), got "
                           f"{type(one_backward).__name__}")
    gen = torch.Generator().manual_seed(seed)
    where, build = _network(gen)
    leaves, main, aux, h = build()
    with count_autograd() as seen:
        _, failure = attempt(name, one_backward, main, aux, raised=lambda err: (
            "the second pass found the shared graph freed: one backward on a single total "
            "needs no second pass" if isinstance(err, RuntimeError) and "second time" in str(err)
            else f"raised {type(err).__name__}: {_first_line(err)}"))
    if failure is not None:
        return failure
    if seen.reverse != 1:
        return _fail(name, f"{seen.reverse} backward passes ({where}); the exercise asks for one. "
                           "Both losses read the same hidden layer: say in one loss what the "
                           "two-pass step does to main's gradient.")
    kept = [s.name for node in describe([main, aux]).nodes for s in node.saved if not s.freed]
    if kept:
        return _fail(name, f"after your pass the graph's saved tensors are still alive ({where}): "
                           "retain_graph=True keeps their memory for nothing when no second "
                           "pass follows.")
    got = [p.grad for p in leaves]
    if any(g is None for g in got):
        return _fail(name, "W.grad or w.grad is None after your function: its pass must reach "
                           "the leaves (call .backward(), not torch.autograd.grad).")
    ref_leaves, ref_main, ref_aux, _ = build()
    two_pass_step(ref_main, ref_aux, ref_leaves)
    reference = [p.grad for p in ref_leaves]
    for main_weight, aux_weight, told in _SLIPS:
        slip = _weighted(build, main_weight, aux_weight)
        if all(_close(g, s) for g, s in zip(got, slip, strict=True)) and not all(
                _close(r, s) for r, s in zip(reference, slip, strict=True)):
            return _fail("gradients", f"{where}: {told}.", "mismatch")
    for label, mine, ref in zip(("W.grad", "w.grad"), got, reference, strict=True):
        report = compare(label, mine, ref, rtol=1e-5, atol=1e-7)
        if not report.ok:
            return failed(label, f"{where}: {report[0].message}", report[0].verdict)
    return passed(name, f"one backward pass, saved tensors freed, and the gradients of the "
                        f"two-pass step ({where})")


# --------------------------------------------------------------------------
# Exercise 2: two players, one forward pass, and the version counter
# --------------------------------------------------------------------------


def broken_step(loss_a, loss_b, A, B, lr) -> None:
    """The step the exercise repairs (the notebook shows the same code): A steps before
    loss_b's backward, which needs the A it saved."""
    loss_a.backward(retain_graph=True)
    with torch.no_grad():
        for p in A:
            p -= lr * p.grad
    loss_b.backward()
    with torch.no_grad():
        for p in B:
            p -= lr * p.grad


def _players(gen: torch.Generator):
    """(what, lr, a builder): two players sharing one forward pass, of new sizes. The
    builder makes new leaves and both losses: (A, B, loss_a, loss_b). Player A is a scorer
    (weights D, bias c), player B a tanh feature layer G; both losses read both."""
    n, k, d = (int(s) for s in torch.randint(3, 7, (3,), generator=gen))
    z = torch.randn(n, k, generator=gen, dtype=torch.float64)
    t = torch.randn(n, generator=gen, dtype=torch.float64)
    D = torch.randn(d, generator=gen, dtype=torch.float64)
    c = torch.randn((), generator=gen, dtype=torch.float64)
    G = torch.randn(k, d, generator=gen, dtype=torch.float64) * 0.7
    lr = round(float(torch.rand((), generator=gen)) * 0.4 + 0.05, 2)

    def build():
        A = [D.clone().requires_grad_(), c.clone().requires_grad_()]
        B = [G.clone().requires_grad_()]
        h = torch.tanh(z @ B[0])
        score = h @ A[0] + A[1]
        return A, B, ((score - t) ** 2).mean(), (score**2).mean() + 0.1 * (h**2).mean()

    return f"{n} examples, {d} features, lr = {lr}", lr, build


def _after(step, build, lr) -> list[torch.Tensor]:
    """The players' values after ``step`` ran on a new copy of the problem."""
    A, B, loss_a, loss_b = build()
    step(loss_a, loss_b, A, B, lr)
    return [p.detach().clone() for p in A + B]


def _moved(A, B, ga, gb, lr, sign=1.0) -> None:
    with torch.no_grad():
        for p, g in zip(A, ga, strict=True):
            p -= sign * lr * g
        for p, g in zip(B, gb, strict=True):
            p -= sign * lr * g


def _reference_step(loss_a, loss_b, A, B, lr) -> None:
    ga = torch.autograd.grad(loss_a, A, retain_graph=True)
    gb = torch.autograd.grad(loss_b, B)
    _moved(A, B, ga, gb, lr)


def _summed_step(loss_a, loss_b, A, B, lr) -> None:
    grads = torch.autograd.grad(loss_a + loss_b, A + B)
    _moved(A, B, grads[:len(A)], grads[len(A):], lr)


def _swapped_step(loss_a, loss_b, A, B, lr) -> None:
    ga = torch.autograd.grad(loss_b, A, retain_graph=True)
    gb = torch.autograd.grad(loss_a, B)
    _moved(A, B, ga, gb, lr)


def _uphill_step(loss_a, loss_b, A, B, lr) -> None:
    ga = torch.autograd.grad(loss_a, A, retain_graph=True)
    gb = torch.autograd.grad(loss_b, B)
    _moved(A, B, ga, gb, lr, sign=-1.0)


def _data_step(loss_a, loss_b, A, B, lr) -> None:
    """The version counter dodged with .data: loss_b's backward reads A's new values."""
    ga = torch.autograd.grad(loss_a, A, retain_graph=True)
    for p, g in zip(A, ga, strict=True):
        p.data -= lr * g
    gb = torch.autograd.grad(loss_b, B)
    with torch.no_grad():
        for p, g in zip(B, gb, strict=True):
            p -= lr * g


_PLAYER_SLIPS = (
    (_summed_step, "each player moved along the gradient of loss_a + loss_b: A must follow "
                   "loss_a only and B loss_b only (one backward of the sum mixes them, and so "
                   "do two backward calls whose .grad add up)"),
    (_data_step, "B's gradient was computed with A's updated values: changing A through "
                 ".data hides the step from the version counter, so loss_b's backward used an "
                 "A its forward pass never saw. Take both gradients before any step"),
    (_swapped_step, "the gradients are swapped: A follows loss_a, B follows loss_b"),
    (_uphill_step, "the players moved up their gradients: a step subtracts lr * gradient"),
)


def _players_error(err: Exception, where: str) -> str:
    first = _first_line(err)
    if "modified by an inplace operation" in first:
        return (f"({where}) a backward pass ran after a step had changed a weight it saved: "
                f"{first.split(':')[0]}. The version counter caught it, as in section 3: take "
                "every gradient first, then step.")
    if "second time" in first:
        return (f"({where}) the second gradient found the shared graph freed: the first "
                "gradient call must keep it (retain_graph=True).")
    return f"raised {type(err).__name__} ({where}): {first}"


def _check_players(two_player_step, seed: int) -> Report:
    name = "two_player_step"
    if not callable(two_player_step):
        return _fail(name, f"expected a function two_player_step(loss_a, loss_b, A, B, lr), "
                           f"got {type(two_player_step).__name__}")
    gen = torch.Generator().manual_seed(seed)
    for _ in range(2):
        where, lr, build = _players(gen)
        A, B, loss_a, loss_b = build()
        before = [p.detach().clone() for p in A + B]
        _, failure = attempt(name, two_player_step, loss_a, loss_b, A, B, lr,
                             raised=lambda err, where=where: _players_error(err, where))
        if failure is not None:
            return failure
        got = [p.detach().clone() for p in A + B]
        if all(torch.equal(g, b) for g, b in zip(got, before, strict=True)):
            return _fail(name, f"({where}) the weights did not change. `p = p - lr * g` makes a "
                               "new tensor and rebinds the name; change the tensor itself "
                               "(p -= lr * g) inside torch.no_grad().")
        expected = _after(_reference_step, build, lr)
        for slip, told in _PLAYER_SLIPS:
            wrong = _after(slip, build, lr)
            if all(_close(g, w) for g, w in zip(got, wrong, strict=True)):
                return _fail("weights after the step", f"({where}) {told}.", "mismatch")
        for label, mine, ref in zip(("D", "c", "G"), got, expected, strict=True):
            report = compare(label, mine, ref, rtol=1e-5, atol=1e-7)
            if not report.ok:
                return failed(label, f"({where}) {report[0].message}", report[0].verdict)
    return passed(name, "both players stepped along their own loss's gradient at the weights "
                        "the forward pass saw, on 2 new problems")


EXERCISES = {
    "l07-one-backward": Method(check=_check_one_backward),
    "l07-two-players": Method(check=_check_players),
    "l07-engine-frees": Method(check=check_engine),
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
