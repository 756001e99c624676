"""How far a reader has to follow one check: a lesson-2 answer through
``bl.check_exercise("l02-cubic", ...)`` enters at most twelve modules of the package,
together at most 3,300 lines of code (each module reads in one sitting: at most 450).

The route is the check's own steps, one module each: the exercise (grading, the lesson's
module), the answer's source read (live, the live objects' reading, with the cell-reading
helpers of sources) against the vocabulary (rules), the answer run
with autograd refused and estimates watched (byhand, watch, nudges), and the verdict
(slips, check, values). The watch for estimates follows every moved copy of the inputs (a
large step, SPSA, Richardson and fits are caught, not only tiny steps): about 250 of those
lines. The reading judges each name by what it is, not how it is spelt (`allowlist`:
``torch.os`` is ``os``): its own module. The live reading, once part of sources, became
the twelfth when it learned to read records (a dataclass, a named tuple) and torch's
functions held as values, which took sources past its 450 lines. The "predict, then run"
questions, which no exercise's check calls, left grading for a module of their own
(predictions): the room bought fewer refusals of honest code (a tensor method held by a
partial, an enum, a dtype's itemsize, exp(u) beside exp(2u), comparisons in a search).
They came back into grading with the hidden seeds (the course floor back to the 18
modules it had), and a third hunt for honest styles added about 120 lines of reading
(builtins and type aliases held by name, attributes set outside a class, whole-number
copies, %%time cells): the budget went from 3,000 to 3,300 lines.
The files are collected with
``sys.setprofile`` (every call into a function of a package file), after one warm-up run
so that imports made on first use are not counted. Run with ``-s`` to see the route.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from codelines import code_lines

import backproplab as bl

PACKAGE = Path(bl.__file__).parent
MAX_FILES = 12
MAX_LINES = 3300


def _right(x):
    return 3 * x**2 - 8 * x


def _slip(x):  # the lesson's first named mistake: 4x instead of 8x
    return 3 * x**2 - 4 * x


def _route(answer) -> list[str]:
    """The package files the check enters, in the order it first enters them."""
    def run():
        with contextlib.suppress(AssertionError), contextlib.redirect_stdout(io.StringIO()):
            bl.check_exercise("l02-cubic", answer)

    run()  # warm-up: the lesson module, torch's lazy imports
    seen: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)) and name not in seen:
                seen.append(name)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return [str(Path(f).relative_to(PACKAGE.parent)) for f in seen]


@pytest.mark.parametrize("answer", [_right, _slip], ids=["right", "named-slip"])
def test_a_lesson_2_check_crosses_at_most_twelve_modules_and_3300_lines(answer):
    route = _route(answer)
    lines = sum(len(code_lines((PACKAGE.parent / f).read_text(encoding="utf-8")))
                for f in route)
    print(f"\n{answer.__name__}: {len(route)} files, {lines} lines: " + " -> ".join(route))
    assert "backproplab/course/grading.py" in route  # the check ran and was seen
    assert len(route) <= MAX_FILES, route
    assert lines <= MAX_LINES, (lines, route)
