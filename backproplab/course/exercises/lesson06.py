"""Lesson 06, zeroing gradients: its exercises and its predictions.

``l06-where`` is checked by method: the learner writes a detector that tells,
from the outside, where a training step it cannot read zeroes its gradients
(at the start, right after ``step()``, between the last ``backward()`` and
``step()``, before every micro-batch, or never). The check builds steps of every
kind on new models and data for every seed, each with ``set_to_none`` both ways, and
names what the step the learner misread leaves in the weights and in ``.grad``.
``l06-momentum`` is by hand: the weights that lesson 04's line reaches when its
loop never zeroes and its optimizer has momentum (two accumulators stacked:
``.grad`` sums the gradients, the momentum buffer sums ``.grad``), checked
against a real torch loop on new problems, with the slips named (the zeroed
loop, momentum left out, dampening, a step too few or too many, every gradient
taken at the starting weights).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ... import data
from ._spec import ByHand, Method, Prediction, call_answer, seeded

# --------------------------------------------------------------------------
# l06-where: where does a step the learner cannot read zero its gradients?
# --------------------------------------------------------------------------

PLACES = ("start", "end", "before step", "each micro-batch", "never")

WHAT_IT_DOES = {
    "start": "zeroes at the start of each step, before the first micro-batch: after a step, "
             ".grad holds that step's full-batch gradient (taken at the weights the step "
             "started from), and the next step replaces it",
    "end": "zeroes right after opt.step(): the weights move by the full-batch gradient, and "
           "afterwards .grad is None (or zeros, with set_to_none=False), which is as right as "
           "zeroing at the start",
    "before step": "zeroes between the last backward and opt.step(): step() finds no gradient "
                   "(a None .grad is skipped, zeros move nothing), so the weights never move",
    "each micro-batch": "zeroes before every micro-batch's backward: after a step, .grad holds "
                        "only the last micro-batch's part (its mean's gradient divided by k), "
                        "not the full batch's gradient, and the weights moved by that part",
    "never": "never zeroes: its first step looks like a right one, but after a second step "
             ".grad holds the sum of both steps' gradients",
}


def _make_step(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, k: int, lr: float,
               place: str, set_to_none: bool):
    """One SGD step on k micro-batches with zero_grad() at ``place`` (a PLACES label)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def zero(here: str) -> None:
        if here == place:
            opt.zero_grad(set_to_none=set_to_none)

    def step() -> None:
        zero("start")
        for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):
            zero("each micro-batch")
            (F.mse_loss(model(X_part), y_part) / k).backward()
        zero("before step")
        opt.step()
        zero("end")

    return step


def _where_inputs(gen: torch.Generator) -> dict[str, Any]:
    """One trial, as plain data: a float64 Linear(d, 1) or a small tanh MLP (its widths and
    starting weights), a batch of k * m rows, the learning rate, and the ten steps to tell
    apart, in a random order: each place with set_to_none=True and with False."""
    d, k, m = (int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in ((1, 4), (2, 5),
                                                                             (2, 4)))
    hidden = int(torch.randint(0, 4, (1,), generator=gen))  # 0: a straight line
    X = torch.randn(k * m, d, generator=gen, dtype=torch.float64)
    y = torch.randn(k * m, 1, generator=gen, dtype=torch.float64)
    widths = [d, 1] if hidden == 0 else [d, hidden + 1, 1]
    weights = []
    for n_in, n_out in zip(widths, widths[1:], strict=False):
        weights += [torch.randn(n_out, n_in, generator=gen, dtype=torch.float64),
                    torch.randn(n_out, generator=gen, dtype=torch.float64)]
    lr = round(0.05 + 0.15 * float(torch.rand((), generator=gen)), 3)
    # Every place both ways, on every trial: None and zeros left in .grad read differently,
    # and a detector that handles only one of them must fail on every seed.
    steps = [(place, none) for place in PLACES for none in (True, False)]
    drawn = [steps[int(i)] for i in torch.randperm(len(steps), generator=gen)]
    return {"widths": widths, "weights": weights, "X": X, "y": y, "k": k, "lr": lr,
            "order": [place for place, _ in drawn], "set_to_none": [none for _, none in drawn]}


def _where_model(inputs: dict[str, Any]) -> torch.nn.Sequential:
    widths = inputs["widths"]
    layers: list[torch.nn.Module] = []
    with seeded():  # the weights are copied in below: the draws must not move the learner's
        for n_in, n_out in zip(widths, widths[1:], strict=False):
            layers += [torch.nn.Linear(n_in, n_out).double(), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers[:-1])
    with torch.no_grad():
        for p, w in zip(model.parameters(), inputs["weights"], strict=True):
            p.copy_(w)
    return model


def _observe_where(answer: Any, inputs: dict[str, Any]) -> list[Any] | dict:
    """What the learner's detector said of each step: a place's name (as written, ignoring
    case and spaces), or what it returned instead of a name."""
    said_all = []
    for place, set_to_none in zip(inputs["order"], inputs["set_to_none"], strict=True):
        model = _where_model(inputs)
        step = _make_step(model, inputs["X"], inputs["y"], inputs["k"], inputs["lr"], place,
                          set_to_none)
        said, failed = call_answer(answer, step, model, inputs["X"].clone(),
                                   inputs["y"].clone(), inputs["k"])
        if failed is not None:
            return failed
        said_all.append(said.strip().lower() if isinstance(said, str)
                        else {"returned": repr(said)[:80]})
    return said_all


def _explain_where(inputs: dict[str, Any], got: list[Any], want: list[str]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
    parameters = sum(a * b + b for a, b in zip(inputs["widths"], inputs["widths"][1:],
                                               strict=False))
    where = f"on a new model ({parameters} parameters) with k = {inputs['k']} micro-batches"
    if want[at] != "never":  # the step that never zeroes never calls zero_grad
        where += f" and zero_grad(set_to_none={inputs['set_to_none'][at]})"
    said = got[at]
    if not isinstance(said, str) or said not in PLACES:
        shown = said["returned"] if isinstance(said, dict) else repr(said)
        return (f"{where}, your function returned {shown}; expected one of "
                f"{', '.join(repr(p) for p in PLACES)}.")
    return f"{where}: the step {WHAT_IT_DOES[want[at]]}. Your function said {said!r}."


WHERE = Method(
    name="where_zeroed",
    make_inputs=_where_inputs,
    observe=_observe_where,
    reference=lambda inputs: list(inputs["order"]),
    explain=_explain_where,
    passed=f"tells apart the {len(PLACES)} places, set_to_none either way, on 2 new problems "
           f"({2 * 2 * len(PLACES)} steps it could not read)",
)


# --------------------------------------------------------------------------
# l06-momentum: a loop that never zeroes, with momentum, by hand
# --------------------------------------------------------------------------


def _momentum_problem(gen: torch.Generator) -> tuple:
    """(x, y, w, b, lr, beta, steps): lesson 04's kind of line, new numbers each trial."""
    n = int(torch.randint(5, 20, (1,), generator=gen))
    x = torch.rand(n, generator=gen, dtype=torch.float64) * 3
    slope, intercept = (torch.randn(2, generator=gen, dtype=torch.float64) * 2).tolist()
    y = slope * x + intercept + 0.5 * torch.randn(n, generator=gen, dtype=torch.float64)
    w, b = torch.randn(2, generator=gen, dtype=torch.float64)
    lr = round(0.002 + 0.018 * float(torch.rand((), generator=gen)), 4)
    beta = round(0.3 + 0.6 * float(torch.rand((), generator=gen)), 2)
    steps = int(torch.randint(3, 8, (1,), generator=gen))
    return x, y, w, b, lr, beta, steps


def _momentum_ref(x, y, w, b, lr, beta, steps):
    """The real loop: backward() and SGD's step with momentum, .grad never cleared."""
    w = w.clone().requires_grad_()
    b = b.clone().requires_grad_()
    opt = torch.optim.SGD([w, b], lr=lr, momentum=beta)
    for _ in range(steps):
        ((w * x + b - y) ** 2).mean().backward()
        opt.step()
    return w.detach(), b.detach()


def _run(x, y, w, b, lr, beta, steps, *, summed=True, momentum=True, dampening=False,
         frozen=False):
    """The loop by hand with one slip switched on (the defaults give the right answer)."""
    def grads(w, b):
        r = w * x + b - y
        return (2 * r * x).mean(), (2 * r).mean()

    held = [torch.zeros_like(w), torch.zeros_like(b)]  # what .grad holds
    velocity = [torch.zeros_like(w), torch.zeros_like(b)]  # the momentum buffer
    share = (1 - beta) if dampening else 1.0
    first = grads(w, b)
    for _ in range(steps):
        g = first if frozen else grads(w, b)
        held = [h + gi for h, gi in zip(held, g, strict=True)] if summed else list(g)
        velocity = [beta * v + share * h for v, h in zip(velocity, held, strict=True)] \
            if momentum else held
        w, b = w - lr * velocity[0], b - lr * velocity[1]
    return w, b


FORGOT_WITH_MOMENTUM = ByHand(
    name="forgot_with_momentum",
    reference=_momentum_ref,
    make_inputs=_momentum_problem,
    outputs=("w after the steps", "b after the steps"),
    mistakes={
        "these are the weights of the loop that zeroes: the buffer added each step's own "
        "gradient, but with no zeroing .grad at step t holds g1 + ... + gt, and that sum is "
        "what the buffer adds": lambda *a: _run(*a, summed=False),
        "momentum is left out: each step subtracts lr times the momentum buffer "
        "(beta times the old buffer plus .grad), not lr times .grad":
            lambda *a: _run(*a, momentum=False),
        "the buffer took (1 - beta) of .grad: SGD's dampening is 0 by default, so the buffer "
        "adds .grad in full (at the first step the buffer is .grad itself)":
            lambda *a: _run(*a, dampening=True),
        "one step too few: the loop runs backward() and step() `steps` times, and the "
        "last step counts too": lambda x, y, w, b, lr, beta, steps: _run(
            x, y, w, b, lr, beta, steps - 1),
        "one step too many: the loop runs backward() and step() exactly `steps` times":
            lambda x, y, w, b, lr, beta, steps: _run(x, y, w, b, lr, beta, steps + 1),
        "every gradient was taken at the starting weights: each backward() computes the "
        "gradient at the weights of its own step, after the updates so far":
            lambda *a: _run(*a, frozen=True),
    },
    advice="Keep two running quantities per parameter, as the loop does: what .grad holds "
           "(nothing clears it) and the momentum buffer (beta times itself plus .grad), and "
           "take each step's gradient at that step's weights.",
)


EXERCISES = {
    "l06-where": WHERE,
    "l06-momentum": FORGOT_WITH_MOMENTUM,
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _zero_grad_answer() -> Any:
    p = torch.ones(2, requires_grad=True)
    p.sum().backward()
    torch.optim.SGD([p], lr=0.1).zero_grad()
    return None if p.grad is None else "zeros"


def _forgot_answer() -> str:
    """Run the lesson's loop that never zeroes for 400 steps: is it still near the best fit?"""
    x, y = data.linear_data()
    best = torch.linalg.lstsq(torch.cat([x, torch.ones_like(x)], dim=1), y).solution.flatten()
    with seeded(1):  # the lesson's starting weights
        model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    distances = []
    for _ in range(400):
        F.mse_loss(model(x), y).backward()  # .grad is never cleared
        opt.step()
        weights = torch.stack([model.weight[0, 0], model.bias[0]]).detach()
        distances.append(float((weights - best).norm()))
    return "yes" if max(distances[-100:]) < 0.05 else "no"


PREDICTIONS = {
    "l06-predict-zero-grad": Prediction(
        question="p.grad after opt.zero_grad()",
        answer=_zero_grad_answer,
        hint="look up the default of zero_grad's keyword argument in its documentation, and "
             "what that default does to the gradient tensors.",
        why="zero_grad() has set_to_none=True by default: it removes the gradient tensors "
            "rather than filling them with zeros",
        choices=("zeros", None),
    ),
    "l06-predict-forgot": Prediction(
        question="does the loop that never zeroes settle at the best fit?",
        answer=_forgot_answer,
        hint="write down what .grad holds after step t, and think of it as a velocity: what "
             "would slow it down once the weights pass the best fit?",
        why="after step t, .grad holds g1 + ... + gt, and each step moves by lr times that sum: "
            "a velocity that nothing damps. The weights swing through the best fit and back, "
            "like a ball rolling without friction",
        choices=("yes", "no"),
    ),
}
