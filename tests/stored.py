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
