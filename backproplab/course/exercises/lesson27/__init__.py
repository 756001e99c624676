"""Lesson 27, custom ops: its exercises and its predictions.

- ``l27-rms-norm-op`` (method, `rms`): a fused RMS norm, ``y = x * r * w`` with
  ``r = 1 / sqrt(mean(x**2 over a row) + eps)`` for x of shape (n, d), w of shape (d,)
  and eps a plain number. Its forward, `op.rms_norm_forward`, is written in numpy, so
  torch cannot differentiate or trace it. The learner writes the three pieces that make
  it an op autograd and torch.compile can use, and hands them over as a dict:
  ``{"fake": ..., "setup_context": ..., "backward": ...}``. The check registers the
  forward under a fresh name with them (`op`), and goes through the fake, the backward's
  form, its formula (against autograd, the slips named), ``torch.library.opcheck`` and
  ``torch.compile``; the last three are judged in the grader from what they gave.
- ``l27-rms-norm-jvp`` (by hand, `tangent`): the same norm's forward-mode rule, the tangent
  of y for tangents of x and w, as a Function's ``jvp`` would return it; checked against
  ``torch.func.jvp`` of the norm in torch operations, the backward's formula named as a slip.

- ``l27-rms-norm-vmap`` (method, `batched`): a vmap rule for the op,
  ``rms_norm_vmap(info, in_dims, x, w, eps)``, registered on a fresh op and run under
  ``torch.vmap`` on four batches (x batched at dim 0 and at dim 1, x and w batched, w
  alone batched); each result held against the norm example by example, and the rule's
  calls of the forward counted (one, not one per example).

The predictions: the graph breaks of the lesson's swish written as an
``autograd.Function`` with a numpy body (``torch._dynamo.explain``), and which of
opcheck's tests fails when the fake returns float32 for float64 inputs.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .._spec import Prediction
from .batched import VMAP_RULE
from .op import NAMESPACE, fresh_name, quiet
from .rms import OPCHECK_TESTS, RMS_OP
from .tangent import RMS_JVP

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
