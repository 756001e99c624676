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
torch.func's ``grad`` and ``vmap`` accept the Function. Exercise 3 calls backward
itself on inputs that broadcast, to see the shapes it returns (the engine would
sum a gradient of the output's shape down and hide the slip). Exercise 4, a fused
log-sum-exp, adds rows far from 0 (where the max shift matters, in forward and in
backward), what is saved, and a double backward that must work: gradgradcheck,
with once_differentiable and softmax weights saved from forward named.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable
from torch.utils._python_dispatch import TorchDispatchMode

from ._spec import (
    Check,
    Method,
    Prediction,
    Report,
    attempt,
    check_by_hand,
    check_function,
    compare,
    forbid_autograd,
)
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


# --------------------------------------------------------------------------
# Exercise 3: a Function whose inputs broadcast
# --------------------------------------------------------------------------

def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _shape(t):
    return tuple(t.shape)


def _ran(name, run, *args):
    """``run(*args)`` and None, or None and the failed Report that says why it raised."""
    return attempt(name, run, *args, what="it")


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


def _relative(got, want):
    return float((got - want).abs().max()) / max(float(want.abs().max()), 1e-300)


def _estimate_like(got, want):
    """Close to the answer the way a numerical estimate is, not to round-off."""
    return got.is_floating_point() and _relative(got.double(), want) < 1e-5


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
                                          f"{_relative(got, want):.0e} of its size. A formula "
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


# --------------------------------------------------------------------------
# Exercise 4: log-sum-exp along the last dimension, fused, twice differentiable
# --------------------------------------------------------------------------

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


EXERCISES = {
    "l15-power-mix": Method(check=_check_power_mix),
    "l15-tanh-output": Method(check=_check_tanh),
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
