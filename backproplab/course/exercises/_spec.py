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
- `close` (with a tolerance named in `TOLERANCE`) and `relative` measure how far a
  result is from the expected one, the same way in every lesson; `Task` words a
  by-hand exercise whose answer is not a gradient;
- `run_by_hand` and `judge_runs` split `check_by_hand` for a method exercise with a
  gradient worked out by hand inside it: its runs recorded where the answer runs (as
  plain data, `plain`), and judged by the by-hand judge in the grader;
- `BY_HAND`, `METHOD` and `ENGINE` are the vocabularies an answer's source is read
  against (`backproplab.course.rules`): tensor arithmetic, torch's public API, and
  torch's API with classes that overload arithmetic (an engine the exercise builds).
  ``X.allowing(...)`` adds what one exercise needs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ...check import Check, Report, compare
from ...custom_function import check_function
from ...values import aligned, as_value, close_mask, finite_abs, relative
from ...watch import AutogradForbidden, count_autograd, forbid_autograd
from ..byhand import ByHand, Ran, Task, check_by_hand, judge_by_hand, run_answer, seeded
from ..grading import Method, Prediction, failure, is_failure, same
from ..rules import BY_HAND, METHOD
from ..slips import fresh

ENGINE = METHOD.allowing(engine=True)
# What a method exercise's mismatch that no common mistake explains says to try next (the
# default speaks of derivatives, which a method exercise does not ask for).
METHOD_ADVICE = ("Run your code on a tiny case in a scratch cell and follow each step of it "
                 "against what the exercise asks.")

__all__ = [
    "BY_HAND",
    "ENGINE",
    "METHOD",
    "METHOD_ADVICE",
    "vjp",
    "randint",
    "AutogradForbidden",
    "ByHand",
    "Check",
    "Method",
    "Prediction",
    "Report",
    "as_plain",
    "attempt",
    "call_answer",
    "compared",
    "every_case",
    "kind_of",
    "failure",
    "is_failure",
    "judge_runs",
    "plain",
    "run_by_hand",
    "same",
    "seeded",
    "check_by_hand",
    "check_function",
    "compare",
    "count_autograd",
    "failed",
    "failed_words",
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


def as_plain(value: Any, depth: int = 0) -> Any:
    """What an answer returned, as plain data an observation can hold: tensors (detached,
    dense, on the CPU), numbers, words, None, and lists, tuples and dicts with str keys of
    them; anything else as ``{"returned": its type's name}``.

    >>> as_plain([torch.ones(2, requires_grad=True), 3, object()])
    [tensor([1., 1.]), 3, {'returned': 'object'}]
    """
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        t = value.detach().cpu()
        return (t.to_dense() if t.layout != torch.strided else t).clone()
    if value is None or type(value) in (bool, int, float, complex, str):
        return value
    if type(value) in (list, tuple) and depth < 4:
        return type(value)(as_plain(v, depth + 1) for v in value)
    if type(value) is dict and depth < 4 and all(type(k) is str for k in value):
        return {k: as_plain(v, depth + 1) for k, v in value.items()}
    return {"returned": type(value).__name__}


def kind_of(value: Any) -> str:
    """What a value of an observation is, in a word: the type `as_plain` described, or its own.

    >>> kind_of(as_plain(object())), kind_of([1.0])
    ('object', 'list')
    """
    if isinstance(value, dict) and set(value) == {"returned"}:
        return str(value["returned"])
    return type(value).__name__


def compared(label: str, got: Any, want: Any, expected: str, tol: str = "float64",
             where: str = "") -> dict[str, str]:
    """Why ``got`` is not `close` to ``want``, as a `failure`: `compare`'s words on the
    value labelled ``label`` (after ``where``) with the tolerance named ``tol``, and its
    verdict (``mismatch``, ``shape``, ...); or, when ``got`` is not a value at all, that
    ``expected`` was expected and what came instead.

    >>> compared("dW", torch.ones(2), torch.zeros(2), "a tensor")["failed"]
    'mismatch'
    >>> compared("dW", "two", torch.zeros(2), "a tensor", where="on new inputs")["detail"]
    'on new inputs: expected a tensor, got str'
    """
    lead = f"{where}: " if where else ""
    rtol, atol = TOLERANCE[tol]
    w = as_value(want, "want").tensor
    scale = max(1.0, float(finite_abs(w).max())) if w.numel() else 1.0  # as `close` scales
    try:  # the check made the reference itself: no .grad of it can have accumulated
        check = compare(label, got, want, rtol=rtol, atol=atol * scale,
                        accumulation=False, advice=METHOD_ADVICE).checks[0]
    except (TypeError, ValueError):  # not a tensor, a number nor a list of numbers
        return failure("fail", f"{lead}expected {expected}, got {kind_of(got)}")
    return failure(check.verdict, lead + check.message)


def every_case(agree: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Agreement of two lists of cases (one trial's), ``agree`` judging each pair."""
    return lambda got, want: (isinstance(got, list) and len(got) == len(want)
                              and all(agree(g, w) for g, w in zip(got, want, strict=True)))


def randint(low: int, high: int, gen: torch.Generator) -> int:
    """One integer from ``low`` up to ``high`` (excluded), drawn from ``gen``: a size of a
    check's fresh inputs.

    >>> randint(3, 4, torch.Generator().manual_seed(0))
    3
    """
    return int(torch.randint(low, high, (1,), generator=gen))


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


# --------------------------------------------------------------------------
# The kit's measures: one closeness test with named tolerances, one relative error
# --------------------------------------------------------------------------

# (rtol, atol) by name. atol is in units of the expected value's largest entry (at least
# 1), so that one name fits values of any size.
TOLERANCE: dict[str, tuple[float, float]] = {
    "formula": (1e-12, 1e-15),  # a formula evaluated in float64: equal to round-off
    "float64": (1e-10, 1e-12),  # float64 results reached another way (sums in another order)
    "float32": (1e-6, 1e-9),  # as close as float32 arithmetic, or a looser method, gets
}


def close(got: Any, want: Any, tol: str = "float64", *, each: bool = False) -> Any:
    """Whether ``got`` agrees with ``want`` (a tensor or a number) to the tolerance named
    ``tol`` (a key of `TOLERANCE`): the same shape, and every entry within it. False for
    a value that is not a number or tensor (None, a string). With ``each``, the entry by
    entry verdict (a boolean tensor), to say where they differ.

    >>> close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-13]))
    True
    >>> close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1]), "float32", each=True)
    tensor([ True, False])
    """
    if tol not in TOLERANCE:
        raise ValueError(f"tol: expected one of {', '.join(TOLERANCE)}, got {tol!r}")
    rtol, atol = TOLERANCE[tol]
    try:
        a, b = aligned(as_value(got, "got"), as_value(want, "want"))
    except TypeError:
        if each:
            raise
        return False
    if a.shape != b.shape:
        if each:
            raise ValueError(f"got: expected the shape {tuple(b.shape)} of want, got "
                             f"{tuple(a.shape)}")
        return False
    scale = max(1.0, float(finite_abs(b).max())) if b.numel() else 1.0
    mask = close_mask(a, b, rtol, atol * scale)
    return mask if each else bool(mask.all())


__all__ += ["TOLERANCE", "Task", "close", "relative"]
def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain data, what can cross the grade's sandbox: tensors detached and
    copied, numbers, words and None as they are, lists, tuples and dicts with str keys of
    them (four levels deep); anything else as the words saying what it was. The kernel's
    feedback records the same, so that both judge the same thing.

    >>> plain((torch.ones(1, requires_grad=True), None, object()))
    (tensor([1.]), None, '<a object object>')
    """
    if isinstance(value, torch.Tensor):
        plain_tensor = type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout \
            == torch.strided
        return value.detach().clone() if plain_tensor else f"<a {type(value).__name__} object>"
    if value is None or type(value) in (bool, int, float, complex, str):
        return value
    if type(value) in (list, tuple) and depth < 4:
        return type(value)(plain(v, depth + 1) for v in value)
    if type(value) is dict and depth < 4 and all(type(k) is str for k in value):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    return f"<a {type(value).__name__} object>"


def run_by_hand(fn: Callable, cases: list, *, name: str = "your function",
                params: tuple[str, ...] | None = None) -> list | dict:
    """``fn`` run on each case as `check_by_hand` runs an answer (`run_answer`: autograd
    off and refused, inputs watched for nudges), recorded as plain data for `judge_runs`;
    it stops at the first run that failed, as the judge does. A run that called autograd,
    is not written yet or made a numerical estimate ends the exercise whatever the values:
    it comes back as a `failure` of that kind, in the by-hand judge's own words (which it
    gives before it compares anything).

    >>> run_by_hand(lambda x: 2 * x, [(torch.ones(1),)])[0][0]
    (tensor([2.]),)
    """
    if params is None:  # the inputs' names, for the words of a refusal
        parameters = inspect.signature(fn).parameters.values()
        params = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY,
                                                                 p.POSITIONAL_OR_KEYWORD))
    records = []
    for case in cases:
        ran = run_answer(fn, fresh(case))
        got = ran.got if isinstance(ran.got, (tuple, list)) else (ran.got,)
        record = [plain(tuple(got)), ran.failure, ran.detail, ran.nudged, list(ran.warnings),
                  ran.largest]
        if ran.failure in ("autograd", "missing", "estimate"):
            told = judge_runs([record, record], lambda *args: None, [case, case], name=name,
                              params=params).checks[0]
            return failure(told.verdict, told.message)
        records.append(record)
        if ran.failure is not None:
            break
    return records


def judge_runs(records: list, reference: Callable[..., Any] | list, cases: list | None = None,
               **options: Any) -> Report:
    """The by-hand judge (`backproplab.course.byhand.judge_by_hand`) on the runs
    `run_by_hand` recorded: case k is trial k, and ``reference`` is called on a copy of each
    case once its run is judged; or, without ``cases``, ``reference`` is the list of the
    reference's results, run by run (enough for a verdict, not for the words of a slip).
    ``options`` are the judge's (``name``, ``outputs``, ``mistakes``, ``advice``, ``params``).
    """
    runs = iter(records)
    if cases is None:
        results, cases = iter(reference), [()] * len(reference)
        reference = lambda *args: next(results)  # noqa: E731 - the results, in turn

    def call(args: Any) -> Ran:
        got, failed, detail, nudged, warned, largest = next(runs)
        return Ran(got, failed, detail, nudged, tuple(warned), largest)

    params = options.pop("params", ())
    replay = ByHand(options.pop("name"), reference, lambda gen: tuple(cases[gen.initial_seed()]),
                    trials=len(cases), **options)
    return judge_by_hand(replay, call, seed=0, params=params)


def failed_words(report: Report, name: str) -> str:
    """The words of a report's first failed check, after that check's name when it is not
    ``name`` (the exercise's own): ``a.grad: on new inputs ...``."""
    check = next(c for c in report.checks if not c.ok)
    return check.message if check.name == name else f"{check.name}: {check.message}"
