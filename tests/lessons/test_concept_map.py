"""The course's order: no lesson leans on a later one, and every idea has one home.

A lesson's text is everything a learner reads while working it: its markdown
and code, the outputs stored under them, and the hints and messages of its
checks (``backproplab/course/exercises/lessonNN.py``). None of it may name a
later lesson ("lesson 12", "lessons 3 and 14"), or promise one ("the next
lesson", "a later lesson", "we will see"). Pointers back are how the course
reuses what it taught.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
EXERCISES = ROOT / "backproplab" / "course" / "exercises"

_NUMBER = r"(?:1[0-9]|0[1-9]|[1-9])"
# "lesson 5", "Lesson 05's", "lessons 3 and 14", "lessons 2, 4 or 6"
LESSONS = re.compile(rf"\b[Ll]essons? {_NUMBER}(?:(?:, | and | or |/|-|–| to ){_NUMBER}\b)*")
PROMISES = re.compile(
    r"\b(?:later lessons?|a later one|next lessons?|lessons? to come|coming lessons?|"
    r"we(?:'ll| will) see|later in the course)\b",
    re.IGNORECASE,
)


def lesson_number(path: Path) -> int:
    return int(path.name[:2])


def _output_text(output: dict) -> str:
    text = output.get("text") or output.get("data", {}).get("text/plain", "")
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    return "".join(text) if isinstance(text, list) else str(text)


def learner_text(path: Path) -> list[tuple[str, str]]:
    """(where, text) for every piece of a lesson a learner reads."""
    nb = json.loads(path.read_text())
    pieces = []
    for cell in nb["cells"]:
        pieces.append((cell["id"], "".join(cell["source"])))
        for output in cell.get("outputs", []):
            pieces.append((f"{cell['id']} (output)", _output_text(output)))
    module = EXERCISES / f"lesson{lesson_number(path):02d}.py"
    if module.exists():
        pieces.append((module.name, module.read_text()))
    return pieces


def forward_references(path: Path) -> list[str]:
    own = lesson_number(path)
    found = []
    for where, text in learner_text(path):
        for match in LESSONS.finditer(text):
            named = [int(n) for n in re.findall(r"\d+", match.group(0))]
            if max(named) > own:
                found.append(f"{where}: {_context(text, match)}")
        for match in PROMISES.finditer(text):
            found.append(f"{where}: {_context(text, match)}")
    return found


def _context(text: str, match: re.Match) -> str:
    start, end = max(0, match.start() - 50), min(len(text), match.end() + 30)
    return " ".join(text[start:end].split())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_names_a_later_one(path: Path) -> None:
    found = forward_references(path)
    assert not found, f"{path.name} points forward:\n" + "\n".join(found)


def test_the_scanner_finds_forward_references_and_lets_pointers_back_pass(tmp_path: Path) -> None:
    cells = [
        {"id": "l05-01", "cell_type": "markdown", "source": ["As lesson 02 showed, paths add up."]},
        {"id": "l05-02", "cell_type": "markdown", "source": ["Lessons 3 and 14 use it; see the next lesson."]},
        {"id": "l05-03", "cell_type": "code", "source": ["x = 1"],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["more in lesson 12\n"]}]},
    ]
    path = tmp_path / "05-sample.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    found = forward_references(path)
    assert [f.split(":")[0] for f in found] == ["l05-02", "l05-02", "l05-03 (output)"]
