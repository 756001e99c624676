"""Lesson 19's exercise 5: forward mode through a Function, its ``jvp`` derived by hand.

The learner's ``Gate`` computes f(x, g) = x * sigmoid(g) in the form torch.func needs
(section 8): ``forward(x, g)``, ``setup_context``, ``backward`` and ``jvp``, with
``generate_vmap_rule``. The observation (run where the answer lives):

1. the Function through autograd once, for a structural slip;
2. ``jvp`` alone and ``backward`` alone, each called with a stand-in ``ctx`` after forward
   and setup_context, as a by-hand answer is run (autograd off and refused), on three
   trials: jvp gets the tangents of x and g, and sees in ``ctx.saved_tensors`` only what
   setup_context saved with ``save_for_forward``, as in torch;
3. what torch's own transforms make of it: the output tangent of ``torch.func.jvp``, and
   whether ``jacfwd`` (forward mode, batched by vmap) agrees with ``jacrev``.

The judge holds jvp and backward to the derivative as a by-hand answer is held (a slip is
named where it holds on every trial), then the transforms' results.
"""

from __future__ import annotations

from typing import Any

import torch

from .._spec import Method, failure
from .._spec import first_line as _first_line
from .calling import (
    backward_runs,
    by_hand_trials,
    forward_directly,
    judged_by_hand,
    not_a_function,
    plain,
    real_run,
    stopped,
    uses_setup_context,
    words,
)

__all__ = ["GATE"]

_GATE = "Gate"
_PARAMS = ("x", "g", "x_t", "g_t", "grad_output")


def gate_inputs(gen: torch.Generator):
    """(x, g, x_t, g_t, grad_output), all of one new shape, float64."""
    shape = (int(torch.randint(2, 6, (1,), generator=gen)),)
    if int(torch.randint(2, (1,), generator=gen)):
        shape = (*shape, int(torch.randint(2, 4, (1,), generator=gen)))
    x, g, x_t, g_t, grad_output = (torch.randn(shape, generator=gen, dtype=torch.float64)
                                   for _ in range(5))
    return x, g * 2, x_t, g_t, grad_output


def _tangent(x, g, x_t, g_t, grad_output=None):
    """The output's tangent: each input's tangent times that input's partial derivative."""
    s = torch.sigmoid(g)
    return x_t * s + x * s * (1 - s) * g_t


def _grads(x, g, x_t, g_t, grad_output):
    s = torch.sigmoid(g)
    return grad_output * s, grad_output * x * s * (1 - s)


def _s(g):
    return torch.sigmoid(g)


_JVP_SLIPS = {
    "jvp ignores the tangents: the output's tangent is x_t times df/dx plus g_t times df/dg, "
    "not the sum of the partial derivatives":
        lambda x, g, xt, gt, go: _s(g) + x * _s(g) * (1 - _s(g)),
    "only x's tangent counts: g is an input too, and its tangent g_t reaches the output "
    "through df/dg = x * sigmoid(g) * (1 - sigmoid(g))": lambda x, g, xt, gt, go: xt * _s(g),
    "only g's tangent counts: x is an input too, and its tangent x_t reaches the output "
    "through df/dx = sigmoid(g)": lambda x, g, xt, gt, go: x * _s(g) * (1 - _s(g)) * gt,
    "the derivative of sigmoid is sigmoid(g) * (1 - sigmoid(g)), not sigmoid(g)":
        lambda x, g, xt, gt, go: xt * _s(g) + x * _s(g) * gt,
    "the factor x is missing from g's term: df/dg = x * sigmoid(g) * (1 - sigmoid(g))":
        lambda x, g, xt, gt, go: xt * _s(g) + _s(g) * (1 - _s(g)) * gt,
    "the tangents are swapped: x_t goes with df/dx = sigmoid(g), g_t with df/dg":
        lambda x, g, xt, gt, go: gt * _s(g) + x * _s(g) * (1 - _s(g)) * xt,
}
_BACKWARD_SLIPS = {
    "backward ignores grad_output: the chain rule multiplies each local derivative by the "
    "incoming gradient": lambda x, g, xt, gt, go: (_s(g), x * _s(g) * (1 - _s(g))),
    "the two gradients are swapped: backward returns x's gradient first, then g's":
        lambda x, g, xt, gt, go: (go * x * _s(g) * (1 - _s(g)), go * _s(g)),
    "the derivative of sigmoid is sigmoid(g) * (1 - sigmoid(g)), not sigmoid(g)":
        lambda x, g, xt, gt, go: (go * _s(g), go * x * _s(g)),
}


# ----------------------------------------------------------------- the observation


def _jvp_alone(gate: type):
    def run(x, g, x_t, g_t, grad_output):
        ctx = forward_directly(gate, (x, g))
        ctx.saved_tensors = ctx.for_forward  # what jvp sees, as in torch
        return gate.jvp(ctx, x_t, g_t)
    return run


def _backward_alone(gate: type):
    def run(x, g, x_t, g_t, grad_output):
        grads = gate.backward(forward_directly(gate, (x, g)), grad_output)
        return tuple(grads) if isinstance(grads, (tuple, list)) else grads
    return run


def _transforms(gate: type, x: torch.Tensor, g: torch.Tensor, x_t: torch.Tensor,
                g_t: torch.Tensor) -> dict[str, Any]:
    """What torch.func's forward-mode transforms make of the Function: the output tangent
    of jvp, and whether jacfwd agrees with jacrev (a sentence where one raised)."""
    seen: dict[str, Any] = {}
    try:
        seen["jvp"] = plain(torch.func.jvp(gate.apply, (x, g), (x_t, g_t))[1])
    except Exception as err:  # the learner's Function failing under the transform
        seen["jvp"] = f"{type(err).__name__}: {_first_line(err)}"
    try:
        forward = torch.func.jacfwd(gate.apply, argnums=(0, 1))(x, g)
        reverse = torch.func.jacrev(gate.apply, argnums=(0, 1))(x, g)
        seen["jacfwd"] = all(bool(torch.allclose(a, b)) for a, b in zip(forward, reverse,
                                                                          strict=True))
    except Exception as err:
        seen["jacfwd"] = f"{type(err).__name__}: {_first_line(err)}"
    return seen


def _observe(gate: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    failed = not_a_function(gate)
    if failed is not None:
        return failed
    if not uses_setup_context(gate):
        return failure("fail", "Gate takes ctx in forward: torch.func's transforms need the "
                               "form of section 8, forward(x, g) without ctx and "
                               "setup_context(ctx, inputs, output) to save what backward and "
                               "jvp read.")
    x, g, x_t, g_t, _ = inputs["trials"][0]
    failed = real_run(gate, (x, g), ["x", "g"])
    if failed is not None:
        return failed
    seen: dict[str, Any] = {"jvp": backward_runs(_jvp_alone(gate), inputs["trials"])}
    if stopped(seen["jvp"]):
        ctx = forward_directly(gate, (x, g))
        seen["for_forward"] = len(ctx.for_forward)
        return seen
    seen["backward"] = backward_runs(_backward_alone(gate), inputs["trials"])
    if not stopped(seen["backward"]):
        seen["real"] = _transforms(gate, x, g, x_t, g_t)
    return seen


# ----------------------------------------------------------------- the judge's side


def _reference(inputs: dict[str, Any]) -> dict[str, Any]:
    trials = inputs["trials"]
    return {"trials": trials, "jvp": [(_tangent(*t),) for t in trials],
            "grads": [_grads(*t) for t in trials]}


def _slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    jvp = words(judged_by_hand(
        got["jvp"], want["trials"], [t[0] for t in want["jvp"]], name="Gate.jvp",
        outputs=["tangent of the output"], mistakes=_JVP_SLIPS, params=_PARAMS,
        advice="The output's tangent is x_t * df/dx + g_t * df/dg, with df/dx = sigmoid(g) "
               "and df/dg = x * sigmoid(g) * (1 - sigmoid(g))."), _GATE)
    if jvp is not None:
        if got.get("for_forward") == 0:
            jvp += (" (setup_context saved nothing with ctx.save_for_forward: jvp sees only "
                    "what is saved that way in ctx.saved_tensors; save_for_backward keeps "
                    "tensors for backward alone)")
        return jvp
    backward = words(judged_by_hand(
        got["backward"], want["trials"], want["grads"], name="Gate.backward",
        outputs=["gradient for x", "gradient for g"], mistakes=_BACKWARD_SLIPS,
        params=_PARAMS, advice="Each gradient is grad_output times that input's partial "
                               "derivative."), _GATE)
    if backward is not None:
        return backward
    real, x, g, x_t, g_t, _ = got["real"], *want["trials"][0]
    if isinstance(real["jvp"], str):
        return f"torch.func.jvp through Gate raised {real['jvp']}"
    if not torch.allclose(real["jvp"], _tangent(x, g, x_t, g_t)):
        return ("jvp is right when called alone, but torch.func.jvp through Gate gives "
                "another tangent: does setup_context save for forward what jvp reads?")
    if isinstance(real["jacfwd"], str):
        hint = (" jacfwd batches jvp with vmap: set generate_vmap_rule = True (section 8)."
                if "vmap" in real["jacfwd"] else "")
        return f"torch.func.jacfwd through Gate raised {real['jacfwd']}.{hint}"
    if not real["jacfwd"]:
        return "jacfwd (forward mode) and jacrev (reverse mode) give different Jacobians"
    return None


GATE = Method(
    name=_GATE,
    make_inputs=lambda gen: {"trials": by_hand_trials(gate_inputs, gen)},
    observe=_observe,
    reference=_reference,
    wrong=_slip,
    trials=1,
    passed="jvp's tangent and backward's gradients match the derivative on 3 new random "
           "inputs; torch.func.jvp agrees, and jacfwd equals jacrev",
)
