"""Finite differences in disguise are refused, as numerical estimates, by every by-hand check.

tests/cheats/estimates.py writes each family (large steps, SPSA, Richardson, a fit,
moved inputs made by multiplication, lerp, where, roll, a stacked copy, in place, through
Python numbers...) as an answer to every by-hand exercise of the registry, applied to the
lesson's own forward. Each is a working estimate: with the watch switched off it scores
where the forward is linear in what it moves. With the watch on, every one fails, named
an estimate, on every exercise (seed 0 here; more seeds in the slow sweep). The rules of
`backproplab.course.nudges` are pinned below one by one, with the honest formulas that
shift inputs too and must not look like a nudge.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from cells import run_cell
from cheats import estimates
from registry import exercises_of, with_tensor_inputs

import backproplab as bl
from backproplab.course import byhand
from backproplab.course.byhand import ByHand, _estimate_message, run_answer
from backproplab.course.grading import find_exercise
from backproplab.course.nudges import Nudges, NudgeSeen

FAMILIES = list(estimates.FAMILIES)
PLANS = estimates.every_plan()
BY_HAND = with_tensor_inputs(exercises_of(ByHand))


def _answer(key: str, family: str):
    """The family's answer to exercise ``key``, run as a cell of a learner's notebook."""
    plan = PLANS[key]
    namespace = {"torch": torch, "F": F, "bl": bl, "math": math, "__name__": "__main__"}
    run_cell(estimates.laundered(plan, family), namespace)
    return namespace[plan.signature.split("(")[0]]


def _missed(family: str, seeds: range) -> list[str]:
    """The exercises (and seeds) where the family is not refused as an estimate when run
    and judged as the check runs and judges it (its source, read first, is allowed: see
    the test below)."""
    missed = []
    for key in BY_HAND:
        answer, exercise = _answer(key, family), find_exercise(key)
        for seed in seeds:
            report = byhand.judge_by_hand(
                exercise, lambda args, answer=answer: byhand.run_answer(answer, args),
                seed=seed)
            message = " ".join(str(report).split())
            if report.ok or "numerical estimate" not in message:
                missed.append(f"{key} seed {seed}: {message[:200]}")
    return missed


def test_every_by_hand_exercise_has_a_plan_and_every_kind_is_there():
    assert sorted(PLANS) == BY_HAND
    kinds = " | ".join(FAMILIES)
    for word in ("h = 1", "h = 2", "multiplication", "lerp", "where", "stacked", "roll",
                 "SPSA", "Richardson", "least-squares", "three points", "forward difference",
                 "computed from the input", "Python numbers", "in place", "broadcasting"):
        assert word in kinds, word


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_refused_as_an_estimate_by_every_by_hand_check(family):
    missed = _missed(family, range(1))
    assert not missed, "\n".join(missed)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_feedback_reads_each_family_as_allowed_then_refuses_it_as_an_estimate(family):
    """The source of each is plain arithmetic (nothing the vocabulary refuses): what
    stops it is the watch, and the learner's feedback says so."""
    report = find_exercise("l09-gather").check(_answer("l09-gather", family), 0)
    assert not report.ok
    assert "numerical estimate" in " ".join(str(report).split())


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_refused_on_more_seeds(family):
    """The inputs change with the seed (shapes, a dim, a mode, a one-hot direction): the
    check that starts at seed s runs its first trial, where the estimate is stopped, on
    seed s's inputs."""
    missed = _missed(family, range(1, 4))
    assert not missed, "\n".join(missed)


class _Unwatched(contextlib.nullcontext):
    """The watch switched off: nothing is ever a nudge."""

    largest = 0

    def __init__(self, inputs) -> None:
        super().__init__()

    def nudged(self) -> None:
        return None


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_scores_where_the_watch_is_off(family, monkeypatch):
    """On a forward linear in what it moves every family is exact: it is the watch that
    refuses them, not their error."""
    monkeypatch.setattr(byhand, "Nudges", _Unwatched)
    report = find_exercise("l09-gather").check(_answer("l09-gather", family), 0)
    assert report.ok, str(report)


# ------------------------------------------------------------------ the rules, one by one

X = torch.tensor([0.5, -1.25, 2.0], dtype=torch.float64)
V = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float64)


def _nudged(compute, *inputs) -> int | None:
    """The input the watch stops ``compute`` at, or None when it runs to the end."""
    inputs = inputs or (X.clone(),)
    try:
        with Nudges(inputs) as seen:
            compute(*inputs)
    except NudgeSeen:
        pass
    return seen.nudged()


@pytest.mark.parametrize("compute", [
    lambda x: (x * 3).sin() - (x * 2).sin(),  # rule 1: one function at two scalings
    lambda x: torch.exp(torch.lerp(x, x + 4, 0.25)) - torch.exp(x),  # ... at x and x + 1
    lambda x: torch.stack([x + 1, x - 1]).tanh(),  # rule 2: two points in one tensor
    lambda x: (x.reshape(1, -1) + torch.tensor([[1.0], [2.0]])).cos(),  # ... by broadcasting
    lambda x: (x + 1e-6).sin(),  # rule 3: a tiny step
    lambda x: (x * (1 + 1e-7)).sin(),  # ... a factor near 1
    lambda x: (x.to(torch.complex128) + 1e-20j).sin(),  # ... the complex step
], ids=["two scalings", "lerp", "stacked", "broadcast", "tiny step", "tiny factor",
        "complex step"])
def test_a_nudge_of_each_kind_is_seen(compute):
    assert _nudged(compute) == 0


def test_a_point_moved_along_another_input_is_seen_and_named():
    def directional(x, v):
        return (x + 2 * v).tanh() - (x - 2 * v).tanh()

    assert _nudged(directional, X.clone(), V.clone()) == 0


def test_an_input_nudged_in_place_and_put_back_is_seen():
    def in_place(x):
        x[1] += 1.0
        up = x.exp().sum()
        x[1] -= 2.0
        return up - x.exp().sum()

    assert _nudged(in_place) == 0


@pytest.mark.parametrize("compute", [
    lambda x: 3 * (x + 1) ** 2 - 8 * x,  # shifts and scalings, each its own way
    lambda x: torch.sigmoid(x) - torch.sigmoid(-x),  # a reflection
    lambda x: 1 / x - 1 / (1 - x),  # a reflection, shifted
    lambda x: (x - x.mean()) / (x.var() + 1e-5) ** 0.5,  # x - mean, var + eps
    lambda x: (1 + x) * (1 - x) + x * x.expand(2, 3),  # two copies in one operation
    lambda x: torch.where(x > 0, x, 0.01 * x).sum() + x.sum(),  # a leaky relu
    lambda x: x.sum(0) + x.flip(0).sum(0) + x.reshape(3, 1).T.sum(),  # views of x
    # tanh and sech^2 written out: exp at u, 2u and -u (powers of two, no polynomial)
    lambda x: (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1) * 4 / (x.exp() + (-x).exp()),
    lambda x: torch.sin(2 * x) - 2 * torch.sin(x) * torch.cos(x),  # a double-angle identity
    lambda x: _doubling(x.abs().min()),  # a search by comparisons: no values taken
    lambda x: 2 * x * (x - 4) + x * x,  # a product rule: x times x is not 2x times x - 4
    lambda x: _overwritten(x),  # an input written over, then used again
    # whole numbers at k and k - 1 (frexp's exponent): no slope lies between them
    lambda x: 2.0 ** torch.frexp(x).exponent - 2.0 ** (torch.frexp(x).exponent - 1),
], ids=["shifts", "reflection", "shifted reflection", "centred", "products", "leaky",
        "views", "tanh from exp", "double angle", "doubling search", "product rule",
        "overwritten", "whole numbers"])
def test_honest_formulas_that_move_inputs_are_not_a_nudge(compute):
    assert _nudged(compute) is None


def _overwritten(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softplus written into x itself, then its slope from the new values (1 - e^-y)."""
    first = torch.exp(-x)
    x.copy_(torch.log1p(torch.exp(x)))
    return first, 1 - torch.exp(-x)


def _through_whole_numbers(k: torch.Tensor) -> torch.Tensor:
    """A forward difference with a step of 1 taken on whole numbers made floats again."""
    return (k.long() + 1).double().sin() - k.sin()


def _doubling(smallest: torch.Tensor) -> float:
    """The power of two that brings ``smallest`` to at least 1000, found by doubling."""
    scale = 1.0
    while smallest * scale < 1000:
        scale *= 2
    return scale


@pytest.mark.parametrize("compute", [
    lambda x: torch.exp(2 * x + 1) - torch.exp(x),  # 2x + 1 is not x times a power of two
    lambda x: (4 * x).pow(3) - (2 * x).pow(3),  # a polynomial at 2x and 4x: a fit is exact
    lambda x: torch.exp(x * 1.5) - torch.exp(x),  # a factor that is no power of two
    lambda x: torch.stack([x * 2, x]).exp(),  # two points in one tensor (rule 2 stands)
    lambda x: (x + 1) * (x + 1) - (x - 1) * (x - 1),  # t * t at two points
    # whole numbers moved, then made floats again: the function runs at floats
    lambda x: _through_whole_numbers((1000 * x).round()),
], ids=["shifted", "polynomial", "factor 1.5", "stacked", "a square at two points",
        "through whole numbers"])
def test_points_the_exemptions_leave_out_are_still_seen(compute):
    """Powers of two pass only exactly and under a function that gives no slope there; the
    point used again as an operand is the point itself at every point."""
    assert _nudged(compute) == 0


def test_complex_points_are_judged_without_error():
    """A complex copy's factor may be complex: only a real power of two passes."""
    z = torch.randn(3, dtype=torch.complex128, generator=torch.Generator().manual_seed(0))
    assert _nudged(lambda z: torch.exp(z) + torch.exp(2 * z), z.clone()) is None
    assert _nudged(lambda z: torch.exp(2j * z) - torch.exp(1j * z), z.clone()) == 0


def test_a_number_read_back_is_named_in_the_estimates_message():
    def momentum(w, x):
        w = w.item()
        for _ in range(3):
            w = w - 0.1 * (w * x).mean().item()
        return torch.tensor(w)

    ran = run_answer(momentum, [torch.tensor(0.5, dtype=torch.float64), X.clone()])
    assert (ran.failure, ran.detail) == ("estimate", "read back")
    assert ".item()" in _estimate_message(ran.nudged, ["w", "x"], ran.detail)
    assert ".item()" not in _estimate_message(0, ["w", "x"])


def test_a_number_the_exercise_hands_over_is_no_step():
    var = torch.rand(4, dtype=torch.float64) + 1.0

    def normalised(var, eps):
        return (var + eps) ** -0.5 - 0.5 * (var + eps) ** -1.5

    assert _nudged(normalised, var, 1e-5) is None


def test_copies_moved_by_different_values_are_not_two_points():
    """``exp(S - lse)`` block after block: lse moved by a different block of scores each
    time is not one function at two points."""
    lse, scores = torch.randn(4, 1, dtype=torch.float64), torch.randn(2, 4, 3,
                                                                      dtype=torch.float64)

    def blocks(lse, scores):
        return [torch.exp(block - lse) for block in scores]

    assert _nudged(blocks, lse, scores) is None
