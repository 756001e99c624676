"""Lesson 19, custom autograd Functions: its exercises and its predictions.

The exercises ask for a ``torch.autograd.Function`` whose backward formula the
learner works out. Each is a `Method`: its observation step (`calling`) records what
the Function does, and the verdict is made from that record, in three steps:

1. the Function through real autograd once, to catch structural slips (one
   gradient per input of forward, None for a plain number; for exercise 2, the
   input changed in place and declared so);
2. backward *alone*, called directly with a stand-in ``ctx`` as a by-hand answer
   is called (autograd switched off and refused, the inputs float64), judged as a
   by-hand answer is: it must agree with autograd to round-off. A backward that
   estimates the derivative (finite differences, ``bl.numerical_grad``) or
   borrows it (``torch.autograd.grad`` inside backward, torch's ``*_backward``
   kernels) fails, saying so; a typical slip in the formula is named;
3. what gradcheck (and gradgradcheck) in float64 make of it.

Exercise 2 writes softplus into its input: the record holds the memory the output
uses, x's grad_fn (mark_dirty), what is saved (the output alone: x's values are
gone, so the derivative is derived in terms of y), and x far from 0. Exercise 3
(`broadcast`) calls backward itself on inputs that broadcast, to see the shapes it
returns. Exercise 4 (`logsumexp`), a fused log-sum-exp, adds rows far from 0, what is
saved, and a double backward that must work. Exercise 5 (`forward`) adds ``jvp``: forward
mode through a Function, called alone as backward is, then through torch.func's jvp and
jacfwd.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ...slips import fresh
from .._spec import Method, Prediction, call_answer, is_failure, same, vjp
from .._spec import failure as _failure
from .._spec import first_line as _first_line
from .broadcast import BROADCAST
from .calling import (
    backward_runs,
    by_hand_trials,
    call_directly,
    double_backward_slip,
    judged_by_hand,
    not_a_function,
    plain,
    real_run,
    stopped,
    torch_check,
    words,
)
from .calling import second_order as _second_order
from .forward import GATE
from .logsumexp import LOGSUMEXP

# What the grade's sandbox loads before an answer runs: what gradcheck imports when a
# check fails (its report steps out of torch's dispatch modes), and what torch.func.jvp
# imports on its first call (exercise 5).
PRELOAD = ("torch._subclasses.schema_check_mode", "torch._decomp.decompositions_for_jvp")

# --------------------------------------------------------------------------
# Exercise 1: PowerMix, f(x, y, p) = x**p * y
# --------------------------------------------------------------------------

_POWER = "PowerMix"
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


def _observe_power(power_mix: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """A structural slip as a failure; else backward alone on each trial, and what
    gradcheck and double backward make of the Function."""
    x, y, p, _ = inputs["trials"][0]
    failed = not_a_function(power_mix) or real_run(power_mix, (x, y, p), ["x", "y", "p"])
    if failed is not None:
        return failed

    def backward_alone(x, y, p, grad_output):
        grads = call_directly(power_mix, (x, y, p), (grad_output,))
        return grads[0], grads[1]

    runs = backward_runs(backward_alone, inputs["trials"])
    if stopped(runs):
        return {"backward": runs}
    return {"backward": runs,
            "gradcheck": torch_check(torch.autograd.gradcheck, power_mix.apply, (x, y, p)),
            "second": _second_order(power_mix.apply, (x, y, p))}


def _power_want(inputs: dict[str, Any]) -> dict[str, Any]:
    """What a right answer is judged against: each trial's inputs and autograd's result."""
    return {"trials": inputs["trials"],
            "grads": [_power_reference(*fresh(trial)) for trial in inputs["trials"]]}


def _power_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    report = judged_by_hand(
        got["backward"], want["trials"], want["grads"], name="PowerMix.backward",
        outputs=["gradient for x", "gradient for y"], mistakes=_POWER_SLIPS,
        params=("x", "y", "p", "grad_output"),
        advice="Differentiate x**p * y with respect to x (power rule, y a constant) and y (x**p "
               "a constant), then multiply each by grad_output.")
    slip = words(report, _POWER)
    if slip is None and not got["gradcheck"][0]:
        slip = ("gradcheck failed in float64: backward is right when called alone, but through "
                "autograd it does not match finite differences of forward (does forward compute "
                "x**p * y?)" + (f"; it raised {got['gradcheck'][1]}" if got["gradcheck"][1]
                               else ""))
    return slip or double_backward_slip(got["second"])


POWER_MIX = Method(
    name=_POWER,
    make_inputs=lambda gen: {"trials": by_hand_trials(power_inputs, gen)},
    observe=_observe_power,
    reference=_power_want,
    agree=lambda got, want: _power_slip(got, want) is None,
    explain=lambda inputs, got, want: _power_slip(got, want),
    trials=1,
    passed="backward's gradients for x and for y match autograd on 3 new random inputs; "
           "gradcheck: passed in float64",
)


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


def _applied(fn_class: type, x: torch.Tensor) -> Any:
    """Apply the Function through autograd to a copy of ``x`` that is not a leaf (autograd
    refuses in-place changes to a leaf that requires grad): (that copy, the output) or a
    `failure` naming the slip."""
    inp = x.detach().clone().requires_grad_() * 1
    try:
        out = fn_class.apply(inp)
    except NotImplementedError:
        return _failure("missing", "not written yet: a method still raises NotImplementedError.")
    except RuntimeError as err:
        text = _first_line(err)
        if "returned as-is" in text:
            return _failure("error", "forward changed x in place and returned it, but nothing "
                            "declared the change, and then saving it is refused. Call "
                            "ctx.mark_dirty on x (section 9) before saving it.")
        if "marked as dirty" in text:
            return _failure("error", "x is marked dirty but forward returned another tensor: "
                            "write softplus into x itself (x.copy_(...), or in-place "
                            "operations) and return x.")
        return _failure("error", f"raised RuntimeError: {text}")
    except Exception as err:  # the learner's bug, reported as a failed check
        return _failure("error", f"raised {type(err).__name__}: {_first_line(err)}")
    if not isinstance(out, torch.Tensor):
        return _failure("fail", f"forward must return x; got {type(out).__name__}")
    return inp, out


def _how_written(fn_class: type, inp: torch.Tensor, out: torch.Tensor) -> dict[str, Any]:
    """How forward wrote its result and what it kept for backward, as it is."""
    node = out.grad_fn
    try:
        saved = [t.detach().clone() for t in getattr(node, "saved_tensors", ())]
    except RuntimeError as err:  # saved, then written over in place
        saved = f"RuntimeError: {_first_line(err)}"
    return {"same_memory": out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr(),
            "out": out.detach().clone(), "function": fn_class.__name__,
            "node": type(inp.grad_fn).__name__,
            "node_name": inp.grad_fn.name() if inp.grad_fn is not None else "None",
            "saved": saved,
            "stashed": [key for key, value in vars(node).items()
                        if isinstance(value, torch.Tensor)] if node is not None else []}


def _far(fn_class: type) -> dict[str, Any]:
    """Forward and backward alone where exp(x) overflows float64."""
    applied = _applied(fn_class, _FAR)
    if is_failure(applied):
        return {"raised": applied["detail"]}
    with torch.no_grad():
        grads, failed = call_answer(call_directly, fn_class, (_FAR.clone(),),
                                    (torch.ones_like(_FAR),), what="it")
    if failed is not None:
        return {"out": applied[1].detach().clone(), "raised": failed["detail"]}
    return {"out": applied[1].detach().clone(), "grad": plain(grads[0])}


def _observe_softplus(fn_class: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """A Function that cannot be applied, as a failure; else how it wrote its result,
    backward alone on each trial, the Function far from 0, and gradcheck."""
    x = inputs["trials"][0][0]
    applied = not_a_function(fn_class) or _applied(fn_class, x)
    if is_failure(applied):
        return applied

    def backward_alone(x, grad_output):
        return call_directly(fn_class, (x,), (grad_output,))[0]

    written = _how_written(fn_class, *applied)
    runs = backward_runs(backward_alone, inputs["trials"])
    if stopped(runs):
        return {"written": written, "backward": runs}
    return {"written": written, "backward": runs, "far": _far(fn_class),
            "gradcheck": torch_check(torch.autograd.gradcheck,
                                     lambda t: fn_class.apply(t * 1), (x,))[0]}


def _in_place_slip(written: dict[str, Any], x: torch.Tensor) -> str | None:
    """What is wrong with how forward wrote its result and what it saved, or None."""
    if not written["same_memory"]:
        return ("forward returned a new tensor, so x's memory was not reused: write softplus "
                "into x itself (x.copy_(...), or in-place operations), return x and declare "
                "it with ctx.mark_dirty.")
    if not same(written["out"], F.softplus(x), rtol=1e-12):
        return "forward does not compute softplus(x) = log(1 + exp(x))."
    if written["node"] != f"{written['function']}Backward":
        return (f"x was changed in place, but its grad_fn is still {written['node_name']}: "
                "without ctx.mark_dirty(x) the graph does not know, and gradients through x "
                "use the old formula (section 9).")
    saved, stashed = written["saved"], written["stashed"]
    if isinstance(saved, str):
        return (f"what forward saved cannot be read back ({saved}): save the output, and "
                "nothing that forward writes over afterwards.")
    if stashed and not saved:
        return (f"nothing saved with ctx.save_for_backward; the tensor is kept as "
                f"ctx.{stashed[0]} instead. Save it with ctx.save_for_backward(...).")
    if len(saved) != 1:
        return (f"{len(saved)} tensors are saved; once x is overwritten, the output is the "
                "one tensor there is to save.")
    if same(saved[0], x):
        return ("a copy of the input x is saved: that is the memory writing in place was to "
                "spare. Save the output y and write the derivative with y.")
    return None


def _far_slip(far: dict[str, Any]) -> str | None:
    """What is wrong with forward or backward where exp(x) overflows, or None."""
    where = f"x = {_FAR.tolist()}"
    if "out" not in far:
        return f"on {where}: {far['raised']}"
    out = far["out"]
    if not (same(out, F.softplus(_FAR), rtol=1e-12, atol=1e-300)
            and bool(torch.isfinite(out).all())):
        shown = out.tolist() if isinstance(out, torch.Tensor) else out
        return (f"forward gives {shown} for {where}: exp(800) overflows even in float64. "
                "Use section 6's stable formula.")
    if "raised" in far:
        return f"on {where}: {far['raised']}"
    # sigmoid(x) lies in [0, 1]: an absolute tolerance lets 1 - exp(-y) pass, which loses
    # digits relative to tiny values (x = -30) but not against the gradient's size.
    grad = far["grad"]
    if not same(grad, torch.sigmoid(_FAR), atol=1e-12):
        shown = grad.tolist() if isinstance(grad, torch.Tensor) else grad
        return (f"backward gives {shown} for {where}, where sigmoid(x) is "
                f"{torch.sigmoid(_FAR).tolist()}.")
    return None


def _softplus_want(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"trials": inputs["trials"],
            "grads": [_softplus_reference(*fresh(trial)) for trial in inputs["trials"]]}


def _softplus_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    slip = _in_place_slip(got["written"], want["trials"][0][0]) or words(judged_by_hand(
        got["backward"], want["trials"], want["grads"], name=f"{_SOFTPLUS}.backward",
        mistakes=_SOFTPLUS_SLIPS, params=("x", "grad_output"),
        advice="softplus'(x) = sigmoid(x). Write exp(y) with exp(x) (y = log(1 + exp(x))), "
               "then sigmoid(x) with y; multiply by grad_output."), _SOFTPLUS)
    slip = slip or _far_slip(got["far"])
    if slip is None and got["gradcheck"] is not True:
        return "gradcheck failed in float64."
    return slip


SOFTPLUS = Method(
    name=_SOFTPLUS,
    make_inputs=lambda gen: {"trials": by_hand_trials(softplus_inputs, gen)},
    observe=_observe_softplus,
    reference=_softplus_want,
    agree=lambda got, want: _softplus_slip(got, want) is None,
    explain=lambda inputs, got, want: _softplus_slip(got, want),
    trials=1,
    passed="backward matches autograd on 3 new random inputs; in place: "
           "softplus written into x, declared with mark_dirty, the output alone saved; far "
           "from 0: forward and backward finite and right at x = -800 and 800; gradcheck: "
           "passed in float64",
)


EXERCISES = {
    "l19-power-mix": POWER_MIX,
    "l19-softplus-in-place": SOFTPLUS,
    "l19-broadcast-function": BROADCAST,
    "l19-logsumexp": LOGSUMEXP,
    "l19-gate-jvp": GATE,
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
    "l19-predict-raises": Prediction(
        question="does a backward with a wrong formula raise?",
        answer=_raises_answer,
        hint="what could autograd compare backward's result with? It has only the numbers "
             "backward hands it.",
        why="autograd trusts whatever backward returns; only a check such as gradcheck can "
            "catch a wrong formula",
    ),
    "l19-predict-once": Prediction(
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
