"""Lesson 11, Exercise 1 (``l11-matmul``): a matrix product for every pair of shapes
``torch.matmul`` takes, its forward and its backward in the learner's engine."""

from __future__ import annotations

import torch

from ...slips import fresh
from .._spec import ENGINE, Method, failed_words, failure, is_failure, judge_runs, run_by_hand
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

KINDS = 11  # kinds of shapes, one case of each per check


def _matmul_shapes(gen):
    """The shapes of a, b for one case: each kind of broadcasting once over 11 seeds in a row
    (the cases that caught a slip once must be in every check, so none is left to chance)."""
    b1, b2, m, k, n = (draw_size(gen) for _ in range(5))
    return [
        ((b1, 1, m, k), (b2, k, n)),      # a size-1 dimension; b lacks one in front
        ((m, k), (b1, b2, k, n)),         # a lacks two batch dimensions
        ((b1, b2, m, k), (k, n)),         # b lacks two: its gradient summed over both
        ((k,), (b1, k, n)),               # a vector times a stack of matrices
        ((k,), (k, n)),                   # no batch at all: a's row goes back at -2, not 1
        ((k,), (b1, b2, k, n)),           # a's gradient summed over two batch dimensions
        ((1,), (b1, 1, n)),               # K = 1: a's (1,) must not be squeezed to ()
        ((b1, m, k), (k,)),               # a stack of matrices times a vector
        ((b1, m, 1), (1,)),               # K = 1: b's (1,) must not be squeezed to ()
        ((1, b2, m, k), (b1, 1, k, n)),   # size-1 dimensions on both sides
        ((k,), (k,)),                     # two vectors: a scalar
    ][trial_kind(gen, KINDS)]


def _matmul_inputs(gen):
    a_shape, b_shape = _matmul_shapes(gen)
    A = torch.randn(a_shape, generator=gen, dtype=F64)
    B = torch.randn(b_shape, generator=gen, dtype=F64)
    G = torch.randn(torch.matmul(A, B).shape, generator=gen, dtype=F64)
    return A, B, G


def _matmul_reference(A, B, G):
    A, B = A.requires_grad_(), B.requires_grad_()
    return torch.autograd.grad((torch.matmul(A, B) * G).sum(), (A, B))


def _as_matrices(A, B, G):
    """matmul's own view: a 1-D a is a row (1, K), a 1-D b a column (K, 1), and G gets
    back the dimensions the product dropped."""
    if B.dim() == 1:
        B, G = B.unsqueeze(-1), G.unsqueeze(-1)
    if A.dim() == 1:
        A, G = A.unsqueeze(0), G.unsqueeze(-2)
    return A, B, G


def _sum_back(full, shape, keepdim=True):
    """``full`` summed down to ``shape``: over the dimensions broadcasting added in front,
    then over those where ``shape`` has size 1 (kept, or dropped without keepdim)."""
    extra = full.dim() - len(shape)
    grad = full.sum(dim=tuple(range(extra))) if extra else full
    stretched = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
    return grad.sum(dim=stretched, keepdim=keepdim) if stretched else grad


def _matmul_slip(a_way="right", b_way="right"):
    """The gradients when a's (or b's) is brought back to its shape the wrong way:
    ``none`` (not summed at all), ``nokeep`` (summed without keepdim), ``all`` (summed
    over every batch dimension), ``row`` (a 1-D operand's added dimension kept)."""
    def back(full, shape, added, way):
        if way == "none":
            grad = full
        elif way == "all":
            grad = full.sum(dim=tuple(range(full.dim() - 2))) if full.dim() > 2 else full
        else:
            matrix = shape if len(shape) > 1 else (1, *shape) if added == -2 else (*shape, 1)
            grad = _sum_back(full, matrix, keepdim=way != "nokeep")
        return grad.squeeze(added) if len(shape) == 1 and way != "row" else grad

    def wrong(A, B, G):
        a, b, g = _as_matrices(A, B, G)
        return back(g @ b.mT, A.shape, -2, a_way), back(a.mT @ g, B.shape, -1, b_way)
    return wrong


MATMUL_SLIPS = {
    "a.grad keeps the batch dimensions of the product: a was broadcast over them, so its "
    "gradient must be summed back to a's own shape":
        _matmul_slip(a_way="none"),
    "b.grad keeps the batch dimensions of the product: b was broadcast over them, so its "
    "gradient must be summed back to b's own shape":
        _matmul_slip(b_way="none"),
    "a.grad lost a's size-1 dimensions: where a has size 1 and the product does not, sum "
    "with keepdim=True, so that the gradient keeps a's shape":
        _matmul_slip(a_way="nokeep"),
    "b.grad lost b's size-1 dimensions: where b has size 1 and the product does not, sum "
    "with keepdim=True, so that the gradient keeps b's shape":
        _matmul_slip(b_way="nokeep"),
    "a.grad is summed over every batch dimension, as for a weight the whole batch shares; "
    "but a has batch dimensions of its own, and those keep their gradient (sum only where "
    "a was broadcast)":
        _matmul_slip(a_way="all"),
    "b.grad is summed over every batch dimension, as for a weight the whole batch shares; "
    "but b has batch dimensions of its own, and those keep their gradient (sum only where "
    "b was broadcast)":
        _matmul_slip(b_way="all"),
    "a is 1-D: matmul treats it as a row (1, K) and drops that dimension from the product, "
    "so its gradient must drop it again":
        _matmul_slip(a_way="row"),
    "b is 1-D: matmul treats it as a column (K, 1) and drops that dimension from the "
    "product, so its gradient must drop it again":
        _matmul_slip(b_way="row"),
}

MATMUL_ADVICE = ("Make both operands matrices as matmul does (a 1-D a a row, a 1-D b a "
                 "column, G given back the dimensions the product dropped), apply lesson 09's "
                 "batched rule, then sum each gradient back to its operand's shape "
                 "and drop any dimension that was added.")


NAMES = ("broadcast_matmul", "Tensor", "backward")
NAME = "broadcast_matmul"


def matmul_inputs(gen):
    """Eleven cases, one of each kind of broadcasting (seeds seed to seed + 10)."""
    return {"cases": cases_from(gen, _matmul_inputs, KINDS)}


def _shown(A, B):
    return f"broadcast_matmul(a {shape_text(A.shape)}, b {shape_text(B.shape)})"


def _observe_matmul(answer, inputs):
    """What the learner's product made on every case, then (when backward can follow
    each) the two leaves' gradients from ``(out * G).sum()``, autograd refused."""
    pieces, unpacked = unpack(answer, NAMES)
    if unpacked:
        return unpacked
    matmul, value_class, backward = pieces
    if not callable(matmul):
        return failure("fail", f"broadcast_matmul is {type(matmul).__name__}, not a function "
                               "of two Tensors")
    cases = inputs["cases"]
    forward = forward_records(NAME, value_class, [
        (_shown(A, B), lambda A=A, B=B: matmul(value_class(A), value_class(B)))
        for A, B, _ in cases])
    if is_failure(forward) or not followable(forward):
        return forward if is_failure(forward) else {"forward": forward}

    def engine_grads(A, B, G):
        a, b = value_class(A), value_class(B)
        backward((matmul(a, b) * value_class(G)).sum())
        return a.grad, b.grad

    grads = run_by_hand(engine_grads, cases, name=NAME)
    return grads if is_failure(grads) else {"forward": forward, "grads": grads}


def _reference(inputs):
    cases = inputs["cases"]
    return {"forward": [torch.matmul(A, B) for A, B, _ in cases],
            "grads": [_matmul_reference(*fresh(case)) for case in cases]}


def _judged(got, reference, cases=None):
    return judge_runs(got["grads"], reference, cases, name=NAME, outputs=("a.grad", "b.grad"),
                      mistakes=MATMUL_SLIPS, advice=MATMUL_ADVICE, params=("A", "B", "G"))


def _agrees(got, want):
    shown = [NAME] * len(want["forward"])
    return (forward_problem(got["forward"], want["forward"], shown) is None and "grads" in got
            and _judged(got, want["grads"]).ok)


def _explain(inputs, got, want):
    shown = [_shown(A, B) for A, B, _ in inputs["cases"]]
    problem = forward_problem(got["forward"], want["forward"], shown)
    if problem is not None:
        return problem
    return failed_words(_judged(got, _matmul_reference, inputs["cases"]), NAME)


# The engine is the lesson: its Tensor sets its own operators (``Tensor.__add__ = add``).
MATMUL = Method(
    name=NAME,
    make_inputs=matmul_inputs,
    observe=_observe_matmul,
    reference=_reference,
    explain=_explain,
    trials=1,  # one trial of 11 cases: the by-hand judge names a slip only if all show it
    agree=_agrees,
    passed=f"a.grad and b.grad match autograd on {KINDS} new random inputs",
    vocabulary=ENGINE,
)
