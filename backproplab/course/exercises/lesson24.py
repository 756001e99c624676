"""Lesson 24, custom ops: its exercise and its predictions.

- ``l24-rms-norm-op`` (method): a fused RMS norm, ``y = x * r * w`` with
  ``r = 1 / sqrt(mean(x**2 over a row) + eps)`` for x of shape (n, d), w of shape (d,)
  and eps a plain number. Its forward, `rms_norm_forward`, is written in numpy, so
  torch cannot differentiate or trace it. The learner writes the three pieces that make
  it an op autograd and torch.compile can use, and hands them over as a dict:
  ``{"fake": ..., "setup_context": ..., "backward": ...}``.

  **Fresh names.** A custom op is registered globally, by its name. On torch 2.13 a
  second ``custom_op`` with a name already taken replaces the first without a word, and
  the first op object then fails when called. So the check never reuses a name: each
  call of it registers `rms_norm_forward` under a new one, ``backproplab_l24::rms_norm_<n>``
  (n counts up; a name found taken is skipped), and attaches the learner's pieces to
  that op alone. A corrected answer is checked again in the same kernel on a new op; the
  learner's own ops, whatever their names, are never touched, and nothing Dynamo cached
  for one op is reused for another (Dynamo is reset before compiling).

  What the check does, on inputs made from the seed (new sizes, values and eps):

  1. the fake, called under ``FakeTensorMode`` on float64 and float32 inputs: it must
     run without reading data and return the output's shape and dtype;
  2. setup_context and backward called as plain functions on real tensors: a tensor
     the backward reads but setup_context did not save, a count of gradients other
     than three (None for eps) and a gradient not shaped like its input are named;
  3. the backward alone against autograd, by `check_by_hand` (float64, autograd
     refused, numerical estimates refused), with the typical slips of the formula named;
  4. ``torch.library.opcheck`` on the registered op, in float64 and float32: each
     failing test is named with what it means (a backward that cannot be traced with
     FakeTensors, numpy say, fails here);
  5. ``torch.compile`` of a small function using the op (AOTAutograd with compilers
     that run the graphs as they are): Dynamo's graph breaks are counted and any is a
     failure (``fullgraph=True`` would refuse it), the op must be one node of the
     graph, and the compiled gradients must equal eager autograd's on new inputs.

The predictions: the graph breaks of the lesson's swish written as an
``autograd.Function`` with a numpy body (``torch._dynamo.explain``), and which of
opcheck's tests fails when the fake returns float32 for float64 inputs.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import warnings
from typing import Any

import numpy as np
import torch

from ._spec import METHOD, Check, Method, Prediction, Report, check_by_hand
from ._spec import failed as _fail
from ._spec import first_line as _first_line

NAMESPACE = "backproplab_l24"
PIECES = ("fake", "setup_context", "backward")
_NUMBERS = itertools.count(1)


# --------------------------------------------------------------------------- the op


def rms_norm_forward(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The fused RMS norm in numpy: each row of x divided by its root mean square (eps
    added under the root), then scaled by w. Same code as the lesson's."""
    a, b = x.detach().numpy(), w.detach().numpy()
    r = 1.0 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)
    return torch.from_numpy(a * r * b)


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The same RMS norm in torch operations, which autograd differentiates."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _fresh_name(stem: str = "rms_norm") -> str:
    """``<stem>_<n>``, a name not yet registered in the check's namespace."""
    while True:
        name = f"{stem}_{next(_NUMBERS)}"
        if not hasattr(getattr(torch.ops, NAMESPACE), name):
            return name


def _register(pieces: dict[str, Any]) -> Any:
    """The forward as a new custom op, the learner's fake and autograd attached."""
    op = torch.library.custom_op(f"{NAMESPACE}::{_fresh_name()}", rms_norm_forward,
                                 mutates_args=())
    op.register_fake(pieces["fake"])
    op.register_autograd(pieces["backward"], setup_context=pieces["setup_context"])
    return op


@contextlib.contextmanager
def _quiet() -> Any:
    """torch's own warnings and log lines about a broken answer (anomaly mode inside
    opcheck, the fake-tensor logger), kept off stderr: the report says what failed."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


# --------------------------------------------------------------------------- inputs


_EPS = (0.1, 0.5, 1.0, 2.0)


def _sizes(gen: torch.Generator) -> tuple[int, int]:
    n, d = (int(s) for s in torch.randint(2, 7, (2,), generator=gen))
    return n, d


def _eps(gen: torch.Generator) -> float:
    return _EPS[int(torch.randint(len(_EPS), (1,), generator=gen))]


def rms_inputs(gen: torch.Generator) -> tuple[Any, ...]:
    """(x, w, eps, g): new sizes and values, eps large enough to matter, and g standing
    for the gradient arriving at the output."""
    n, d = _sizes(gen)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    g = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return x, w, _eps(gen), g


def _cases(gen: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """Two (x, w, eps) of new sizes, one in float64 and one in float32."""
    cases = []
    for dtype in (torch.float64, torch.float32):
        n, d = _sizes(gen)
        x = torch.randn(n, d, generator=gen, dtype=dtype)
        w = torch.randn(d, generator=gen, dtype=dtype)
        cases.append((x, w, _eps(gen)))
    return cases


def _reference(x, w, eps, g):
    x, w = x.requires_grad_(), w.requires_grad_()
    return torch.autograd.grad(rms_norm_reference(x, w, eps), (x, w), g)


# --------------------------------------------------------------------------- 1. the fake


def _pieces(name: str, answer: Any) -> dict[str, Any] | Report:
    if not isinstance(answer, dict):
        return _fail(name, f"expected a dict {{'fake': ..., 'setup_context': ..., "
                           f"'backward': ...}} of your three functions, got "
                           f"{type(answer).__name__}")
    missing = [k for k in PIECES if k not in answer]
    if missing:
        return _fail(name, f"the dict has no {', '.join(repr(k) for k in missing)}: it "
                           f"needs the three keys {', '.join(repr(k) for k in PIECES)}")
    for key in PIECES:
        if not callable(answer[key]):
            return _fail(name, f"answer[{key!r}] should be a function, got "
                               f"{type(answer[key]).__name__}")
    return answer


def _said(err: BaseException) -> str:
    """What went wrong, in one line: the compiler's wrapper unwrapped, no final period."""
    inner = getattr(err, "inner_exception", None)
    err = inner if isinstance(inner, BaseException) else err
    return f"{type(err).__name__}: {_first_line(err).rstrip('.')}"


def _shape(t: Any) -> str:
    return str(tuple(t.shape))


def _fake_problem(fake: Any, x: torch.Tensor, w: torch.Tensor, eps: float) -> Report | None:
    """The fake on FakeTensors like (x, w): None when it gives the output's metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    name = "fake"
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        try:
            out = fake(fx, fw, eps)
        except NotImplementedError:
            return _fail(name, "not written yet: it still raises NotImplementedError.",
                         "missing")
        except Exception as err:  # the learner's bug, told as a failed check
            return _fail(name, f"it raised {_said(err)}. A fake "
                               "gets tensors without data (FakeTensors: a shape, a dtype, a "
                               "device, no numbers), so it may read x.shape and x.dtype but "
                               "never the values: make an empty tensor of the output's shape "
                               "and dtype, without computing anything")
    if not isinstance(out, torch.Tensor):
        return _fail(name, f"it returned {type(out).__name__}; return a tensor like the "
                           "op's output (torch.empty_like(x), say)")
    if out.shape != x.shape:
        return _fail(name, f"wrong shape: for x of shape {_shape(x)} and w of shape "
                           f"{_shape(w)} it returns {_shape(out)}, but the op returns "
                           f"{_shape(x)} (y has x's shape). opcheck's test_faketensor "
                           "compares the two, and the compiler would plan every later "
                           "operation with the fake's shape")
    if out.dtype != x.dtype:
        return _fail(name, f"wrong dtype: for {x.dtype} inputs it returns {out.dtype}, "
                           f"but the op returns {x.dtype}. Make the result from x "
                           "(torch.empty_like(x), x.new_empty(...)) so that it follows the "
                           "inputs' dtype, which the check varies")
    if out.device != x.device:
        return _fail(name, f"it returns a tensor on {out.device}; the op's output is on "
                           f"{x.device}, with x")
    return None


# --------------------------------------------------------------------------- 2. the backward's form


class StandInContext:
    """What ``ctx`` offers setup_context and backward, so both can be called as plain
    functions: ``save_for_backward`` (tensors or None, as torch's) and ``saved_tensors``."""

    def __init__(self) -> None:
        self.needs_input_grad = (True, True, False)
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, torch.Tensor):
                raise TypeError(f"save_for_backward can only save tensors (or None), but "
                                f"argument {i} is of type {type(t).__name__}: keep a plain "
                                "number as an attribute of ctx instead")
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def call_directly(pieces: dict[str, Any], x, w, eps, g) -> tuple[Any, StandInContext]:
    """What the learner's backward returns for the gradient g, after their setup_context
    saw (x, w, eps) and the op's output, as autograd would call them."""
    ctx = StandInContext()
    pieces["setup_context"](ctx, (x, w, eps), rms_norm_forward(x, w, eps))
    return pieces["backward"](ctx, g), ctx


_READING_SAVED = ("unpack", "saved_tensors", "index out of range", "has no attribute")


def _form_problem(pieces: dict[str, Any], x, w, eps, g) -> tuple[Report | None, list[str]]:
    """(None or the failed report, names of tensors kept as ctx attributes) for the
    backward's form: what it reads, how many gradients it returns, their shapes."""
    name = "backward"
    try:
        grads, ctx = call_directly(pieces, x, w, eps, g)
    except NotImplementedError:
        return _fail(name, "not written yet: setup_context or backward still raises "
                           "NotImplementedError.", "missing"), []
    except Exception as err:  # the learner's bug, told as a failed check
        text = _said(err)
        if any(s in str(err) for s in _READING_SAVED):
            return _fail(name, f"something the backward reads was not saved: it raised "
                               f"{text} while reading what setup_context kept. setup_context "
                               "must save, with ctx.save_for_backward, every tensor the "
                               "backward reads (here x and w, or what you compute from "
                               "them), and keep a plain number such as eps as an attribute "
                               "of ctx"), []
        return _fail(name, f"setup_context or backward raised {text}", "error"), []
    stashed = sorted(k for k, v in vars(ctx).items() if isinstance(v, torch.Tensor))
    grads = grads if isinstance(grads, tuple) else (grads,)
    extra = grads[3:]
    if len(grads) < 3 or any(t is not None for t in extra):
        return _fail(name, f"it returns {len(grads)} value(s); the op has three inputs (x, "
                           "w, eps), so backward returns three gradients, one per input in "
                           "their order: dL/dx, dL/dw, and None for the plain number eps"), []
    if grads[2] is not None:
        return _fail(name, "its third gradient is not None: eps is a plain number, not a "
                           "tensor, so nothing flows back to it; return None for eps"), []
    shapes = [getattr(t, "shape", None) for t in grads[:2]]
    if shapes == [w.shape, x.shape]:
        return _fail(name, "the gradients are in the wrong order: backward returns them in "
                           "the order of the op's inputs, dL/dx first, then dL/dw"), []
    for label, got, like in (("dL/dx", grads[0], x), ("dL/dw", grads[1], w)):
        if not isinstance(got, torch.Tensor):
            return _fail(name, f"{label} is {type(got).__name__}, not a tensor"), []
        if got.shape != like.shape:
            told = (" w is used by every row of x, so its gradient is a sum over the rows "
                    "(a weight that broadcasts gets the sum of what reaches it)"
                    if like is w and got.shape == x.shape else "")
            return _fail(name, f"{label} has shape {_shape(got)}, but the input has shape "
                               f"{_shape(like)}: a gradient is shaped like its input.{told}"
                               " (autograd would quietly sum such a gradient down: "
                               "the backward itself must return the right shape.)"), []
    return None, stashed


# --------------------------------------------------------------------------- 3. the formula


def _r(x, eps):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _slip(dx_of, dw_of=None):
    def wrong(x, w, eps, g):
        r = _r(x, eps)
        dw = (g * x * r).sum(0) if dw_of is None else dw_of(x, w, eps, g, r)
        return dx_of(x, w, eps, g, r), dw
    return wrong


def _right_dx(x, w, eps, g, r):
    return r * g * w - x * r**3 * (g * w * x).mean(-1, keepdim=True)


RMS_SLIPS = {
    "r treated as a constant: r depends on x too (through the mean of x**2 over the row), "
    "so dL/dx has a second term, - x * r**3 * mean(g * w * x) over the row":
        _slip(lambda x, w, eps, g, r: r * g * w),
    "the term through r sums over the row where it should average: d mean(x**2)/dx = 2x/d, "
    "so that term carries the row's mean (the 1/d), not its sum":
        _slip(lambda x, w, eps, g, r: r * g * w - x * r**3 * (g * w * x).sum(-1, keepdim=True)),
    "w is missing from dL/dx: y = (x * r) * w, so the gradient reaching x * r is g * w, in "
    "both terms":
        _slip(lambda x, w, eps, g, r: r * g - x * r**3 * (g * x).mean(-1, keepdim=True)),
    "eps is missing from r in the backward: r = 1 / sqrt(mean(x**2) + eps), as in the forward":
        lambda x, w, eps, g: _slip(_right_dx)(x, w, 0.0, g),
    "the term through r has the wrong sign: r = (m + eps)**(-1/2) falls as m grows, so its "
    "term is subtracted":
        _slip(lambda x, w, eps, g, r: r * g * w + x * r**3 * (g * w * x).mean(-1, keepdim=True)),
    "the incoming gradient g is missing: the chain rule multiplies every path by the "
    "gradient arriving at the output":
        lambda x, w, eps, g: _slip(_right_dx)(x, w, eps, torch.ones_like(g)),
    "dL/dw misses r: y = x * r * w, so dL/dw sums g * x * r over the rows":
        _slip(_right_dx, lambda x, w, eps, g, r: (g * x).sum(0)),
}

RMS_ADVICE = (
    "With r = (mean(x**2) + eps)**(-1/2) per row: dL/dw sums g * x * r over the rows; "
    "dL/dx = r * (g * w) plus the path through r, where dr/dx = -r**3 * x / d."
)


def _formula(pieces: dict[str, Any], seed: int) -> Report:
    def backward_alone(x, w, eps, g):
        grads, _ = call_directly(pieces, x, w, eps, g)
        return grads[0], grads[1]

    return check_by_hand(backward_alone, _reference, rms_inputs, name="backward",
                         outputs=("dL/dx", "dL/dw"), seed=seed, mistakes=RMS_SLIPS,
                         advice=RMS_ADVICE)


# --------------------------------------------------------------------------- 4. opcheck

OPCHECK_TESTS = {
    "test_schema": "the op did something its schema does not declare: it changed an input "
                   "in place or returned one of its inputs",
    "test_autograd_registration": "the op's autograd is not registered at torch's autograd "
                                  "key",
    "test_faketensor": "the fake's result differs from the real output in shape, dtype, "
                       "strides or device",
    "test_aot_dispatch_dynamic": "AOTAutograd could not trace the op with its backward on "
                                 "FakeTensors of symbolic sizes, or the traced results "
                                 "differ from eager ones",
}


def _opcheck_problem(op: Any, cases: list) -> Report | None:
    from torch.library import opcheck

    for x, w, eps in cases:
        args = (x.clone().requires_grad_(), w.clone().requires_grad_(), eps)
        results = opcheck(op, args, raise_exception=False)
        for test, result in results.items():
            if result == "SUCCESS":
                continue
            meaning = OPCHECK_TESTS.get(test, "")
            text = _said(result)
            if test == "test_aot_dispatch_dynamic" and "numpy" in str(result):
                meaning = ("AOTAutograd traces your backward with FakeTensors, which have no "
                           "numbers to hand to numpy: write the backward in torch operations "
                           "(the forward may be numpy; the backward becomes part of the "
                           "compiled graph)")
            return _fail("opcheck", f"{test} fails on {x.dtype} inputs of shape {_shape(x)}: "
                                    f"{meaning}. torch says {text}")
    return None


# --------------------------------------------------------------------------- 5. torch.compile


def _compile_problem(op: Any, gen: torch.Generator) -> Report | None:
    """Compile a small function using the op; None if there is one graph with the op as
    one node and the compiled gradients equal eager autograd's on new inputs."""
    import torch._dynamo
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def run_as_is(gm, example_inputs):
        return make_boxed_func(gm.forward)

    graphs = []
    aot = aot_autograd(fw_compiler=run_as_is, bw_compiler=run_as_is)

    def backend(gm, example_inputs):
        graphs.append(gm)
        return aot(gm, example_inputs)

    x, w, eps, g = rms_inputs(gen)

    def use(x, w, g):
        return (op(torch.tanh(x), w, eps) * g).sum()

    name = "torch.compile"
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    breaks_before = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    try:
        grads = torch.autograd.grad(torch.compile(use, backend=backend)(xc, wc, g), (xc, wc))
    except Exception as err:  # the learner's pieces, under the compiler
        return _fail(name, f"compiling a function that uses the op raised {_said(err)}",
                     "error")
    finally:
        torch._dynamo.reset()
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values()) - breaks_before
    if breaks or len(graphs) != 1:
        return _fail(name, f"{breaks} graph break(s), {len(graphs)} graph(s): the op should "
                           "compile into one graph, as fullgraph=True demands")
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    if targets.count(op._opoverload) != 1:
        return _fail(name, "the op is not one node of the compiled graph")
    xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
    eager = torch.autograd.grad((rms_norm_reference(torch.tanh(xe), we, eps) * g).sum(),
                                (xe, we))
    for label, got, want in zip(("dL/dx", "dL/dw"), grads, eager, strict=True):
        if not torch.allclose(got, want, rtol=1e-10, atol=1e-12):
            return _fail(name, f"the compiled {label} differs from eager autograd's on new "
                               "inputs")
    return None


# --------------------------------------------------------------------------- the check


def _check_rms_op(answer: Any, seed: int) -> Report:
    name = "rms_norm op"
    pieces = _pieces(name, answer)
    if isinstance(pieces, Report):
        return pieces
    gen = torch.Generator().manual_seed(seed + 24)
    cases = _cases(gen)
    with _quiet():
        for x, w, eps in cases:
            failed = _fake_problem(pieces["fake"], x, w, eps)
            if failed is not None:
                return failed
        x, w, eps, g = rms_inputs(gen)
        failed, stashed = _form_problem(pieces, x, w, eps, g)
        if failed is not None:
            return failed
        formula = _formula(pieces, seed)
        if not formula.ok:
            return formula
        op = _register(pieces)
        failed = _opcheck_problem(op, cases)
        if failed is None:
            failed = _compile_problem(op, gen)
        if failed is not None:
            return failed
    checks = [
        Check("fake", True, "pass", "the output's shape and dtype, from float64 and float32 "
                                    "inputs, without reading data"),
        *formula.checks,
        Check("opcheck", True, "pass", "all four tests pass, in float64 and float32"),
        Check("torch.compile", True, "pass", "one graph with the op as one node, no graph "
                                             "break, gradients equal to eager autograd's"),
    ]
    if stashed:
        checks.append(Check("setup_context", True, "warning",
                            f"tensors kept as ctx attributes ({', '.join(stashed)}) rather "
                            "than with ctx.save_for_backward: they work here, but autograd "
                            "neither frees them after backward nor sees in-place changes to "
                            "them"))
    return Report(tuple(checks))


EXERCISES = {
    "l24-rms-norm-op": Method(check=_check_rms_op, vocabulary=METHOD.allowing("torch.library.")),
}


# --------------------------------------------------------------------------- predictions


def swish_numpy(x: torch.Tensor, beta: float) -> torch.Tensor:
    """The lesson's swish, x * sigmoid(beta * x), computed in numpy."""
    a = x.detach().numpy()
    return torch.from_numpy(a / (1 + np.exp(-beta * a)))


def _swish_setup_context(ctx, inputs, output):
    x, beta = inputs
    ctx.save_for_backward(x)
    ctx.beta = beta


def _swish_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(ctx.beta * x)
    return grad * (s + ctx.beta * x * s * (1 - s)), None


@functools.cache
def _function_breaks() -> int:
    """Graph breaks torch._dynamo.explain counts for the swish written as a Function."""
    import torch._dynamo

    class SwishFunction(torch.autograd.Function):
        forward = staticmethod(swish_numpy)
        setup_context = staticmethod(_swish_setup_context)
        backward = staticmethod(_swish_backward)

    def g(x):
        return SwishFunction.apply(x.sin(), 1.5).sum()

    x = torch.linspace(-2, 2, 6, dtype=torch.float64, requires_grad=True)
    torch._dynamo.reset()
    with _quiet():
        explained = torch._dynamo.explain(g)(x)
    torch._dynamo.reset()
    return explained.graph_break_count


@functools.cache
def _dtype_fake_answer() -> str | tuple[str, ...]:
    """The opcheck tests that fail when swish's fake returns float32 for float64 inputs."""
    op = torch.library.custom_op(f"{NAMESPACE}::{_fresh_name('swish')}", swish_numpy,
                                 mutates_args=())
    op.register_fake(lambda x, beta: torch.empty(x.shape))
    op.register_autograd(_swish_backward, setup_context=_swish_setup_context)
    x = torch.linspace(-2, 2, 6, dtype=torch.float64, requires_grad=True)
    with _quiet():
        results = torch.library.opcheck(op, (x, 1.5), raise_exception=False)
    failing = tuple(test for test, result in results.items() if result != "SUCCESS")
    return failing[0] if len(failing) == 1 else failing


PREDICTIONS = {
    "l24-predict-function-breaks": Prediction(
        question="graph breaks when the numpy swish, written as an autograd.Function, is "
                 "compiled",
        answer=_function_breaks,
        hint="Dynamo reads the Python of a Function's forward and backward as it reads the "
             "function around them; ask yourself whether the numpy calls in the forward are "
             "something it cannot put in a graph, or something it can translate.",
        why="Dynamo translates numpy calls on arrays from tensors into torch operations (its "
            "numpy support), so it traces right through the Function's forward and backward: "
            "{answer} graph breaks, one graph, and the graph holds the numpy arithmetic as "
            "torch operations, where the custom op was one opaque node",
    ),
    "l24-predict-fake-dtype": Prediction(
        question="the opcheck test that fails when the fake returns float32 for float64 inputs",
        answer=_dtype_fake_answer,
        hint="ask of each test what it compares: which of them sets the fake's result beside "
             "the real output, and which only compares numbers that the real kernel computes "
             "anyway?",
        why="{answer} runs the op on FakeTensors and on real tensors and compares the "
            "metadata of the two results; the schema and autograd tests never call the fake, "
            "and test_aot_dispatch_dynamic compares the values and gradients of the traced "
            "op with eager ones, which are right because the real kernel computes them. The "
            "compiler trusts the fake and would have planned with the wrong dtype",
        choices=tuple(OPCHECK_TESTS),
    ),
}
