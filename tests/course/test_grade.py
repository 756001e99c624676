"""``backproplab grade``: the grade decided from the submitted source, in a fresh process.

Every shortcut of tests/cheats/shortcuts.py and every shape of tests/cheats/shapes.py
(the reference or autograd hidden in ordinary Python: a callable instance, a bound
method, a default argument, a decorator, a thread started when the cell runs, ...)
scores 0 on its exercise while the honest rest of the notebook scores; every honest
variant of tests/honest_answers.py scores every point, and passes the kernel's feedback.
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from cells import run_cell
from honest_answers import HONEST
from IPython.core.inputtransformer2 import TransformerManager

import backproplab as bl
from backproplab.__main__ import main
from backproplab.course import grade, sources
from backproplab.course.grading import find_exercise
from backproplab.course.sandbox import Sandbox, SandboxError

ROOT = Path(__file__).parents[2]
LESSONS = ROOT / "notebooks"
pytestmark = pytest.mark.slow


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPES = _module(ROOT / "tests" / "cheats" / "shapes.py").SHAPES
SHORTCUTS = _module(ROOT / "tests" / "cheats" / "shortcuts.py")


def _lesson(key: str) -> Path:
    """The lesson that holds exercise ``key`` (or, for ``lNN-``, lesson NN's first part)."""
    paths = sorted(LESSONS.glob(f"{key[1:3]}-*.ipynb"))
    return next((p for p in paths if f'"grade_id": "{key}"' in p.read_text()), paths[0])


def _with(key: str, source: str, earlier: str | None = None,
          nb: nbformat.NotebookNode | None = None,
          later: str | None = None) -> nbformat.NotebookNode:
    """The lesson (or ``nb``) with ``key``'s solution cell holding ``source``, ``earlier``
    as a cell of the learner's just above it and ``later`` as one just below it."""
    nb = copy.deepcopy(nb) if nb is not None else nbformat.read(_lesson(key), as_version=4)
    at = next(i for i, c in enumerate(nb.cells)
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == key)
    nb.cells[at].source = source
    if later is not None:
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(later))
    if earlier is not None:
        nb.cells.insert(at, nbformat.v4.new_code_cell(earlier))
    return nb


def _write(root: Path, student: str, key: str, nb: nbformat.NotebookNode,
           assignment: str = "ps1") -> None:
    folder = root / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / _lesson(key).name)


def _graded(root: Path, **kwargs) -> dict[tuple[str, str], grade.Verdict]:
    verdicts = grade.grade(root, LESSONS, jobs=2, **kwargs)
    return {(v.student, v.exercise): v for v in verdicts}


def test_every_shape_and_shortcut_scores_nothing_while_the_honest_rest_scores(tmp_path):
    shortcut_source = "{prelude}{source}\n\nnll_grads = answer\n"
    students = {f"shape{k}": source for k, (_, source) in enumerate(SHAPES)}
    students |= {f"shortcut{k}": shortcut_source.format(
        prelude=SHORTCUTS.PRELUDE, source=s.source.replace("{key}", "l04-grads"))
        for k, s in enumerate(SHORTCUTS.SHORTCUTS)}
    # Each submission is an assignment of one of two students, graded at once: two
    # containers in all instead of one a submission. What an answer sees is the same
    # either way: the runner forks each answer's child from a state that no answer
    # changes, and that is the same for every answer here (lesson 04 preloads no module,
    # and its exercises are by hand, so no method exercise's modules are loaded either).
    # Each l04-grads answer is followed in its container by its own notebook's honest
    # l04-huber, which must score: an answer that left its container broken for the next
    # would cost that one its point.
    for k, (student, source) in enumerate(students.items()):
        _write(tmp_path, f"class{k % 2}", "l04-grads", _with("l04-grads", source),
               assignment=student)
    got = {(v.assignment, v.exercise): v
           for v in grade.grade(tmp_path, LESSONS, jobs=2, timeout=60)}
    assert len(got) == 2 * len(students)
    kinds = {f"shape{k}": kind for k, (kind, _) in enumerate(SHAPES)}
    kinds |= {f"shortcut{k}": s.kind for k, s in enumerate(SHORTCUTS.SHORTCUTS)}
    scored = [f"{kinds[s]}: {got[s, 'l04-grads'].verdict}" for s in students
              if got[s, "l04-grads"].points]
    assert not scored, "shortcuts that scored:\n" + "\n".join(scored)
    assert all(got[s, "l04-huber"].points == 1 for s in students), [
        (s, got[s, "l04-huber"]) for s in students if not got[s, "l04-huber"].points]


def test_every_escape_is_refused_before_it_runs_naming_its_shape(tmp_path):
    """The escapes of tests/cheats/shapes.py (by hand, on l04-grads; method, on
    l05-microbatch): each is refused by the reading, so nothing of it runs."""
    from backproplab.course.rules import REASONS

    module = _module(ROOT / "tests" / "cheats" / "shapes.py")
    rows = [(f"hand{k}", "l04-grads", *e) for k, e in enumerate(module.ESCAPES)]
    rows += [(f"method{k}", "l05-microbatch", *e) for k, e in enumerate(module.METHOD_ESCAPES)]
    for student, key, _, source, _ in rows:
        _write(tmp_path, student, key, _with(key, source))
    got = _graded(tmp_path, only={"l04-grads", "l05-microbatch"})
    wrong = [f"{kind}: {got[student, key].verdict} {got[student, key].reason[:200]}"
             for student, key, kind, _, why in rows
             if got[student, key].verdict != "refused" or REASONS[why] not in
             " ".join(got[student, key].reason.split())]
    assert not wrong, "\n".join(wrong)


def test_a_refusal_in_the_grade_speaks_the_exercises_own_words(tmp_path):
    """Lesson 16's second exercise asks for a formula, not a gradient: the grade's reason
    says so, as the kernel's feedback does."""
    source = ("import numpy\n\n\ndef bytes_formula(batch, widths, activation):\n"
              "    return int(numpy.prod([4, batch, widths[0]]))\n")
    _write(tmp_path, "sly", "l16-bytes-formula", _with("l16-bytes-formula", source))
    got = _graded(tmp_path, only={"l16-bytes-formula"})["sly", "l16-bytes-formula"]
    task = find_exercise("l16-bytes-formula").task
    assert got.verdict == "refused" and f"asks for {task.asks_for}," in got.reason
    assert "gradient" not in task.asks_for


def test_every_honest_variant_scores_every_point(tmp_path):
    rounds: dict[int, dict[str, list]] = {}  # round -> notebook -> its variants
    for h in HONEST:
        k = sum(1 for other in HONEST[:HONEST.index(h)] if other.key == h.key)
        rounds.setdefault(k, {}).setdefault(_lesson(h.key).name, []).append(h)
    # A notebook holds one answer an exercise, so the variants come in rounds; each round
    # is an assignment of one of two students, two containers in all, as a student's
    # assignments share one in a real grade. A later round meets the same runner as a
    # first one: each answer runs in a child forked from a runner that loaded everything
    # before the first (test_sandbox's "same runner" test).
    for k, lessons in rounds.items():
        for variants in lessons.values():
            nb = None
            for h in variants:
                nb = _with(h.key, h.source, h.earlier, nb, h.later)
            _write(tmp_path, f"class{k % 2}", variants[0].key, nb, assignment=f"round{k}")
    got = {(v.assignment, v.exercise): v
           for v in grade.grade(tmp_path, LESSONS, jobs=2, only={h.key for h in HONEST})}
    lost = [f"{h.key} ({h.style}): {v.verdict} {v.reason[:300]}"
            for k, lessons in rounds.items() for variants in lessons.values() for h in variants
            if not (v := got[f"round{k}", h.key]).points]
    assert not lost, "\n".join(lost)
    assert len(HONEST) >= 40


def test_every_graded_exercise_has_honest_answers_of_its_own():
    """Each exercise is held to an honest answer written otherwise than its solution."""
    from registry import exercises_of

    from backproplab.course.byhand import ByHand
    from backproplab.course.grading import Method

    graded = set(exercises_of(ByHand)) | set(exercises_of(Method))
    assert len(graded) > 80
    assert sorted(graded - {h.key for h in HONEST}) == []


@pytest.mark.parametrize("honest", HONEST, ids=lambda h: f"{h.key}-{h.style}")
def test_every_honest_variant_passes_the_kernels_feedback(honest):
    space = {"torch": torch, "F": F, "math": math, "nn": torch.nn, "bl": bl,
             "__name__": "__main__", "get_ipython": lambda: _NoHelp()}
    for cell in (honest.earlier, honest.source, honest.later):
        if cell:  # as IPython runs it: help lines (``name?``) become a call that shows help
            run_cell(TransformerManager().transform_cell(cell), space)
    check = next(c.source for c in nbformat.read(_lesson(honest.key), as_version=4).cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                 == f"{honest.key}-check")
    (names, _), *_ = sources.answer_calls(check, honest.key)
    answer = tuple(space[n] for n in names)
    bl.check_exercise(honest.key, answer[0] if len(answer) == 1 else answer)


class _NoHelp:
    """The kernel's help page for ``name?``, shown nowhere: the test has no screen."""

    def run_line_magic(self, magic: str, line: str) -> None:
        assert magic == "pinfo", magic


def test_grades_threads_read_answers_one_at_a_time(tmp_path, monkeypatch):
    """Syntax trees built in two threads at once can fail on CPython 3.11 (a spurious
    SystemError): the reading is serialised, only the sandboxed runs overlap."""
    import threading
    import time

    inside, most = [0], [0]
    lock = threading.Lock()
    read = grade.answer_source

    def counting(*args, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # long enough for a second thread to arrive if it may
        try:
            return read(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(grade, "answer_source", counting)
    for student in ("alice", "bob", "carol"):
        _write(tmp_path, student, "l02-", nbformat.read(_lesson("l02-"), as_version=4))
    got = _graded(tmp_path)
    assert len(got) == 12 and all(v.verdict == "pass" for v in got.values())
    assert most[0] == 1


def test_every_function_of_an_exercise_the_grader_runs_holds_the_graders_lock():
    """Students are graded in threads, and an exercise's own functions draw from torch's
    process-wide generator (a layer built, then given the trial's weights; a dropout mask
    seeded for a reference): one thread's draws between another's seed and its layer gave
    a cached reference other weights, and an honest student 0 (l16-checkpoint-by-hooks,
    beside l15-vanishing's inputs). Each runs holding the grader's lock."""
    from backproplab.course.byhand import ByHand
    from backproplab.course.grading import Method

    held = []

    def noted(value):
        def run(*args):
            held.append(grade._OWN_RUNS._is_owned())
            return value
        return run

    method = Method(name="m", make_inputs=noted({"n": 1}), observe=noted(0),
                    reference=noted(2), explain=noted("why"), agree=noted(True),
                    mistakes={"a slip": noted(3)})
    by_hand = ByHand("dz/dx", reference=noted(torch.ones(1)), make_inputs=noted((1.0,)),
                     mistakes={"a slip": noted(torch.zeros(1))})
    for exercise in (method, by_hand):
        cached = grade._cached(exercise, {})
        cached.make_inputs(torch.Generator())
        cached.reference(1.0)
        cached.mistakes["a slip"](1.0)
        if exercise is method:
            cached.explain({"n": 1}, 0, 2)
            cached.agree(0, 2)
    assert held == [True] * 8


def test_the_solutions_score_everything_and_the_blank_version_nothing(tmp_path):
    blank = bl.course.assignment.student_version(nbformat.read(_lesson("l02-"), as_version=4))[0]
    _write(tmp_path, "alice", "l02-", nbformat.read(_lesson("l02-"), as_version=4))
    _write(tmp_path, "bob", "l02-", blank)
    got = _graded(tmp_path)
    keys = {k for _, k in got}
    assert len(keys) == 4
    assert all(got["alice", k].points == got["alice", k].max_points == 1 for k in keys)
    assert all(got["bob", k].points == 0 and got["bob", k].verdict == "missing" for k in keys)


def test_the_command_writes_the_csv_and_reads_the_secret_from_a_file(tmp_path, capsys):
    _write(tmp_path / "sub", "alice", "l04-", nbformat.read(_lesson("l04-"), as_version=4))
    (tmp_path / "secret").write_text("words\n")
    out = tmp_path / "grades.csv"
    assert main(["grade", str(tmp_path / "sub"), "--against", str(LESSONS), "--csv", str(out),
                 "--secret-file", str(tmp_path / "secret"), "-j", "2"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == list(grade.COLUMNS)
    assert {(r["student"], r["exercise"], r["points"], r["verdict"]) for r in rows} == {
        ("alice", "l04-grads", "1", "pass"), ("alice", "l04-huber", "1", "pass")}
    assert "alice: 2 of 2 points" in capsys.readouterr().out


def test_bad_input_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "backproplab", "grade", str(tmp_path / "no"),
                           "--against", str(LESSONS), "--csv", str(tmp_path / "g.csv")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "SUBMITTED" in done.stderr and "Traceback" not in done.stderr


def _answer(box: Sandbox, source: str, key: str = "l02-cubic"):
    return box.answer(key, [("<cell 1>", source)], ["f"])


def test_the_answers_process_has_no_secret_and_a_time_limit(monkeypatch):
    monkeypatch.setenv("BACKPROPLAB_SECRET", "not for the answer")
    source = ("import os\nimport torch\nSEEN = sorted(os.environ)\n\n"
              "def f(x):\n    return torch.tensor(float('BACKPROPLAB_SECRET' in SEEN))\n")
    with Sandbox(timeout=60) as box, _answer(box, source) as run:
        assert run.call((torch.zeros(1),)).got == 0
    with Sandbox(timeout=2) as box, pytest.raises(SandboxError) as err:
        with _answer(box, "def f(x):\n    while True:\n        pass\n") as run:
            run.call((torch.zeros(1),))
    assert err.value.kind == "timeout"


def test_what_an_answer_returns_reaches_the_grader_as_plain_data():
    with Sandbox(timeout=60) as box, _answer(
            box, "class Odd:\n    def __reduce__(self):\n"
                 "        return (print, ('ran in the grader',))\n\n"
                 "def f(x):\n    return Odd(), x\n") as run:
        got = run.call((torch.ones(2),)).got
    assert got[0] == "<a Odd object>" and torch.equal(got[1], torch.ones(2))


def test_a_secret_in_the_environment_does_not_reach_the_answers(tmp_path, monkeypatch):
    """The command takes the secret out of its environment before any answer's process
    starts from it."""
    monkeypatch.setenv("BACKPROPLAB_SECRET", "words")
    _write(tmp_path / "sub", "alice", "l04-", nbformat.read(_lesson("l04-"), as_version=4))
    assert main(["grade", str(tmp_path / "sub"), "--against", str(LESSONS),
                 "--csv", str(tmp_path / "g.csv")]) == 0
    assert "BACKPROPLAB_SECRET" not in os.environ
