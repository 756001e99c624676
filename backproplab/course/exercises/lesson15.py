"""Lesson 15, custom autograd Functions: its exercises and its predictions.

The exercises ask for a ``torch.autograd.Function`` whose backward formula the
learner works out. Their checks (`Method` checks) run in three steps:

1. the Function through real autograd once, to catch structural slips (one
   gradient per input of forward, None for a plain number);
2. backward *alone*, called directly with a stand-in ``ctx`` (`call_directly`)
   inside `check_by_hand`: autograd is switched off and refused, the inputs
   are float64 and the result must agree with autograd to round-off. A
   backward that estimates the derivative (finite differences,
   ``bl.numerical_grad``) or borrows it (``torch.autograd.grad`` inside
   backward, torch's ``*_backward`` kernels) fails, saying so; a typical slip
   in the formula is named;
3. `check_function`: gradcheck and gradgradcheck in float64, and a warning
   for tensors kept as ctx attributes.

Exercise 2 also checks what setup_context saves (the output alone) and that
torch.func's ``grad`` and ``vmap`` accept the Function.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable
from torch.utils._python_dispatch import TorchDispatchMode

from ._spec import Check, Method, Prediction, Report, check_by_hand, check_function
from ._spec import failed as _fail
from ._spec import first_line as _first_line

# --------------------------------------------------------------------------
# Calling forward and backward directly
# --------------------------------------------------------------------------


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


class OpsSeen(TorchDispatchMode):
    """Inside ``with OpsSeen() as seen:``, ``seen.names`` collects the torch operations
    that run (``"tanh"``, ``"mul"``, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


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


# --------------------------------------------------------------------------
# Exercise 1: PowerMix, f(x, y, p) = x**p * y
# --------------------------------------------------------------------------

_EXPONENTS = (0.5, 1.5, 2.0, 2.5, 3.0, 4.0)


def power_inputs(gen: torch.Generator):
    """(x, y, p, grad_output): x positive (x**p is defined), p a plain number."""
    n = int(torch.randint(2, 7, (1,), generator=gen))
    x = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    p = _EXPONENTS[int(torch.randint(len(_EXPONENTS), (1,), generator=gen))]
    grad_output = torch.randn(n, generator=gen, dtype=torch.float64)
    return x, y, p, grad_output


def _power_reference(x, y, p, grad_output):
    x, y = x.requires_grad_(), y.requires_grad_()
    return torch.autograd.grad(x**p * y, (x, y), grad_output)


_POWER_SLIPS = {
    "backward ignores grad_output: the chain rule multiplies each local derivative by the "
    "incoming gradient": lambda x, y, p, g: (p * x ** (p - 1) * y, x**p),
    "the power rule's factor p is missing: d(x**p)/dx = p * x**(p - 1)":
        lambda x, y, p, g: (g * x ** (p - 1) * y, g * x**p),
    "the exponent was not lowered: d(x**p)/dx = p * x**(p - 1), not p * x**p":
        lambda x, y, p, g: (g * p * x**p * y, g * x**p),
    "the factor y is missing: d(x**p * y)/dx = p * x**(p - 1) * y":
        lambda x, y, p, g: (g * p * x ** (p - 1), g * x**p),
    "the two gradients are swapped: backward returns x's gradient first, then y's":
        lambda x, y, p, g: (g * x**p, g * p * x ** (p - 1) * y),
    "the gradient for y is d(x**p * y)/dy = x**p, not y":
        lambda x, y, p, g: (g * p * x ** (p - 1) * y, g * y),
}


def _check_power_mix(power_mix, seed: int) -> Report:
    name = "PowerMix"
    if not _is_function(power_mix):
        return _not_a_function(name, power_mix)
    x, y, p, _ = power_inputs(torch.Generator().manual_seed(seed))
    _, failed = _real_run(name, power_mix, (x, y, p), ["x", "y", "p"])
    if failed is not None:
        return failed

    def backward_alone(x, y, p, grad_output):
        grads = call_directly(power_mix, (x, y, p), (grad_output,))
        return grads[0], grads[1]

    formula = check_by_hand(
        backward_alone, _power_reference, power_inputs, name="PowerMix.backward",
        outputs=["gradient for x", "gradient for y"], seed=seed, mistakes=_POWER_SLIPS,
        advice="Differentiate x**p * y with respect to x (power rule, y a constant) and y (x**p "
               "a constant), then multiply each by grad_output.",
    )
    if not formula.ok:
        return formula
    return Report(formula.checks + _gradchecks(power_mix, x, y, p))


# --------------------------------------------------------------------------
# Exercise 2: Tanh saving its output, in the form torch.func can use
# --------------------------------------------------------------------------


def tanh_inputs(gen: torch.Generator):
    """(x, grad_output) of a new shape."""
    shape = (int(torch.randint(2, 6, (1,), generator=gen)),)
    if int(torch.randint(2, (1,), generator=gen)):
        shape = (*shape, int(torch.randint(2, 4, (1,), generator=gen)))
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 1.5
    return x, torch.randn(shape, generator=gen, dtype=torch.float64)


def _tanh_reference(x, grad_output):
    x = x.requires_grad_()
    return torch.autograd.grad(torch.tanh(x), x, grad_output)[0]


_TANH_SLIPS = {
    "the sign inside is flipped: tanh'(x) = 1 - t**2, not 1 + t**2":
        lambda x, g: g * (1 + torch.tanh(x) ** 2),
    "backward ignores grad_output: the chain rule multiplies 1 - t**2 by the incoming "
    "gradient": lambda x, g: 1 - torch.tanh(x) ** 2,
    "the square is missing: tanh'(x) = 1 - t**2, not 1 - t":
        lambda x, g: g * (1 - torch.tanh(x)),
}


def _saved_check(out: torch.Tensor, x: torch.Tensor) -> Check:
    """The Function must save its output t alone (the derivative 1 - t**2 needs nothing else)."""
    name = "saved for backward"
    node = out.grad_fn
    saved = tuple(node.saved_tensors)
    stashed = [key for key, value in vars(node).items() if isinstance(value, torch.Tensor)]
    if not saved and stashed:
        return Check(name, False, "fail",
                     f"nothing saved with ctx.save_for_backward; the tensor is kept as ctx."
                     f"{stashed[0]} instead. Save it with ctx.save_for_backward(...): autograd "
                     "then frees it after backward and notices in-place changes.")
    if len(saved) != 1:
        return Check(name, False, "fail",
                     f"setup_context saves {len(saved)} tensors; the output alone is enough, "
                     "since tanh'(x) = 1 - t**2 needs only t.")
    if torch.equal(saved[0], x.detach()) and not torch.equal(saved[0], out.detach()):
        return Check(name, False, "fail",
                     "setup_context saves the input x; the exercise asks for the output t "
                     "(setup_context receives it as `output`): 1 - t**2 needs only t, and "
                     "backward then does not compute tanh again.")
    if not torch.equal(saved[0], out.detach()):
        return Check(name, False, "fail", "the saved tensor is neither the input nor the "
                                          "output; save the output t = tanh(x).")
    return Check(name, True, "pass", "the output t alone")


def _func_check(fn_class: type, x: torch.Tensor) -> Check:
    """torch.func.grad and vmap on the Function."""
    name = "torch.func"
    if not uses_setup_context(fn_class):
        return Check(name, False, "fail", "Tanh has no setup_context, so torch.func (grad, "
                                          "vmap) cannot use it: keep forward(x) without ctx and "
                                          "save in setup_context(ctx, inputs, output).")
    try:
        grads = torch.func.grad(lambda t: fn_class.apply(t).sum())(x)
        batched = torch.func.vmap(fn_class.apply)(x)
    except Exception as err:  # torch.func's refusal, reported as a failed check
        return Check(name, False, "fail", f"torch.func refused it: {_first_line(err)}")
    ok = (torch.allclose(grads, 1 - torch.tanh(x) ** 2)
          and torch.allclose(batched, torch.tanh(x)))
    if not ok:
        return Check(name, False, "mismatch", "torch.func.grad or vmap gives different numbers "
                                              "from tanh and its derivative.")
    return Check(name, True, "pass", "torch.func.grad and torch.func.vmap accept it")


# Operations a backward needs only to evaluate tanh again (an estimate from nearby
# values, say): 1 - t**2 from the saved output needs none of them.
_TANH_AGAIN = {"tanh", "atanh", "exp", "expm1", "sinh", "cosh", "sigmoid", "log", "log1p"}


def _check_tanh(tanh_class, seed: int) -> Report:
    name = "Tanh"
    if not _is_function(tanh_class):
        return _not_a_function(name, tanh_class)
    x, _ = tanh_inputs(torch.Generator().manual_seed(seed))
    out, failed = _real_run(name, tanh_class, (x,), ["x"])
    if failed is not None:
        return failed
    saved = _saved_check(out, x)
    if not saved.ok:
        return Report((saved,))

    again: set[str] = set()

    def backward_alone(x, grad_output):
        ctx = forward_directly(tanh_class, (x,))
        with OpsSeen() as seen:
            grads = tanh_class.backward(ctx, grad_output)
        again.update(seen.names & _TANH_AGAIN)
        return grads[0] if isinstance(grads, tuple) else grads

    formula = check_by_hand(
        backward_alone, _tanh_reference, tanh_inputs, name="Tanh.backward", seed=seed,
        mistakes=_TANH_SLIPS,
        advice="tanh'(x) = 1 - tanh(x)**2 = 1 - t**2 with t the output; multiply it by "
               "grad_output.",
    )
    if not formula.ok:
        return formula
    if again:
        return _fail("Tanh.backward", f"backward evaluates {', '.join(sorted(again))} although "
                                      "the formula needs only the saved output t: 1 - t**2. "
                                      "Values of tanh near t make a numerical estimate, not the "
                                      "derivative worked out.")
    func = _func_check(tanh_class, x)
    if not func.ok:
        return Report((func,))
    return Report(formula.checks + (saved, func) + _gradchecks(tanh_class, x))


EXERCISES = {
    "l15-power-mix": Method(check=_check_power_mix),
    "l15-tanh-output": Method(check=_check_tanh),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


class _SquareMissingTwo(torch.autograd.Function):
    """x**2 with the factor 2 forgotten in backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return x * grad_output


def _raises_answer() -> bool:
    """Does a backward with a wrong formula raise?"""
    try:
        _SquareMissingTwo.apply(torch.ones(2, requires_grad=True)).sum().backward()
    except RuntimeError:
        return True
    return False


class _SquareOnce(torch.autograd.Function):
    """x**2 with a backward marked once_differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output


def _once_answer():
    """The second derivative of SquareOnce(x).sum() + (x**3).sum() at x = [1, 2]."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad(_SquareOnce.apply(x).sum() + (x**3).sum(), x, create_graph=True)
    try:
        (h,) = torch.autograd.grad(g.sum(), x)
    except RuntimeError:
        return "error"
    return h.tolist()


PREDICTIONS = {
    "l15-predict-raises": Prediction(
        question="does a backward with a wrong formula raise?",
        answer=_raises_answer,
        hint="what could autograd compare backward's result with? It has only the numbers "
             "backward hands it.",
        why="autograd trusts whatever backward returns; only a check such as gradcheck can "
            "catch a wrong formula",
    ),
    "l15-predict-once": Prediction(
        question="the second derivative of SquareOnce(x).sum() + (x**3).sum() at x = [1, 2]",
        answer=_once_answer,
        hint="the first gradient is a sum of two parts. Which of them was computed with "
             "recording on, and what does the second pass see of the other one?",
        why="SquareOnce's backward ran with recording off, so its part of the first gradient, "
            "2x, arrived as a constant. The x**3 part, 3x**2, kept its graph, so the second "
            "call had something to walk and returned only its derivative 6x: {answer}, where "
            "the truth is 2 + 6x = [8.0, 14.0]. No error, no warning",
    ),
}
