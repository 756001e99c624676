"""Lesson 15's exercise 4: log-sum-exp along the last dimension as one Function, fused
and twice differentiable. Besides backward alone by hand, the check runs rows far from 0
(where the max shift matters, in forward and in backward), looks at what is saved, and
runs a double backward that must work: gradgradcheck, with once_differentiable and
softmax weights saved from forward named."""

from __future__ import annotations

import torch

from .._spec import Check, Report, check_by_hand
from .._spec import failed as _fail
from .._spec import first_line as _first_line
from .calling import (
    _gradchecks,
    _is_function,
    _not_a_function,
    _ran,
    _real_run,
    _shape,
    call_directly,
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


def _shape_slip(fn_class: type, x: torch.Tensor, g: torch.Tensor) -> Report | None:
    """grad_output has the result's shape, one dimension short of x: used as it is, it does
    not line up with the softmax weights."""
    if x.dim() < 2:
        return None
    try:
        with torch.no_grad():
            _lse_backward_alone(fn_class)(x.clone(), g.clone())
    except Exception as err:  # any other error is reported by the runs that follow
        if isinstance(err, RuntimeError) and "must match the size" in str(err):
            return _fail(_LSE, f"backward raised for x of shape {_shape(x)}: "
                               f"{_first_line(err)}. grad_output has the result's shape "
                               f"{_shape(g)}, without the summed dimension: put it back with "
                               "grad_output.unsqueeze(-1) before multiplying by the weights.",
                         "error")
    return None


def _two_or_more_dims(seed: int):
    """lse_inputs with x of at least 2 dimensions, where grad_output is one dimension short."""
    for k in range(5, 40):
        x, g = lse_inputs(torch.Generator().manual_seed(seed + k))
        if x.dim() >= 2:
            return x, g
    raise AssertionError("lse_inputs drew no 2-D input in 35 seeds")


def _far_check(fn_class: type, seed: int) -> Report | None:
    """Forward and backward on rows far from 0 (x + 1000 and x - 1000), where exp alone
    overflows or underflows: the max shift in forward, exp(x - out) in backward."""
    x, g = lse_inputs(torch.Generator().manual_seed(seed + 77))
    for shift in (_FAR, -_FAR):
        far = x + shift
        want = torch.logsumexp(far, dim=-1)
        ctx_out, failure = _ran(_LSE, lambda t: fn_class.apply(t).detach(), far.clone())
        if failure is not None:
            return failure
        if not torch.isfinite(ctx_out).all():
            return _fail(_LSE, f"forward gives {ctx_out.flatten()[0].item()} on rows whose "
                               f"entries are near {shift:+.0f}: exp of them overflows (or "
                               "underflows to 0) in float64. Shift by the row's maximum m "
                               "first: out = m + log(sum(exp(x - m))).", "mismatch")
        if not torch.allclose(ctx_out, want, rtol=1e-12, atol=0):
            return _fail(_LSE, f"forward does not compute log(sum(exp(x))) along the last "
                               f"dimension on rows near {shift:+.0f}.", "mismatch")
        with torch.no_grad():
            got, failure = _ran(_LSE, _lse_backward_alone(fn_class), far.clone(), g.clone())
        if failure is not None:
            return failure
        reference = _lse_reference(far.clone(), g.clone())
        if not torch.isfinite(got).all():
            return _fail(_LSE, f"backward returns nan or inf on rows near {shift:+.0f} "
                               "although forward is fine there: the max shift is forgotten in "
                               "backward. exp(x) / exp(x).sum() overflows to inf / inf (or "
                               "underflows to 0 / 0); exp(x - out), with the saved output, "
                               "never does.", "mismatch")
        if not torch.allclose(got, reference, rtol=1e-10, atol=1e-300):
            return _fail(_LSE, f"backward is wrong on rows near {shift:+.0f}.", "mismatch")
    return None


def _lse_saved(fn_class: type, x: torch.Tensor) -> tuple[Check | None, torch.Tensor | None]:
    """What the Function keeps for backward: saved tensors, not ctx attributes."""
    leaf = x.detach().clone().requires_grad_()
    out = fn_class.apply(leaf)
    node = out.grad_fn
    stashed = [key for key, value in vars(node).items() if isinstance(value, torch.Tensor)]
    if stashed:
        return Check("saved for backward", False, "fail",
                     f"the softmax weights (or what backward needs for them) are not saved: "
                     f"they are kept as ctx.{stashed[0]}. Save tensors with "
                     "ctx.save_for_backward(...): autograd then frees them after backward, "
                     "notices in-place changes, and makes no reference cycle."), None
    if not node.saved_tensors:
        return Check("saved for backward", False, "fail",
                     "nothing is saved for backward, so it cannot compute the softmax "
                     "weights: save x and the output with ctx.save_for_backward."), None
    return None, out


def _intermediate_weights(out: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether the Function saved the softmax weights themselves, computed in forward."""
    p = torch.softmax(x.detach(), dim=-1)
    return any(t.shape == p.shape and torch.allclose(t.detach(), p, rtol=1e-12, atol=0)
               for t in out.grad_fn.saved_tensors)


def _double_backward(fn_class: type, x: torch.Tensor) -> Report | None:
    """gradgradcheck, with the slip behind a failure named."""
    xs = x.detach().clone().requires_grad_()
    if getattr(fn_class.backward, "__wrapped__", None) is not None:
        return _fail(_LSE, "backward is marked @once_differentiable: its result has no "
                           "history, so a second derivative through it raises or, beside "
                           "another path, silently misses this part (section 4). The exercise "
                           "asks for a backward written with differentiable torch operations, "
                           "which needs no decorator.", "fail")
    try:
        ok = torch.autograd.gradgradcheck(fn_class.apply, (xs,), raise_exception=False)
    except Exception as err:  # a backward that breaks under create_graph, told as a failure
        ok, why = False, f" (it raised {type(err).__name__}: {_first_line(err)})"
    else:
        why = ""
    if ok:
        return None
    out = fn_class.apply(xs)
    if _intermediate_weights(out, xs):
        return _fail(_LSE, "the second derivative is wrong: backward uses softmax weights "
                           "computed in forward and saved. forward runs with recording off, "
                           "so to double backward they are constants and their own "
                           "dependence on x is lost. Save x and the output instead and "
                           "compute the weights in backward, exp(x - out.unsqueeze(-1)).",
                     "mismatch")
    return _fail(_LSE, "gradgradcheck failed" + why + ": backward leaves autograd somewhere "
                       "(.detach(), .item(), torch.no_grad(), NumPy), so its own derivative "
                       "is lost. Write it with torch operations on the saved tensors only.",
                 "mismatch")


def _check_logsumexp(lse_class, seed: int) -> Report:
    if not _is_function(lse_class):
        return _not_a_function(_LSE, lse_class)
    x, g = lse_inputs(torch.Generator().manual_seed(seed))
    slip = _shape_slip(lse_class, *_two_or_more_dims(seed))
    if slip is not None:
        return slip
    _, failed = _real_run(_LSE, lse_class, (x,), ["x"])
    if failed is not None:
        return failed
    formula = check_by_hand(
        _lse_backward_alone(lse_class), _lse_reference, lse_inputs, name="LogSumExp.backward",
        seed=seed, mistakes=_LSE_SLIPS,
        advice="out = log(sum_k exp(x_k)): differentiate it with respect to one x_j, write "
               "the result with out itself, then multiply by grad_output (unsqueezed along "
               "the summed dimension).",
    )
    if not formula.ok:
        return formula
    saved, out = _lse_saved(lse_class, x)
    if saved is not None:
        return Report((saved,))
    far = _far_check(lse_class, seed)
    if far is not None:
        return far
    double = _double_backward(lse_class, x)
    if double is not None:
        return double
    return Report(formula.checks + (
        Check("far from 0", True, "pass", f"forward and backward finite and right on rows "
                                          f"near +{_FAR:.0f} and -{_FAR:.0f}"),
    ) + _gradchecks(lse_class, x))
