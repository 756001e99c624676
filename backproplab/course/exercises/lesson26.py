"""Lesson 26, attention backward by hand: its exercises and its prediction.

The lesson writes one causal self-attention head in named steps (`head_forward`
below is the same code). Its exercises run the attention's backward the way a fused
kernel does, from what FlashAttention keeps: the queries, keys and values, the
output and each row's log-sum-exp of the masked scores, never the (T, T) weights.
A check makes fresh random inputs (new sizes each time) and holds the learner's
function against autograd through the same step, given the same numbers (`_vjp`).

- ``l26-dscores``: the softmax and the causal mask, for one head: P is not kept
  but rebuilt from the scores and each row's log-sum-exp, so a mask forgotten in
  backward lets gradient into the future.
- ``l26-heads``: the whole attention core, O = softmax(mask(Q K^T / sqrt(d))) V,
  back to Q, K and V for a batch of several heads, (B, H, T, d): the transposes of
  the last two dimensions, the head width read from the last dimension (H differs
  from d on every input, so Q.shape[1] fails), the mask broadcast over (B, H).
- ``l26-flash``: the same gradients one block of keys at a time, with no tensor
  larger than the inputs (``without``: no (T, T) scores, weights or mask): the
  softmax's row sum comes from O and dO, whole, before the loop; each block builds
  its own piece of the mask; dQ adds up over the blocks. T is never a multiple of
  the block, so a forgotten last block fails on every input.
- ``l26-predict-growth``: how the bytes kept for backward grow when T doubles.
"""

from __future__ import annotations

import math

import torch

from ...graph import describe
from ._spec import ByHand, Prediction, randint
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
# Fresh inputs for the checks
# --------------------------------------------------------------------------


def _head_width(gen: torch.Generator) -> int:
    """d takes 2, 3 and 4 in turn with the seed, so the three trials of a check (seeds s,
    s + 1, s + 2) see all three: an answer with a width written in fails on two of them."""
    return 2 + gen.initial_seed() % 3


def fresh_head(gen: torch.Generator) -> dict:
    """One random head and sequence (T from 3 to 9 tokens, a new model width and head
    width d), run forward in float64: the forward values by name, ``lse`` (each row's
    log-sum-exp of the masked scores) and ``dP``, random numbers standing for the
    gradient arriving at P."""
    T, width, d = randint(3, 10, gen), randint(5, 10, gen), _head_width(gen)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    X = randn(T, width)
    Wq, Wk, Wv = (randn(width, d, scale=width**-0.5) for _ in range(3))
    Wo = randn(d, width, scale=d**-0.5)
    with torch.no_grad():
        head = head_forward(X, Wq, Wk, Wv, Wo)
        head["lse"] = torch.logsumexp(head["Sm"], dim=-1, keepdim=True)
    head["dP"] = randn(T, T)
    return head


def attention(Q, K, V):
    """softmax(mask(Q K^T / sqrt(d))) V over the last two dimensions, any batch in front."""
    S = Q @ K.mT / math.sqrt(Q.shape[-1])
    return torch.softmax(S.masked_fill(future_mask(Q.shape[-2]), float("-inf")), dim=-1) @ V


def fresh_heads(gen: torch.Generator) -> dict:
    """A batch of heads, (B, H, T, d) each, with what a fused kernel keeps from forward
    (Q, K, V, the output O and ``lse``) and ``dO``, the gradient arriving at O.

    d cycles with the seed (`_head_width`); H is 2 or 3 and never equal to d, so the
    2-D habit of reading the width as ``Q.shape[1]`` fails on every input. ``block``, the
    number of keys per block, is at most d (a (T, block) tile is no larger than an input).
    T is more than B * H * d, so that even one (T, T) mask holds more entries than an
    input, and never a multiple of ``block``: whole blocks and a shorter last one.
    """
    d = _head_width(gen)
    heads = 3 if d != 3 else 2
    batch = randint(1, 3, gen)
    block = 2 if d == 2 else randint(2, 4, gen)
    whole = batch * heads * d // block + randint(1, 3, gen)  # whole blocks: past B * H * d
    T = block * whole + randint(1, block, gen)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    Q, K, V, dO = (randn(batch, heads, T, d) for _ in range(4))
    with torch.no_grad():
        S = Q @ K.mT / math.sqrt(d)
        lse = torch.logsumexp(S.masked_fill(future_mask(T), float("-inf")), -1, keepdim=True)
        O = attention(Q, K, V)  # noqa: E741 (O, as papers name it)
    return {"Q": Q, "K": K, "V": V, "O": O, "lse": lse, "dO": dO, "block": block}


def _inputs(make, *names):
    """make_inputs for an exercise whose arguments are these values of ``make(gen)``."""
    def inputs(gen):
        found = make(gen)
        return tuple(found[name] for name in names)
    return inputs


# --------------------------------------------------------------------------
# Exercise 1: the mask and the softmax, with P rebuilt from the row log-sum-exp
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
    make_inputs=_inputs(fresh_head, "S", "lse", "dP"),
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
        "(lesson 09's softmax VJP), so dS = P * (dP - (dP * P).sum(-1, keepdim=True)), "
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
           "use lesson 09's softmax VJP along each row.",
)

# --------------------------------------------------------------------------
# Exercise 2: the attention core for a batch of heads, (B, H, T, d)
# --------------------------------------------------------------------------


def _heads_ref(Q, K, V, lse, dO):
    return _vjp(attention, [Q, K, V], dO)


def _core(Q, K, V, lse, dO, *, width=None, mask=True, row_sum=True):
    """The attention core's backward up to dS, with the pieces a slip changes: the head
    width it reads (everywhere), the mask, the row sum. Returns dS, P and 1/sqrt(width)."""
    scale = (Q.shape[-1] if width is None else width) ** -0.5
    P = torch.exp(Q @ K.mT * scale - lse)
    if mask:
        P = P.masked_fill(future_mask(Q.shape[-2]), 0.0)
    dP = dO @ V.mT
    dS = P * (dP - (dP * P).sum(-1, keepdim=True)) if row_sum else P * dP
    return dS, P, scale


def _heads(Q, K, V, lse, dO, *, dK="dS.mT @ Q", dV="P.mT @ dO", unscaled=False, **core):
    """The core's gradients, each computed as a slip computes it."""
    dS, P, scale = _core(Q, K, V, lse, dO, **core)
    scale = 1.0 if unscaled else scale
    return (dS @ K * scale, (dS.mT if dK == "dS.mT @ Q" else dS) @ Q * scale,
            (P.mT if dV == "P.mT @ dO" else P) @ dO)


HEADS = ByHand(
    name="attention_backward",
    reference=_heads_ref,
    make_inputs=_inputs(fresh_heads, "Q", "K", "V", "lse", "dO"),
    outputs=["dQ", "dK", "dV"],
    mistakes={
        "the head width was read as Q.shape[1], which in (B, H, T, d) is the number of heads "
        "H: d is the last dimension, Q.shape[-1], in the scores and in their gradients":
            lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, width=Q.shape[1]),
        "the 1/sqrt(d) is missing from dQ and dK: the scores were divided by sqrt(d), so "
        "their gradients are too": lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, unscaled=True),
        "the mask is missing in backward: exp(S - lse) is not 0 above the diagonal, because "
        "the future scores are finite numbers, so gradient leaks into keys the forward pass "
        "never used. Mask the rebuilt P (exercise 1)":
            lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, mask=False),
        "the softmax's row sum is missing: dS = P * (dP - (dP * P).sum(-1, keepdim=True)), "
        "not P * dP (exercise 1)":
            lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, row_sum=False),
        "dK is missing dS's transpose: K enters the scores as K.mT, so the gradient at K is "
        "the transpose of the one at K.mT, over the last two dimensions: dS.mT @ Q / sqrt(d)":
            lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, dK="dS @ Q"),
        "dV is missing P's transpose: V is the right factor of P @ V, so dV = P.mT @ dO, "
        "the transpose over the last two dimensions":
            lambda Q, K, V, lse, dO: _heads(Q, K, V, lse, dO, dV="P @ dO"),
    },
    advice="Write the forward for one head as four steps (scores, mask, softmax, weighted "
           "sum) and take dO back through each: lesson 09's matmul rule for the two "
           "products, exercise 1 for the softmax. Every step acts on the last two dimensions; "
           "B and H only ride along.",
)

# --------------------------------------------------------------------------
# Exercise 3: the same, one block of keys at a time (FlashAttention's backward)
# --------------------------------------------------------------------------


def _flash_ref(Q, K, V, O, lse, dO, block):
    return _vjp(attention, [Q, K, V], dO)


def _blocks(Q, K, V, O, lse, dO, block, *, row_sum="whole", mask="global", last=True,
            add=True, unscaled=()):
    """The blockwise backward with one thing changed, as each slip below has it."""
    T, scale = Q.shape[-2], Q.shape[-1] ** -0.5
    whole = (dO * O).sum(-1, keepdim=True)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    rows = torch.arange(T)[:, None]
    stop = T if last else T - T % block
    for start in range(0, stop, block):
        keys = slice(start, min(start + block, T))
        cols = torch.arange(keys.start, keys.stop)
        P = torch.exp(Q @ K[..., keys, :].mT * scale - lse)
        if mask == "global":
            P = P.masked_fill(cols > rows, 0.0)
        elif mask == "local":  # the block's own column numbers, from 0
            P = P.masked_fill(cols - start > rows, 0.0)
        dP = dO @ V[..., keys, :].mT
        D = whole if row_sum == "whole" else (dP * P).sum(-1, keepdim=True)
        dS = P * (dP - D)
        part = dS @ K[..., keys, :] * (1.0 if "dQ" in unscaled else scale)
        dQ = dQ + part if add else part
        dK[..., keys, :] = dS.mT @ Q * (1.0 if "dK" in unscaled else scale)
        dV[..., keys, :] = P.mT @ dO
    return dQ, dK, dV


FLASH = ByHand(
    name="flash_backward",
    reference=_flash_ref,
    make_inputs=_inputs(fresh_heads, "Q", "K", "V", "O", "lse", "dO", "block"),
    outputs=["dQ", "dK", "dV"],
    without="a tensor of (T, T) entries per head (the scores, P or the mask of every key at "
            "once)",
    mistakes={
        "the softmax's row sum was taken over one block of keys: (dP * P).sum(-1) runs over "
        "the whole row, which no block holds. Write dP with dO and V, and the sum becomes "
        "one you can compute from tensors you have whole, before the loop":
            lambda *a: _blocks(*a, row_sum="block"),
        "the causal mask is missing in the blocks: a key after the query gets "
        "exp(S - lse), not 0, because its score is a finite number. Zero P where the key's "
        "position is past the query's":
            lambda *a: _blocks(*a, mask=None),
        "the block's mask counted its keys from 0: key j of the block starting at s is key "
        "s + j of the sequence, and the mask compares that with the query's position":
            lambda *a: _blocks(*a, mask="local"),
        "the last, shorter block of keys was left out: T is not a multiple of block here, "
        "so the last keys get no dK or dV and give dQ nothing. Let the last block end at T":
            lambda *a: _blocks(*a, last=False),
        "dQ holds the last block's part only: every block of keys adds its part to dQ "
        "(+=, not =)": lambda *a: _blocks(*a, add=False),
        "the 1/sqrt(d) is missing from dK: the scores were divided by sqrt(d), so the "
        "gradient of every K block is too, as dQ's is": lambda *a: _blocks(*a, unscaled=("dK",)),
        "the 1/sqrt(d) is missing from dQ and dK: the scores were divided by sqrt(d), so "
        "their gradients are too": lambda *a: _blocks(*a, unscaled=("dQ", "dK")),
    },
    advice="For one block of keys, everything the full backward does to those columns can be "
           "done with the block alone, once each row's softmax sum is known. dK and dV of "
           "the block's keys are finished in the block; dQ gathers a part from every block.",
)

EXERCISES = {
    "l26-dscores": DSCORES,
    "l26-heads": HEADS,
    "l26-flash": FLASH,
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
    "l26-predict-growth": Prediction(
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
