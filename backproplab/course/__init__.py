"""The course: exercises graded, lessons handed out. It imports the lab, never the reverse.

- ``grading``     check_exercise, check_by_hand, check_prediction, reveal: how the
                  lessons' exercises and "predict, then run" questions are graded
- ``exercises``   lessonNN.py (or a package lessonNN/): each lesson's references, input
                  makers, slips and predictions, in the vocabulary of ``exercises/_spec.py``
- ``assignment``  the exercise format (nbgrader's markers); student and learner versions
- ``handout``     writing them out: ``backproplab release`` and ``learn``
- ``audit``       what in submitted notebooks tampers with grading
- ``distributed`` lesson 16's experiments, run in worker processes
- ``site``        the course as a static website: ``backproplab site``
- ``cli``         the command line behind ``backproplab``

The names of ``assignment`` are also found here (``backproplab.course.student_version``),
where they lived before this package was split; they load on first use, so
``backproplab --help`` never waits for nbformat.
"""

import importlib
import importlib.util

__all__ = ["assignment", "audit", "cli", "distributed", "exercises", "grading", "handout", "site"]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    # A submodule, public or not (``from . import secret`` asks here first): importing
    # assignment to look for it there would load nbformat, a second on every first check.
    if name in __all__ or importlib.util.find_spec(f".{name}", __name__) is not None:
        return importlib.import_module(f".{name}", __name__)
    assignment = importlib.import_module(".assignment", __name__)
    try:
        return getattr(assignment, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
