"""Lesson 12's last exercise: back through the first layer's input, un-concatenated,
un-viewed and scatter-added into the embedding table."""

from __future__ import annotations

import torch

from .._spec import ByHand
from .model import grads_at, inputs_of, slips

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
