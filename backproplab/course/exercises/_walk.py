"""Running a learner's graph walk (lessons 01 and 02): ``bl.describe`` watched, and
backward passes refused or counted, so a walk that lets torch do the work is named.
What it finds is a `failure` (plain data), never a verdict: the judge makes that."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ... import graph
from ._spec import call_answer, count_autograd, failure, forbid_autograd

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


def run_walk(answer: Any, *arguments: Any, reason: str | None = None,
             raised: Callable[[Exception], str] | None = None) -> tuple[Any, dict | None]:
    """Call ``answer(*arguments)`` with ``bl.describe`` watched, and backward passes refused
    (with ``reason``) or, without one, counted and reported as the wrong method.
    ``raised`` words an error the answer raised.

    Returns (result, None), or (None, a `failure` saying what went wrong).
    """
    described: list[str] = []
    passes = contextlib.nullcontext(None) if reason else count_autograd()
    with (forbid_autograd(reason) if reason else contextlib.nullcontext()), \
            passes as seen, _watch_describe(described):
        result, failed = call_answer(answer, *arguments, raised=raised, not_callable=(
            f"expected a function, got {type(answer).__name__}. The check calls it on new "
            "graphs, so it has to be a function."))
    if failed is not None:
        return None, failed
    if described:
        return None, failure("fail", "your code called bl.describe, which walks the graph for "
                                     "you. This exercise asks you to walk it yourself, with "
                                     "next_functions and .variable.")
    if seen is not None and seen.reverse:
        return None, failure("autograd", f"your code ran a backward pass ({seen.calls[0]}). "
                                         "Walking the graph needs none: start at .grad_fn and "
                                         "follow next_functions.")
    return result, None
