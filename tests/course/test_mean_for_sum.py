"""A mean where a sum belongs is named "1/N" in every by-hand exercise of the course.

The README promises that a gradient off by a factor of 1/N is called that. This
test holds every by-hand exercise of the lessons to it, on the inputs its
visible check draws: for each of its outputs and each dimension of an input
that is at least 4 long on every trial (a batch, a sequence, a row of
features: what a reduction can run over), an answer that is exactly the
reference divided by that dimension's size must get a message that says so,
whatever else the exercise knows about its slips.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import torch

from backproplab.course import byhand, grading, slips

EXERCISES = Path(grading.__file__).resolve().parent / "exercises"
TRIALS = 3


def _by_hand() -> list[tuple[str, byhand.ByHand]]:
    found = []
    # lessonNN.py, or a package lessonNN/ when a lesson's checks are long
    for path in sorted(p for p in EXERCISES.glob("lesson[0-9][0-9]*")
                       if p.suffix == ".py" or (p / "__init__.py").is_file()):
        module = importlib.import_module(f"backproplab.course.exercises.{path.stem}")
        found += [(key, ex) for key, ex in sorted(module.EXERCISES.items())
                  if isinstance(ex, byhand.ByHand)]
    return found


BY_HAND = _by_hand()


def _trials(exercise: byhand.ByHand) -> list[tuple[tuple, tuple]]:
    """(inputs, reference outputs) of the visible check's trials."""
    out = []
    for k in range(TRIALS):
        inputs = byhand._float64(exercise.make_inputs(torch.Generator().manual_seed(k)))
        ref = slips.as_outputs(exercise.reference(*slips.fresh(inputs)))
        out.append((inputs, tuple(r.detach() if isinstance(r, torch.Tensor) else r for r in ref)))
    return out


def _reductions(trials: list[tuple[tuple, tuple]]) -> list[tuple[int, int]]:
    """(input, dimension) pairs at least 4 long on every trial."""
    first = trials[0][0]
    pairs = []
    for k, x in enumerate(first):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim == 0:
            continue
        for d in range(x.ndim):
            if all(isinstance(inp[k], torch.Tensor) and inp[k].ndim == x.ndim
                   and inp[k].shape[d] >= 4 for inp, _ in trials):
                pairs.append((k, d))
    return pairs


NAMED = re.compile(r"1/N|\bmean\b|averag", re.IGNORECASE)


@pytest.mark.parametrize(("key", "exercise"), BY_HAND, ids=[k for k, _ in BY_HAND])
def test_a_mean_for_a_sum_is_named(key: str, exercise: byhand.ByHand) -> None:
    trials = _trials(exercise)
    pairs = _reductions(trials)
    tried = 0
    for i, ref in enumerate(trials[0][1]):
        if not isinstance(ref, torch.Tensor) or not ref.is_floating_point():
            continue
        for k, d in pairs:
            runs = []
            for inputs, refs in trials:
                got = tuple(r / inputs[k].shape[d] if j == i else r for j, r in enumerate(refs))
                runs.append(slips.Trial(inputs, got, refs))
            if all(torch.equal(r.got[i], r.ref[i]) for r in runs):
                continue  # a zero gradient divided by N is still right
            tried += 1
            failure = slips.judge(f"{key}[{i}]", i, runs, exercise.mistakes,
                                     exercise.advice, None, None)
            assert failure is not None, f"{key}: 1/N x output {i} passed"
            assert NAMED.search(failure.message), (
                f"{key}, output {i} divided by the size of dimension {d} of input {k}:\n"
                f"{failure.message}")
    if pairs:
        assert tried, f"{key}: no output to divide"


def test_the_course_has_by_hand_exercises_with_reductions() -> None:
    """The test above is not vacuous: most by-hand exercises have a dimension to reduce."""
    with_pairs = [key for key, ex in BY_HAND if _reductions(_trials(ex))]
    assert len(BY_HAND) >= 40 and len(with_pairs) >= 25, (len(BY_HAND), len(with_pairs))
