"""Verdicts and diagnoses are data: changing how the lab lays out a mismatch's numbers
changes no verdict, no named slip and no number of a by-hand feedback or a grade's reason.

`backproplab.check.lay_out` is the one place a mismatch's words and numbers are put
together. Each test runs the same by-hand checks twice, once as the lab lays them out and
once with that layout changed (the numbers after a colon instead of on a line of their
own, an index written ``(1)`` instead of ``[1]``). The judge must not notice: the same
checks fail with the same verdicts, the same slips are named, every number is still there,
and the worst entry keeps its name. (A judge that read the numbers back from the text, by
splitting at the newline or matching ``worst entry [1]``, loses them here.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch

from backproplab import check
from backproplab.course import grade
from backproplab.course.byhand import ByHand, check_by_hand, judge_by_hand, run_answer

LESSONS = Path(__file__).parents[2] / "notebooks"

NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _inputs(gen):
    return (torch.randn(int(torch.randint(3, 7, (1,), generator=gen)), generator=gen),)


def _reference(x):
    return 2 * x + x**2


SLIPS = {"the x**2 term's factor 2 is missing": lambda x: x + x**2}
ENTRIES = ("x.grad", "w.grad", "b.grad")
EXERCISE = ByHand("dz/dx", _reference, _inputs, mistakes=SLIPS)
LABELLED = ByHand("grads", lambda x: 2 * x, lambda gen: (torch.randn(3, generator=gen),),
                  entries=ENTRIES)

# (what the answer does, the answer, the exercise, words its feedback must hold)
CASES = [
    ("a kept slip", lambda x: x + x**2, EXERCISE, "factor 2 is missing"),
    ("a factor on every trial", lambda x: (2 * x + x**2) / 2, EXERCISE, "exactly 1/2 ×"),
    ("no single mistake", lambda x: x.exp(), EXERCISE, "no single common mistake"),
    ("a named entry", lambda x: x * torch.tensor([2.0, 2.0, 3.0], dtype=x.dtype), LABELLED,
     "b.grad"),
    ("a shape", lambda x: (2 * x + x**2).unsqueeze(0), EXERCISE, "keepdim=True"),
]


def _mutated(words: str, numbers: check.Mismatch) -> str:
    """The lab's layout changed: the numbers after a colon, indices in parentheses."""
    text = LAY_OUT(words, numbers)
    return text.replace("\n  ", ": ").replace("[", "(").replace("]", ")")


LAY_OUT = check.lay_out


def _feedback(answer, exercise: ByHand, seed: int):
    """The kernel's feedback and the grader's judgement (its failed check's message is
    the reason `backproplab grade` writes), as (name, ok, verdict, message, data)."""
    live = exercise.check(answer, seed)
    graded = judge_by_hand(exercise, lambda args: run_answer(answer, args), seed=seed)
    return [[(c.name, c.ok, c.verdict, c.message, c.diagnosis, c.numbers) for c in r.checks]
            for r in (live, graded)]


@pytest.mark.parametrize(("what", "answer", "exercise", "words"), CASES,
                         ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 7])
def test_a_new_layout_changes_no_verdict_slip_or_number(monkeypatch, what, answer, exercise,
                                                        words, seed):
    before = _feedback(answer, exercise, seed)
    monkeypatch.setattr(check, "lay_out", _mutated)
    after = _feedback(answer, exercise, seed)
    for old_report, new_report in zip(before, after, strict=True):
        assert len(old_report) == len(new_report)
        for old, new in zip(old_report, new_report, strict=True):
            (name, ok, verdict, old_text, diagnosis, numbers) = old
            assert (name, ok, verdict, diagnosis, numbers) == new[:3] + new[4:]
            assert not ok
            new_text = new[3]
            # The judge's own words, the named slip among them, are untouched ...
            assert words in " ".join(old_text.split()) and words in " ".join(new_text.split())
            head = old_text.split("\n")[0]
            assert new_text.startswith(head)
            # ... every number is still there, in order ...
            assert NUMBER.findall(old_text) == NUMBER.findall(new_text)
            if numbers is not None:
                # ... and the new layout really is in effect.
                assert "\n" in old_text and "\n" not in new_text
            if numbers is not None and numbers.entry:
                assert f"[{numbers.index[0]}] ({numbers.entry})" in old_text
                assert f"({numbers.index[0]}) ({numbers.entry})" in new_text


def test_the_worst_entry_is_named_from_its_index():
    report = check_by_hand(lambda x: x * torch.tensor([2.0, 2.0, 3.0], dtype=x.dtype),
                           reference=lambda x: 2 * x,
                           make_inputs=lambda gen: (torch.randn(3, generator=gen),),
                           name="grads", entries=ENTRIES)
    numbers = report[0].numbers
    assert numbers is not None and numbers.index == (2,) and numbers.entry == "b.grad"
    assert numbers.got == pytest.approx(1.5 * numbers.expected)


def test_compare_keeps_its_numbers_as_data():
    c = check.compare("dx", torch.tensor([1.0, 2.0, 5.0]), torch.tensor([1.0, 2.0, 3.0]))[0]
    n = c.numbers
    assert (n.index, n.got, n.expected, n.differing, n.size) == ((2,), 5.0, 3.0, 1, 3)
    assert n.max_abs_diff == pytest.approx(2.0) and n.rel_error == pytest.approx(2 / 3)
    assert c.diagnosis is None or c.diagnosis.kind  # a value, when there is one
    assert "worst entry [2]: yours 5, expected 3" in c.message


@pytest.mark.slow
def test_a_new_layout_changes_no_number_of_a_grades_reason(tmp_path, monkeypatch):
    """`backproplab grade` on a submission with a kept slip: its CSV reason keeps the
    slip's name and every number when the layout changes (the by-hand judge runs in the
    grader, so the changed layout is the one it uses)."""
    lesson = next(LESSONS.glob("02-*.ipynb"))
    nb = nbformat.read(lesson, as_version=4)
    cell = next(c for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "l02-cubic")
    cell.source = "def cubic_slope(x):\n    return 3 * x**2 - 4 * x\n"  # 8x, not 4x
    (tmp_path / "alice").mkdir()
    nbformat.write(nb, tmp_path / "alice" / lesson.name)

    def reason() -> grade.Verdict:
        (verdict,) = grade.grade(tmp_path, LESSONS, only={"l02-cubic"})
        return verdict

    before = reason()
    monkeypatch.setattr(check, "lay_out", _mutated)
    after = reason()
    assert (before.points, before.verdict) == (after.points, after.verdict) == (0.0, "mismatch")
    assert "8x, not 4x" in before.reason and "8x, not 4x" in after.reason
    # (the reason is one line either way; the index shows which layout was in effect)
    assert "worst entry [" in before.reason and "worst entry (" in after.reason
    assert NUMBER.findall(before.reason) == NUMBER.findall(after.reason)
    assert len(NUMBER.findall(before.reason)) > 5  # the numbers are there to compare
