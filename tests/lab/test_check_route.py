"""How far a reader has to follow one check: a lesson-2 answer through
``bl.check_exercise("l02-cubic", ...)`` enters at most six files of the package.

The files are collected with ``sys.setprofile`` (every call into a function of a
package file), after one warm-up run so that imports made on first use are not
counted. Run with ``-s`` to see the route.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

import backproplab as bl

PACKAGE = Path(bl.__file__).parent
MAX_FILES = 6


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
def test_a_lesson_2_check_crosses_at_most_six_files(answer):
    route = _route(answer)
    print(f"\n{answer.__name__}: {len(route)} files: " + " -> ".join(route))
    assert "backproplab/course/grading.py" in route  # the check ran and was seen
    assert len(route) <= MAX_FILES, route
