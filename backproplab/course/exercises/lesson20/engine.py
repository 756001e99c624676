"""Lesson 20, exercise 2: views and in-place writes for a small engine, held against torch.

The learner writes ``view(a, f)``, ``grad_fn(a)``, ``add_(a, b)`` and ``copy_(a, b)`` for the
engine of `engine_source` (lesson 11's pass, lesson 07's boxes): a view shares its base's
memory and version counter, a write through a view gives the base a new node (torch's
``CopySlices``), a view's node is rebuilt once its memory was written, and a write into a
leaf that requires grad, or into a view of one, raises. The check runs the same cases
(``CASES``) on the learner's engine, built in a namespace of its own around the four
functions with autograd refused, and on torch: each case either runs, with the leaves'
gradients, or raises a RuntimeError at one of its steps. The learner's side is observed
where the answer runs and comes back as plain data; torch's side and every verdict are
made in the grader. A slip is named only when the learner's engine does exactly what
that slip does (`solution` with the slip switched on) in every case of every trial.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....watch import forbid_autograd
from .._spec import Method, call_answer, failure, same
from .cases import CASES, Side
from .engine_source import ENGINE_CODE
from .slips import SLIPS, solution

__all__ = ["ENGINE_VIEWS"]

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
                    f"{theirs[2]:.6g} in torch's. A view's data is f(a.data), the same memory "
                    "as its base's (no copy), and add_ and copy_ change that memory in place, "
                    "so that the base and every view of it see the write.")
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
