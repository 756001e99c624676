"""Lesson 12, backprop through a classifier: its exercises and its predictions.

The lesson writes a small classifier's forward pass in named steps (`model.forward`
is the same code) and asks for the backward of its cross-entropy and its batch
norm a few lines at a time: each exercise takes the forward values of its lines
and the gradient arriving at the last of them, and returns the gradient at every
intermediate of those lines. A check makes a fresh random model and batch (other
sizes than the lesson's spiral, `model.fresh_batch`), runs `forward` in float64,
and hands the learner's function that batch's forward values and, for the
gradient arriving from above, random numbers of the right shape. The reference is
autograd's gradient at each of those intermediates, given the same numbers
(`model.grads_at`).

A slip early in an exercise's lines carries into the gradients after it, so each
slip is written as the whole chain with the slip in it (`_pick_log`, `_normalise`,
`_shift` in ``cross_entropy``; `_scale`, `_centre` in ``norms``; `_lookup`
here): a learner who makes one slip and derives the rest right is told the
slip. Two transfers follow the same rules: class weights in cross-entropy's fused
form, and layer norm.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Prediction
from .cross_entropy import NORMALISE, PICK_LOG, SHIFT, WEIGHTED
from .model import grads_at, inputs_of, slips, spiral_grads
from .norms import CENTRE, LAYERNORM, SCALE_NORMALISE

# --------------------------------------------------------------------------
# The first layer's input: un-concatenate, un-view, scatter-add
# --------------------------------------------------------------------------


def _lookup_ref(dxin, tokens, num_rows):
    n, per_point = tokens.shape
    dim = (dxin.shape[1] - 2) // per_point

    def build(table, x):
        emb = table[tokens]
        return {"emb": emb, "C": table}, torch.cat([x, emb.view(n, -1)], dim=1), dxin
    return grads_at(["emb", "C"], build, dxin.new_zeros(num_rows, dim), dxin.new_zeros(n, 2))


def _lookup(dxin, tokens, num_rows, columns="last", order="tokens", write="add", first=False):
    """(demb, dC) with a slip: the first columns of dxin taken, the view undone in the
    wrong ``order``, the repeated rows written once instead of added, or each point's
    first token only."""
    n, per_point = tokens.shape
    dim = (dxin.shape[1] - 2) // per_point
    cols = dxin[:, 2:] if columns == "last" else dxin[:, :per_point * dim]
    demb = (cols.reshape(n, per_point, dim) if order == "tokens"
            else cols.reshape(n, dim, per_point).transpose(1, 2))
    ids, grads = (tokens[:, 0], demb[:, 0]) if first else (tokens.reshape(-1),
                                                            demb.reshape(-1, dim))
    dC = dxin.new_zeros(num_rows, dim)
    if write == "add":
        dC.index_add_(0, ids, grads)
    else:
        dC[ids] = grads  # repeated rows: one write wins
    return demb, dC


def _lookup_inputs(gen):
    """A fresh batch's (dxin, tokens, num_rows), with one more row in the table than the
    tokens use: a table sized from the tokens (tokens.max() + 1 rows, or one_hot without
    num_classes) has a row too few on every trial."""
    dxin, tokens, num_rows = inputs_of("dxin", "tokens", "num_rows")(gen)
    return dxin, tokens, num_rows + 1


EMBEDDING = ByHand(
    name="back to the table",
    reference=_lookup_ref,
    make_inputs=_lookup_inputs,
    outputs=["demb", "dC"],
    mistakes=slips(_lookup, {
        "the first columns were taken: torch.cat put the point's 2 coordinates first, so "
        "embcat's gradient is the columns after them": {"columns": "first"},
        "the columns went back in the wrong order: view(n, -1) laid each point's T rows of "
        "E numbers side by side, so undo it with view(n, T, E)": {"order": "features"},
        "a row looked up several times keeps only one lookup's gradient: writing dC[ids] "
        "= ... (or dC[ids] += ..., which is the same write with advanced indexing) stores "
        "each repeated row once. Add every lookup with index_add_, or loop over the "
        "lookups with +=": {"write": "assign"},
        "only each point's first token was sent back: the lookup used all T tokens of a "
        "point; flatten tokens to (n*T,) and demb to (n*T, E)": {"first": True},
    }),
    advice="Undo the forward steps in reverse: the concatenation (which columns were "
           "embcat's?), the view, then the lookup (lesson 09: indexing).",
)


EXERCISES = {
    "l12-pick-log": PICK_LOG,
    "l12-normalise": NORMALISE,
    "l12-shift": SHIFT,
    "l12-weighted": WEIGHTED,
    "l12-scale-normalise": SCALE_NORMALISE,
    "l12-centre": CENTRE,
    "l12-embedding": EMBEDDING,
    "l12-layernorm": LAYERNORM,
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _largest_dlogit_max():
    return round(float(spiral_grads()["logit_maxes"].abs().max()), 12)


def _largest_db1():
    return round(float(spiral_grads()["b1"].abs().max()), 12)


PREDICTIONS = {
    "l12-predict-maxes": Prediction(
        question="the largest |entry| of dlogit_maxes on the spiral batch",
        answer=_largest_dlogit_max,
        hint="add the same number c to every logit of a row: what happens to the row's "
             "probabilities, and so to the loss, as c moves?",
        why="shifting a row of logits by any number c leaves its softmax unchanged, so the "
            "loss does not depend on logit_maxes at all and its gradient there vanishes (what "
            "is left is round-off, below 1e-15). Subtracting the max only keeps exp from "
            "overflowing",
    ),
    "l12-predict-db1": Prediction(
        question="the largest |entry| of db1 on the spiral batch",
        answer=_largest_db1,
        hint="batch norm subtracts each feature's batch mean. Add the same number to every "
             "row of hpre: what changes after the subtraction?",
        why="adding a number to every row of hpre moves the batch mean by the same number, "
            "so diff = hpre - mean, and everything after it, stays as it was: the loss does "
            "not depend on b1, and its gradient vanishes (what is left is round-off)",
    ),
}
