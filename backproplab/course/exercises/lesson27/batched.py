"""Lesson 27, Exercise 3 (``l27-rms-norm-vmap``): a vmap rule for the RMS norm op, which
runs a whole batch in one call of the numpy forward.

The learner's rule, ``rms_norm_vmap(info, in_dims, x, w, eps)``, is registered on a fresh
op (the lesson's forward, with a right fake and backward), and ``torch.vmap`` of the op runs
on four new cases: x batched at dim 0; x batched at dim 1; x (at its last dim, 2) and w
batched; w alone batched, at its dim 1. Where the answer runs, the observation keeps each
result and how many times the rule called ``rms_norm_forward`` (its name in the answer's
namespace is watched); the grader holds each result against the norm applied example by
example, and a rule that calls the forward once per example is named as such.
"""

from __future__ import annotations

from typing import Any

import torch

from .._spec import METHOD, Method, call_answer, failure, plain
from .op import NAMESPACE, fresh_name, inverse_rms, quiet, rms_norm_forward, rms_norm_reference

NAME = "rms_norm_vmap"
# (x's batch dimension, w's): None where that input is one example's, shared by the batch.
# x batched at dim 2 tells movedim(x_dim, 0) from transpose(0, x_dim) and movedim(0, x_dim),
# which agree with it at dims 0 and 1.
KINDS = ((0, None), (1, None), (2, 0), (None, 1))


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
    """The four cases, each of new sizes: x, w, eps and in_dims (x's and w's batch
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


def _raised(err: Exception, in_dims: tuple) -> str:
    said = str(err).splitlines()[0].rstrip(" .") if str(err) else ""
    hint = f". {LINE_UP}" if in_dims[1] is not None else ""
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
                    what=NAME, raised=lambda err, d=in_dims: _raised(err, d))
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


def _reference(inputs):
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
    reference=_reference,
    agree=lambda got, want: _problem(got, want) is None,
    explain=lambda inputs, got, want: _problem(got, want, inputs["cases"]) or "it differs.",
    trials=1,
    # Registering the op builds its schema's code as it goes, where the answer runs.
    allows=frozenset({"exec"}),
    # The rule calls the lesson's forward, whose body is numpy.
    vocabulary=METHOD.allowing("torch.library.", "numpy", "numpy.", "Tensor.numpy",
                               "torch.from_numpy"),
    passed="torch.vmap of the op with your rule equals the norm applied example by example "
           "on 4 new batches (x batched at dim 0 and at dim 1, x at dim 2 and w batched, w "
           "alone batched), each in one call of the forward",
)
