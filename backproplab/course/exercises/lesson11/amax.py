"""Lesson 11, Exercise 3 (``l11-amax``): the largest entry along a dimension as one node
of the learner's engine, ties split as torch's ``amax`` splits them."""

from __future__ import annotations

import torch

from ...slips import fresh
from .._spec import (
    ENGINE,
    Method,
    call_answer,
    failed_words,
    failure,
    is_failure,
    judge_runs,
    run_by_hand,
)
from .shared import (
    F64,
    cases_from,
    draw_size,
    followable,
    forward_problem,
    forward_records,
    shape_text,
    trial_kind,
    unpack,
)


def _amax_inputs(gen):
    """Small integers (ties are common) of a new shape, a dimension, keepdim, and G."""
    kind = trial_kind(gen, 4)
    shape = [(draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), draw_size(gen, 3, 6), 4),
             (draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), 5, draw_size(gen, 2, 4))][kind]
    dim, keepdim = [(1, False), (-1, True), (0, True), (1, False)][kind]
    X = torch.randint(0, 3, shape, generator=gen).to(F64)
    G = torch.randn(torch.amax(X, dim, keepdim).shape, generator=gen, dtype=F64)
    return X, dim, keepdim, G


def _amax_reference(X, dim, keepdim, G):
    X = X.requires_grad_()
    (grad,) = torch.autograd.grad((torch.amax(X, dim, keepdim) * G).sum(), X)
    return grad


def _amax_slip(share):
    """x.grad when the winners of each slice get ``share(winners, count, size)`` times
    the gradient arriving there."""
    def wrong(X, dim, keepdim, G):
        top = torch.amax(X, dim, keepdim=True)
        winners = (X == top).to(F64)
        g = G if keepdim else G.unsqueeze(dim)
        return g * share(winners, winners.sum(dim, keepdim=True), X.shape[dim])
    return wrong


def _one_winner(X, dim, keepdim, G):
    """x.grad when the whole gradient goes to the first maximum of each slice."""
    index = torch.argmax(X, dim, keepdim=True)
    g = G if keepdim else G.unsqueeze(dim)
    return torch.zeros_like(X).scatter_(dim, index, g)


AMAX_SLIPS = {
    "every tied entry got the whole gradient: torch's amax splits it evenly between the "
    "entries that tie for the maximum":
        _amax_slip(lambda w, n, size: w),
    "the gradient was divided by the size of the dimension, as for a mean: only the "
    "entries that tie for the maximum share it":
        _amax_slip(lambda w, n, size: w / size),
    "the gradient went to one entry per slice: that is max(dim=...)'s convention, which "
    "returns an index; amax splits it evenly between the tied entries":
        _one_winner,
}

AMAX_ADVICE = ("Lesson 09: a reduction becomes a broadcast (put the reduced dimension "
               "back as size 1 when keepdim is False), and only the maxima of each slice get "
               "gradient, tied ones an equal share.")


NAMES = ("amax", "Tensor", "backward")
NAME = "amax"


def amax_inputs(gen):
    """Four cases, one of each kind (seeds seed to seed + 3)."""
    return {"cases": cases_from(gen, _amax_inputs, 4)}


def _shown(X, dim, keepdim):
    return f"amax(x {shape_text(X.shape)}, dim={dim}, keepdim={keepdim})"


def _observe_amax(answer, inputs):
    """What the learner's amax made on every case, how many parents its node has (and
    whether x is the first), then (when backward can follow each) x's gradient from
    ``(amax(x) * G).sum()``, autograd refused."""
    pieces, unpacked = unpack(answer, NAMES)
    if unpacked:
        return unpacked
    amax, value_class, backward = pieces
    if not callable(amax):
        return failure("fail", f"amax is {type(amax).__name__}, not a function of a Tensor, a "
                               "dimension and keepdim")
    cases = inputs["cases"]
    forward = forward_records(NAME, value_class, [
        (_shown(X, dim, keepdim), lambda X=X, d=dim, kd=keepdim: amax(value_class(X), d, kd))
        for X, dim, keepdim, _ in cases])
    if is_failure(forward) or not followable(forward):
        return forward if is_failure(forward) else {"forward": forward}
    x = value_class(cases[0][0])
    parents, failed = call_answer(lambda: tuple(amax(x, 0, False).parents), what=NAME)
    if failed is not None:
        return failed
    node = {"parents": len(parents), "x first": bool(parents) and parents[0] is x}

    def engine_grad(X, dim, keepdim, G):
        x = value_class(X)
        backward((amax(x, dim, keepdim) * value_class(G)).sum())
        return x.grad

    grads = run_by_hand(engine_grad, cases, name="amax's x.grad")
    return grads if is_failure(grads) else {"forward": forward, "node": node, "grads": grads}


def _reference(inputs):
    cases = inputs["cases"]
    return {"forward": [torch.amax(X, dim, keepdim) for X, dim, keepdim, _ in cases],
            "grads": [_amax_reference(*fresh(case)) for case in cases]}


def _node_problem(node):
    if node["parents"] != 1 or not node["x first"]:
        return (f"amax(x, ...) made a node with {node['parents']} parent(s); it must be one "
                "node whose only parent is x, with a rule you derive (a chain of the engine's "
                "operations would be their rules, not yours)")
    return None


def _judged(got, reference, cases=None):
    return judge_runs(got["grads"], reference, cases, name="amax's x.grad", mistakes=AMAX_SLIPS,
                      advice=AMAX_ADVICE, params=("X", "dim", "keepdim", "G"))


def _agrees(got, want):
    shown = [NAME] * len(want["forward"])
    return (forward_problem(got["forward"], want["forward"], shown) is None and "grads" in got
            and _node_problem(got["node"]) is None
            and _judged(got, want["grads"]).ok)


def _explain(inputs, got, want):
    shown = [_shown(*case[:3]) for case in inputs["cases"]]
    problem = forward_problem(got["forward"], want["forward"], shown) or _node_problem(
        got["node"])
    return problem or failed_words(_judged(got, _amax_reference, inputs["cases"]), NAME)


AMAX = Method(
    name=NAME,
    make_inputs=amax_inputs,
    observe=_observe_amax,
    reference=_reference,
    explain=_explain,
    trials=1,  # one trial of four cases: the by-hand judge names a slip only if all show it
    agree=_agrees,
    passed="x.grad matches autograd on 4 new random inputs",
    vocabulary=ENGINE,
)
