"""Running a piece of source as a notebook cell would run it.

IPython keeps each cell's text in ``linecache``, which is where a check reads an
answer's source (`backproplab.course.sources`). Tests that build answers from
text run them the same way, so the checks can read them as they read a learner's.
"""

from __future__ import annotations

import itertools
import linecache
from typing import Any

_COUNT = itertools.count(1)


def run_cell(source: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """``exec`` ``source`` in ``namespace`` as a cell of its own; returns the namespace."""
    filename = f"<test cell {next(_COUNT)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace
