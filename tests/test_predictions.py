"""Every "predict, then run" question is asked before it is answered.

For each question the lessons register (backproplab/lessons/lessonNN.py): its
question and hint, and the message a wrong guess gets, hold no form of the
answer. For each prediction in a lesson: the question cell, the guess cell's
task and the check cell's source hold no form of it either; the check carries
0 points (a guess can be changed after the reveal); the reveal comes right
after the check, and only then the prose about the answer.
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import nbformat
import pytest

import backproplab as bl
from backproplab.exercise import _answer_of

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
MODULES = sorted((ROOT / "backproplab" / "lessons").glob("lesson[0-9][0-9].py"))


def _questions() -> list[tuple[str, bl.Prediction]]:
    found = []
    for path in MODULES:
        module = importlib.import_module(f"backproplab.lessons.{path.stem}")
        found += sorted(getattr(module, "PREDICTIONS", {}).items())
    return found


QUESTIONS = _questions()


def _number_forms(value: float) -> set[str]:
    forms = {f"{value:g}", repr(float(value))}
    if math.isfinite(value) and value == int(value):
        forms.add(str(int(value)))
    return forms


def _forms(answer: object) -> list[str]:
    """Regular expressions for ways of writing the answer down."""
    if isinstance(answer, bool):
        return [rf"\b{answer}\b"]
    if isinstance(answer, str):
        return [rf"(?i)\b{re.escape(answer)}\b"]
    if hasattr(answer, "tolist"):
        answer = answer.tolist()
    if isinstance(answer, (int, float)):
        return [rf"(?<![\w.]){re.escape(f)}(?![\w]|\.\d)" for f in _number_forms(answer)]
    if isinstance(answer, (list, tuple)):
        if all(isinstance(a, str) for a in answer):
            # One name alone is also how a question lists its candidates: not counted.
            if len(answer) < 2:
                return []
            return [r"(?i)\b" + r"\W+".join(re.escape(a) for a in answer) + r"\b"]
        if all(isinstance(a, (int, float)) for a in answer):
            parts = [sorted(_number_forms(a), key=len)[0] for a in answer]
            return [r"(?<![\w.])" + r"\W+(?:and\W+)?".join(map(re.escape, parts)) + r"(?![\w])"]
    return []


def _leaks(text: str, answer: object, choices: tuple | None) -> list[str]:
    """The answer's forms found in ``text``; naming every choice gives nothing away."""
    if choices is not None and all(any(re.search(f, text) for f in _forms(c)) for c in choices):
        return []
    if isinstance(answer, bool) and re.search(rf"\b{not answer}\b", text):
        return []  # "True or False" names both
    return [f for f in _forms(answer) if re.search(f, text)]


def _wrong_guess(answer: object, choices: tuple | None) -> object:
    if choices is not None:
        return next(c for c in choices if not bl.exercise._matches(c, answer))
    if isinstance(answer, bool):
        return not answer
    if isinstance(answer, str):
        return "zzz"
    if hasattr(answer, "tolist"):
        answer = answer.tolist()
    if isinstance(answer, (list, tuple)):
        return type(answer)(_wrong_guess(a, None) for a in answer)
    return answer + 1.5 if answer is not None else 0.5


def test_the_lessons_register_their_questions():
    assert len(QUESTIONS) >= len(LESSONS) - 1, [k for k, _ in QUESTIONS]


@pytest.mark.parametrize(("key", "question"), QUESTIONS, ids=[k for k, _ in QUESTIONS])
def test_question_hint_and_wrong_guess_message_hold_no_answer(key, question):
    answer = _answer_of(question)
    for where, text in (("question", question.question), ("hint", question.hint)):
        assert not _leaks(text, answer, question.choices), f"{key}: the {where} gives it away"
    guess = _wrong_guess(answer, question.choices)
    report = bl.exercise.prediction_report(question, guess)
    assert not report.ok, f"{key}: {guess!r} was accepted"
    message = " ".join(str(report).split()).replace(
        f"(you predicted {bl.exercise._show(guess)})", "")
    assert not _leaks(message, answer, question.choices), f"{key}: {message}"
    assert "not quite" in message


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _predictions(nb):
    """(question markdown, guess cell, check cell, the cell after the check) per prediction."""
    cells = nb.cells
    for i, cell in enumerate(cells):
        if _meta(cell).get("solution") and "predict" in _meta(cell).get("grade_id", ""):
            question = next(c for c in reversed(cells[:i]) if c.cell_type == "markdown")
            j = next(k for k in range(i + 1, len(cells)) if cells[k].cell_type == "code")
            yield question, cell, cells[j], cells[j + 1] if j + 1 < len(cells) else None


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_each_prediction_is_asked_checked_then_revealed(lesson):
    nb = nbformat.read(lesson, as_version=4)
    found = list(_predictions(nb))
    assert found, f"{lesson.name}: no prediction"
    for question, guess, check, after in found:
        grade_id = _meta(guess)["grade_id"]
        called = re.search(r"bl\.check_prediction\(\s*\"([^\"]+)\"", check.source)
        assert called, f"{grade_id}: the check does not call bl.check_prediction by id"
        key = called.group(1)
        assert _meta(check).get("points") == 0, f"{grade_id}: a prediction is worth 0 points"
        assert after is not None and after.cell_type == "code" and not _meta(after)
        assert re.search(rf"bl\.reveal\(\s*\"{re.escape(key)}\"\s*\)", after.source), (
            f"{grade_id}: the cell after the check must reveal {key!r}")
        prediction = bl.lessons.find_prediction(key)
        answer = _answer_of(prediction)
        task = "\n".join(line for line in guess.source.splitlines()
                         if line.lstrip().startswith("#") and "SOLUTION" not in line)
        for where, text in (("question", question.source), ("guess cell's comments", task),
                            ("check cell", check.source)):
            leaks = _leaks(text, answer, prediction.choices)
            assert not leaks, f"{lesson.name} {grade_id}: the {where} gives the answer away"
