"""Lesson 06, zeroing gradients: its exercises and its predictions.

``l06-accumulate`` is checked by method, on new models and new data for every
seed: the learner builds zeroing into a loop that accumulates k micro-batches
per step; the check counts the backward passes and the optimizer steps and
compares the weights with full-batch training, naming gradients cleared
before every micro-batch, never, or between the last ``backward()`` and
``step()``, and a missing ``/ k``. ``l06-never-zeroed`` is by hand: the learner
writes, without backward, the weights a logistic regression reaches when its
loop never zeroes (each step uses the sum of all gradients so far), checked
against a real torch loop on new problems, with the slips named (the zeroed
loop, a step too few or too many, the updates summed instead of the
gradients, every gradient taken at the starting weights, the mean's 1/n).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

from ... import data
from ._spec import ByHand, Method, Prediction, Report, attempt, compare, count_autograd, passed
from ._spec import failed as _fail


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def _call(name: str, answer: Any, *args: Any) -> tuple[Any, Any, Report | None]:
    """(result, the count of backward passes, None) or (None, None, a failed Report)."""
    with count_autograd() as seen:
        result, failure = attempt(name, answer, *args)
    if failure is not None:
        return None, None, failure
    others = [c for c in seen.calls if c != "Tensor.backward()"]
    if others:
        return None, None, _fail(name, f"your code called {others[0]}, which hands gradients back "
                                       "without touching .grad. This exercise is about .grad in "
                                       "a loop that calls backward(): use backward().")
    return result, seen, None


# --------------------------------------------------------------------------
# l06-accumulate: zero once per step in a loop of k micro-batches
# --------------------------------------------------------------------------


def _accumulation_problem(gen: torch.Generator) -> tuple:
    """(start weights, X, y, steps, k, lr): a float64 Linear(d, 1) and a batch of k * m rows."""
    d, k, m = (int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in ((2, 5), (2, 5),
                                                                             (2, 5)))
    X = torch.randn(k * m, d, generator=gen, dtype=torch.float64)
    y = X @ torch.randn(d, 1, generator=gen, dtype=torch.float64) + 0.3 * torch.randn(
        k * m, 1, generator=gen, dtype=torch.float64)
    start = {"weight": torch.randn(1, d, generator=gen, dtype=torch.float64),
             "bias": torch.randn(1, generator=gen, dtype=torch.float64)}
    steps = int(torch.randint(3, 7, (1,), generator=gen))
    lr = round(0.05 + 0.15 * float(torch.rand((), generator=gen)), 3)
    return start, X, y, steps, k, lr


def _model(start: dict) -> torch.nn.Linear:
    model = torch.nn.Linear(start["weight"].shape[1], 1).double()
    model.load_state_dict(start)
    return model


def _accumulation_loop(start: dict, X: torch.Tensor, y: torch.Tensor, steps: int, k: int,
                       lr: float, slip: str | None = None) -> torch.nn.Linear:
    """The right loop (slip=None), or the loop with one named slip."""
    model = _model(start)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        if slip != "never":
            opt.zero_grad()
        for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):
            if slip == "every":
                opt.zero_grad()
            loss = F.mse_loss(model(X_part), y_part)
            (loss if slip == "no k" else loss / k).backward()
        opt.step()
    return model


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.allclose(p, q, rtol=1e-10, atol=1e-12)
               for p, q in zip(a.parameters(), b.parameters(), strict=True))


ACCUMULATION_SLIPS = {
    "every": "the gradients were cleared before every micro-batch, so step() saw only the "
             "last micro-batch's share. Clear them once per step, before the first "
             "micro-batch, and let the k backward calls add up",
    "never": "the gradients were never cleared: each step used the sum of every "
             "micro-batch since the start. Clear them once per step",
    "no k": "each step moved k times too far: the k micro-batch means add up to k times the "
            "full-batch mean. Divide each micro-batch's loss by k (lesson 05)",
}


def _check_accumulate(answer: Any, seed: int) -> Report:
    name = "train_accumulated"
    for trial in range(3):
        start, X, y, steps, k, lr = _accumulation_problem(
            torch.Generator().manual_seed(seed + trial))
        learner = _model(start)
        made: list[int] = []
        handle = register_optimizer_step_post_hook(
            lambda opt, args, kwargs, made=made: made.append(1))
        try:
            _, seen, failure = _call(name, answer, learner, X, y, steps, k, lr)
        finally:
            handle.remove()
        if failure is not None:
            return failure
        where = f"training {steps} steps of {k} micro-batches on new data"
        if seen.reverse != steps * k:
            return _fail(name, f"{where}, your loop ran {_plural(seen.reverse, 'backward pass')};"
                               f" expected {steps * k}, one per micro-batch.")
        if len(made) != steps:
            return _fail(name, f"{where}, your loop made {_plural(len(made), 'optimizer step')}; "
                               f"expected {steps}, one after each group of {k} micro-batches "
                               "(torch.optim.SGD's step()).")
        moved = any(not torch.equal(p.detach(), start[n]) for n, p in learner.named_parameters())
        if not moved:
            return _fail(name, f"{where}, the weights did not move: step() ran on gradients that "
                               "were already cleared. Zero them before the first backward of a "
                               "step or after step(), never between the last backward and "
                               "step().")
        if _same_weights(learner, _accumulation_loop(start, X, y, steps, k, lr)):
            continue
        for slip, words in ACCUMULATION_SLIPS.items():
            if _same_weights(learner, _accumulation_loop(start, X, y, steps, k, lr, slip)):
                return _fail(name, f"{where}, {words}.")
        ref = _accumulation_loop(start, X, y, steps, k, lr)
        verdict = compare("trained weight", learner.weight, ref.weight)[0]
        return _fail(name, f"{where}, the trained weights differ from those of full-batch "
                           f"training: {verdict.message}")
    return passed(name, "trains like full-batch SGD on 3 new problems: one backward per "
                        "micro-batch, one step per group of k")


# --------------------------------------------------------------------------
# l06-never-zeroed: what a loop that never zeroes applies, by hand
# --------------------------------------------------------------------------


def _logistic_problem(gen: torch.Generator) -> tuple:
    """(w, b, X, t, lr, steps): a logistic regression, new sizes and numbers each trial."""
    n = int(torch.randint(5, 13, (1,), generator=gen))
    features = int(torch.randint(2, 5, (1,), generator=gen))
    X = torch.randn(n, features, generator=gen, dtype=torch.float64)
    t = torch.randint(0, 2, (n,), generator=gen).to(torch.float64)
    w = torch.randn(features, generator=gen, dtype=torch.float64) * 0.5
    b = torch.randn((), generator=gen, dtype=torch.float64) * 0.5
    lr = round(0.05 + 0.25 * float(torch.rand((), generator=gen)), 3)
    steps = int(torch.randint(3, 9, (1,), generator=gen))
    return w, b, X, t, lr, steps


def _never_zeroed_ref(w, b, X, t, lr, steps):
    """The real loop: backward() and SGD's step, .grad never cleared."""
    w = w.clone().requires_grad_()
    b = b.clone().requires_grad_()
    opt = torch.optim.SGD([w, b], lr=lr)
    for _ in range(steps):
        F.binary_cross_entropy_with_logits(X @ w + b, t).backward()
        opt.step()
    return w.detach(), b.detach()


def _grads(w, b, X, t, mean=True, sign=1.0):
    """The gradient of the mean logistic loss at (w, b) (or a slip of it)."""
    dz = sign * (torch.sigmoid(X @ w + b) - t) / (len(t) if mean else 1)
    return X.T @ dz, dz.sum()


def _run(w, b, X, t, lr, steps, *, summed=True, twice=False, frozen=False, mean=True,
         sign=1.0):
    """The update rule with one slip switched on (the defaults give the right answer)."""
    Gw, Gb = torch.zeros_like(w), torch.zeros_like(b)
    Uw, Ub = torch.zeros_like(w), torch.zeros_like(b)
    first = _grads(w, b, X, t, mean, sign)
    for _ in range(steps):
        gw, gb = first if frozen else _grads(w, b, X, t, mean, sign)
        Gw, Gb = (Gw + gw, Gb + gb) if summed else (gw, gb)
        if twice:  # the updates summed again
            Uw, Ub = Uw + lr * Gw, Ub + lr * Gb
            w, b = w - Uw, b - Ub
        else:
            w, b = w - lr * Gw, b - lr * Gb
    return w, b


NEVER_ZEROED = ByHand(
    name="never_zeroed",
    reference=_never_zeroed_ref,
    make_inputs=_logistic_problem,
    outputs=("w after the steps", "b after the steps"),
    mistakes={
        "these are the weights of the loop that zeroes: each step used only its own "
        "gradient, but with no zeroing .grad after step s holds g1 + ... + gs, and the step "
        "is lr times that sum": lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps,
                                                                   summed=False),
        "one step too few: the loop runs backward() and step() `steps` times, and the "
        "last step counts too": lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps - 1),
        "one step too many: the loop runs backward() and step() exactly `steps` times":
            lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps + 1),
        "you summed the updates instead of the gradients: .grad holds the sum of the "
        "gradients, and each step subtracts lr times that sum, once, not the sum of all "
        "the steps so far": lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps,
                                                                twice=True),
        "every gradient in your sum was taken at the starting weights: each backward() "
        "computes the gradient at the weights of its own step, after the updates so far":
            lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps, frozen=True),
        "the 1/n of the mean is missing: the loss averages over the n examples":
            lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps, mean=False),
        "the sign of the gradient is flipped: dL/dz_i = (sigmoid(z_i) - t_i) / n":
            lambda w, b, X, t, lr, steps: _run(w, b, X, t, lr, steps, sign=-1.0),
    },
    advice="Write the gradient of the mean loss at the current (w, b) first; then keep a "
           "running sum of the gradients, as .grad does, and subtract lr times that sum at "
           "every step.",
)


EXERCISES = {
    "l06-accumulate": Method(check=_check_accumulate),
    "l06-never-zeroed": NEVER_ZEROED,
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
    with torch.random.fork_rng():
        torch.manual_seed(1)  # the lesson's starting weights
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
