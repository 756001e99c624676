"""Lesson 07's corrected facts, read from the stored outputs, so that an edit cannot bring
back the old claims: saved tensors dominate a training step's memory only at large batches,
and retain_graph=True does not protect a saved tensor changed in place."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "07-retain-graph.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}




def _memory_table(cells) -> dict[int, list[int]]:
    """batch -> [parameters, gradients, Adam state, saved] bytes, from the stored table."""
    rows = {}
    for line in _text(cells["l07-46"]).splitlines():
        numbers = re.findall(r"[\d,]+(?=\s|%|$)", line)
        if line.strip() and line.split()[0].isdigit():
            values = [int(n.replace(",", "")) for n in numbers]
            rows[values[0]] = values[1:5]
    return rows


def test_saved_tensors_are_a_sliver_at_batch_one(cells):
    rows = _memory_table(cells)
    params, grads, state, saved = rows[1]
    assert grads == params and state >= 2 * params  # counted from the tensors themselves
    assert saved < 0.01 * (params + grads + state)


def test_saved_tensors_dominate_at_large_batch(cells):
    rows = _memory_table(cells)
    params, grads, state, saved = rows[max(rows)]
    assert saved > params + grads + state
    # Saved bytes grow with the batch, the rest does not.
    assert rows[max(rows)][:3] == rows[1][:3]
    assert rows[max(rows)][3] == max(rows) * rows[1][3]


def test_prose_quotes_the_computed_bytes(cells):
    rows = _memory_table(cells)
    prose = cells["l07-48"].source
    fixed = sum(rows[1][:3])
    assert f"{fixed:,}" in prose and f"{rows[1][3]:,}" in prose
    for batch, (p, g, s, saved) in rows.items():
        share = round(100 * saved / (p + g + s + saved))
        if batch >= 256:
            assert f"{share}%" in prose, (batch, share)


def test_the_unconditional_claim_is_gone(cells):
    for cell in cells.values():
        if cell.cell_type == "markdown":
            assert "most of the memory a training step uses" not in cell.source


def test_retain_graph_does_not_protect_against_in_place_changes(cells):
    setup = _text(cells["l07-41"])
    assert "w._version = 0" in setup and "w._version = 1" in setup
    assert "raises-exception" in cells["l07-43"].metadata.get("tags", [])
    error = _text(cells["l07-43"])
    assert "RuntimeError" in error and "modified by an inplace operation" in error
    assert "is at version 1; expected version 0" in error
    assert "retain_graph=True" in cells["l07-41"].source
