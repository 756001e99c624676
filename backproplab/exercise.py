"""Checks for exercises: gradients worked out by hand, methods, and predictions.

An exercise that says "by hand" asks for a *function*, not a number, so the
check can call it on inputs the learner has never seen. `check_by_hand` does
that: it makes fresh random inputs, runs the learner's function with autograd
switched off (any backward pass raises, with a message saying why), runs the
reference on the same inputs, and compares. A hard-coded answer fails because
it stays the same while the inputs change; a call to autograd fails because it
is refused.

`count_autograd` counts the backward passes a piece of code runs, for the
lessons where the method is the point (accumulating, zeroing, keeping the
graph). `check_prediction` grades a "predict, then run" guess and explains the
right answer when the guess is wrong.

>>> import torch, backproplab as bl
>>> def grad_by_hand(x):            # d/dx of (x**2).sum()
...     return 2 * x
>>> print(bl.check_by_hand(
...     grad_by_hand,
...     reference=lambda x: torch.func.grad(lambda t: (t**2).sum())(x),
...     make_inputs=lambda gen: (torch.randn(3, generator=gen),),
...     name="dz/dx",
... ))
✓ dz/dx: matches autograd on 3 new random inputs
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.forward_ad as forward_ad
from torch.autograd.variable import Variable

from ._diagnose import _type_name
from ._report import Check, Report
from .check import compare

__all__ = [
    "AutogradForbidden",
    "AutogradCount",
    "check_by_hand",
    "check_prediction",
    "count_autograd",
    "forbid_autograd",
]


class AutogradForbidden(AssertionError):
    """Raised by any autograd pass inside `forbid_autograd`.

    It is an ``AssertionError`` so that a graded cell fails the way any other
    failed check does.
    """


# --------------------------------------------------------------------------
# Watching autograd: every reverse pass (``Tensor.backward``,
# ``torch.autograd.grad``, and ``torch.func``/``torch.autograd.functional``
# built on them) goes through one engine object, and every forward-mode pass
# starts with ``forward_ad.make_dual``. Both are swapped for the duration of a
# ``with`` block and always restored.
# --------------------------------------------------------------------------


def _caller_api(direct: str = "autograd") -> str:
    """The torch function the learner's code called, e.g. ``Tensor.backward()``;
    ``direct`` when the learner called the watched function itself."""
    frame = sys._getframe(2)
    outermost = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("torch") or module.startswith("backproplab.exercise"):
            if module.startswith("torch"):
                outermost = frame
        elif outermost is not None:
            break
        frame = frame.f_back
    if outermost is None:
        return direct
    module = outermost.f_globals.get("__name__", "")
    name = outermost.f_code.co_name
    if module == "torch._tensor":
        return f"Tensor.{name}()"
    if module.startswith("torch._functorch") or module.startswith("torch.func"):
        return _transform_name(outermost.f_code)
    if module == "torch.autograd" or module == "torch.autograd.__init__":
        return f"torch.autograd.{name}"
    return f"{module}.{name}"


_TRANSFORMS = {"grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
               "linearize"}


def _transform_name(code: Any) -> str:
    """``torch.func.jacfwd`` for the frames of ``jacfwd(f)(x)``, so a check can tell a
    full Jacobian from one ``jvp``. The transform is the function whose closure runs:
    ``jacfwd.<locals>.wrapper_fn``, or ``_vjp_with_argnums...`` for a pullback."""
    outer = getattr(code, "co_qualname", code.co_name).split(".")[0]  # co_qualname: 3.11+
    name = outer.lstrip("_").removesuffix("_with_argnums")
    if name in _TRANSFORMS:
        return f"torch.func.{name}"
    return "a torch.func transform (grad, vjp, jvp, jacrev, jacfwd, ...)"


class _EngineWatch:
    """Stands in for autograd's engine: counts or refuses reverse passes."""

    def __init__(self, engine: Any, on_pass: Callable[[str], None]) -> None:
        self._engine = engine
        self._on_pass = on_pass

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        self._on_pass(_caller_api())
        return self._engine.run_backward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@contextlib.contextmanager
def _watch(on_reverse: Callable[[str], None], on_forward: Callable[[str], None]) -> Iterator[None]:
    engine = Variable._execution_engine
    make_dual = forward_ad.make_dual

    def watched_make_dual(*args: Any, **kwargs: Any) -> Any:
        on_forward(_caller_api("torch.autograd.forward_ad.make_dual (dual numbers)"))
        return make_dual(*args, **kwargs)

    Variable._execution_engine = _EngineWatch(engine, on_reverse)
    forward_ad.make_dual = watched_make_dual
    try:
        yield
    finally:
        Variable._execution_engine = engine
        forward_ad.make_dual = make_dual


@contextlib.contextmanager
def forbid_autograd(reason: str = "this exercise asks for the gradient by hand") -> Iterator[None]:
    """Make every autograd pass inside the block raise `AutogradForbidden`.

    Reverse mode (``Tensor.backward``, ``torch.autograd.grad``, ``torch.func.grad``,
    ``vjp``, ``jacrev``, ``torch.autograd.functional``) and forward mode
    (``torch.func.jvp``, ``jacfwd``, dual numbers) are all refused. The
    message names the call and ``reason``.

    >>> import torch
    >>> x = torch.tensor(2.0, requires_grad=True)
    >>> with forbid_autograd():  # doctest: +ELLIPSIS
    ...     (x * x).backward()
    Traceback (most recent call last):
    ...
    backproplab.exercise.AutogradForbidden: ... but your code called Tensor.backward()...
    """

    def refuse(api: str) -> None:
        raise AutogradForbidden(
            f"{reason}, but your code called {api}. Work the chain rule out and compute "
            "the gradient with plain tensor operations."
        )

    with _watch(refuse, refuse):
        yield


@dataclass
class AutogradCount:
    """What `count_autograd` saw: reverse passes and forward-mode tangents.

    ``calls`` lists the torch function behind each, in order, e.g.
    ``["Tensor.backward()", "Tensor.backward()"]``. A ``torch.func`` transform
    is named by the one the code called (``"torch.func.jacfwd"``, not the
    ``jvp`` inside it), so a check can tell a full Jacobian from one product.
    """

    reverse: int = 0
    forward: int = 0
    calls: list[str] | None = None

    def __post_init__(self) -> None:
        if self.calls is None:
            self.calls = []


@contextlib.contextmanager
def count_autograd() -> Iterator[AutogradCount]:
    """Count the backward passes (and forward-mode tangents) run inside the block.

    A ``torch.func.jacrev`` or ``vmap``-ed ``vjp`` counts once per engine run,
    which is the point: it batches many rows into one pass.

    >>> import torch
    >>> x = torch.tensor(3.0, requires_grad=True)
    >>> with count_autograd() as seen:
    ...     for _ in range(2):
    ...         (2 * x).backward()
    >>> seen.reverse, seen.calls
    (2, ['Tensor.backward()', 'Tensor.backward()'])
    """
    seen = AutogradCount()

    def reverse(api: str) -> None:
        seen.reverse += 1
        seen.calls.append(api)

    def forward(api: str) -> None:
        seen.forward += 1
        seen.calls.append(api)

    with _watch(reverse, forward):
        yield seen


# --------------------------------------------------------------------------
# check_by_hand
# --------------------------------------------------------------------------


def _as_outputs(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _fresh(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Independent copies, so neither side can change what the other sees."""
    return tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def _shapes(inputs: Sequence[Any]) -> str:
    parts = [
        "x".join(map(str, t.shape)) or "scalar" if isinstance(t, torch.Tensor) else repr(t)
        for t in inputs
    ]
    return ", ".join(parts)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two answers are identical (used to spot answers that ignore their inputs)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _one_number(answers: list[tuple[Any, ...]]) -> bool:
    """Whether every answer, on every input, is filled with one and the same number
    (a hard-coded value broadcast to the input's shape, say)."""
    values = set()
    for answer in answers:
        for value in answer:
            if isinstance(value, torch.Tensor):
                values.update(value.detach().reshape(-1).tolist())
            elif isinstance(value, (int, float)):
                values.add(value)
            else:
                return False
    return len(values) == 1


def _fail(name: str, message: str, verdict: str = "fail") -> Report:
    return Report((Check(name, False, verdict, message),))


def check_by_hand(
    answer: Callable[..., Any],
    reference: Callable[..., Any],
    make_inputs: Callable[[torch.Generator], Sequence[Any]],
    *,
    name: str = "your function",
    outputs: Sequence[str] | None = None,
    trials: int = 3,
    seed: int = 0,
    mistakes: Mapping[str, Callable[..., Any]] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> Report:
    """Check a hand-written gradient function on new random inputs, autograd off.

    For each of ``trials`` seeds, ``make_inputs(generator)`` makes the inputs
    (new values, and new shapes where the formula allows). ``answer`` is
    called on copies of them inside `forbid_autograd`; ``reference`` (which
    may use autograd) is called on other copies. The results, a tensor or a
    tuple of tensors named by ``outputs``, are compared with `compare`.

    It fails, saying which, when ``answer`` is not a function, calls
    autograd, raises, returns the same thing whatever the inputs (a
    hard-coded answer), or disagrees with the reference. ``mistakes`` maps a
    description of a typical slip to a function computing that wrong answer
    on the same inputs; when the learner's result matches one, the message
    names it.

    >>> import torch
    >>> wrong = lambda x: x                      # forgot the factor 2
    >>> print(check_by_hand(
    ...     wrong,
    ...     reference=lambda x: 2 * x,
    ...     make_inputs=lambda gen: (torch.randn(4, generator=gen),),
    ...     name="dz/dx",
    ... ))  # doctest: +ELLIPSIS
    ✗ dz/dx: on new inputs (shapes 4): mismatch. Likely mistake: ...factor...
    """
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {_type_name(name)}")
    if not callable(reference):
        raise TypeError(f"reference: expected a function, got {_type_name(reference)}")
    if not callable(make_inputs):
        raise TypeError(f"make_inputs: expected a function of a torch.Generator, got "
                        f"{_type_name(make_inputs)}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 2:
        raise ValueError(f"trials: expected an int >= 2 (one trial cannot spot a hard-coded "
                         f"answer), got {trials!r}")
    if not callable(answer):
        return _fail(
            name,
            f"expected a function, got {_type_name(answer)} {answer!r:.60}. This exercise "
            "asks for a function so that it can be checked on new inputs; a number worked "
            "out for one point cannot be.",
        )

    answers, refs, ins = [], [], []
    for k in range(trials):
        gen = torch.Generator().manual_seed(seed + k)
        inputs = tuple(make_inputs(gen))
        ref = _as_outputs(reference(*_fresh(inputs)))
        try:
            with torch.no_grad(), forbid_autograd():
                got = answer(*_fresh(inputs))
        except AutogradForbidden as err:
            return _fail(name, str(err), "autograd")
        except NotImplementedError:
            return _fail(name, "not written yet: the function still raises NotImplementedError.",
                         "missing")
        except Exception as err:  # the learner's bug, reported as a failed check
            return _fail(
                name,
                f"raised {type(err).__name__}: {err} (on inputs of shapes {_shapes(inputs)}). "
                "Call it yourself on such inputs to see where.",
                "error",
            )
        answers.append(_as_outputs(got))
        refs.append(tuple(r.detach() if isinstance(r, torch.Tensor) else r for r in ref))
        ins.append(inputs)

    n_out = len(refs[0])
    labels = list(outputs) if outputs is not None else (
        [name] if n_out == 1 else [f"{name}[{i}]" for i in range(n_out)]
    )
    if len(labels) != n_out:
        raise ValueError(f"outputs: expected {n_out} names, one per reference output, "
                         f"got {len(labels)}")
    if any(len(a) != n_out for a in answers):
        got = len(next(a for a in answers if len(a) != n_out))
        return _fail(name, f"returned {got} value(s); expected {n_out} ({', '.join(labels)}).")

    same_answers = all(_same(a, answers[0]) for a in answers[1:])
    same_refs = all(_same(r, refs[0]) for r in refs[1:])
    if (same_answers and not same_refs) or (_one_number(answers) and not _one_number(refs)):
        return _fail(
            name,
            "it returns the same result whatever the inputs, so it looks hard-coded (or it "
            "ignores its arguments). The check calls it on new random inputs: compute the "
            "gradient from the arguments it is given.",
            "hard-coded",
        )

    for inputs, got, ref in zip(ins, answers, refs, strict=True):
        for i, label in enumerate(labels):
            report = compare(label, got[i], ref[i], rtol=rtol, atol=atol)
            if report.ok:
                continue
            message = f"on new inputs (shapes {_shapes(inputs)}): {report[0].message}"
            slip = _named_mistake(mistakes, inputs, got, i, rtol, atol)
            if slip:
                # The slip is the diagnosis: keep only the numbers of compare's message.
                numbers = report[0].message.split("\n", 1)[-1].strip()
                message = f"on new inputs (shapes {_shapes(inputs)}): {slip}.\n  {numbers}"
            return _fail(label, message, report[0].verdict)

    checks = tuple(
        Check(label, True, "pass", f"matches autograd on {trials} new random inputs")
        for label in labels
    )
    return Report(checks)


def _named_mistake(
    mistakes: Mapping[str, Callable[..., Any]] | None,
    inputs: tuple[Any, ...],
    got: tuple[Any, ...],
    i: int,
    rtol: float | None,
    atol: float | None,
) -> str | None:
    for description, wrong in (mistakes or {}).items():
        try:
            expected_wrong = _as_outputs(wrong(*_fresh(inputs)))[i]
            if compare(description, got[i], expected_wrong, rtol=rtol, atol=atol).ok:
                return description
        except Exception:  # a slip that does not apply to this output
            continue
    return None


# --------------------------------------------------------------------------
# check_prediction
# --------------------------------------------------------------------------


def check_prediction(name: str, prediction: Any, answer: Any, why: str) -> Report:
    """Grade a "predict, then run" guess; a wrong guess is told the answer and why.

    Numbers and tensors are compared with `compare` (so 4 and 4.0 agree);
    strings, and tuples of strings, ignoring case and surrounding spaces. ``None`` or
    ``...`` means no prediction was recorded yet.

    >>> print(check_prediction("a.grad", 4, 4.0, "each backward() adds 2"))
    ✓ a.grad: your prediction 4 is right: each backward() adds 2
    >>> print(check_prediction("a.grad", 2, 4.0, "each backward() adds 2"))
    ✗ a.grad: you predicted 2, but it is 4.0: each backward() adds 2
    """
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {_type_name(name)}")
    if not isinstance(why, str) or not why.strip():
        raise ValueError(f"why: expected a non-empty explanation, got {why!r}")
    if prediction is None or prediction is Ellipsis:
        return _fail(name, "no prediction recorded yet: write your guess before running on.",
                     "missing")
    if isinstance(answer, str):
        right = isinstance(prediction, str) and prediction.strip().lower() == answer.lower()
    elif isinstance(answer, (tuple, list)) and any(isinstance(a, str) for a in answer):
        # a row of choices, e.g. ("jacfwd", "jacrev"): each compared like a single word
        right = (
            isinstance(prediction, (tuple, list)) and len(prediction) == len(answer)
            and all(isinstance(p, str) and p.strip().lower() == str(a).lower()
                    for p, a in zip(prediction, answer, strict=True))
        )
    elif isinstance(answer, bool) or isinstance(prediction, (bool, str)):
        right = type(prediction) is type(answer) and prediction == answer
    else:
        try:
            right = compare(name, prediction, answer).ok
        except TypeError:
            right = False
    if right:
        return Report((Check(name, True, "pass",
                             f"your prediction {_show(prediction)} is right: {why}"),))
    return _fail(name, f"you predicted {_show(prediction)}, but it is {_show(answer)}: {why}")


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.tolist())
    return repr(value) if isinstance(value, str) else str(value)
