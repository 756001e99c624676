"""Lesson 15, custom autograd Functions: its exercises and its predictions.

The exercises ask for a ``torch.autograd.Function`` whose backward formula the
learner works out. Their checks (`Method` checks) run in three steps:

1. the Function through real autograd once, to catch structural slips (one
   gradient per input of forward, None for a plain number; for exercise 2, the
   input changed in place and declared so);
2. backward *alone*, called directly with a stand-in ``ctx`` (`calling`) inside
   `check_by_hand`: autograd is switched off and refused, the inputs are float64
   and the result must agree with autograd to round-off. A backward that
   estimates the derivative (finite differences, ``bl.numerical_grad``) or
   borrows it (``torch.autograd.grad`` inside backward, torch's ``*_backward``
   kernels) fails, saying so; a typical slip in the formula is named;
3. gradcheck (and gradgradcheck) in float64, and a warning for tensors kept as
   ctx attributes.

Exercise 2 writes softplus into its input: the check looks at the memory the output
uses, at x's grad_fn (mark_dirty), at what is saved (the output alone: x's values are
gone, so the derivative is derived in terms of y), and at x far from 0. Exercise 3
(`broadcast`) calls backward itself on inputs that broadcast, to see the shapes it
returns. Exercise 4 (`logsumexp`), a fused log-sum-exp, adds rows far from 0, what is
saved, and a double backward that must work.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .._spec import Check, Method, Prediction, Report, check_by_hand, vjp
from .._spec import failed as _fail
from .._spec import first_line as _first_line
from .broadcast import _check_broadcast_function
from .calling import (
    _gradchecks,
    _is_function,
    _not_a_function,
    _ran,
    _real_run,
    call_directly,
)
from .logsumexp import _check_logsumexp

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
# Exercise 2: softplus in place, its backward from the output alone
# --------------------------------------------------------------------------

_SOFTPLUS = "SoftplusInPlace"
# exp(800) overflows float64: a forward without section 6's shift gives inf there.
_FAR = torch.tensor([-800.0, -30.0, -1.0, 0.0, 1.5, 30.0, 800.0], dtype=torch.float64)


def softplus_inputs(gen: torch.Generator):
    """(x, grad_output) of a new shape, x spread over about -7 to 7."""
    shape = (int(torch.randint(2, 6, (1,), generator=gen)),)
    if int(torch.randint(2, (1,), generator=gen)):
        shape = (*shape, int(torch.randint(2, 4, (1,), generator=gen)))
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2.5
    return x, torch.randn(shape, generator=gen, dtype=torch.float64)


def _softplus_reference(x, grad_output):
    return vjp(F.softplus, [x], grad_output)


_SOFTPLUS_SLIPS = {
    "the saved tensor holds y = softplus(x), not x: forward wrote y over x, so sigmoid of "
    "it is sigmoid(y), not the derivative sigmoid(x). Write sigmoid(x) with y alone":
        lambda x, g: g * torch.sigmoid(F.softplus(x)),
    "exp(-y) is 1 / (1 + exp(x)), which is sigmoid(-x), not sigmoid(x): the two add up to 1":
        lambda x, g: g * torch.exp(-F.softplus(x)),
    "backward ignores grad_output: the chain rule multiplies sigmoid(x) by the incoming "
    "gradient": lambda x, g: torch.sigmoid(x),
}


def _applied(fn_class: type, x: torch.Tensor):
    """Apply the Function through autograd to a copy of ``x`` that is not a leaf (autograd
    refuses in-place changes to a leaf that requires grad): (that copy, the output) or a
    failed Report naming the slip."""
    inp = x.detach().clone().requires_grad_() * 1
    try:
        out = fn_class.apply(inp)
    except NotImplementedError:
        return _fail(_SOFTPLUS, "not written yet: a method still raises NotImplementedError.",
                     "missing")
    except RuntimeError as err:
        text = _first_line(err)
        if "returned as-is" in text:
            return _fail(_SOFTPLUS, "forward changed x in place and returned it, but nothing "
                         "declared the change, and then saving it is refused. Call "
                         "ctx.mark_dirty on x (section 9) before saving it.", "error")
        if "marked as dirty" in text:
            return _fail(_SOFTPLUS, "x is marked dirty but forward returned another tensor: "
                         "write softplus into x itself (x.copy_(...), or in-place "
                         "operations) and return x.", "error")
        return _fail(_SOFTPLUS, f"raised RuntimeError: {text}", "error")
    except Exception as err:  # the learner's bug, reported as a failed check
        return _fail(_SOFTPLUS, f"raised {type(err).__name__}: {_first_line(err)}", "error")
    if not isinstance(out, torch.Tensor):
        return _fail(_SOFTPLUS, f"forward must return x; got {type(out).__name__}")
    return inp, out


def _in_place(fn_class: type, inp: torch.Tensor, out: torch.Tensor, x: torch.Tensor) -> str:
    """What is wrong with how forward wrote its result, or ''."""
    same_memory = out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr()
    if not same_memory:
        return ("forward returned a new tensor, so x's memory was not reused: write softplus "
                "into x itself (x.copy_(...), or in-place operations), return x and declare "
                "it with ctx.mark_dirty.")
    if not torch.allclose(out.detach(), F.softplus(x), rtol=1e-12, atol=0):
        return "forward does not compute softplus(x) = log(1 + exp(x))."
    if type(inp.grad_fn).__name__ != f"{fn_class.__name__}Backward":
        return (f"x was changed in place, but its grad_fn is still {inp.grad_fn.name()}: "
                "without ctx.mark_dirty(x) the graph does not know, and gradients through x "
                "use the old formula (section 9).")
    return ""


def _saved(out: torch.Tensor, x: torch.Tensor) -> str:
    """What is wrong with what the Function kept for backward, or ''."""
    node = out.grad_fn
    saved = tuple(node.saved_tensors)
    stashed = [key for key, value in vars(node).items() if isinstance(value, torch.Tensor)]
    if stashed and not saved:
        return (f"nothing saved with ctx.save_for_backward; the tensor is kept as "
                f"ctx.{stashed[0]} instead. Save it with ctx.save_for_backward(...).")
    if len(saved) != 1:
        return (f"{len(saved)} tensors are saved; once x is overwritten, the output is the "
                "one tensor there is to save.")
    if torch.equal(saved[0].detach(), x):
        return ("a copy of the input x is saved: that is the memory writing in place was to "
                "spare. Save the output y and write the derivative with y.")
    return ""


def _far(fn_class: type) -> str:
    """Forward and backward where exp(x) overflows float64, or ''."""
    applied = _applied(fn_class, _FAR)
    if isinstance(applied, Report):
        return f"on x = {_FAR.tolist()}: {applied.checks[0].message}"
    out = applied[1]
    if not bool(torch.isfinite(out).all()) or not torch.allclose(
            out.detach(), F.softplus(_FAR), rtol=1e-12, atol=1e-300):
        return (f"forward gives {out.detach().tolist()} for x = {_FAR.tolist()}: exp(800) "
                "overflows even in float64. Use section 6's stable formula.")
    ones = torch.ones_like(_FAR)
    with torch.no_grad():
        grads, failure = _ran(_SOFTPLUS, call_directly, fn_class, (_FAR.clone(),), (ones,))
    if failure is not None:
        return f"on x = {_FAR.tolist()}: {failure.checks[0].message}"
    grad = grads[0]
    # sigmoid(x) lies in [0, 1]: an absolute tolerance lets 1 - exp(-y) pass, which loses
    # digits relative to tiny values (x = -30) but not against the gradient's size.
    if not torch.allclose(grad, torch.sigmoid(_FAR), rtol=0, atol=1e-12):
        return (f"backward gives {grad.tolist()} for x = {_FAR.tolist()}, where sigmoid(x) "
                f"is {torch.sigmoid(_FAR).tolist()}.")
    return ""


def _check_softplus(fn_class, seed: int) -> Report:
    if not _is_function(fn_class):
        return _not_a_function(_SOFTPLUS, fn_class)
    x, _ = softplus_inputs(torch.Generator().manual_seed(seed))
    applied = _applied(fn_class, x)
    if isinstance(applied, Report):
        return applied
    slip = _in_place(fn_class, *applied, x) or _saved(applied[1], x)
    if slip:
        return _fail(_SOFTPLUS, slip)

    def backward_alone(x, grad_output):
        return call_directly(fn_class, (x,), (grad_output,))[0]

    formula = check_by_hand(
        backward_alone, _softplus_reference, softplus_inputs, name=f"{_SOFTPLUS}.backward",
        seed=seed, mistakes=_SOFTPLUS_SLIPS,
        advice="softplus'(x) = sigmoid(x). Write exp(y) with exp(x) (y = log(1 + exp(x))), "
               "then sigmoid(x) with y; multiply by grad_output.",
    )
    if not formula.ok:
        return formula
    far = _far(fn_class)
    if far:
        return _fail(_SOFTPLUS, far, "mismatch")
    leaf = x.detach().clone().requires_grad_()
    if not torch.autograd.gradcheck(lambda t: fn_class.apply(t * 1), (leaf,),
                                    raise_exception=False):
        return _fail(_SOFTPLUS, "gradcheck failed in float64.")
    return Report(formula.checks + (
        Check("in place", True, "pass", "softplus written into x, declared with mark_dirty, "
                                        "the output alone saved"),
        Check("far from 0", True, "pass", "forward and backward finite and right at x = "
                                          "-800 and 800"),
        Check("gradcheck", True, "pass", "passed in float64"),
    ))


EXERCISES = {
    "l15-power-mix": Method(check=_check_power_mix),
    "l15-softplus-in-place": Method(check=_check_softplus),
    "l15-broadcast-function": Method(check=_check_broadcast_function),
    "l15-logsumexp": Method(check=_check_logsumexp),
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
