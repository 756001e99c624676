"""Lesson 20, views and in-place operations under autograd: its exercises, their checks and
its predictions.

- ``l20-two-writes``: by hand, the gradients through two writes into overlapping windows
  of a cloned vector (a window scaled in place by ``a``, then another window overwritten
  by ``b`` times the first), given the gradient ``g`` arriving at the result: a chain of
  two CopySlices. The windows overlap on every trial, in either order, so that the order
  of the backward steps (zero what was overwritten, then add what the read sends back)
  shows. The slips: the steps in the other order, the overwrite that still passes g on,
  ``b``'s gradient taken with the values before the scaling, the read's path forgotten,
  the scaling left out of ``dx``.
- ``l20-engine-views``: a method check. The learner writes ``view(a, f)``, ``grad_fn(a)``,
  ``add_(a, b)`` and ``copy_(a, b)`` for the engine of `engine_source` (lesson 11's pass,
  lesson 07's boxes): a view shares its base's memory and version counter, a write through
  a view gives the base a new node (torch's ``CopySlices``), a view's node is rebuilt once
  its memory was written, and a write into a leaf that requires grad, or into a view of
  one, raises. The check runs the same cases (`cases`) on the learner's engine, built in a
  namespace of its own around the four functions with autograd refused, and on torch:
  each case either runs, with the leaves' gradients, or raises a RuntimeError at one of
  its steps. Two cases are there for answers that pass the rest: a constant copied into a
  view of a base with a history (the write is recorded all the same), and the refusals
  caught with the leaf used after them (torch raises before it writes or moves the counter).
  The learner's side is observed where the answer runs and comes back as plain data;
  torch's side and every verdict are made in the grader. A slip is named only when the
  learner's engine does exactly what that slip does (`solution` with the slip switched on)
  in every case of every trial.
- Two predictions: which of eight expressions return a view, and what ``v.grad`` holds
  when two entries of ``v`` are written to one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....watch import forbid_autograd
from .._spec import ByHand, Method, Prediction, call_answer, failure, same
from .cases import CASES, Side
from .engine_source import ENGINE_CODE, SLIPS, solution

F64 = torch.float64

# --------------------------------------------------------------------------- Exercise 1


def two_writes(x, a, b, i, j):
    """The lesson's forward: two writes into windows of length len(a) of a copy of x."""
    k = len(a)
    y = x.clone()
    y[i:i + k].mul_(a)  # the first window, scaled in place
    y[j:j + k] = b * y[i:i + k].clone()  # another window overwritten (the clone: see section 2)
    return y


def _windows_inputs(gen: torch.Generator) -> tuple:
    """x (n,), a and b (k,), the windows' starts i != j with |i - j| < k (they overlap,
    either one first), and g (n,)."""
    n = int(torch.randint(8, 14, (1,), generator=gen))
    k = int(torch.randint(2, 6, (1,), generator=gen))
    i = int(torch.randint(0, n - k + 1, (1,), generator=gen))
    shifts = [d for d in range(1 - k, k) if d and 0 <= i + d <= n - k]
    j = i + shifts[int(torch.randint(len(shifts), (1,), generator=gen))]
    x, g = (torch.randn(n, generator=gen, dtype=F64) for _ in range(2))
    a, b = (torch.randn(k, generator=gen, dtype=F64) for _ in range(2))
    return x, a, b, i, j, g


def _windows_reference(x, a, b, i, j, g):
    leaves = [t.detach().clone().requires_grad_() for t in (x, a, b)]
    return torch.autograd.grad(two_writes(*leaves, i, j), leaves, g)


def _windows(x, a, b, i, j, g, *, order=True, zero=True, scaled=True, read=True, scale=True):
    """The gradients by hand, with one of the steps made otherwise (defaults: right)."""
    k = len(a)
    first, second = slice(i, i + k), slice(j, j + k)
    g1 = g.clone()  # the gradient at y after the first write
    if order and zero:
        g1[second] = 0
    if read:
        g1[first] += b * g[second]
    if not order and zero:
        g1[second] = 0
    db = g[second] * (x[first] * a if scaled else x[first])
    dx = g1.clone()
    if scale:
        dx[first] = g1[first] * a
    return dx, g1[first] * x[first], db


WINDOWS = ByHand(
    name="window_grads",
    reference=_windows_reference,
    make_inputs=_windows_inputs,
    outputs=["dx", "da", "db"],
    mistakes={
        "the two steps for the second write are in the other order: you added what the read "
        "y[i:i + k] sends back, then zeroed the overwritten window, which wiped that out where "
        "the windows overlap. Backward undoes the writes last first: zero the overwritten "
        "window of g, then add b * g[j:j + k] to the read window":
            lambda *t: _windows(*t, order=False),
        "the overwrite still passes g on: the old values in y[j:j + k] were replaced, so they "
        "reach the result no more and get 0 (CopySlices of a copy_)":
            lambda *t: _windows(*t, zero=False),
        "db was taken with x's values: the second write reads y[i:i + k] after the first "
        "scaled it, so db = g[j:j + k] * x[i:i + k] * a":
            lambda *t: _windows(*t, scaled=False),
        "the read's path is missing: y[i:i + k] also feeds the second write, so it gets "
        "b * g[j:j + k] on top of what reaches it directly":
            lambda *t: _windows(*t, read=False),
        "dx leaves out the scaling: the first window of x was multiplied by a, so its "
        "gradient is a times what arrives there":
            lambda *t: _windows(*t, scale=False),
    },
    advice="Undo the writes last first, as the chain of CopySlices does: start from g at "
           "the result, zero the window the second write overwrote, add to the window it "
           "read what the read sends back, then go through the scaling.",
)

# --------------------------------------------------------------------------- Exercise 2

NAMES = ("view", "grad_fn", "add_", "copy_")


def _engine(functions: Callable[[dict], tuple]) -> dict:
    """A fresh copy of the lesson's engine, its grad_fn replaced by the answer's, and the
    answer's view, add_ and copy_ beside it."""
    space: dict[str, Any] = {"torch": torch}
    exec(ENGINE_CODE, space)  # noqa: S102 - the lesson's own engine, compiled in engine_source
    space.update(zip(NAMES, functions(space), strict=True))
    return space


def _inputs(gen: torch.Generator) -> dict[str, Any]:
    """One trial: the size of the matrices (3 to 5 rows and columns), a seed for their
    values, and the views the cases take (a row, a column crossing it, another row, a
    block of at least 2 x 2)."""
    rows, cols = (int(n) for n in torch.randint(3, 6, (2,), generator=gen))
    i, other = (int(n) for n in torch.randperm(rows, generator=gen)[:2])
    j = int(torch.randint(cols, (1,), generator=gen))
    i0 = int(torch.randint(rows - 1, (1,), generator=gen))
    j0 = int(torch.randint(cols - 1, (1,), generator=gen))
    i1 = i0 + 2 + int(torch.randint(rows - i0 - 1, (1,), generator=gen))
    j1 = j0 + 2 + int(torch.randint(cols - j0 - 1, (1,), generator=gen))
    return {"shape": [rows, cols], "seed": int(torch.randint(10**6, (1,), generator=gen)),
            "row": ["row", i], "col": ["col", j], "other_row": ["row", other],
            "block": ["block", i0, i1, j0, j1]}


def _run_cases(side_of: Callable[[], Side], inputs: dict[str, Any]) -> dict[str, list]:
    """Every case on fresh sides: {case: ["ran", leaf grads, value] or ["raised", step, op]}."""
    return {key: side_of().play(case.steps, inputs) for key, case in CASES.items()}


def observe_engine(functions: Callable[[dict], tuple], inputs: dict[str, Any]) -> dict:
    """Every case on the engine that ``functions(space)`` completes, autograd refused."""
    with forbid_autograd("the engine computes every gradient with its own rules"):
        return _run_cases(lambda: Side(_engine(functions)), inputs)


def _observe(answer: Any, inputs: dict[str, Any]) -> dict:
    if not (isinstance(answer, tuple) and len(answer) == 4 and all(map(callable, answer))):
        return failure("fail", "expected the four functions (view, grad_fn, add_, copy_) from "
                               "the check cell; run it as it is")
    seen, failed = call_answer(observe_engine, lambda space: answer, inputs,
                               what="view, grad_fn, add_ or copy_")
    return failed if failed is not None else seen


def _torch(inputs: dict[str, Any]) -> dict[str, list]:
    return _run_cases(lambda: Side(None), inputs)


def _agree(got: dict, want: dict) -> bool:
    return same(got, want, rtol=1e-9, atol=1e-12)


def _outcome(result: list) -> str:
    """What a side did in a case, in words: "ran", or what it raised in which step."""
    if result[0] == "ran":
        return "ran"
    what = "RuntimeError" if result[0] == "raised" else result[3]
    return f"raised {what} in step {result[1]}, {result[2]}"


def _grads_differ(names: tuple[str, ...], got: list, want: list) -> str:
    """Where the first leaf whose gradient differs, differs."""
    if len(got) != len(want):
        return f"{len(got)} leaves have a grad in yours, {len(want)} in torch's"
    for name, mine, theirs in zip(names, got, want, strict=True):
        if mine is None or theirs is None:
            if (mine is None) != (theirs is None):
                return (f"{name}.grad is {'None' if mine is None else 'a tensor'} in yours, "
                        f"{'None' if theirs is None else 'a tensor'} in torch's")
            continue
        if mine.shape != theirs.shape:
            return (f"{name}.grad has shape {list(mine.shape)} in yours, {list(theirs.shape)} "
                    "in torch's")
        bad = ~torch.isclose(mine, theirs, rtol=1e-9, atol=1e-12)
        if bad.any():
            at = [int(k) for k in bad.nonzero()[0]]
            return (f"{name}.grad differs at {int(bad.sum())} of {bad.numel()} entries, e.g. "
                    f"at {at}: yours {mine[tuple(at)].item() + 0.0:.4g}, torch's "
                    f"{theirs[tuple(at)].item() + 0.0:.4g}")
    return "the leaves' gradients differ"


def _explain(inputs: dict[str, Any], got: dict, want: dict) -> str:
    """The first case where the learner's engine and torch part ways, in words."""
    for key, case in CASES.items():
        mine, theirs = got.get(key), want[key]
        if same(mine, theirs, rtol=1e-9, atol=1e-12):
            continue
        views = case.shown(inputs)
        where = f"{case.what} (at {views})" if views else case.what
        if not isinstance(mine, list) or not mine:
            return f"{where}: the check could not read what your engine did."
        if mine[0] == "error" and theirs[0] == "raised":
            return (f"{where}: your engine {_outcome(mine)}. Where torch refuses a step it "
                    "raises RuntimeError; so must your engine, and only there.")
        if mine[0] == theirs[0] == "ran" and not same(mine[2], theirs[2], rtol=1e-9):
            return (f"{where}: the value backward started from is {mine[2]:.6g} in yours, "
                    f"{theirs[2]:.6g} in torch's. " + (case.why_value or "A view's data is "
                    "f(a.data), the same memory as its base's (no copy), and add_ and copy_ "
                    "change that memory in place, so that the base and every view of it see "
                    "the write."))
        if mine[0] == theirs[0] == "ran":
            return f"{where}: {_grads_differ(case.leaves, mine[1], theirs[1])}. {case.why_grads}"
        if theirs[0] == "raised" and mine[0] == "ran":
            return f"{where}: torch {_outcome(theirs)}, yours ran. {case.why_raises}"
        if theirs[0] == "ran":
            return (f"{where}: yours {_outcome(mine)}, where torch runs. "
                    f"{case.why_runs or case.why_grads}")
        return (f"{where}: torch {_outcome(theirs)}, yours {_outcome(mine)}. "
                f"{case.why_raises}")
    return "your engine and torch part ways on a case the check cannot name"


ENGINE_VIEWS = Method(
    name="your engine's views",
    make_inputs=_inputs,
    observe=_observe,
    reference=_torch,
    explain=_explain,
    mistakes={words: (lambda inputs, slip=slip: observe_engine(
        lambda space: solution(space, slip), inputs)) for slip, words in SLIPS.items()},
    agree=_agree,
    passed=f"runs where torch runs, with torch's gradients, and raises where torch raises, in "
           f"{len(CASES)} cases on 2 new sets of matrices and views",
)

EXERCISES = {
    "l20-two-writes": WINDOWS,
    "l20-engine-views": ENGINE_VIEWS,
}

# --------------------------------------------------------------------------- Predictions

VIEW_CANDIDATES = ("x.t()", "x[[0, 2]]", "x[:, 1]", "x.expand(2, 3, 4)", "x.flip(0)",
                   "x.t().reshape(12)", "x.reshape(2, 6)", "x[x > 5]")


def _candidates(x: torch.Tensor) -> list[torch.Tensor]:
    """The eight expressions of the question, in its order."""
    return [x.t(), x[[0, 2]], x[:, 1], x.expand(2, 3, 4), x.flip(0), x.t().reshape(12),
            x.reshape(2, 6), x[x > 5]]


def _views_answer() -> list[int]:
    x = torch.arange(12.0).reshape(3, 4).clone()  # a tensor of its own, not a view
    return [n for n, t in enumerate(_candidates(x), 1) if t._base is x]


def _duplicates_answer() -> list[float]:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    v = torch.tensor([10.0, 20.0], requires_grad=True)
    y = x * 1
    y[torch.tensor([1, 1])] = v
    y.backward(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    return v.grad.tolist()


PREDICTIONS = {
    "l20-predict-views": Prediction(
        question="which of the eight expressions return a view of x (by their numbers)",
        answer=_views_answer,
        hint="a view reads the same memory with its own offset, sizes and strides, and "
             "nothing else: a fixed step through memory per dimension. For each expression, "
             "list the positions in x's memory of its entries, in order, and ask whether "
             "such steps reach them.",
        why="x.t() swaps the two strides, x[:, 1] starts at 1 and steps by 4, x.expand(2, 3, "
            "4) adds a dimension of stride 0 (every entry read twice) and x.reshape(2, 6) "
            "only regroups the rows. An index list or a mask picks entries at no fixed "
            "step, flip would need a negative stride (torch's strides are never negative), "
            "and the transpose's entries in row order sit at 0, 4, 8, 1, 5, ...: no single "
            "stride for a shape (12,), so reshape copies. The views: {answer}",
        unordered=True,
    ),
    "l20-predict-duplicates": Prediction(
        question="v.grad after y[torch.tensor([1, 1])] = v and y.backward(g), with "
                 "v = [10.0, 20.0], y = x * 1 and g = [1.0, 2.0, 3.0, 4.0, 5.0]",
        answer=_duplicates_answer,
        hint="index_put_'s backward runs later, from what the write recorded, and torch "
             "does not promise which of two writes to one place lands. What could that "
             "backward hand each entry of v?",
        why="index_put_'s backward hands each entry of v the gradient at the position it was "
            "written to, g[idx] = g[[1, 1]], so both get g[1] = 2, {answer}, although only "
            "one of the two values is left in y[1]: with duplicate indices and "
            "accumulate=False, the gradient of the one that lost is not 0",
    ),
}
