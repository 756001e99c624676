"""Lesson 15's checks call a learner's Function the way autograd would, but as plain
Python functions: forward (and setup_context) with a stand-in ``ctx``, then backward
alone, so that backward can be checked by hand with autograd switched off. Also the
steps every exercise of the lesson shares: a run through real autograd that names a
structural slip, and check_function's gradcheck verdicts."""

from __future__ import annotations

from typing import Any

import torch

from .._spec import Check, Report, attempt, check_function
from .._spec import failed as _fail
from .._spec import first_line as _first_line


class StandInContext:
    """What autograd's ``ctx`` offers a Function, so forward and backward can be
    called directly as plain functions (with autograd off) and backward checked alone."""

    def __init__(self, inputs: tuple[Any, ...]):
        self.needs_input_grad = tuple(
            isinstance(t, torch.Tensor) and t.is_floating_point() for t in inputs)
        self.saved_tensors: tuple[torch.Tensor, ...] = ()

    def save_for_backward(self, *tensors: torch.Tensor) -> None:
        self.saved_tensors = tensors

    def mark_dirty(self, *tensors: torch.Tensor) -> None:
        pass

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def uses_setup_context(fn_class: type) -> bool:
    """Whether the Function has the form torch.func needs: forward(*inputs) plus
    setup_context(ctx, inputs, output)."""
    return fn_class.setup_context is not torch.autograd.Function.setup_context


def forward_directly(fn_class: type, inputs: tuple[Any, ...]) -> StandInContext:
    """Run forward (and setup_context) as plain functions; the ctx backward will get."""
    ctx = StandInContext(inputs)
    if uses_setup_context(fn_class):
        output = fn_class.forward(*inputs)
        fn_class.setup_context(ctx, inputs, output)
    else:
        fn_class.forward(ctx, *inputs)
    return ctx


def call_directly(fn_class: type, inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]):
    """backward's result for ``grad_outputs``, by calling forward then backward the way
    autograd would, but as plain Python functions: a tuple, one entry per input."""
    ctx = forward_directly(fn_class, inputs)
    grads = fn_class.backward(ctx, *grad_outputs)
    return grads if isinstance(grads, tuple) else (grads,)


def _is_function(answer: Any) -> bool:
    return isinstance(answer, type) and issubclass(answer, torch.autograd.Function)


def _not_a_function(name: str, answer: Any) -> Report:
    what = answer.__name__ if isinstance(answer, type) else type(answer).__name__
    return _fail(name, f"expected a subclass of torch.autograd.Function (the class itself, not "
                       f"an instance or the result of .apply), got {what}")


def _real_run(name: str, fn_class: type, inputs: tuple[Any, ...], labels: list[str]):
    """Run the Function through autograd once; a failed Report for a structural slip."""
    xs = tuple(t.detach().clone().requires_grad_() if isinstance(t, torch.Tensor) else t
               for t in inputs)
    wrt = [t for t in xs if isinstance(t, torch.Tensor)]
    try:
        out = fn_class.apply(*xs)
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            return None, _fail(name, "forward must return a tensor computed from the inputs; "
                                     f"got {type(out).__name__}")
        torch.autograd.grad(out, wrt, torch.ones_like(out), allow_unused=True,
                            retain_graph=True)
    except NotImplementedError:
        return None, _fail(name, "not written yet: a method still raises NotImplementedError.",
                           "missing")
    except RuntimeError as err:
        text = _first_line(err)
        if "incorrect number of gradients" in text:
            got = text.rsplit("got ", 1)[-1].rstrip(")")
            return None, _fail(name, f"backward returned {got} entries, but forward has "
                                     f"{len(inputs)} inputs ({', '.join(labels)}): return one "
                                     "entry per input, None for the plain number.", "error")
        if "different than None" in text:
            return None, _fail(name, f"backward returned a gradient for a plain number "
                                     f"({text}): return None in the place of every input that "
                                     "is not a tensor.", "error")
        return None, _fail(name, f"raised RuntimeError: {text}", "error")
    except Exception as err:  # the learner's bug, reported as a failed check
        return None, _fail(name, f"raised {type(err).__name__}: {_first_line(err)}", "error")
    return out, None


def _gradchecks(fn_class: type, *inputs: Any) -> tuple[Check, ...]:
    """check_function's verdicts beyond the Jacobians: gradcheck, gradgradcheck, ctx."""
    report = check_function(fn_class, *inputs)
    wanted = [c for c in report.checks if c.name in ("gradcheck", "gradgradcheck", "ctx")
              or not c.ok]
    return tuple(wanted)


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _shape(t):
    return tuple(t.shape)


def _ran(name, run, *args):
    """``run(*args)`` and None, or None and the failed Report that says why it raised."""
    return attempt(name, run, *args, what="it")
