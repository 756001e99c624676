"""Every method exercise's solution passes, and every kept wrong answer fails, on every seed.

The visible check runs seed 0 and a hidden test another written seed; a graded course
runs seeds derived from the instructor's secret. For each method exercise (a `Method`
judged from observations), the solution and each kept wrong answer (tests/wrong_answers/)
are taken from the lesson as ``backproplab grade`` takes them (the solution cell
replaced, the definitions it needs) and observed on the inputs of seeds 0 to
``SEEDS + trials - 2``. A check with seed s judges trials s .. s + trials - 1 and passes
only if all of them agree with the reference, so the check of every seed s < SEEDS is
known from these observations. The solution must pass on all of them, each wrong
answer fail on all of them, and be told the mistake kept with it (the fragment its message
holds on seed 0) on the checks of the seeds in ``NAMED`` too. The same answer runs every
check, as a learner's function does when the check cell is run again.

An exercise whose observation starts worker processes or compiles (lesson 23's process
groups, torch.compile in lessons 25 and 27: seconds per observation, a dozen wrong
answers) is swept on ``COSTLY_SEEDS`` seeds instead, which the suite's time allows.

An exercise of ``PURE`` (its solution and every kept slip a function of its arguments alone)
holds cases that are the same on every seed; each answer meets a case it has met before
with the result it gave then (`_remembered`), so a shared case costs one call an answer.
"""

from __future__ import annotations

import copy
import functools

import nbformat
import pytest
import torch
from registry import exercises_of, lesson_of, tells, wrong_answers

from backproplab.course import grade, rules, sandbox
from backproplab.course.grading import Method, is_failure, judge_method, same

SEEDS = 50
COSTLY_SEEDS = 3
NAMED = (20, 40)  # two checks of each wrong answer judged in full: a second each, or less
pytestmark = pytest.mark.slow


METHODS = exercises_of(Method)

# l16-tbptt: the pass message's loop of 8 units and 400 steps (k = 10 and 100) is in every
# seed's inputs, four fifths of an observation's time.
PURE = {"l16-tbptt"}


def _bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's values as bytes (numpy has no bfloat16, so read them as bytes first)."""
    return tensor.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()


def _remembered(answer):
    """``answer``, called once for each distinct list of arguments (tensors by their values)."""
    results: dict[tuple, object] = {}

    def remembered(*args):
        key = tuple((str(a.dtype), tuple(a.shape), _bytes(a))
                    if isinstance(a, torch.Tensor) else repr(a) for a in args)
        if key not in results:
            results[key] = answer(*args)
        return results[key]

    return remembered


def _answer(nb: nbformat.NotebookNode, graded: grade.Graded, exercise: Method,
            source: str | None):
    """The answer as the grade takes it (``source`` in the solution cell's place), or
    None when the grade would refuse it before running it."""
    cell = next(c for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == graded.key)
    original = cell.source
    if source is not None:
        cell.source = source
    try:
        found = grade.answer_source(nb, graded)
    finally:
        cell.source = original
    if isinstance(found, str):
        return None
    pieces, files, _ = found
    if rules.read([p.tree for p in pieces], exercise.vocabulary):
        return None
    try:
        answer = sandbox.load_answer(files, graded.names)
    except Exception:  # its own source fails to run: it fails on every seed
        return None
    return _remembered(answer) if graded.key in PURE else answer


_INPUTS: dict[tuple[int, int], object] = {}


def _inputs(exercise: Method, trial: int):
    """The inputs of trial seed ``trial``, made once for every answer of the sweep and copied
    for each, since an answer may change what it is given."""
    key = (id(exercise), trial)
    if key not in _INPUTS:
        _INPUTS[key] = exercise.make_inputs(torch.Generator().manual_seed(trial))
    return copy.deepcopy(_INPUTS[key])


_REFERENCES: dict[tuple[int, int], object] = {}


def _reference(exercise: Method, trial: int):
    """The reference's result on trial seed ``trial``, computed once for every answer of the
    sweep (as the grade computes it once for a class, from inputs no answer has touched) and
    copied for each comparison, so that no comparison can change what the next one sees."""
    key = (id(exercise), trial)
    if key not in _REFERENCES:
        _REFERENCES[key] = exercise.reference(_inputs(exercise, trial))
    return copy.deepcopy(_REFERENCES[key])


def _agrees_on(exercise: Method, answer, trial: int) -> bool:
    """Whether the answer's observation on trial seed ``trial`` agrees with the reference."""
    got = exercise.run(answer, _inputs(exercise, trial))  # as the kernel and the sandbox do
    return not is_failure(got) and (exercise.agree or same)(got, _reference(exercise, trial))


def _agrees(exercise: Method, answer, seeds: int) -> list[bool]:
    """Whether the answer's observation agrees with the reference, trial seed by seed."""
    return [_agrees_on(exercise, answer, t) for t in range(seeds + exercise.trials - 1)]


def _passing_seeds(exercise: Method, answer, seeds: int) -> list[int]:
    """The seeds s < ``seeds`` whose check (trials s .. s + trials - 1) the answer passes.
    A trial that disagrees fails every check that runs it, so the checks still open are
    settled by looking at the last trial of the first of them first."""
    n, passing, s, seen = exercise.trials, [], 0, {}

    def agrees(t: int) -> bool:
        if t not in seen:
            seen[t] = _agrees_on(exercise, answer, t)
        return seen[t]

    while s < seeds:
        last = next((t for t in range(s + n - 1, s - 1, -1) if not agrees(t)), None)
        if last is None:  # every trial of check s agrees: it passes
            passing.append(s)
            s += 1
        else:  # checks s .. last all run trial `last`, which disagrees
            s = last + 1
    return passing


def _seeds(exercise: Method) -> int:
    return COSTLY_SEEDS if exercise.allows & {"processes", "exec"} else SEEDS


@pytest.mark.parametrize("key", sorted(METHODS))
def test_the_solution_passes_and_every_kept_slip_fails_and_is_named_on_every_seed(key):
    exercise = METHODS[key]
    seeds = _seeds(exercise)
    nb, graded = lesson_of(key)
    solution = _answer(nb, graded, exercise, None)
    assert solution is not None, f"{key}: the lesson's solution is refused or does not run"
    agrees = _agrees(exercise, solution, seeds)
    failing = [s for s in range(seeds) if not all(agrees[s:s + exercise.trials])]
    assert not failing, f"{key}: the solution fails on {len(failing)} of {seeds} seeds, " \
                        f"e.g. seed {failing[0]}"
    problems = []
    for k, (source, fragment) in enumerate(wrong_answers(key)):
        answer = _answer(nb, graded, exercise, source)
        if answer is None:
            continue
        passed = _passing_seeds(exercise, answer, seeds)
        if passed:
            problems.append(f"wrong answer {k} ({fragment!r}) passes on {len(passed)} of "
                            f"{seeds} seeds, e.g. seed {passed[0]}")
        for s in (s for s in NAMED if s < seeds and s not in passed):
            told = str(judge_method(exercise, functools.partial(exercise.run, answer), seed=s))
            if not tells(told, fragment):
                problems.append(f"wrong answer {k} is not told {fragment!r} on seed {s}: {told}")
    assert not problems, f"{key}:\n" + "\n".join(problems)
