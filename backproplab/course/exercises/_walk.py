"""Running a learner's graph walk (lessons 01 and 02): ``bl.describe`` watched, and
backward passes refused or counted, so a walk that lets torch do the work is named."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from ... import graph
from ._spec import Report, attempt, count_autograd, forbid_autograd
from ._spec import failed as _fail

__all__ = ["run_walk"]


@contextlib.contextmanager
def _watch_describe(calls: list[str]) -> Iterator[None]:
    """Note every call of ``bl.describe`` inside the block, whatever name it is called by."""
    code = graph.describe.__code__
    previous = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            calls.append("bl.describe")

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


def run_walk(name: str, answer: Any, *arguments: Any, reason: str | None = None
         ) -> tuple[Any, Report | None]:
    """Call ``answer(*arguments)`` with ``bl.describe`` watched, and backward passes refused
    (with ``reason``) or, without one, counted and reported as the wrong method.

    Returns (result, None), or (None, a failed Report saying what went wrong).
    """
    described: list[str] = []
    passes = contextlib.nullcontext(None) if reason else count_autograd()
    with (forbid_autograd(reason) if reason else contextlib.nullcontext()), \
            passes as seen, _watch_describe(described):
        result, failure = attempt(name, answer, *arguments, not_callable=(
            f"expected a function, got {type(answer).__name__}. The check calls it on new "
            "graphs, so it has to be a function."))
    if failure is not None:
        return None, failure
    if described:
        return None, _fail(name, "your code called bl.describe, which walks the graph for you. "
                                 "This exercise asks you to walk it yourself, with "
                                 "next_functions and .variable.")
    if seen is not None and seen.reverse:
        return None, _fail(name, f"your code ran a backward pass ({seen.calls[0]}). Walking the "
                                 "graph needs none: start at .grad_fn and follow "
                                 "next_functions.", "autograd")
    return result, None

