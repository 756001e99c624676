"""Lesson 11, a tensor engine of your own: its exercises and its prediction.

The exercises are about the learner's engine, so their check cells hand over the
engine's pieces with the answer, as lesson 03's do:

- Exercise 1 (``l11-matmul``) passes ``(broadcast_matmul, Tensor, backward)``: a
  matrix product for every pair of shapes ``torch.matmul`` takes. The check runs
  one trial per kind of shape (a size-1 batch dimension, batch dimensions missing
  in front, a 1-D operand on either side, two vectors to a scalar, size-1
  dimensions on both sides), with new sizes each time: the forward value must be
  torch's, then the lesson's ``backward`` runs from ``(out * G).sum()`` with autograd
  refused, as `check_by_hand` runs an answer, and the two leaves' gradients must be
  torch's, in the by-hand judge's view. Each slip is named only when it holds on every
  trial.
- Exercise 2 (``l11-cumsum``) passes ``(cumsum, Tensor, backward)``: a cumulative sum
  along a dimension, as one node, its rule derived (no lesson shows it). Each trial has
  four cases: 1-D, 2-D along the last dimension, 3-D along the middle one (as -2) and
  along the first, each sum over at least 3 entries.
- Exercise 3 (``l11-amax``) passes ``(amax, Tensor, backward)``: the largest entry
  along a dimension, as one node. Inputs are small integers, so ties are common;
  torch's ``amax`` splits the gradient evenly between the tied entries.

Each exercise is a `Method` whose observation (what the answer made and did, recorded
where it runs) is judged in the grader. This module holds the three exercises, in order,
and the lesson's prediction; what the three checks share is in module ``shared``, whose
``one_node`` checks Exercises 2 and 3 whole.
"""

from __future__ import annotations

import torch

from ...slips import fresh
from .._spec import (
    ENGINE,
    Method,
    Prediction,
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
    one_node,
    shape_text,
    trial_kind,
    unpack,
)

# --------------------------------------------------------------------------- Exercise 1


MATMUL_KINDS = 11  # kinds of shapes, one case of each per check


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
    ][trial_kind(gen, MATMUL_KINDS)]


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
    return {"cases": cases_from(gen, _matmul_inputs, MATMUL_KINDS)}


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
    passed=f"a.grad and b.grad match autograd on {MATMUL_KINDS} new random inputs",
    vocabulary=ENGINE,
)


# --------------------------------------------------------------------------- Exercise 2


def _cumsum_inputs(gen):
    """x of a new shape, a dimension and G. Over four cases (seeds seed to seed + 3) every
    kind comes once: 1-D; 2-D along the last dimension; 3-D along the middle one, written
    as -2; 3-D along the first. Every sum runs over at least 3 entries, so that each slip
    below changes the gradient."""
    kind = trial_kind(gen, 4)
    long = draw_size(gen, 3, 7)
    shape, dim = [((long,), 0),
                  ((draw_size(gen, 2, 5), long), 1),
                  ((draw_size(gen, 2, 4), long, draw_size(gen, 2, 4)), -2),
                  ((long, draw_size(gen, 2, 4), draw_size(gen, 2, 4)), 0)][kind]
    X = torch.randn(shape, generator=gen, dtype=F64)
    G = torch.randn(shape, generator=gen, dtype=F64)
    return X, dim, G


def _cumsum_reference(X, dim, G):
    X = X.requires_grad_()
    (grad,) = torch.autograd.grad((torch.cumsum(X, dim) * G).sum(), X)
    return grad


def _from_the_end(G, dim):
    """The cumulative sum of G taken from the last entry back to the first."""
    return G.flip(dim).cumsum(dim).flip(dim)


CUMSUM_SLIPS = {
    "g was summed from the first entry onwards, as the forward sums x: but x_j is part of "
    "every output from j to the end, so its gradient sums g from j to the end":
        lambda X, dim, G: G.cumsum(dim),
    "the sums from the end come out in reversed order: after summing the flipped g, flip "
    "the result back":
        lambda X, dim, G: G.flip(dim).cumsum(dim),
    "x_j's own term is missing: output j sums x_0 to x_j, x_j included, so g_j belongs in "
    "x_j's gradient too":
        lambda X, dim, G: _from_the_end(G, dim) - G,
    "every entry got the whole sum of g, as if every output used every entry of x: output "
    "k uses only x_0 to x_k":
        lambda X, dim, G: G.sum(dim, keepdim=True).expand_as(G),
}

CUMSUM_ADVICE = ("Lesson 09's method: shapes first, then one entry. Write which outputs "
                 "x_j is a term of, add up their gradients, then find a tensor operation "
                 "that does it for every j at once.")


def _cumsum_shown(X, dim):
    return f"cumsum(x {shape_text(X.shape)}, dim={dim})"


CUMSUM = one_node(
    name="cumsum", make_case=_cumsum_inputs, count=4,
    forward=torch.cumsum, gradient=_cumsum_reference, shown=_cumsum_shown, slips=CUMSUM_SLIPS,
    advice=CUMSUM_ADVICE, params=("X", "dim", "G"),
    expects="a function of a Tensor and a dimension")


# --------------------------------------------------------------------------- Exercise 3


KINDS = 6  # kinds of input, one case of each per check


def _amax_inputs(gen):
    """Small integers (ties are common) of a new shape, a dimension, keepdim, and G. Each
    kind once over 6 seeds in a row: without keepdim along the first, a middle and the last
    dimension, so that g's dimension must go back where ``dim`` says (a negative ``dim``
    counts from the end of a's shape, not of g's)."""
    kind = trial_kind(gen, KINDS)
    shape = [(draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), draw_size(gen, 3, 6), 4),
             (draw_size(gen, 3, 6), draw_size(gen, 3, 6)),
             (draw_size(gen, 2, 4), 5, draw_size(gen, 2, 4)),
             (draw_size(gen, 2, 4), draw_size(gen, 2, 4), 5),
             (5, draw_size(gen, 2, 4), draw_size(gen, 2, 4))][kind]
    dim, keepdim = [(1, False), (-1, True), (0, True), (1, False),
                    (-1, False),  # g's last dimension back at a's end, not at 1
                    (0, False)][kind]  # g's dimension back in front, not at 1
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


def _amax_shown(X, dim, keepdim):
    return f"amax(x {shape_text(X.shape)}, dim={dim}, keepdim={keepdim})"


AMAX = one_node(
    name="amax", make_case=_amax_inputs, count=KINDS,  # one of each kind, seeds seed on
    forward=torch.amax, gradient=_amax_reference, shown=_amax_shown, slips=AMAX_SLIPS,
    advice=AMAX_ADVICE, params=("X", "dim", "keepdim", "G"),
    expects="a function of a Tensor, a dimension and keepdim")


# The engine is the lesson: its Tensor sets its own operators (``Tensor.__add__ = add``),
# so each exercise reads the answer with the ENGINE vocabulary.
EXERCISES = {
    "l11-matmul": MATMUL,
    "l11-cumsum": CUMSUM,
    "l11-amax": AMAX,
}

# --------------------------------------------------------------------------- prediction


def _arrivals_answer():
    """How many gradients torch's engine waits for at y's node, for
    loss = (y * y + y).sum(), y = relu(x @ w): the edges into ReluBackward0."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen, dtype=F64)
    w = torch.randn(3, 2, generator=gen, dtype=F64, requires_grad=True)
    y = (x @ w).relu()
    loss = (y * y + y).sum()
    count, seen, todo = 0, set(), [loss.grad_fn]
    while todo:
        for fn, _ in todo.pop().next_functions:
            count += fn is y.grad_fn
            if fn is not None and fn not in seen:
                seen.add(fn)
                todo.append(fn)
    return count


PREDICTIONS = {
    "l11-predict-arrivals": Prediction(
        question="gradients arriving at y for loss = (y * y + y).sum()",
        answer=_arrivals_answer,
        hint="count the places where y is an input of an operation: each one sends a "
             "gradient back to y, and the product has y as both of its inputs.",
        why="the product y * y has y as both of its inputs and sends one gradient back for "
            "each, and the sum sends one more: {answer}. torch's engine counts these edges "
            "for every node before the pass, and runs ReluBackward0 once the last one has "
            "arrived",
    ),
}
