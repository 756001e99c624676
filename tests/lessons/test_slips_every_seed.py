"""Every kept wrong answer of every by-hand exercise fails on every seed, not only seed 0,
and is told its mistake on every seed checked for it.

A kept slip that the visible check's inputs catch could still pass on the hidden test's
seed, or on the secret seeds of a graded course. For each by-hand exercise and each of
its kept wrong answers (tests/wrong_answers/), the wrong answer is taken from its lesson
as ``backproplab grade`` takes it (the solution cell replaced, the definitions it needs)
and run on the inputs of seeds 0 to 301. A check with seed s runs seeds s, s + 1 and
s + 2, and passes only if all three agree with the reference, so the check of each seed
s in 0..299 is known from these runs. Every kept wrong answer must fail on every one of
the 300 seeds (an exception is listed below with its reason).

A wrong answer that fails is also told what it did: its message must name the mistake kept
with it (the fragment the kernel's message holds on seed 0) on the check of every
``NAMED_EVERY``-th seed too, judged by `judge_by_hand` from the results already recorded. A
slip named on one seed can be named wrongly on another, where the inputs happen to let
two slips give the same numbers. Every seed's naming would cost minutes; ten seeds of each
answer cost about ten seconds for all of them.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from registry import exercises_of, lesson_of, tells, wrong_answers

from backproplab.course import grade, rules, sandbox, slips
from backproplab.course.byhand import ByHand, Ran, _float64, _positional_names, judge_by_hand
from backproplab.watch import QuietDispatchMode

SEEDS = 300
NAMED_EVERY = 30
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


def _run(answer, exercise: ByHand, inputs: tuple) -> Ran:
    """``answer`` on ``inputs``, as plainly as can be (the check's watchers are slow on
    90,000 calls): what they refuse (autograd, an estimate's steps) is refused by the source
    before this, or shows as a value that is not exact to round-off. In an exercise that
    asks to do without something (a Jacobian) the largest tensor it makes is kept
    (`_Largest`), as the check keeps it."""
    watch = _Largest() if exercise.without is not None else nullcontext()
    try:
        with torch.no_grad(), watch:
            got = answer(*slips.fresh(inputs))
    except Exception as err:  # a slip that raises on some input fails there
        return Ran(failure="error", detail=f"{type(err).__name__}: {err}")
    return Ran(got=got, largest=watch.largest if exercise.without is not None else 0)


def _right(ran: Ran, exercise: ByHand, inputs: tuple, ref: tuple) -> bool:
    """Whether the answer's run agrees with the reference on ``inputs``, as the check judges
    it: a tensor larger than every input fails an exercise that asks to do without one."""
    if ran.failure is not None:
        return False
    got = slips.as_outputs(ran.got)
    limit = max((t.numel() for t in inputs if isinstance(t, torch.Tensor)), default=1)
    return (len(got) == len(ref) and ran.largest <= limit and all(
        slips._compare("", g, r, r, None, None).ok for g, r in zip(got, ref, strict=True)))


def _told(exercise: ByHand, answer, runs: list[Ran], seed: int) -> str:
    """The message of the check of ``seed``, judged from the recorded runs of its trials."""
    trials = iter(runs[seed:seed + exercise.trials])
    return str(judge_by_hand(exercise, lambda args: next(trials), seed=seed,
                             params=_positional_names(answer)))


@pytest.mark.parametrize("key", sorted(BY_HAND))
def test_every_kept_slip_fails_and_is_named_on_every_seed(key):
    exercise, wrong = BY_HAND[key], wrong_answers(key)
    nb, graded = lesson_of(key)
    inputs = [_float64(exercise.make_inputs(torch.Generator().manual_seed(s)))
              for s in range(SEEDS + exercise.trials - 1)]
    refs = [slips.as_outputs(exercise.reference(*slips.fresh(x))) for x in inputs]
    problems = []
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
        runs = [_run(answer, exercise, x) for x in inputs]
        agrees = [_right(ran, exercise, x, ref)
                  for ran, x, ref in zip(runs, inputs, refs, strict=True)]
        passed = [s for s in range(SEEDS) if all(agrees[s:s + exercise.trials])]
        if len(passed) > EXCEPTIONS.get((key, k), (0, ""))[0]:
            problems.append(f"wrong answer {k} ({fragment!r}) passes on {len(passed)} of "
                            f"{SEEDS} seeds, e.g. seed {passed[0]}")
        told = {s: _told(exercise, answer, runs, s) for s in range(0, SEEDS, NAMED_EVERY)
                if s not in passed}
        misnamed = [s for s, text in told.items() if not tells(text, fragment)]
        if misnamed:
            problems.append(f"wrong answer {k} is not told {fragment!r} on {len(misnamed)} of "
                            f"{len(told)} seeds, e.g. seed {misnamed[0]}: {told[misnamed[0]]}")
    assert not problems, f"{key}:\n" + "\n".join(problems)
