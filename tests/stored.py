"""Reading what a lesson stored: the text of a cell's outputs, as the facts tests need it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def output_text(cell: Mapping[str, Any]) -> str:
    """Everything a cell printed or showed as text: streams, values, and errors as
    "Name: message", one output after another."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            text = out["text"]
            parts.append(text if isinstance(text, str) else "".join(text))
        elif out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        else:
            text = out.get("data", {}).get("text/plain", "")
            parts.append(text if isinstance(text, str) else "".join(text))
    return "\n".join(parts)


def flat_text(cell: Mapping[str, Any]) -> str:
    """`output_text` with line breaks and runs of spaces as single spaces: reports wrap to
    the lab's width, so a phrase may be split over two lines."""
    return " ".join(output_text(cell).split())


def printed(cell: Mapping[str, Any]) -> str:
    """What a cell printed (its stream outputs), joined as they came."""
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream")


def markdown_before(cells: list[Mapping[str, Any]], grade_id: str) -> str:
    """The prose a learner has read when reaching the cell graded as ``grade_id``."""
    at = next(i for i, c in enumerate(cells)
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join("".join(c["source"]) for c in cells[:at] if c["cell_type"] == "markdown")
