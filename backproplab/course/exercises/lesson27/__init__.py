"""Lesson 27, custom ops: its exercises and its predictions, and the checks of the
second and third exercises.

- ``l27-rms-norm-op`` (method, `rms`): a fused RMS norm, ``y = x * r * w`` with
  ``r = 1 / sqrt(mean(x**2 over a row) + eps)`` for x of shape (n, d), w of shape (d,)
  and eps a plain number. Its forward, `op.rms_norm_forward`, is written in numpy, so
  torch cannot differentiate or trace it. The learner writes the three pieces that make
  it an op autograd and torch.compile can use, and hands them over as a dict:
  ``{"fake": ..., "setup_context": ..., "backward": ...}``. The check registers the
  forward under a fresh name with them (`op`), and goes through the fake, the backward's
  form, its formula (against autograd, the slips named), ``torch.library.opcheck`` and
  ``torch.compile``; the last three are judged in the grader from what they gave.
- ``l27-rms-norm-jvp`` (by hand, in this module): the same norm's forward-mode rule, the tangent
  of y for tangents of x and w, as a Function's ``jvp`` would return it; checked against
  ``torch.func.jvp`` of the norm in torch operations, the backward's formula named as a slip.
- ``l27-rms-norm-vmap`` (method, in this module): a vmap rule for the op,
  ``rms_norm_vmap(info, in_dims, x, w, eps)``, which runs a whole batch in one call of the
  numpy forward. It is registered on a fresh op (the lesson's forward, with a right fake and
  backward), and ``torch.vmap`` of the op runs on five new batches: x batched at dim 0; x
  batched at dim 1; x (at its last dim, 2) and w batched; w alone batched, at its dim 1; x
  alone batched at its last dim, 2.
  Where the answer runs, the observation keeps each result and how many times the rule
  called ``rms_norm_forward`` (its name in the answer's namespace is watched); the grader
  holds each result against the norm applied example by example, and a rule that calls
  the forward once per example, not once for the batch, is named as such.

The predictions: the graph breaks of the lesson's swish written as an
``autograd.Function`` with a numpy body (``torch._dynamo.explain``), and which of
opcheck's tests fails when the fake returns float32 for float64 inputs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from .._spec import METHOD, ByHand, Method, Prediction, Task, call_answer, failure, plain
from .op import (
    NAMESPACE,
    fresh_name,
    inverse_rms,
    quiet,
    rms_inputs,
    rms_norm_forward,
    rms_norm_reference,
)
from .rms import OPCHECK_TESTS, RMS_OP

# --------------------------------------------------------------------------- Exercise 2


def tangent_inputs(gen: torch.Generator) -> tuple:
    """(x, w, eps, x_t, w_t): new sizes and values, and a tangent for each tensor input."""
    x, w, eps, x_t = rms_inputs(gen)  # the fourth, shaped like x, serves as x's tangent
    w_t = torch.randn(w.shape, generator=gen, dtype=torch.float64)
    return x, w, eps, x_t, w_t


def _reference(x, w, eps, x_t, w_t):
    """torch.func's forward mode through the norm in torch operations."""
    return torch.func.jvp(lambda a, b: rms_norm_reference(a, b, eps), (x, w), (x_t, w_t))[1]


def _slip(r_t_of=None, *, w_moves=True, x_moves=True):
    """The tangent with its r's tangent computed by ``r_t_of`` (right when None), or with
    the path through w or x's direct one left out."""
    def wrong(x, w, eps, x_t, w_t):
        r = inverse_rms(x, eps)
        right = -r**3 * (x * x_t).mean(-1, keepdim=True)
        r_t = right if r_t_of is None else r_t_of(x, x_t, r)
        y_t = (x_t * r if x_moves else 0) + x * r_t
        return y_t * w + (x * r * w_t if w_moves else 0)
    return wrong


def _backward_formula(x, w, eps, x_t, w_t):
    """Exercise 1's dL/dx with the tangent in place of the gradient, and its dL/dw's
    summand: uᵀ·J where J·v was asked for."""
    r = inverse_rms(x, eps)
    gw = x_t * w
    return r * gw - x * r**3 * (gw * x).mean(-1, keepdim=True) + x * r * w_t


JVP_SLIPS = {
    "r treated as a constant: r depends on x (through the row's mean of x**2), so moving x "
    "moves r too, by r_t = -r**3 * mean(x * x_t) over the row":
        _slip(lambda x, x_t, r: 0 * r),
    "w's tangent is missing: w moves along w_t as well, which adds x * r * w_t":
        _slip(w_moves=False),
    "the direct path from x is missing: y = x * r * w moves with x itself (x_t * r * w), "
    "not only through r":
        _slip(x_moves=False),
    "r's tangent sums over the row where it should average: mean(x**2) moves by "
    "2 * mean(x * x_t), with the row's 1/d":
        _slip(lambda x, x_t, r: -r**3 * (x * x_t).sum(-1, keepdim=True)),
    "r's tangent has a stray factor 1/2: the square's 2 (d x**2 = 2 x dx) cancels the "
    "inverse square root's -1/2, leaving -r**3 * mean(x * x_t)":
        _slip(lambda x, x_t, r: -0.5 * r**3 * (x * x_t).mean(-1, keepdim=True)),
    "r's tangent has the wrong power of r: d (m + eps)**(-1/2) = -1/2 (m + eps)**(-3/2) dm, "
    "which is r cubed":
        _slip(lambda x, x_t, r: -r**2 * (x * x_t).mean(-1, keepdim=True)),
    "r's tangent has the wrong sign: r = (m + eps)**(-1/2) falls as m grows":
        _slip(lambda x, x_t, r: r**3 * (x * x_t).mean(-1, keepdim=True)),
    "this is the backward's formula, uᵀ·J with the tangent in place of the gradient: in J·v, "
    "w multiplies the whole tangent of x * r from outside, and the row's mean holds x * x_t "
    "alone":
        _backward_formula,
}

JVP_ADVICE = (
    "Carry the tangents forward: m = mean(x**2) over the row moves by 2 * mean(x * x_t); "
    "r = (m + eps)**(-1/2) by -1/2 * r**3 times that; then y = (x * r) * w by the product "
    "rule, with w_t for w."
)

RMS_JVP = ByHand(
    name="rms_norm_jvp",
    reference=_reference,
    make_inputs=tangent_inputs,
    mistakes=JVP_SLIPS,
    advice=JVP_ADVICE,
    task=Task(asks_for="the tangent by hand", result="the tangent",
              how="Carry the tangents forward through each step and compute them with plain "
                  "tensor operations.",
              reference="torch.func.jvp"),
)


# --------------------------------------------------------------------------- Exercise 3

NAME = "rms_norm_vmap"
# (x's batch dimension, w's): None where that input is one example's, shared by the batch.
# x batched at dim 2 tells movedim(x_dim, 0) from transpose(0, x_dim) and movedim(0, x_dim),
# which agree with it at dims 0 and 1. x alone batched at its last dim: a rule that leaves
# x's batch in place when w is shared agrees at dims 0 and 1, not where the mean is taken.
KINDS = ((0, None), (1, None), (2, 0), (None, 1), (2, None))


def _fake(x, w, eps):
    return torch.empty(torch.broadcast_shapes(x.shape, w.shape), dtype=x.dtype)


def _setup_context(ctx, inputs, output):
    x, w, eps = inputs
    ctx.save_for_backward(x, w)
    ctx.eps = eps


def _backward(ctx, grad):
    x, w = ctx.saved_tensors
    r = inverse_rms(x, ctx.eps)
    gw = grad * w
    return r * gw - x * r**3 * (gw * x).mean(-1, keepdim=True), (grad * x * r).sum(0), None


def _batched(gen, batch, shape, where):
    """A batch of ``batch`` tensors of ``shape``, its batch dimension at ``where`` (None:
    one tensor of ``shape``, shared by the batch)."""
    if where is None:
        return torch.randn(shape, generator=gen, dtype=torch.float64)
    return torch.randn(batch, *shape, generator=gen, dtype=torch.float64).movedim(0, where)


def vmap_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The cases of KINDS, each of new sizes: x, w, eps and in_dims (x's and w's batch
    dimension, None for eps). The batch size differs from n and d, so that a batch
    dimension taken for another shows in the result's shape."""
    cases = []
    for bx, bw in KINDS:
        n, d = (int(s) for s in torch.randint(2, 6, (2,), generator=gen))
        batch = n + d + int(torch.randint(1, 3, (), generator=gen))
        x, w = _batched(gen, batch, (n, d), bx), _batched(gen, batch, (d,), bw)
        cases.append({"x": x, "w": w, "eps": [0.1, 0.5, 1.0][len(cases) % 3],
                      "in_dims": [bx, bw, None], "batch": batch})
    return {"cases": cases}


def _op_with(rule):
    """The lesson's forward as a new op, a right fake and backward, and ``rule`` for vmap."""
    op = torch.library.custom_op(f"{NAMESPACE}::{fresh_name('rms_norm_vmap')}",
                                 rms_norm_forward, mutates_args=())
    op.register_fake(_fake)
    op.register_autograd(_backward, setup_context=_setup_context)
    op.register_vmap(rule)
    return op


# Where both are batched, the mistake may be x's or w's: the advice covers both.
LINE_UP = ("Move each batched input's batch dimension to the front, its other dimensions "
           "kept in order (movedim(dim, 0)), and give w a row dimension, (batch, 1, d), so "
           "that each example's weights line up with its rows of x")


def _raised(err: Exception, in_dims: tuple, x_dims: int) -> str:
    said = str(err).splitlines()[0].rstrip(" .") if str(err) else ""
    hint = f". {LINE_UP}" if in_dims[1] is not None else ""
    if in_dims[1] is None and in_dims[0] == x_dims - 1:
        hint = (". x's batch dimension is its last here, where the forward takes each row's "
                "mean and lines w up: move it to the front, its other dimensions kept in "
                "order (movedim(dim, 0))")
    return f"torch.vmap of the op with in_dims={in_dims} raised {type(err).__name__}: {said}{hint}"


def _observe(answer, inputs):
    """Each case's result under torch.vmap with the answer as the op's rule, and the number
    of times the rule called ``rms_norm_forward``."""
    if not callable(answer):
        return failure("fail", f"{NAME} is {type(answer).__name__}, not a function of "
                               "(info, in_dims, x, w, eps)")
    namespace = getattr(answer, "__globals__", {})
    calls: list[int] = []
    original = namespace.get("rms_norm_forward")

    def counted(*args, **kwargs):
        calls.append(1)
        return (original or rms_norm_forward)(*args, **kwargs)

    op = _op_with(answer)
    runs = []
    try:
        if original is not None:
            namespace["rms_norm_forward"] = counted
        for case in inputs["cases"]:
            calls.clear()
            in_dims = tuple(case["in_dims"])
            with quiet():
                out, failed = call_answer(
                    lambda c=case, d=in_dims: torch.vmap(op, in_dims=d)(c["x"], c["w"], c["eps"]),
                    what=NAME, raised=lambda err, d=in_dims, k=case["x"].ndim: _raised(err, d, k))
            if failed is not None:
                return failed
            runs.append({"out": plain(out), "calls": len(calls)})
    finally:
        if original is not None:
            namespace["rms_norm_forward"] = original
    return {"runs": runs, "watched": original is not None}


def _one_by_one(case):
    """The norm applied to each example in turn, stacked: what vmap must give."""
    x, w = case["x"], case["w"]
    bx, bw = case["in_dims"][:2]
    xs = x.movedim(bx, 0) if bx is not None else x.expand(case["batch"], *x.shape)
    ws = w.movedim(bw, 0) if bw is not None else w.expand(case["batch"], *w.shape)
    return torch.stack([rms_norm_reference(xi, wi, case["eps"]) for xi, wi in zip(xs, ws,
                                                                                   strict=True)])


def _vmap_reference(inputs):
    return {"outs": [_one_by_one(case) for case in inputs["cases"]],
            "w batched": [case["in_dims"][1] is not None for case in inputs["cases"]]}


def _problem(got, want, cases=None) -> str | None:
    """What is wrong with the first case that is wrong, in words (the cases' shapes said
    when ``cases`` are given); None when every case is right."""
    for k, (run, right) in enumerate(zip(got["runs"], want["outs"], strict=True)):
        case = cases[k] if cases else None
        where = (f"with x of shape {tuple(case['x'].shape)}, w of shape "
                 f"{tuple(case['w'].shape)} and in_dims={tuple(case['in_dims'])}, " if case
                 else "")
        out = run["out"]
        if not isinstance(out, torch.Tensor) or out.shape != right.shape:
            found = tuple(out.shape) if isinstance(out, torch.Tensor) else out
            return (f"{where}torch.vmap gave a result of shape {found}, where the batch of "
                    f"{right.shape[0]} examples has shape {tuple(right.shape)}. Move each "
                    "batched input's batch dimension to the front (movedim) and return 0 as "
                    "the output's, or return where the batch dimension really is")
        if not torch.allclose(out, right, rtol=1e-10, atol=1e-12):
            return (f"{where}torch.vmap's result differs from the norm applied example by "
                    f"example by up to {(out - right).abs().max():.3g}"
                    + (f". {LINE_UP}" if want["w batched"][k] else ""))
        if got["watched"] and run["calls"] == 0:
            return (f"{where}your rule never called rms_norm_forward: a vmap rule runs the "
                    "op's own kernel on the whole batch, not the norm computed another way")
        if got["watched"] and run["calls"] > 1:
            return (f"{where}your rule called rms_norm_forward {run['calls']} times: a vmap "
                    "rule runs the whole batch in one call (numpy's mean over the last axis "
                    "and its broadcasting take any leading dimensions)")
    return None


VMAP_RULE = Method(
    name=NAME,
    make_inputs=vmap_inputs,
    observe=_observe,
    reference=_vmap_reference,
    agree=lambda got, want: _problem(got, want) is None,
    explain=lambda inputs, got, want: _problem(got, want, inputs["cases"]) or "it differs.",
    trials=1,
    # Registering the op builds its schema's code as it goes, where the answer runs.
    allows=frozenset({"exec"}),
    # The rule calls the lesson's forward, whose body is numpy.
    vocabulary=METHOD.allowing("torch.library.", "numpy", "numpy.", "Tensor.numpy",
                               "torch.from_numpy"),
    passed="torch.vmap of the op with your rule equals the norm applied example by example "
           "on 5 new batches (x batched at dim 0, at dim 1 and at its last, 2; x at dim 2 "
           "and w batched; w alone batched), each in one call of the forward",
)


EXERCISES = {
    "l27-rms-norm-op": RMS_OP,
    "l27-rms-norm-jvp": RMS_JVP,
    "l27-rms-norm-vmap": VMAP_RULE,
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
    with quiet():
        explained = torch._dynamo.explain(g)(x)
    torch._dynamo.reset()
    return explained.graph_break_count


@functools.cache
def _dtype_fake_answer() -> str | tuple[str, ...]:
    """The opcheck tests that fail when swish's fake returns float32 for float64 inputs."""
    op = torch.library.custom_op(f"{NAMESPACE}::{fresh_name('swish')}", swish_numpy,
                                 mutates_args=())
    op.register_fake(lambda x, beta: torch.empty(x.shape))
    op.register_autograd(_swish_backward, setup_context=_swish_setup_context)
    x = torch.linspace(-2, 2, 6, dtype=torch.float64, requires_grad=True)
    with quiet():
        results = torch.library.opcheck(op, (x, 1.5), raise_exception=False)
    failing = tuple(test for test, result in results.items() if result != "SUCCESS")
    return failing[0] if len(failing) == 1 else failing


PREDICTIONS = {
    "l27-predict-function-breaks": Prediction(
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
    "l27-predict-fake-dtype": Prediction(
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
