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
`_shift` in ``cross_entropy``; `_scale`, `_centre` in ``norms``; `_lookup` in
``lookup``): a learner who makes one slip and derives the rest right is told the
slip. Two transfers follow the same rules: class weights in cross-entropy's fused
form, and layer norm.
"""

from __future__ import annotations

from .._spec import Prediction
from .cross_entropy import NORMALISE, PICK_LOG, SHIFT, WEIGHTED
from .lookup import EMBEDDING
from .model import spiral_grads
from .norms import CENTRE, LAYERNORM, SCALE_NORMALISE

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
