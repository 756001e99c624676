"""Lesson 06, zeroing gradients: its exercises and its predictions.

Both exercises are checked by method, on new models and new data for every
seed: ``l06-find-bug`` trains with the learner's loop and compares it with a
loop that zeroes in the right place; ``l06-per-example`` collects one gradient
per example while the gradient tensor is cleared in place, which is where the
aliasing trap waits (a list holding the same tensor several times). The
messages name the slip when it is what happened: gradients cleared between
``backward()`` and ``step()``, never cleared, or stored without a copy.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ... import data
from ._spec import Method, Prediction, Report, attempt, compare, count_autograd, passed
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
# l06-find-bug: zero the gradients in the right place
# --------------------------------------------------------------------------


def _new_problem(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int, dict]:
    """(x, y, steps, the starting weights of a Linear(1, 1)) for one trial."""
    slope = float(torch.empty(()).uniform_(-3, 3, generator=gen))
    intercept = float(torch.empty(()).uniform_(-4, 4, generator=gen))
    seed = int(torch.randint(0, 10_000, (1,), generator=gen))
    n = int(torch.randint(20, 60, (1,), generator=gen))
    x, y = data.linear_data(n=n, slope=slope, intercept=intercept, seed=seed)
    steps = int(torch.randint(12, 30, (1,), generator=gen))
    start = {"weight": torch.randn(1, 1, generator=gen), "bias": torch.randn(1, generator=gen)}
    return x, y, steps, start


def _model(start: dict) -> torch.nn.Linear:
    model = torch.nn.Linear(1, 1)
    model.load_state_dict(start)
    return model


def _reference_loop(start: dict, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float,
                    zero: bool) -> torch.nn.Linear:
    """The loop of section 2: zero_grad() before each backward, or (zero=False) never."""
    model = _model(start)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        if zero:
            opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return model


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(compare("w", p, q).ok for p, q in zip(a.parameters(), b.parameters(), strict=True))


def _check_find_bug(answer: Any, seed: int) -> Report:
    name = "train_fixed"
    lr = 0.01
    for k in range(3):
        x, y, steps, start = _new_problem(torch.Generator().manual_seed(seed + k))
        learner = _model(start)
        _, seen, failure = _call(name, answer, learner, x, y, steps, lr)
        if failure is not None:
            return failure
        where = f"training {steps} steps on new data"
        moved = any(not torch.equal(p.detach(), start[n]) for n, p in learner.named_parameters())
        if not moved:
            return _fail(name, f"{where}, the weights did not move: step() ran on gradients that "
                               "were already cleared. Zero them before backward() or after "
                               "step(), never between the two.")
        if seen.reverse != steps:
            return _fail(name, f"{where}, your loop ran {_plural(seen.reverse, 'backward pass')}; "
                               "expected one per step.")
        if _same_weights(learner, _reference_loop(start, x, y, steps, lr, zero=True)):
            continue
        if _same_weights(learner, _reference_loop(start, x, y, steps, lr, zero=False)):
            return _fail(name, f"{where}, your loop trains exactly like the loop that never "
                               "zeroes: each step used the sum of all past gradients. Clear the "
                               "model's gradients once per step (the model's, not the data's).")
        ref = _reference_loop(start, x, y, steps, lr, zero=True)
        verdict = compare("trained weight", learner.weight, ref.weight)[0]
        return _fail(name, f"{where}, the trained weights differ from those of the loop that "
                           f"zeroes before each backward: {verdict.message}")
    return passed(name, "trains like the reference loop on 3 new problems, "
                                             "one backward pass per step")


# --------------------------------------------------------------------------
# l06-per-example: one gradient per example, the gradient tensor cleared in place
# --------------------------------------------------------------------------


def _new_examples(gen: torch.Generator) -> tuple[dict, torch.Tensor, torch.Tensor]:
    features = int(torch.randint(2, 5, (1,), generator=gen))
    n = int(torch.randint(3, 6, (1,), generator=gen))
    start = {"weight": torch.randn(1, features, generator=gen),
             "bias": torch.randn(1, generator=gen)}
    return start, torch.randn(n, features, generator=gen), torch.randn(n, 1, generator=gen)


def _one_example_grad(start: dict, X: torch.Tensor, y: torch.Tensor, i: int) -> torch.Tensor:
    w = start["weight"].clone().requires_grad_()
    pred = X[i:i + 1] @ w.T + start["bias"]
    (grad,) = torch.autograd.grad(F.mse_loss(pred, y[i:i + 1]), w)
    return grad


def _check_per_example(answer: Any, seed: int) -> Report:
    name = "per_example_grads"
    for k in range(3):
        start, X, y = _new_examples(torch.Generator().manual_seed(seed + k))
        model = torch.nn.Linear(X.shape[1], 1)
        model.load_state_dict(start)
        for p in model.parameters():  # zero gradient tensors, kept for the whole run
            p.grad = torch.zeros_like(p)
        buffer = model.weight.grad
        got, seen, failure = _call(name, answer, model, X, y)
        if failure is not None:
            return failure
        n = len(X)
        where = f"for {n} examples"
        if not isinstance(got, (list, tuple)) or len(got) != n:
            size = len(got) if isinstance(got, (list, tuple)) else type(got).__name__
            return _fail(name, f"{where}, expected a list of {n} gradients, one per example, "
                               f"got {size}.")
        if seen.reverse != n:
            return _fail(name, f"{where}, your function ran "
                               f"{_plural(seen.reverse, 'backward pass')}; expected one per "
                               "example.")
        tensors = [g for g in got if isinstance(g, torch.Tensor)]
        shared = [g for g in tensors if g.data_ptr() == buffer.data_ptr()]
        if len(shared) > 1 or (shared and model.weight.grad is buffer):
            count = f"all {n}" if len(shared) == n else str(len(shared))
            return _fail(name, f"{where}, {count} entries of your list are one and the same "
                               "tensor, model.weight.grad itself. Each zero_() cleared that "
                               "tensor in place, the very one already in your list, so every "
                               "such entry now shows the last example's gradient. Append a "
                               "copy: model.weight.grad.clone().")
        want = [_one_example_grad(start, X, y, i) for i in range(n)]
        running = [sum(want[: i + 1]) for i in range(n)]
        if n > 1 and all(compare("g", g, r).ok for g, r in zip(got, running, strict=True)):
            return _fail(name, f"{where}, entry i holds the sum of the gradients of examples 0 to "
                               "i: .grad was not cleared between the examples, so each backward "
                               "added onto the ones before.")
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            verdict = compare(f"gradient of example {i}", g, w)
            if not verdict.ok:
                return _fail(name, f"{where}: {verdict[0].message}")
        if model.weight.grad is not buffer:
            return _fail(name, f"{where}, the gradients are right, but model.weight.grad is a "
                               "new tensor now: setting it to None (as zero_grad() does by "
                               "default, set_to_none=True) let the next backward make a new one. "
                               "This exercise keeps the tensor: clear it in place, with "
                               "model.zero_grad(set_to_none=False) or .grad.zero_().")
    return passed(name, "one gradient per example on 3 new models, with "
                                             "the gradient tensor kept throughout")


EXERCISES = {
    "l06-find-bug": Method(check=_check_find_bug),
    "l06-per-example": Method(check=_check_per_example),
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
