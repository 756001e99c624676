"""Lesson 15's exercise 3: (a - b)**2 as a Function whose inputs broadcast. The check
calls backward itself, to see the shapes it returns: the engine would sum a gradient of
the output's shape down to the input's and hide the slip."""

from __future__ import annotations

import torch

from .._spec import Check, Report, compare, forbid_autograd, relative
from .._spec import failed as _fail
from .calling import _ran, _randn, _shape

_FUNCTION = "(a - b)**2 as a Function"
# The visible check always starts on the shapes of the exercise's text.
_FIRST_PAIR = ((3, 1), (1, 4))
_PAIRS = (
    ((2, 3, 1), (4,)),
    ((5,), (2, 1)),
    ((1, 4), (3, 4)),
    ((2, 1, 3), (4, 1)),
    ((3, 1, 2), (1, 5, 1)),
    ((4, 3), (3,)),
)


def _shape_pairs(seed):
    """Three pairs of input shapes; the visible check (seed 0) starts with (3, 1) x (1, 4)."""
    order = torch.randperm(len(_PAIRS), generator=torch.Generator().manual_seed(seed))
    picks = [_PAIRS[int(i)] for i in order[:3]]
    return [_FIRST_PAIR, *picks[:2]] if seed == 0 else picks


def _broadcast_dims(shape, out_shape):
    """The dimensions of out_shape along which a tensor of ``shape`` was broadcast."""
    lead = len(out_shape) - len(shape)
    return [d for d in range(len(out_shape))
            if d < lead or (shape[d - lead] == 1 and out_shape[d] != 1)]


def _dims_text(dims):
    """'dimension 1' or 'dimensions 0 and 2'."""
    if len(dims) == 1:
        return f"dimension {dims[0]}"
    return "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}"


def _shape_message(label, got, want, out_shape):
    broadcast = _broadcast_dims(want, out_shape)
    if not broadcast:
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}. "
                f"{label} has the output's shape {tuple(out_shape)} (it was not broadcast), "
                "so its gradient has that shape too: no sum is needed.")
    dims, them = _dims_text(broadcast), "it" if len(broadcast) == 1 else "them"
    if got == tuple(out_shape):
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
                f"it still has the output's shape. {label} was broadcast along {dims} of the "
                f"output, so sum the gradient over {them} (keepdim=True where "
                f"{label} has a 1) to get back to {want}. The engine happens to do this sum "
                "for you when the shapes allow, which is why gradcheck alone cannot see it; "
                "a backward still returns one gradient per input, shaped like it.")
    if torch.Size(got).numel() == torch.Size(want).numel():
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
                "the right number of entries, but a summed dimension was dropped. Keep it with "
                "keepdim=True (or reshape to the input's shape).")
    return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
            f"summed over the wrong dimensions. {label} was broadcast along {dims} of the "
            f"output {tuple(out_shape)}; sum over exactly those.")


def _estimate_like(got, want):
    """Close to the answer the way a numerical estimate is, not to round-off."""
    return got.is_floating_point() and relative(got.double(), want) < 1e-5


def _backward_itself(function, out, g):
    """What ``function.backward`` returns for ``out``, called directly with the output's
    grad_fn as its ctx: the engine would sum a gradient of the broadcast shape down to the
    input's shape by itself, and hide the shape backward really returns."""
    with torch.no_grad(), forbid_autograd():
        return function.backward(out.grad_fn, g)


def _check_broadcast_function(answer, seed):
    """Shapes from backward itself, values to round-off, and gradcheck, on broadcast inputs."""
    if not (isinstance(answer, type) and issubclass(answer, torch.autograd.Function)):
        return _fail(_FUNCTION, f"expected a class derived from torch.autograd.Function, got "
                                  f"{type(answer).__name__}.")
    gen = torch.Generator().manual_seed(1000 + seed)
    tried = []
    for a_shape, b_shape in _shape_pairs(seed):
        a = _randn(gen, *a_shape).requires_grad_()
        b = _randn(gen, *b_shape).requires_grad_()
        out, failure = _ran(_FUNCTION, answer.apply, a, b)
        if failure is not None:
            return failure
        want_out = (a - b).detach() ** 2
        if not isinstance(out, torch.Tensor) or _shape(out) != _shape(want_out):
            got = _shape(out) if isinstance(out, torch.Tensor) else type(out).__name__
            return _fail(_FUNCTION, f"forward returned {got} for inputs of shapes {a_shape} "
                                      f"and {b_shape}; expected (a - b)**2, shape "
                                      f"{_shape(want_out)}.")
        if not compare("forward", out.detach(), want_out).ok:
            return _fail(_FUNCTION, f"forward does not compute (a - b)**2 (inputs of shapes "
                                      f"{a_shape} and {b_shape}).")
        if out.grad_fn is None:
            return _fail(_FUNCTION, "forward's output has no grad_fn: call the Function "
                                      "through .apply and return a tensor computed from a, b.")
        g = _randn(gen, *_shape(out))
        grads, failure = _ran(_FUNCTION, _backward_itself, answer, out, g.clone())
        if failure is not None:
            return failure
        if not isinstance(grads, (tuple, list)) or len(grads) != 2:
            n = len(grads) if isinstance(grads, (tuple, list)) else 1
            return _fail(_FUNCTION, f"backward returned {n} value(s); it returns one "
                                      "gradient per input of forward: (grad_a, grad_b).")
        da_want, db_want = torch.autograd.grad((a - b) ** 2, (a, b), g)
        for label, got, want in (("a", grads[0], da_want), ("b", grads[1], db_want)):
            if not isinstance(got, torch.Tensor):
                return _fail(_FUNCTION, f"backward returned {type(got).__name__} for {label}; "
                                          "expected a tensor shaped like it.")
            if _shape(got) != _shape(want):
                return _fail(_FUNCTION, _shape_message(label, _shape(got), _shape(want),
                                                         _shape(out)), "shape")
            report = compare(f"grad_{label} (shapes {a_shape} and {b_shape})", got, want,
                             rtol=1e-12, atol=1e-12 * float(want.abs().max()))
            if not report.ok and _estimate_like(got, want):
                return _fail(_FUNCTION, f"grad_{label} agrees with autograd only to about "
                                          f"{relative(got, want):.0e} of its size. A formula "
                                          "derived by hand agrees to round-off (about 1e-16); "
                                          "a numerical estimate such as finite differences "
                                          "only to about 1e-9, which is what this looks like.",
                               "mismatch")
            if not report.ok:
                return report
        if not torch.autograd.gradcheck(answer.apply, (a, b), raise_exception=False):
            return _fail(_FUNCTION, f"gradcheck failed in float64 on inputs of shapes "
                                      f"{a_shape} and {b_shape}.")
        tried.append(f"{a_shape} x {b_shape}")
    return Report((
        Check(_FUNCTION, True, "pass", "backward returns gradients shaped like a and b for "
                                       f"inputs of shapes {', '.join(tried)}"),
        Check("gradcheck", True, "pass", "passed in float64 on each"),
    ))
