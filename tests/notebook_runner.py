"""Run a notebook in a fresh kernel of the current environment.

Shared by the tests that execute lessons in altered forms (wrong answers,
student versions), so they all start kernels the same way as nbval does.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


def run(nb: nbformat.NotebookNode, cwd: Path = NOTEBOOKS, *, allow_errors: bool = True,
        timeout: int = 180) -> nbformat.NotebookNode:
    """Execute ``nb`` in place and return it; errors stay in the cell outputs."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def error_of(cell: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """The error output of a code cell, or None when it ran cleanly."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out
    return None


def grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
