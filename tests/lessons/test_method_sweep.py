"""Every method exercise's solution passes, and every kept wrong answer fails, on every seed.

The visible check runs seed 0 and a hidden test another written seed; a graded course
runs seeds derived from the instructor's secret. For each method exercise (a `Method`
judged from observations), the solution and each kept wrong answer (tests/wrong_answers/)
are taken from the lesson as ``backproplab grade`` takes them (the solution cell
replaced, the definitions it needs) and observed on the inputs of seeds 0 to
``SEEDS + trials - 2``. A check with seed s judges trials s .. s + trials - 1 and passes
only if all of them agree with the reference, so the check of every seed s < SEEDS is
known from these observations. The solution must pass on all of them, each wrong
answer fail on all of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

import nbformat
import pytest
import torch

from backproplab.course import exercises, grade, rules, sandbox
from backproplab.course.grading import Method, is_failure, same

ROOT = Path(__file__).parents[2]
SEEDS = 50
pytestmark = pytest.mark.slow


def _methods() -> dict[str, Method]:
    found = {}
    for info in pkgutil.iter_modules(exercises.__path__):
        if info.name.startswith("lesson"):
            module = importlib.import_module(f"{exercises.__name__}.{info.name}")
            found |= {k: v for k, v in module.EXERCISES.items()
                      if isinstance(v, Method) and v.observe is not None}
    return found


METHODS = _methods()


def _wrong(key: str) -> list[tuple[str, str]]:
    path = ROOT / "tests" / "wrong_answers" / f"lesson{key[1:3]}.py"
    spec = importlib.util.spec_from_file_location(f"wrong_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.WRONG.get(key, [])
    return [table] if isinstance(table, tuple) else list(table)


def _lesson(key: str) -> tuple[nbformat.NotebookNode, grade.Graded]:
    for path in sorted((ROOT / "notebooks").glob(f"{key[1:3]}-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        graded = [g for g in grade.graded_exercises(nb) if g.key == key]
        if graded:
            return nb, graded[0]
    raise LookupError(key)


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
        return sandbox.load_answer(files, graded.names)
    except Exception:  # its own source fails to run: it fails on every seed
        return None


def _agrees(exercise: Method, answer, seeds: int) -> list[bool]:
    """Whether the answer's observation agrees with the reference, trial seed by seed."""
    agree = exercise.agree or same
    found = []
    for s in range(seeds + exercise.trials - 1):
        inputs = exercise.make_inputs(torch.Generator().manual_seed(s))
        got = exercise.observe(answer, inputs)
        found.append(not is_failure(got) and agree(got, exercise.reference(inputs)))
    return found


@pytest.mark.parametrize("key", sorted(METHODS))
def test_the_solution_passes_and_every_kept_slip_fails_on_every_seed(key):
    exercise = METHODS[key]
    nb, graded = _lesson(key)
    solution = _answer(nb, graded, exercise, None)
    assert solution is not None, f"{key}: the lesson's solution is refused or does not run"
    agrees = _agrees(exercise, solution, SEEDS)
    failing = [s for s in range(SEEDS) if not all(agrees[s:s + exercise.trials])]
    assert not failing, f"{key}: the solution fails on {len(failing)} of {SEEDS} seeds, " \
                        f"e.g. seed {failing[0]}"
    passing = []
    for k, (source, fragment) in enumerate(_wrong(key)):
        answer = _answer(nb, graded, exercise, source)
        if answer is None:
            continue
        agrees = _agrees(exercise, answer, SEEDS)
        passed = [s for s in range(SEEDS) if all(agrees[s:s + exercise.trials])]
        if passed:
            passing.append(f"wrong answer {k} ({fragment!r}) passes on {len(passed)} of "
                           f"{SEEDS} seeds, e.g. seed {passed[0]}")
    assert not passing, f"{key}:\n" + "\n".join(passing)
