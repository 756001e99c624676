"""Lesson 19, attention backward by hand: its exercises and its prediction.

The lesson writes one causal self-attention head in named steps (`head_forward`
below is the same code) and asks for the backward of four of them, one small
function each. A check makes a fresh random head (a new sequence length T, model
width and head width d), runs `head_forward` in float64, and hands the learner's
function the forward values its exercise names and random numbers standing for
the gradient arriving from above. The reference is autograd's gradient through
that one step, given the same numbers (`_vjp`), as lesson 10's checks do.

- ``l19-attend``: O = P V, back to P and V (which factor is transposed).
- ``l19-dscores``: the softmax and the causal mask, as FlashAttention's backward
  runs them: P is not kept but rebuilt from the scores and each row's
  log-sum-exp, so a mask forgotten in backward lets gradient into the future.
- ``l19-scores``: S = Q K^T / sqrt(d), back to Q and K (the 1/sqrt(d), K^T).
- ``l19-projections``: Q, K and V are all made from X: three paths that add up.
- ``l19-predict-growth``: how the bytes kept for backward grow when T doubles.
"""

from __future__ import annotations

import math

import torch

from ...graph import describe
from ._spec import ByHand, Prediction
from ._spec import vjp as _vjp

# --------------------------------------------------------------------------
# The head, as the lesson writes it
# --------------------------------------------------------------------------


def future_mask(T: int) -> torch.Tensor:
    """(T, T) booleans, True above the diagonal: the scores of later tokens."""
    return torch.ones(T, T, dtype=torch.bool).triu(1)


def head_forward(X, Wq, Wk, Wv, Wo):
    """One causal self-attention head, one named step per line; returns every step."""
    d = Wq.shape[1]
    Q = X @ Wq                                   # (T, d) what each token looks for
    K = X @ Wk                                   # (T, d) what each token offers
    V = X @ Wv                                   # (T, d) what each token passes on
    S = Q @ K.T / math.sqrt(d)                   # (T, T) scores, scaled
    Sm = S.masked_fill(future_mask(len(X)), float("-inf"))  # no looking ahead
    P = torch.softmax(Sm, dim=-1)                # (T, T) each row sums to 1
    O = P @ V  # noqa: E741 (O, as papers name it)  (T, d) a weighted mix of values
    Y = O @ Wo                                   # (T, d_model) back to the model's width
    return {"Q": Q, "K": K, "V": V, "S": S, "Sm": Sm, "P": P, "O": O, "Y": Y}


# --------------------------------------------------------------------------
# Fresh heads for the checks
# --------------------------------------------------------------------------


def _randint(low: int, high: int, gen: torch.Generator) -> int:
    return int(torch.randint(low, high, (1,), generator=gen))


def fresh_head(gen: torch.Generator) -> dict:
    """A random head and sequence, new sizes each time, run forward in float64.

    Returns the forward values by name, ``lse`` (each row's log-sum-exp of the
    masked scores), the inputs and weights, and random gradients arriving from
    above: ``dO``, ``dP`` (full), ``dS`` (zero above the diagonal, as it arrives
    from the softmax step), ``dQ``, ``dK``, ``dV``. The head width d is at least 2
    (so 1/sqrt(d) shows) and below the model width (so a transposed weight
    gradient has the wrong shape), and takes 2, 3 and 4 in turn with the seed.
    """
    T, width = _randint(3, 10, gen), _randint(5, 10, gen)
    # d takes 2, 3 and 4 in turn with the seed, so the three trials of a check (seeds s,
    # s + 1, s + 2) see all three: an answer with a width written in fails on two of them.
    d = 2 + gen.initial_seed() % 3

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    X = randn(T, width)
    Wq, Wk, Wv = (randn(width, d, scale=width**-0.5) for _ in range(3))
    Wo = randn(d, width, scale=d**-0.5)
    with torch.no_grad():
        head = head_forward(X, Wq, Wk, Wv, Wo)
        head["lse"] = torch.logsumexp(head["Sm"], dim=-1, keepdim=True)
    head.update({"X": X, "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo})
    head.update({f"d{name}": randn(*head[name].shape) for name in ("O", "P", "Q", "K", "V")})
    head["dS"] = randn(T, T).tril()
    return head


def _inputs(*names):
    """make_inputs for an exercise whose arguments are these values of a fresh head."""
    def make(gen):
        head = fresh_head(gen)
        return tuple(head[name] for name in names)
    return make


# --------------------------------------------------------------------------
# Exercise 1: O = P V
# --------------------------------------------------------------------------


def _attend_ref(P, V, dO):
    return _vjp(lambda P, V: P @ V, [P, V], dO)


ATTEND = ByHand(
    name="attend_backward",
    reference=_attend_ref,
    make_inputs=_inputs("P", "V", "dO"),
    outputs=["dP", "dV"],
    mistakes={
        "dP came out transposed: V @ dO.T is dP's transpose. O = P @ V, so dP = dO @ V.T":
            lambda P, V, dO: (V @ dO.T, P.T @ dO),
        "dV is missing P's transpose: P @ dO mixes the rows the wrong way round; V is the "
        "right factor of P @ V, so dV = P.T @ dO": lambda P, V, dO: (dO @ V.T, P @ dO),
        "dP was masked: this step is a plain matrix product and its gradient is full; the "
        "future entries die one step further back, in the softmax":
            lambda P, V, dO: ((dO @ V.T).tril(), P.T @ dO),
    },
    advice="Lesson 08's matmul rule: for O = P @ V, each factor's gradient is dO times the "
           "other factor transposed, on the side that makes the shapes fit.",
)

# --------------------------------------------------------------------------
# Exercise 2: the mask and the softmax, with P rebuilt from the row log-sum-exp
# --------------------------------------------------------------------------


def _dscores_ref(S, lse, dP):
    mask = future_mask(len(S))
    return _vjp(lambda S: torch.softmax(S.masked_fill(mask, float("-inf")), dim=-1), [S], dP)


def _softmax_vjp(P, dP, dim=-1, keepdim=True):
    total = (dP * P).sum(dim, keepdim=keepdim)
    return P * (dP - total)


def _rebuilt(S, lse, mask=True):
    P = torch.exp(S - lse)
    return P.masked_fill(future_mask(len(S)), 0.0) if mask else P


DSCORES = ByHand(
    name="dscores",
    reference=_dscores_ref,
    make_inputs=_inputs("S", "lse", "dP"),
    mistakes={
        "the mask is missing in backward: exp(S - lse) is not 0 above the diagonal, because "
        "the future scores in S are finite numbers, so gradient leaks into scores the forward "
        "pass never used. Rebuild P from the masked scores":
            lambda S, lse, dP: _softmax_vjp(_rebuilt(S, lse, mask=False), dP),
        "the mask came too late: zeroing dS above the diagonal at the end is not enough, "
        "because the row sum (dP * P).sum(-1) already took in the future entries of an "
        "unmasked P. Mask P before the sum":
            lambda S, lse, dP: _softmax_vjp(_rebuilt(S, lse, mask=False), dP)
            .masked_fill(future_mask(len(S)), 0.0),
        "the row sum is missing: every score of a row moves every probability of that row "
        "(lesson 08's softmax VJP), so dS = P * (dP - (dP * P).sum(-1, keepdim=True)), "
        "not P * dP": lambda S, lse, dP: _rebuilt(S, lse) * dP,
        "the row sum went along the wrong dimension: each row of P is one softmax, so sum "
        "over the last dimension (-1), keeping it (keepdim=True)":
            lambda S, lse, dP: _softmax_vjp(_rebuilt(S, lse), dP, dim=0),
        "the row sum lost its dimension: (dP * P).sum(-1) has shape (T,), which broadcasts "
        "along the columns, not the rows; sum with keepdim=True":
            lambda S, lse, dP: _softmax_vjp(_rebuilt(S, lse), dP, keepdim=False),
        "P was rebuilt as exp(S), without lse: subtracting each row's log-sum-exp is what "
        "makes the rows sum to 1": lambda S, lse, dP: _softmax_vjp(
            torch.exp(S).masked_fill(future_mask(len(S)), 0.0), dP),
    },
    advice="First rebuild P from S and lse as the forward pass made it (mask included), then "
           "use lesson 08's softmax VJP along each row.",
)

# --------------------------------------------------------------------------
# Exercise 3: S = Q K^T / sqrt(d)
# --------------------------------------------------------------------------


def _scores_ref(Q, K, dS):
    scale = math.sqrt(Q.shape[1])
    return _vjp(lambda Q, K: Q @ K.T / scale, [Q, K], dS)


def _root(Q):
    return math.sqrt(Q.shape[1])


SCORES = ByHand(
    name="scores_backward",
    reference=_scores_ref,
    make_inputs=_inputs("Q", "K", "dS"),
    outputs=["dQ", "dK"],
    mistakes={
        "the 1/sqrt(d) is missing: the scores were divided by sqrt(d), so their gradients "
        "are too": lambda Q, K, dS: (dS @ K, dS.T @ Q),
        "divided by d instead of sqrt(d): the forward pass divided by sqrt(d) (the square "
        "root of the head width, Q.shape[1])": lambda Q, K, dS: (dS @ K / Q.shape[1],
                                                                 dS.T @ Q / Q.shape[1]),
        "multiplied by sqrt(d) instead of dividing: the scores were divided by it":
            lambda Q, K, dS: (dS @ K * _root(Q), dS.T @ Q * _root(Q)),
        "dK is missing dS's transpose: K enters as K.T, so the gradient at K is the "
        "transpose of the one at K.T: dK = dS.T @ Q / sqrt(d)":
            lambda Q, K, dS: (dS @ K / _root(Q), dS @ Q / _root(Q)),
        "dQ used dS's transpose: Q is the left factor of Q @ K.T, so dQ = dS @ K / sqrt(d)":
            lambda Q, K, dS: (dS.T @ K / _root(Q), dS.T @ Q / _root(Q)),
    },
    advice="Treat K.T as a matrix of its own: lesson 08's matmul rule gives the gradients at "
           "Q and at K.T, and a transpose undoes itself.",
)

# --------------------------------------------------------------------------
# Exercise 4: Q, K, V from X
# --------------------------------------------------------------------------


def _projections_ref(X, Wq, Wk, Wv, dQ, dK, dV):
    return _vjp(lambda X, Wq, Wk, Wv: (X @ Wq, X @ Wk, X @ Wv), [X, Wq, Wk, Wv], dQ, dK, dV)


def _weights(X, dQ, dK, dV):
    return X.T @ dQ, X.T @ dK, X.T @ dV


PROJECTIONS = ByHand(
    name="projections_backward",
    reference=_projections_ref,
    make_inputs=_inputs("X", "Wq", "Wk", "Wv", "dQ", "dK", "dV"),
    outputs=["dX", "dWq", "dWk", "dWv"],
    mistakes={
        "only the path through Q reached X: X also makes K and V, and the gradients of the "
        "three uses add up (+=, not =)":
            lambda X, q, k, v, dQ, dK, dV: (dQ @ q.T, *_weights(X, dQ, dK, dV)),
        "only the path through V reached X (= where += was meant: the last write won): X also "
        "makes Q and K, and the gradients of the three uses add up":
            lambda X, q, k, v, dQ, dK, dV: (dV @ v.T, *_weights(X, dQ, dK, dV)),
        "the path through K is missing: X makes Q, K and V, three terms in dX":
            lambda X, q, k, v, dQ, dK, dV: (dQ @ q.T + dV @ v.T, *_weights(X, dQ, dK, dV)),
        "the path through V is missing: X makes Q, K and V, three terms in dX":
            lambda X, q, k, v, dQ, dK, dV: (dQ @ q.T + dK @ k.T, *_weights(X, dQ, dK, dV)),
        "the path through Q is missing: X makes Q, K and V, three terms in dX":
            lambda X, q, k, v, dQ, dK, dV: (dK @ k.T + dV @ v.T, *_weights(X, dQ, dK, dV)),
        "the weights' gradients were mixed up: each weight makes one of Q, K, V, so dWq comes "
        "from dQ, dWk from dK and dWv from dV":
            lambda X, q, k, v, dQ, dK, dV: (dQ @ q.T + dK @ k.T + dV @ v.T,
                                            *_weights(X, dV, dK, dQ)),
    },
    advice="Three products share X: each gives X one term (lesson 08's matmul rule) and its "
           "own weight one gradient.",
)

EXERCISES = {
    "l19-attend": ATTEND,
    "l19-dscores": DSCORES,
    "l19-scores": SCORES,
    "l19-projections": PROJECTIONS,
}

# --------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------

WIDTH, HEAD_WIDTH = 8, 4  # the lesson's head


def saved_bytes(T: int, seed: int = 0) -> dict:
    """Bytes a head of the lesson's widths keeps for backward on T tokens (the input
    needs no gradient): ``total``, beyond the leaves, and ``square``, the (T, T) part."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(T, WIDTH, generator=gen, dtype=torch.float64)
    weights = [torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()
               for shape in [(WIDTH, HEAD_WIDTH)] * 3 + [(HEAD_WIDTH, WIDTH)]]
    graph = describe(head_forward(X, *weights)["Y"].sum())
    memory = graph.saved_memory()
    square = {s.storage: s.nbytes for node in graph.nodes for s in node.saved
              if s.shape == (T, T)}
    return {"total": memory.total - memory.leaf_bytes, "square": sum(square.values())}


def _growth() -> str:
    ratio = saved_bytes(256)["total"] / saved_bytes(128)["total"]
    return "x4" if abs(ratio - 4) < abs(ratio - 2) else "x2"


PREDICTIONS = {
    "l19-predict-growth": Prediction(
        question="how the bytes kept for backward grow from T = 128 to T = 256",
        answer=_growth,
        hint="list what the head keeps and the shape of each: which grow with T, and which "
             "with T twice over? Which of them is the largest at T = 128?",
        why="the (T, T) tensors, the attention weights P (8 bytes a number) and the boolean "
            "mask (1 byte), grow four times when T doubles, while X, Q, K, V and O, (T, width) "
            "each, only double. At T = 128 the square part is already most of what is kept, so "
            "the total grows by a little less than four, closer to {answer} than to the other "
            "choice, and the longer the sequence, the closer to four",
        choices=("x2", "x4"),
    ),
}
