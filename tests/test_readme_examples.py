"""The README's examples are the real thing: code copied from the lessons, real output.

When a lesson's exercise or the release command's output changes, these tests
fail until the README says the same again.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat

from backproplab import course

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TEACHING = README[README.index("## Teaching with backproplab"):]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", text, flags=re.S)


def _cell(lesson: str, grade_id: str):
    nb = nbformat.read(ROOT / "notebooks" / lesson, as_version=4)
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_the_exercise_example_is_lesson_2s_cells():
    python = _blocks(TEACHING, "python")
    solution, check = _cell("02-chain-rule.ipynb", "l02-cubic"), _cell(
        "02-chain-rule.ipynb", "l02-cubic-check")
    assert python[0] == solution.source
    assert python[1] == check.source
    metadata = [json.loads(block) for block in _blocks(TEACHING, "json")[:2]]
    assert metadata == [{"nbgrader": dict(solution.metadata["nbgrader"])},
                        {"nbgrader": dict(check.metadata["nbgrader"])}]


def test_the_hidden_test_example_is_lesson_1s_check_cell():
    hidden = next(b for b in _blocks(TEACHING, "python") if "HIDDEN TESTS" in b)
    assert hidden == _cell("01-computational-graph.ipynb", "l01-saved-cos-check").source


def test_the_release_output_is_what_release_prints(tmp_path: Path):
    shown = re.search(r"```\n(released .*?)\n```", TEACHING, flags=re.S).group(1)
    lines = []
    course.release(ROOT / "notebooks", tmp_path / "student", log=lines.append)
    expected = [line for line in shown.splitlines() if line != "..."]
    assert lines[: len(expected)] == expected
    shutil.rmtree(tmp_path / "student")
