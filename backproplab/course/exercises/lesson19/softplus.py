"""Lesson 19's second exercise: softplus written into its input, declared with
``mark_dirty``, its backward derived from the output alone."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ...slips import fresh
from .._spec import Method, call_answer, is_failure, same, vjp
from .._spec import failure as _failure
from .._spec import first_line as _first_line
from .calling import (
    backward_runs,
    by_hand_trials,
    call_directly,
    judged_by_hand,
    kept_on_ctx,
    not_a_function,
    plain,
    stopped,
    torch_check,
    words,
)

# --------------------------------------------------------------------------
# Exercise 2: softplus in place, its backward from the output alone
# --------------------------------------------------------------------------

_SOFTPLUS = "SoftplusInPlace"
# exp(800) overflows float64: a forward without section 6's shift gives inf there.
_FAR = torch.tensor([-800.0, -30.0, -1.0, 0.0, 1.5, 30.0, 800.0], dtype=torch.float64)


def softplus_inputs(gen: torch.Generator):
    """(x, grad_output) of a new shape, x spread over about -7 to 7. Its first entry is
    negative and its second positive, in every trial: the stable formula treats the two
    signs apart, and the check of forward (on the first trial) must see both."""
    shape = (int(torch.randint(2, 6, (1,), generator=gen)),)
    if int(torch.randint(2, (1,), generator=gen)):
        shape = (*shape, int(torch.randint(2, 4, (1,), generator=gen)))
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2.5
    first_two = x.view(-1)[:2]
    first_two.copy_(first_two.abs() * torch.tensor([-1.0, 1.0], dtype=torch.float64))
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
            "stashed": kept_on_ctx(node) if node is not None else []}


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
    want = F.softplus(x)
    if not same(written["out"], want, rtol=1e-12):
        return "forward does not compute softplus(x) = log(1 + exp(x))" + _first_wrong(
            written["out"], want, x)
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


def _first_wrong(out: Any, want: torch.Tensor, x: torch.Tensor) -> str:
    """': at x = -1.2 it gives 1.5, where softplus(x) = 0.26.' for the first entry where
    forward's output differs, or '.' when it cannot be told entry by entry."""
    if not (isinstance(out, torch.Tensor) and out.shape == want.shape):
        return "."
    wrong = ~torch.isclose(out.double(), want, rtol=1e-12, atol=0.0)
    if not bool(wrong.any()):
        return "."
    k = int(wrong.view(-1).nonzero()[0])
    return (f": at x = {float(x.view(-1)[k]):.4g} it gives {float(out.view(-1)[k]):.4g}, where "
            f"softplus(x) = {float(want.view(-1)[k]):.4g}.")


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
    wrong=_softplus_slip,
    trials=1,
    passed="backward matches autograd on 3 new random inputs; in place: "
           "softplus written into x, declared with mark_dirty, the output alone saved; far "
           "from 0: forward and backward finite and right at x = -800 and 800; gradcheck: "
           "passed in float64",
)
