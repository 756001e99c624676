"""The vocabulary the lesson modules use to describe their exercises and questions,
and the two small helpers their method checks share."""

from .._report import Check, Report
from ..exercise import ByHand, Method, Prediction

__all__ = ["ByHand", "Method", "Prediction", "failed", "first_line"]


def failed(name: str, message: str, verdict: str = "fail") -> Report:
    """A report of one failed check, as a method check returns it."""
    return Report((Check(name, False, verdict, message),))


def first_line(err: BaseException) -> str:
    """An error's first line (its type when it has no message), for a short report."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
