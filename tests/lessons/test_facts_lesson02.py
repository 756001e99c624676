"""Facts lesson 02 states, checked against its stored outputs.

The text about the traced graph matches its figure (saved tensors are listed as
the pass found them, and shown freed only by a description made afterwards),
and no cell before a prediction answers it.
"""

from __future__ import annotations

import json

from notebook_runner import NOTEBOOKS

LESSON = NOTEBOOKS / "02-chain-rule.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}


def _text(cell) -> str:
    return "".join(cell["source"])


def _printed(cell_id: str) -> str:
    return "".join("".join(o.get("text", "")) for o in BY_ID[cell_id]["outputs"]
                   if o["output_type"] == "stream")


def _markdown_before(solution_grade_id: str) -> str:
    at = next(i for i, c in enumerate(CELLS)
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == solution_grade_id)
    return "\n".join(_text(c) for c in CELLS[:at] if c["cell_type"] == "markdown")


def test_the_figure_text_says_what_the_figure_shows():
    figure_text = _text(BY_ID["l02-18"])
    assert "freed" not in figure_text  # the drawing lists the saved tensors as the pass began
    after = _printed("l02-44")
    assert after.count("(freed)") == 3  # self of PowBackward0; self and other of MulBackward0


def test_paths_are_not_said_to_add_up_before_the_question():
    before = _markdown_before("l02-predict-paths").lower()
    assert "add up" not in before and "summed" not in before and "1 + 1" not in before


def test_exactness_is_not_said_before_its_question():
    before = _markdown_before("l02-predict-match")
    assert "Exact:" not in before and "Exact," not in before
