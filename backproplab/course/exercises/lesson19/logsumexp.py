"""Lesson 19's exercise 4: log-sum-exp along the last dimension as one Function, fused
and twice differentiable. Besides backward alone by hand, the observation runs rows far
from 0 (where the max shift matters, in forward and in backward), notes what is saved,
and runs a double backward that must work: gradgradcheck, with once_differentiable and
softmax weights saved from forward named."""

from __future__ import annotations

from typing import Any

import torch

from .._spec import Method, call_answer, failure
from .._spec import first_line as _first_line
from .calling import (
    backward_runs,
    by_hand_trials,
    call_directly,
    judged_by_hand,
    kept_on_ctx,
    not_a_function,
    plain,
    real_run,
    shape_of,
    stopped,
    torch_check,
    words,
)

_LSE = "LogSumExp"
# Far enough from 0 that exp overflows (or underflows to 0) in float64: exp(710) is inf.
_FAR = 1000.0


def lse_inputs(gen: torch.Generator):
    """(x, grad_output): x of 1 to 3 dimensions, sizes different from each other, reduced
    along the last one; grad_output shaped like the result (x's shape without the last)."""
    dims = int(torch.randint(1, 4, (1,), generator=gen))
    shape = [int(s) + 2 for s in torch.randperm(5, generator=gen)[:dims]]
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
    return x, torch.randn(shape[:-1], generator=gen, dtype=torch.float64)


def _lse_reference(x, grad_output):
    x = x.requires_grad_()
    return torch.autograd.grad(torch.logsumexp(x, dim=-1), x, grad_output)[0]


def _softmax_weights(x):
    return torch.softmax(x, dim=-1)


_LSE_SLIPS = {
    "backward ignores grad_output: the chain rule multiplies the softmax weights by the "
    "incoming gradient, grad_output.unsqueeze(-1) * p": lambda x, g: _softmax_weights(x),
    "that is grad_output copied along the last dimension, the backward of a plain sum: each "
    "x_j counts with its softmax weight p_j = exp(x_j - out)":
        lambda x, g: g.unsqueeze(-1).expand_as(x),
    "exp(x - out) without dividing is right, but this divides once more by the sum: "
    "exp(x - out) is already the softmax weight, since out = log(sum(exp(x)))":
        lambda x, g: g.unsqueeze(-1) * _softmax_weights(x) / torch.exp(x).sum(-1, keepdim=True),
    "the weights are exp(x), not exp(x - out): d out / d x_j = exp(x_j) / sum_k exp(x_k)":
        lambda x, g: g.unsqueeze(-1) * torch.exp(x),
}


def _lse_backward_alone(fn_class: type):
    def backward_alone(x, grad_output):
        return call_directly(fn_class, (x,), (grad_output,))[0]
    return backward_alone


def _two_or_more_dims(seed: int):
    """lse_inputs with x of at least 2 dimensions, where grad_output is one dimension short."""
    for k in range(5, 40):
        x, g = lse_inputs(torch.Generator().manual_seed(seed + k))
        if x.dim() >= 2:
            return [x, g]
    raise AssertionError("lse_inputs drew no 2-D input in 35 seeds")


def _lse_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The by-hand trials (the first also the Function's own run), an input of 2 or more
    dimensions, and one of 2 or more dimensions (several rows) to move far from 0."""
    seed = gen.initial_seed()
    return {"trials": by_hand_trials(lse_inputs, gen), "wide": _two_or_more_dims(seed),
            "far": _two_or_more_dims(seed + 72)}


def _shifts(x: torch.Tensor) -> list[tuple[Any, str]]:
    """Each shift of the far test and the words for its rows: every row by +1000, every row
    by -1000, and the rows by +1000 and -1000 in turn (a shift by the whole tensor's
    maximum, not each row's, fails only there)."""
    turns = torch.arange(x[..., 0].numel()).reshape(x.shape[:-1]).unsqueeze(-1) % 2
    return [(_FAR, "rows near +1000"), (-_FAR, "rows near -1000"),
            (_FAR - 2 * _FAR * turns.to(x.dtype), "rows near +1000 and -1000 in turn")]


def _shape_slip(fn_class: type, x: torch.Tensor, g: torch.Tensor) -> dict | None:
    """grad_output has the result's shape, one dimension short of x: used as it is, it does
    not line up with the softmax weights. The `failure` when backward raises so."""
    try:
        with torch.no_grad():
            _lse_backward_alone(fn_class)(x.clone(), g.clone())
    except Exception as err:  # any other error is reported by the runs that follow
        if isinstance(err, RuntimeError) and "must match the size" in str(err):
            return failure("error", f"backward raised for x of shape {shape_of(x)}: "
                                    f"{_first_line(err)}. grad_output has the result's shape "
                                    f"{shape_of(g)}, without the summed dimension: put it back "
                                    "with grad_output.unsqueeze(-1) before multiplying by the "
                                    "weights.")
    return None


def _far(fn_class: type, x: torch.Tensor, g: torch.Tensor) -> list[dict[str, Any]]:
    """Forward through autograd and backward alone on each of the `_shifts`."""
    found = []
    for shift, _ in _shifts(x):
        out, failed = call_answer(lambda t: fn_class.apply(t).detach(), x + shift, what="it")
        if failed is not None:
            found.append({"raised": failed["detail"]})
            continue
        with torch.no_grad():
            grad, failed = call_answer(_lse_backward_alone(fn_class), x + shift, g.clone(),
                                       what="it")
        found.append({"out": plain(out)} | ({"raised": failed["detail"]} if failed else
                                            {"grad": plain(grad)}))
    return found


def _saved(fn_class: type, x: torch.Tensor) -> dict[str, Any]:
    """What the Function keeps for backward: saved tensors, and tensors kept on ctx."""
    node = fn_class.apply(x.detach().clone().requires_grad_()).grad_fn
    return {"stashed": kept_on_ctx(node),
            "tensors": [t.detach().clone() for t in node.saved_tensors]}


def _observe_lse(lse_class: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """A structural slip as a failure; else backward alone on each trial, what is saved,
    the rows far from 0, and what gradgradcheck and gradcheck make of it."""
    x = inputs["trials"][0][0]
    failed = (not_a_function(lse_class) or _shape_slip(lse_class, *inputs["wide"])
              or real_run(lse_class, (x,), ["x"]))
    if failed is not None:
        return failed
    runs = backward_runs(_lse_backward_alone(lse_class), inputs["trials"])
    if stopped(runs):
        return {"backward": runs}
    return {"backward": runs,
            "saved": _saved(lse_class, x),
            "far": _far(lse_class, *inputs["far"]),
            "once": getattr(lse_class.backward, "__wrapped__", None) is not None,
            "gradgradcheck": torch_check(torch.autograd.gradgradcheck, lse_class.apply, (x,)),
            "gradcheck": torch_check(torch.autograd.gradcheck, lse_class.apply, (x,))[0]}


def _lse_want(inputs: dict[str, Any]) -> dict[str, Any]:
    x, g = inputs["far"]
    return {"trials": inputs["trials"], "far": inputs["far"],
            "grads": [_lse_reference(x.clone(), g.clone()) for x, g in inputs["trials"]],
            "far_grads": [_lse_reference(x + shift, g.clone()) for shift, _ in _shifts(x)]}


def _saved_slip(saved: dict[str, Any]) -> str | None:
    if saved["stashed"]:
        return (f"saved for backward: the softmax weights (or what backward needs for them) "
                f"are not saved: they are kept as ctx.{saved['stashed'][0]}. Save tensors with "
                "ctx.save_for_backward(...): autograd then frees them after backward, notices "
                "in-place changes, and makes no reference cycle.")
    if not saved["tensors"]:
        return ("saved for backward: nothing is saved for backward, so it cannot compute the "
                "softmax weights: save x and the output with ctx.save_for_backward.")
    return None


def _far_slip(far: list[dict[str, Any]], x: torch.Tensor, grads: list[torch.Tensor]
              ) -> str | None:
    """Forward and backward on rows far from 0, where exp alone overflows or underflows:
    the max shift in forward, exp(x - out) in backward; then on rows far from each other,
    where only each row's own maximum will do (the shifts before passed)."""
    for (shift, rows), found, reference in zip(_shifts(x), far, grads, strict=True):
        mixed = isinstance(shift, torch.Tensor)
        want = torch.logsumexp(x + shift, dim=-1)
        out = found.get("out")
        if out is None:
            return found["raised"]
        if not isinstance(out, torch.Tensor) or not torch.isfinite(out).all():
            shown = out[~torch.isfinite(out)][0].item() if isinstance(out, torch.Tensor) else out
            if mixed:
                return (f"forward gives {shown} on {rows}, though not when every row is near "
                        "the same number: the shift is not each row's own maximum. Shift by "
                        "x.amax(dim=-1, keepdim=True), not by the whole tensor's maximum.")
            return (f"forward gives {shown} on {rows}: exp of them overflows (or underflows "
                    "to 0) in float64. Shift by the row's maximum m first: out = m + "
                    "log(sum(exp(x - m))).")
        if out.shape != want.shape or not torch.allclose(out, want, rtol=1e-12, atol=0):
            return f"forward does not compute log(sum(exp(x))) along the last dimension on {rows}."
        if "raised" in found:
            return found["raised"]
        got = found["grad"]
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            if mixed:
                return (f"backward returns nan or inf on {rows}, though not when every row is "
                        "near the same number: its shift is not each row's own maximum. "
                        "exp(x - out), with the saved output, needs none.")
            return (f"backward returns nan or inf on {rows} although forward is fine there: "
                    "the max shift is forgotten in backward. exp(x) / exp(x).sum() overflows "
                    "to inf / inf (or underflows to 0 / 0); exp(x - out), with the saved "
                    "output, never does.")
        if not (isinstance(got, torch.Tensor) and got.shape == reference.shape
                and torch.allclose(got, reference, rtol=1e-10, atol=1e-300)):
            return f"backward is wrong on {rows}."
    return None


def _double_slip(got: dict[str, Any], x: torch.Tensor) -> str | None:
    """gradgradcheck, with the slip behind a failure named."""
    if got["once"]:
        return ("backward is marked @once_differentiable: its result has no history, so a "
                "second derivative through it raises or, beside another path, silently misses "
                "this part (section 4). The exercise asks for a backward written with "
                "differentiable torch operations, which needs no decorator.")
    passed, raised = got["gradgradcheck"]
    if passed:
        return None
    p = torch.softmax(x, dim=-1)
    if any(t.shape == p.shape and torch.allclose(t, p, rtol=1e-12, atol=0)
           for t in got["saved"]["tensors"]):
        return ("the second derivative is wrong: backward uses softmax weights computed in "
                "forward and saved. forward runs with recording off, so to double backward "
                "they are constants and their own dependence on x is lost. Save x and the "
                "output instead and compute the weights in backward, "
                "exp(x - out.unsqueeze(-1)).")
    return ("gradgradcheck failed" + (f" (it raised {raised})" if raised else "")
            + ": backward leaves autograd somewhere (.detach(), .item(), torch.no_grad(), "
              "NumPy), so its own derivative is lost. Write it with torch operations on the "
              "saved tensors only.")


def _lse_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    slip = words(judged_by_hand(
        got["backward"], want["trials"], want["grads"], name="LogSumExp.backward",
        mistakes=_LSE_SLIPS, params=("x", "grad_output"),
        advice="out = log(sum_k exp(x_k)): differentiate it with respect to one x_j, write "
               "the result with out itself, then multiply by grad_output (unsqueezed along "
               "the summed dimension)."), _LSE)
    slip = (slip or _saved_slip(got["saved"])
            or _far_slip(got["far"], want["far"][0], want["far_grads"])
            or _double_slip(got, want["trials"][0][0]))
    if slip is None and got["gradcheck"] is not True:
        return "gradcheck failed in float64."
    return slip


LOGSUMEXP = Method(
    name=_LSE,
    make_inputs=_lse_inputs,
    observe=_observe_lse,
    reference=_lse_want,
    wrong=_lse_slip,
    trials=1,
    passed="backward matches autograd on 3 new random inputs; far from 0: forward and "
           "backward finite and right on rows near +1000, near -1000 and near both in turn; "
           "gradcheck: passed in float64; gradgradcheck: passed (backward is itself "
           "differentiable and correct)",
)
