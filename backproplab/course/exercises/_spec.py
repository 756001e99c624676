"""The vocabulary the lesson modules write their exercises and questions in.

A lesson module describes each exercise as a `ByHand` (a gradient by hand,
checked by `check_by_hand`) or a `Method` (a check of how the answer was
reached), and each "predict, then run" question as a `Prediction`. A
method check builds its verdict from the same few pieces, all here:

- `attempt` calls the learner's function and turns what can go wrong (not a
  function, not written yet, autograd where it is refused, an error) into a
  failed report, so every check words these the same way;
- `passed` and `failed` make a report of one check;
- `compare`, `count_autograd`, `forbid_autograd`, `check_by_hand` and
  `check_function` are the tools a check uses on the learner's results;
- `vjp` is a reference for a by-hand step of a backward pass: autograd's answer;
- `BY_HAND`, `METHOD` and `ENGINE` are the vocabularies an answer's source is read
  against (`backproplab.course.rules`): tensor arithmetic, torch's public API, and
  torch's API with classes that overload arithmetic (an engine the exercise builds).
  ``X.allowing(...)`` adds what one exercise needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...check import Check, Report, compare
from ...custom_function import check_function
from ...watch import AutogradForbidden, count_autograd, forbid_autograd
from ..byhand import check_by_hand
from ..grading import ByHand, Method, Prediction, failure, is_failure, same
from ..rules import BY_HAND, METHOD

ENGINE = METHOD.allowing(engine=True)

__all__ = [
    "BY_HAND",
    "ENGINE",
    "METHOD",
    "vjp",
    "AutogradForbidden",
    "ByHand",
    "Check",
    "Method",
    "Prediction",
    "Report",
    "attempt",
    "call_answer",
    "failure",
    "is_failure",
    "same",
    "check_by_hand",
    "check_function",
    "compare",
    "count_autograd",
    "failed",
    "first_line",
    "forbid_autograd",
    "passed",
]


def passed(name: str, message: str) -> Report:
    """A report of one passed check, as a method check returns it."""
    return Report((Check(name, True, "pass", message),))


def failed(name: str, message: str, verdict: str = "fail") -> Report:
    """A report of one failed check, as a method check returns it."""
    return Report((Check(name, False, verdict, message),))


def first_line(err: BaseException) -> str:
    """An error's first line (its type when it has no message), for a short report."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def attempt(
    name: str,
    answer: Any,
    *args: Any,
    what: str = "the function",
    not_callable: str | None = None,
    raised: Callable[[Exception], str | Report] | None = None,
) -> tuple[Any, Report | None]:
    """Call the learner's ``answer(*args)``: (its result, None), or (None, the failed
    report) when it is not a function, not written yet (``what`` still raises
    NotImplementedError), refused by `forbid_autograd`, or raises. ``not_callable``
    and ``raised`` word the first and the last for the exercise at hand (``raised``
    may also return the whole failed report, to give it another verdict).

    >>> attempt("f", lambda x: 2 * x, 3)
    (6, None)
    >>> def blank(x):
    ...     raise NotImplementedError
    >>> print(attempt("f", blank, 3)[1])
    ✗ f: not written yet: the function still raises NotImplementedError.
    """
    if not callable(answer):
        return None, failed(name, not_callable or f"expected a function, got "
                                                  f"{type(answer).__name__}.")
    try:
        return answer(*args), None
    except AutogradForbidden as err:
        return None, failed(name, str(err), "autograd")
    except NotImplementedError:
        return None, failed(name, f"not written yet: {what} still raises NotImplementedError.",
                            "missing")
    except Exception as err:  # the learner's bug, told as a failed check
        told = raised(err) if raised is not None else f"raised {type(err).__name__}: {err}"
        return None, told if isinstance(told, Report) else failed(name, told, "error")


def call_answer(
    answer: Any,
    *args: Any,
    what: str = "the function",
    not_callable: str | None = None,
    raised: Callable[[Exception], str | dict] | None = None,
) -> tuple[Any, dict | None]:
    """`attempt` for a method exercise's ``observe`` step: (the answer's result, None), or
    (None, a `failure`) when it is not a function, not written yet, refused by
    `forbid_autograd`, or raises. ``raised`` may word the error (a str) or return a whole
    `failure` (to give it another verdict).

    >>> call_answer(lambda x: 2 * x, 3)
    (6, None)
    >>> call_answer(len, 3)[1]["failed"]
    'error'
    """
    if not callable(answer):
        return None, failure("fail", not_callable or f"expected a function, got "
                                                   f"{type(answer).__name__}.")
    try:
        return answer(*args), None
    except AutogradForbidden as err:
        return None, failure("autograd", str(err))
    except NotImplementedError:
        return None, failure("missing", f"not written yet: {what} still raises "
                                        "NotImplementedError.")
    except Exception as err:  # the learner's bug, told as a failed check
        told = raised(err) if raised is not None else f"raised {type(err).__name__}: {err}"
        return None, told if is_failure(told) else failure("error", str(told))


def vjp(step: Callable, wrt, *upstream):
    """autograd's gradients at ``wrt`` of ``step(*wrt)``, given the gradients
    ``upstream`` arriving at its output(s): one step of a backward pass, as the
    reference of a by-hand exercise computes it.

    >>> x = torch.tensor([1.0, 2.0])
    >>> vjp(lambda t: t * t, [x], torch.ones(2))
    tensor([2., 4.])
    """
    wrt = [t.detach().clone().requires_grad_() for t in wrt]
    out = step(*wrt)
    outs = out if isinstance(out, tuple) else (out,)
    grads = torch.autograd.grad(outs, wrt, upstream)
    return grads if len(grads) > 1 else grads[0]
