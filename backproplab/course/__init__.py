"""The course: exercises graded, lessons handed out. It imports the lab, never the reverse.

- ``grading``     check_exercise, check_prediction, reveal: the lessons' exercises and
                  "predict, then run" questions, checked by id
- ``exercises``   lessonNN.py (or a package lessonNN/): each lesson's references, input
                  makers, slips and predictions, in the vocabulary of ``exercises/_spec.py``
- ``assignment``  the exercise format (nbgrader's markers); student and learner versions
- ``handout``     writing them out: ``backproplab release`` and ``learn``
- ``audit``       what in submitted notebooks tampers with grading
- ``distributed`` lesson 23's experiments, run in worker processes
- ``site``        the course as a static website: ``backproplab site``
- ``cli``         the command line behind ``backproplab``

Each loads on first use (``backproplab.course.grading``), so ``backproplab --help``
never waits for torch or nbformat.
"""

import importlib
import importlib.util

__all__ = ["assignment", "audit", "cli", "distributed", "exercises", "grading", "handout",
           "site"]


def __getattr__(name: str):
    # A submodule, public or not, loaded when first asked for (``from . import sandbox``
    # asks here first, and gets an AttributeError when there is no such attribute yet).
    if not name.startswith("__") and importlib.util.find_spec(f".{name}", __name__) is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
