"""Every kept wrong answer of every by-hand exercise fails on every seed, not only seed 0.

A kept slip that the visible check's inputs catch could still pass on the hidden test's
seed, or on the secret seeds of a graded course. For each by-hand exercise and each of
its kept wrong answers (tests/wrong_answers/), the wrong answer is taken from its lesson
as ``backproplab grade`` takes it (the solution cell replaced, the definitions it needs)
and run on the inputs of seeds 0 to 301. A check with seed s runs seeds s, s + 1 and
s + 2, and passes only if all three agree with the reference, so the check of each seed
s in 0..299 is known from these runs. Every kept wrong answer must fail on every one of
the 300 seeds (an exception is listed below with its reason).
"""

from __future__ import annotations

import pytest
import torch
from registry import exercises_of, lesson_of, wrong_answers

from backproplab.course import grade, rules, sandbox, slips
from backproplab.course.byhand import _float64
from backproplab.course.grading import ByHand
from backproplab.watch import QuietDispatchMode

SEEDS = 300
pytestmark = pytest.mark.slow

# (exercise, index of the wrong answer): (passes allowed of 300, why). None so far.
EXCEPTIONS: dict[tuple[str, int], tuple[int, str]] = {}


BY_HAND = exercises_of(ByHand)


class _Largest(QuietDispatchMode):
    """The entries of the largest tensor an operation made: the one part of `run_answer`'s
    watch that an exercise asking to do without something (a Jacobian) needs here. The
    other part, the estimate watch (`Nudges`, 40 ms a run of lesson 26's answers), can only
    fail an answer more: leaving it out may show a slip passing that the check fails, and
    never hides one that passes."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor):
                self.largest = max(self.largest, o.numel())
        return out


def _right(answer, exercise: ByHand, inputs: tuple, ref: tuple) -> bool:
    """Whether ``answer`` agrees with the reference on ``inputs``, as the check judges it.
    Run as plainly as can be (the check's watchers are slow on 90,000 calls): what they
    refuse (autograd, an estimate's steps) is refused by the source before this, or shows
    as a value that is not exact to round-off. Only an answer that agrees, in an exercise
    that asks to do without something (a Jacobian), is run again watched, as the check
    runs it (`_Largest`): a tensor larger than every input fails it."""
    try:
        with torch.no_grad():
            got = slips.as_outputs(answer(*slips.fresh(inputs)))
    except Exception:  # a slip that raises on some input fails there
        return False
    agrees = len(got) == len(ref) and all(
        slips._compare("", g, r, r, None, None).ok for g, r in zip(got, ref, strict=True))
    if agrees and exercise.without is not None:
        limit = max((t.numel() for t in inputs if isinstance(t, torch.Tensor)), default=1)
        with torch.no_grad(), _Largest() as seen:
            answer(*slips.fresh(inputs))
        return seen.largest <= limit
    return agrees


@pytest.mark.parametrize("key", sorted(BY_HAND))
def test_every_kept_slip_fails_on_every_seed(key):
    exercise, wrong = BY_HAND[key], wrong_answers(key)
    nb, graded = lesson_of(key)
    inputs = [_float64(exercise.make_inputs(torch.Generator().manual_seed(s)))
              for s in range(SEEDS + exercise.trials - 1)]
    refs = [slips.as_outputs(exercise.reference(*slips.fresh(x))) for x in inputs]
    passing = []
    for k, (source, fragment) in enumerate(wrong):
        solution = next(c for c in nb.cells
                        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == key)
        original, solution.source = solution.source, source
        try:
            found = grade.answer_source(nb, graded)
        finally:
            solution.source = original
        if isinstance(found, str):
            continue  # not even defined: fails on every seed
        pieces, files, _ = found
        if rules.read([p.tree for p in pieces], exercise.vocabulary):
            continue  # refused by its source: fails on every seed
        answer = sandbox.load_answer(files, graded.names)
        agrees = [_right(answer, exercise, x, ref) for x, ref in zip(inputs, refs, strict=True)]
        passed = [s for s in range(SEEDS) if all(agrees[s:s + exercise.trials])]
        if len(passed) > EXCEPTIONS.get((key, k), (0, ""))[0]:
            passing.append(f"wrong answer {k} ({fragment!r}) passes on {len(passed)} of "
                           f"{SEEDS} seeds, e.g. seed {passed[0]}")
    assert not passing, f"{key}:\n" + "\n".join(passing)
