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
  step on new problems, and twice on a fixed one, a new forward pass before each
  call as in a training loop (so a .grad left by one step shows in the next), and
  names the slips by rerunning them (the losses summed, the counter dodged with
  ``.data``, the gradients swapped, a step uphill, a step that rebinds a name).
- ``l07-engine-frees``: the learner's ``Saved`` box and ``backward`` for a small
  tensor engine, checked in :mod:`.engine` against torch, case by case.

Each observation (the passes run, the saved tensors left alive, the gradients or the
weights after the step, what the engine's boxes and passes did) comes back as plain
data, and the grader judges it: a slip is named only when it explains the numbers on
every problem.
"""

from __future__ import annotations

from typing import Any

import torch

from ....graph import describe
from .._spec import METHOD_ADVICE, Method, Prediction, call_answer, compare, count_autograd
from .._spec import first_line as _first_line
from .engine import ENGINE_FREES
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


def _network_inputs(gen: torch.Generator) -> dict[str, Any]:
    """A one-hidden-layer tanh network of new sizes, as plain data: its inputs, targets,
    starting weights and which auxiliary loss reads its hidden layer."""
    n, d, width = (int(k) for k in torch.randint(3, 7, (3,), generator=gen))
    return {"x": torch.randn(n, d, generator=gen, dtype=torch.float64),
            "target": torch.randn(n, generator=gen, dtype=torch.float64),
            "W": torch.randn(d, width, generator=gen, dtype=torch.float64) * 0.8,
            "w": torch.randn(width, generator=gen, dtype=torch.float64),
            "aux": int(torch.randint(len(AUX), (1,), generator=gen))}


def _network_where(inputs: dict[str, Any]) -> str:
    (n, d), width = inputs["x"].shape, inputs["w"].shape[0]
    return f"{n} examples, {d} inputs, {width} hidden units, aux = {AUX[inputs['aux']][0]}"


def _build(inputs: dict[str, Any]):
    """New leaves and the two losses on them: (leaves, main, aux, h)."""
    leaves = [inputs["W"].clone().requires_grad_(), inputs["w"].clone().requires_grad_()]
    h = torch.tanh(inputs["x"] @ leaves[0])
    out = h @ leaves[1]
    return leaves, ((out - inputs["target"]) ** 2).mean(), AUX[inputs["aux"]][1](h, out), h


def _weighted(inputs: dict[str, Any], main_weight, aux_weight) -> dict[str, Any]:
    """What one pass of main_weight(main) * main + aux_weight(main) * aux shows."""
    leaves, main, aux, _ = _build(inputs)
    m = main.item()
    return {"passes": 1, "kept": [], "grads": list(torch.autograd.grad(
        main_weight(m) * main + aux_weight(m) * aux, leaves))}


def _two_pass(inputs: dict[str, Any]) -> dict[str, Any]:
    """What a right answer shows: one pass, nothing kept, the two-pass step's gradients."""
    leaves, main, aux, _ = _build(inputs)
    two_pass_step(main, aux, leaves)
    return {"passes": 1, "kept": [], "grads": [p.grad for p in leaves]}


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


def _one_backward_raised(err: Exception) -> str:
    if isinstance(err, RuntimeError) and "second time" in str(err):
        return ("the second pass found the shared graph freed: one backward on a single total "
                "needs no second pass")
    return f"raised {type(err).__name__}: {_first_line(err)}"


def _observe_one_backward(one_backward, inputs: dict[str, Any]) -> dict[str, Any]:
    """The backward passes the learner's function ran, the saved tensors of the graph it
    left alive (by name), and the leaves' gradients."""
    leaves, main, aux, _ = _build(inputs)
    with count_autograd() as seen:
        _, failed = call_answer(one_backward, main, aux, raised=_one_backward_raised,
                                not_callable=f"expected a function one_backward(main, aux), "
                                             f"got {type(one_backward).__name__}")
    if failed is not None:
        return failed
    kept = [s.name for node in describe([main, aux]).nodes for s in node.saved if not s.freed]
    return {"passes": seen.reverse, "kept": kept,
            "grads": [None if p.grad is None else p.grad.detach().clone() for p in leaves]}


def _agree_one(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return (got["passes"] == want["passes"] and got["kept"] == want["kept"]
            and all(_close(g, w) for g, w in zip(got["grads"], want["grads"], strict=True)))


def _explain_one(inputs: dict[str, Any], got: dict[str, Any], want: dict[str, Any]) -> str:
    where = _network_where(inputs)
    if got["passes"] != 1:
        return (f"{got['passes']} backward passes ({where}); the exercise asks for one. Both "
                "losses read the same hidden layer: say in one loss what the two-pass step "
                "does to main's gradient.")
    if got["kept"]:
        return (f"after your pass the graph's saved tensors are still alive ({where}): "
                "retain_graph=True keeps their memory for nothing when no second pass follows.")
    if any(g is None for g in got["grads"]):
        return ("W.grad or w.grad is None after your function: its pass must reach the leaves "
                "(call .backward(), not torch.autograd.grad).")
    for label, mine, ref in zip(("W.grad", "w.grad"), got["grads"], want["grads"], strict=True):
        report = compare(label, mine, ref, rtol=1e-5, atol=1e-7, advice=METHOD_ADVICE)
        if not report.ok:
            return f"{label}: {where}: {report[0].message}"
    return f"the gradients differ from the two-pass step's ({where})"


ONE_BACKWARD = Method(
    name="one_backward",
    make_inputs=_network_inputs,
    observe=_observe_one_backward,
    reference=_two_pass,
    explain=_explain_one,
    mistakes={f"{told}.": lambda inputs, m=m, a=a: _weighted(inputs, m, a)
              for m, a, told in _SLIPS},
    trials=1,  # one new network, as the check always had
    agree=_agree_one,
    passed="one backward pass, saved tensors freed, and the gradients of the two-pass step "
           "on a new network",
)


# --------------------------------------------------------------------------
# Exercise 2: two players, one forward pass, and the version counter
# --------------------------------------------------------------------------


def _players_inputs(gen: torch.Generator) -> dict[str, Any]:
    """Two players sharing one forward pass, of new sizes, as plain data. Player A is a
    scorer (weights D, bias c), player B a tanh feature layer G; both losses read both."""
    n, k, d = (int(s) for s in torch.randint(3, 7, (3,), generator=gen))
    z = torch.randn(n, k, generator=gen, dtype=torch.float64)
    t = torch.randn(n, generator=gen, dtype=torch.float64)
    D = torch.randn(d, generator=gen, dtype=torch.float64)
    c = torch.randn((), generator=gen, dtype=torch.float64)
    G = torch.randn(k, d, generator=gen, dtype=torch.float64) * 0.7
    lr = round(float(torch.rand((), generator=gen)) * 0.4 + 0.05, 2)
    return {"z": z, "t": t, "D": D, "c": c, "G": G, "lr": lr, "steps": 1}


def _players_where(p: dict[str, Any]) -> str:
    return (f"{p['z'].shape[0]} examples, {p['D'].shape[0]} features, lr = {p['lr']}"
            + (", two steps, a new forward pass before each" if p["steps"] > 1 else ""))


def _players_build(p: dict[str, Any]):
    """A builder of new leaves (or of A and B again, for a loop's next step) and both
    losses: (A, B, loss_a, loss_b)."""
    def build(A=None, B=None):
        A = A or [p["D"].clone().requires_grad_(), p["c"].clone().requires_grad_()]
        B = B or [p["G"].clone().requires_grad_()]
        h = torch.tanh(p["z"] @ B[0])
        score = h @ A[0] + A[1]
        return A, B, ((score - p["t"]) ** 2).mean(), (score**2).mean() + 0.1 * (h**2).mean()
    return build


def _players(gen: torch.Generator):
    """(what, lr, a builder) of one new problem (`_players_inputs`, `_players_build`)."""
    p = _players_inputs(gen)
    return _players_where(p), p["lr"], _players_build(p)


def _after(step, build, lr, steps=1) -> list[torch.Tensor]:
    """The players' values after ``step`` ran on a new copy of the problem (``steps``
    times, a new forward pass before each)."""
    A = B = None
    for _ in range(steps):
        A, B, loss_a, loss_b = build(A, B)
        step(loss_a, loss_b, A, B, lr)
    return [p.detach().clone() for p in A + B]


def _moved(A, B, ga, gb, lr, sign=1.0) -> None:
    with torch.no_grad():
        for p, g in zip(A + B, [*ga, *gb], strict=True):
            p -= sign * lr * g


def _reference_step(loss_a, loss_b, A, B, lr) -> None:
    ga = torch.autograd.grad(loss_a, A, retain_graph=True)
    gb = torch.autograd.grad(loss_b, B)
    _moved(A, B, ga, gb, lr)


def _summed_step(loss_a, loss_b, A, B, lr, kept=True) -> None:
    """The sum's gradients in .grad, cleared first unless ``kept`` (then in the loop the second
    step adds its own to the first's)."""
    for p in A + B:
        p.grad = p.grad if kept else None
    (loss_a + loss_b).backward()
    _moved(A, B, [p.grad for p in A], [p.grad for p in B], lr)


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
    _moved([], B, [], torch.autograd.grad(loss_b, B), lr)


_SUMMED = ("each player moved along the gradient of loss_a + loss_b: A must follow loss_a "
           "only and B loss_b only (one backward of the sum mixes them, and so do two backward "
           "calls whose .grad add up")
_PLAYER_SLIPS = (
    (_summed_step, _SUMMED + "; clear .grad before each step)"),  # as the loop leaves .grad
    (lambda *step: _summed_step(*step, kept=False), _SUMMED + ")"),  # autograd.grad of the sum
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


def _observe_players(two_player_step, inputs: dict[str, Any]) -> list[Any] | dict:
    """On each problem, the players' weights after the learner's steps."""
    seen = []
    for p in inputs["problems"]:
        build, where, A, B = _players_build(p), _players_where(p), None, None
        for _ in range(p["steps"]):
            A, B, loss_a, loss_b = build(A, B)
            _, failed = call_answer(
                two_player_step, loss_a, loss_b, A, B, p["lr"],
                raised=lambda err, where=where: _players_error(err, where),
                not_callable=f"expected a function two_player_step(loss_a, loss_b, A, B, lr), "
                             f"got {type(two_player_step).__name__}")
            if failed is not None:
                return failed
        seen.append([t.detach().clone() for t in A + B])
    return seen


def _stepped(step):
    """What ``step`` leaves on each problem (`_reference_step`, or a slip)."""
    return lambda given: [_after(step, _players_build(p), p["lr"], p["steps"])
                          for p in given["problems"]]


def _agree_players(got: list[Any], want: list[Any]) -> bool:
    return all(_close(g, w) for mine, right in zip(got, want, strict=True)
               for g, w in zip(mine, right, strict=True))


def _explain_players(inputs: dict[str, Any], got: list[Any], want: list[Any]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not _agree_players([g], [w]))
    p, where = inputs["problems"][at], _players_where(inputs["problems"][at])
    if all(torch.equal(g, p[b]) for g, b in zip(got[at], "DcG", strict=True)):
        return (f"({where}) the weights did not change. `p = p - lr * g` makes a new tensor and "
                "rebinds the name; change the tensor itself (p -= lr * g) inside "
                "torch.no_grad().")
    for label, mine, ref in zip(("D", "c", "G"), got[at], want[at], strict=True):
        report = compare(label, mine, ref, rtol=1e-5, atol=1e-7, advice=METHOD_ADVICE)
        if not report.ok:
            return f"{label}: ({where}) {report[0].message}"
    return f"({where}) the weights differ from the step's"


TWO_PLAYERS = Method(
    name="two_player_step",
    # The step is a training loop's: a fixed problem takes two, so that a .grad the first
    # leaves behind (never cleared, or cleared only between the passes) shows in the second.
    make_inputs=lambda gen: {"problems": [_players_inputs(gen) for _ in range(2)] + [
        {**_players_inputs(torch.Generator().manual_seed(707)), "steps": 2}]},
    observe=_observe_players,
    reference=_stepped(_reference_step),
    explain=_explain_players,
    mistakes={f"{told}.": _stepped(slip) for slip, told in _PLAYER_SLIPS},
    trials=1,  # one trial: 2 new problems, drawn as the check always drew them, and the loop
    agree=_agree_players,
    passed="both players stepped along their own loss's gradient at the weights the forward "
           "pass saw, on 2 new problems",
)


EXERCISES = {
    "l07-one-backward": ONE_BACKWARD,
    "l07-two-players": TWO_PLAYERS,
    "l07-engine-frees": ENGINE_FREES,
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
