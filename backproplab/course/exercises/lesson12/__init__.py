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
`_shift` in ``model``; `_scale`, `_centre`, `_lookup` here): a learner who makes one
slip and derives the rest right is told the slip. Two transfers follow the same rules:
class weights in cross-entropy's fused form, and layer norm.

Module ``model`` holds the classifier and the cross-entropy exercises. This module holds
the rest, in the lesson's order: batch norm's scale, shift and normalise, its variance
and centring, the way back to the embedding table, and the transfer to layer norm; then
the exercises' ids and the predictions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, Prediction, randint
from .model import (
    NORMALISE,
    PICK_LOG,
    SHIFT,
    SUM_ADDS,
    WEIGHTED,
    grads_at,
    inputs_of,
    slips,
    spiral_grads,
)

# --------------------------------------------------------------------------
# Batch norm: scale, shift and normalise; the variance and the centring
# --------------------------------------------------------------------------


def _scale_ref(diff, invstd, gain, dhbn):
    def build(d, s, g, b):
        xhat = d * s
        return {"xhat": xhat, "gain": g, "bias": b, "invstd": s}, g * xhat + b, dhbn
    return grads_at(["xhat", "gain", "bias", "invstd"], build, diff, invstd, gain,
                     torch.zeros_like(gain))


def _scale(diff, invstd, gain, dhbn, use_gain=True, sums=True, dgain_with="xhat",
           invstd_sum=True, invstd_keepdim=True, invstd_with="diff", invstd_from="dxhat"):
    """(dxhat, dgain, dbias, dinvstd) with a slip: the gain left out of dxhat; dgain and
    dbias not summed; dgain with another factor; dinvstd unsummed, without keepdim, with
    another factor or from dhbn."""
    xhat = diff * invstd
    dxhat = gain * dhbn if use_gain else dhbn.clone()
    factor = {"xhat": xhat, "gain": gain.expand_as(dhbn)}[dgain_with]
    dgain, dbias = ((dhbn * factor).sum(0), dhbn.sum(0)) if sums else (dhbn * factor, dhbn)
    left = {"dxhat": dxhat, "dhbn": dhbn}[invstd_from]
    product = left * {"diff": diff, "xhat": xhat}[invstd_with]
    dinvstd = product.sum(0, keepdim=invstd_keepdim) if invstd_sum else product
    return dxhat, dgain, dbias, dinvstd


def _centre_ref(diff, var, eps, dxhat, dinvstd):
    def build(hpre):
        mean = hpre.mean(0, keepdim=True)
        d = hpre - mean
        d2 = d**2
        v = d2.mean(0, keepdim=True)
        s = (v + eps) ** -0.5
        made = {"var": v, "diff2": d2, "diff": d, "mean": mean, "hpre": hpre}
        return made, (d * s.detach(), s), (dxhat, dinvstd)  # xhat's path to diff; invstd
    return grads_at(["var", "diff2", "diff", "mean", "hpre"], build, diff)


def _centre(diff, var, eps, dxhat, dinvstd, power=-1.5, var_sign=-1, with_eps=True,
            correction=0, spread=True, paths="both", two=2, mean_sum=True, mean_sign=-1,
            hpre_paths="both", hpre_divide=True):
    """(dvar, ddiff2, ddiff, dmean, dhpre) with a slip at one step, carried down."""
    n = len(diff)
    invstd = (var + eps) ** -0.5
    dvar = var_sign * 0.5 * dinvstd * ((var + eps) if with_eps else var) ** power
    ddiff2 = dvar / (n - correction) if correction is not None else dvar.clone()
    if spread:
        ddiff2 = ddiff2.expand_as(diff)
    direct, square = dxhat * invstd, two * diff * ddiff2
    ddiff = {"both": direct + square, "xhat": direct, "diff2": square}[paths]
    dmean = mean_sign * (ddiff.sum(0, keepdim=True) if mean_sum else ddiff)
    through_mean = dmean.expand_as(diff) / (n - (hpre_divide == "bessel") if hpre_divide else 1)
    dhpre = {"both": ddiff + through_mean, "diff": ddiff.clone()}[hpre_paths]
    return dvar, ddiff2, ddiff, dmean, dhpre


SCALE_NORMALISE = ByHand(
    name="scale, shift and normalise",
    reference=_scale_ref,
    make_inputs=inputs_of("diff", "invstd", "gain", "dhbn"),
    outputs=["dxhat", "dgain", "dbias", "dinvstd"],
    mistakes=slips(_scale, {
        "the gain is missing from dxhat: hbn = gain * xhat + bias, so dxhat = gain * dhbn":
            {"use_gain": False},
        "dgain and dbias are not summed over the batch: gain and bias (one number per "
        "feature) were broadcast over every row": {"sums": False},
        "dgain used the gain instead of xhat: hbn = gain * xhat, so dgain sums dhbn * xhat":
            {"dgain_with": "gain"},
        "the sum for dinvstd is missing: invstd has one number per feature, shape (1, H), "
        "broadcast over the batch, so its gradient sums over dim 0 (keepdim=True)":
            {"invstd_sum": False},
        "dinvstd was multiplied by xhat; in xhat = diff * invstd the factor beside invstd "
        "is diff": {"invstd_with": "xhat"},
        "dinvstd was made from dhbn; invstd reaches the loss through xhat, so it takes "
        "dxhat (= gain * dhbn)": {"invstd_from": "dhbn"},
    }),
    advice="hbn = gain * xhat + bias with gain and bias (H,) broadcast over the n rows; "
           "xhat = diff * invstd with invstd (1, H).",
)


CENTRE = ByHand(
    name="the variance and the centring",
    reference=_centre_ref,
    make_inputs=inputs_of("diff", "var", "eps", "dxhat", "dinvstd"),
    outputs=["dvar", "ddiff2", "ddiff", "dmean", "dhpre"],
    mistakes=slips(_centre, {
        "dvar: the power rule lowers the exponent by one: the derivative of v**-0.5 is "
        "-0.5 * v**-1.5": {"power": -0.5},
        "the sign of dvar is lost: the derivative of v**-0.5 is -0.5 * v**-1.5":
            {"var_sign": 1},
        "eps is missing: invstd = (var + eps)**-0.5, so dvar is taken at var + eps":
            {"with_eps": False},
        "ddiff2 divided by n - 1 (Bessel's correction), but this var divides by n, as "
        "batch norm does in training": {"correction": 1},
        "the mean's 1/n is missing from ddiff2: var = diff2.mean(0) gives each row 1/n "
        "of dvar": {"correction": None},
        "ddiff2 is not spread over the batch: diff2 has shape (n, H), and so must its "
        "gradient (every row gets dvar / n)": {"spread": False},
        "ddiff has only the path through xhat: diff also feeds diff2, " + SUM_ADDS:
            {"paths": "xhat"},
        "ddiff has only the path through diff2: diff is also multiplied into xhat, "
        + SUM_ADDS: {"paths": "diff2"},
        "the square's factor 2 is missing: the derivative of diff**2 is 2 * diff":
            {"two": 1},
        "the sum for dmean is missing: mean has one number per feature, shape (1, H), "
        "subtracted from every row, so its gradient sums over dim 0 (keepdim=True)":
            {"mean_sum": False},
        "the sign of dmean is lost: the mean is subtracted": {"mean_sign": 1},
        "dhpre has only the direct path: hpre also feeds the mean, " + SUM_ADDS:
            {"hpre_paths": "diff"},
        "the mean's 1/n is missing on dhpre's path through the mean":
            {"hpre_divide": False},
        "dhpre divided by n - 1 (Bessel's correction), but the mean of n rows divides "
        "by n": {"hpre_divide": "bessel"},
    }),
    advice="Bottom up, one line at a time: the power rule at var + eps; a mean of n rows "
           "gives each row 1/n; diff and hpre are each used twice, one term per use.",
)


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


# --------------------------------------------------------------------------
# Transfer: layer norm
# --------------------------------------------------------------------------


def _layernorm_inputs(gen):
    n, features = randint(4, 9, gen), randint(9, 14, gen)  # never square
    x = torch.randn(n, features, generator=gen, dtype=torch.float64) * 2 + 0.5
    dout = torch.randn(n, features, generator=gen, dtype=torch.float64)
    gain = torch.rand(features, generator=gen, dtype=torch.float64) + 0.5
    return dout, x, gain, 0.01 + 0.2 * float(torch.rand(1, generator=gen))


def _layernorm_ref(dout, x, gain, eps):
    def build(t):
        return {"x": t}, F.layer_norm(t, (t.shape[1],), gain, None, eps), dout
    return grads_at(["x"], build, x)[0]


def _norm_backward(dout, x, gain, eps, dim, correction=0, mean_term=True, var_term=True,
                   use_gain=True):
    """The compact normalisation backward over ``dim``, with the slips as switches."""
    d = x.shape[dim]
    centred = x - x.mean(dim, keepdim=True)
    invstd = ((centred**2).sum(dim, keepdim=True) / (d - correction) + eps) ** -0.5
    xhat = centred * invstd
    g = dout * gain if use_gain else dout
    out = d * g - mean_term * g.sum(dim, keepdim=True)
    return invstd / d * (out - var_term * xhat * (g * xhat).sum(dim, keepdim=True))


LAYERNORM = ByHand(
    name="dx through layer norm",
    reference=_layernorm_ref,
    make_inputs=_layernorm_inputs,
    mistakes={
        "the statistics were taken over the batch (dim 0), as in batch norm; layer "
        "norm normalises each row over its features (dim 1)":
            lambda do, x, g, eps: _norm_backward(do, x, g, eps, dim=0),
        "the path through the mean is missing: subtract the row sum of the gradient "
        "at xhat": lambda do, x, g, eps: _norm_backward(do, x, g, eps, 1, mean_term=False),
        "the path through the variance is missing: subtract xhat times the row sum of "
        "(gradient at xhat * xhat)":
            lambda do, x, g, eps: _norm_backward(do, x, g, eps, 1, var_term=False),
        "the gain is missing: the gradient at xhat is dout * gain":
            lambda do, x, g, eps: _norm_backward(do, x, g, eps, 1, use_gain=False),
        "divided by D - 1 (Bessel's correction), but layer norm's variance divides by "
        "the number of features D":
            lambda do, x, g, eps: _norm_backward(do, x, g, eps, 1, correction=1),
    },
    advice="Redo the batch-norm steps with every mean and sum taken along dim 1 "
           "(keepdim=True), the features of one row.",
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
