"""Lesson 12's classifier and its cross-entropy exercises.

The classifier: its forward pass in named steps (the lesson's own code), the spiral model
the predictions run on, and the fresh random batches every check draws; and what every
exercise shares: `grads_at`, the references' autograd step, and `slips`. Then the
exercises where the backward starts, at the loss: the pick and the log, the
normalisation, exp and the max, and the transfer to class weights in the fused form.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, randint

EPS = 1e-5


def forward(p, x, tokens, y, eps=EPS):
    """The classifier, one small named step per line; returns every intermediate."""
    n = len(x)
    emb = p["C"][tokens]                     # (n, T, E): one table row per token
    embcat = emb.view(n, -1)                 # (n, T*E): a point's rows side by side
    xin = torch.cat([x, embcat], dim=1)      # (n, 2 + T*E): the point, then its tokens
    hpre = xin @ p["W1"] + p["b1"]           # first linear layer
    mean = hpre.mean(0, keepdim=True)        # batch norm: mean over the batch
    diff = hpre - mean
    diff2 = diff**2
    var = diff2.mean(0, keepdim=True)        # divides by n, as batch norm does in training
    invstd = (var + eps) ** -0.5
    xhat = diff * invstd                     # normalised
    hbn = p["gain"] * xhat + p["bias"]       # scaled and shifted
    h = torch.tanh(hbn)
    logits = h @ p["W2"] + p["b2"]           # second linear layer
    logit_maxes = logits.max(1, keepdim=True).values
    shifted = logits - logit_maxes           # every row's largest entry is now 0
    counts = shifted.exp()
    counts_sum = counts.sum(1, keepdim=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv          # softmax
    logprobs = probs.log()
    picked = logprobs[torch.arange(n), y]    # each point's log-probability of its class
    loss = -picked.mean()
    return {"emb": emb, "embcat": embcat, "xin": xin, "hpre": hpre, "mean": mean,
            "diff": diff, "diff2": diff2, "var": var, "invstd": invstd, "xhat": xhat,
            "hbn": hbn, "h": h, "logits": logits, "logit_maxes": logit_maxes,
            "shifted": shifted, "counts": counts, "counts_sum": counts_sum,
            "counts_sum_inv": counts_sum_inv, "probs": probs, "logprobs": logprobs,
            "picked": picked, "loss": loss}


# --------------------------------------------------------------------------
# The lesson's spiral and model (the predictions run on them)
# --------------------------------------------------------------------------


def spiral_tokens(points):
    """Each point's two tokens: its quadrant (0 to 3) and its ring (4 to 7)."""
    quadrant = 2 * (points[:, 0] > 0).long() + (points[:, 1] > 0).long()
    ring = 4 + (points.norm(dim=1) * 4).long().clamp(max=3)
    return torch.stack([quadrant, ring], dim=1)


def spiral_model(hidden=16, dim=3, seed=13):
    """The lesson's starting weights (float64, seeded), as the lesson makes them."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "C": torch.randn(8, dim, generator=gen, dtype=torch.float64),
        "W1": torch.randn(2 + 2 * dim, hidden, generator=gen, dtype=torch.float64),
        "b1": torch.zeros(hidden, dtype=torch.float64),
        "gain": torch.ones(hidden, dtype=torch.float64),
        "bias": torch.zeros(hidden, dtype=torch.float64),
        "W2": torch.randn(hidden, 3, generator=gen, dtype=torch.float64) * 0.5,
        "b2": torch.zeros(3, dtype=torch.float64),
    }


def spiral_grads():
    """autograd's gradient at every parameter and intermediate of the lesson's first pass."""
    from .... import data

    x32, y = data.spiral_data()
    x = x32.double()
    p = {name: t.requires_grad_() for name, t in spiral_model().items()}
    named = {**p, **forward(p, x, spiral_tokens(x), y)}
    return dict(zip(named, torch.autograd.grad(named["loss"], list(named.values())),
                    strict=True))


# --------------------------------------------------------------------------
# Fresh batches for the checks, and the reference
# --------------------------------------------------------------------------


def fresh_batch(gen):
    """A random model and batch, new sizes each time, run forward.

    Returns the forward values by name; for each of them, ``d<name>``: random
    numbers of its shape standing for the gradient arriving from above (a
    step's backward must be right whatever arrives, and a real one can be
    round-off, as at logit_maxes); and ``x``, ``tokens``, ``y``, ``eps``, the
    parameters and ``num_rows``.
    """
    n, classes, hidden = randint(8, 17, gen), randint(3, 6, gen), randint(4, 9, gen)
    per_point, dim, rows = randint(2, 4, gen), randint(2, 5, gen), randint(5, 9, gen)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    p = {
        "C": randn(rows, dim),
        "W1": randn(2 + per_point * dim, hidden),
        "b1": randn(hidden, scale=0.1),
        "gain": torch.rand(hidden, generator=gen, dtype=torch.float64) + 0.5,
        "bias": randn(hidden, scale=0.3),
        "W2": randn(hidden, classes, scale=0.8),
        "b2": randn(classes, scale=0.3),
    }
    x = randn(n, 2)
    tokens = torch.randint(0, rows, (n, per_point), generator=gen)  # more lookups than rows
    y = torch.randint(0, classes, (n,), generator=gen)
    eps = 0.01 + 0.2 * float(torch.rand(1, generator=gen))  # large, so a missing eps shows
    with torch.no_grad():
        batch = forward(p, x, tokens, y, eps)
    batch.update({f"d{name}": randn(*t.shape) for name, t in batch.items() if name != "loss"})
    batch.update(p)
    batch.update({"x": x, "tokens": tokens, "y": y, "eps": eps, "num_rows": rows})
    return batch


def inputs_of(*names):
    """make_inputs for an exercise whose arguments are these values of a fresh batch."""
    def make(gen):
        batch = fresh_batch(gen)
        return tuple(batch[name] for name in names)
    return make


def grads_at(names, build, *leaves):
    """autograd's gradients at the tensors ``names`` of the graph that ``build`` makes from
    ``leaves``: ``build`` returns (its tensors by name, its outputs, the gradients arriving
    at those outputs)."""
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    made, outs, arriving = build(*leaves)
    return torch.autograd.grad(outs, [made[name] for name in names], arriving)


def row_numbers(t):
    return torch.arange(len(t))


def slips(chain, table):
    """{message: the chain with that slip}, from {message: the slip's switches}."""
    return {message: (lambda *a, _k=switches: chain(*a, **_k))
            for message, switches in table.items()}


SUM_ADDS = "and the gradients of the two uses add up (+=, not =)"


# --------------------------------------------------------------------------
# Cross-entropy: the pick and the log; the normalisation; exp and the max
# --------------------------------------------------------------------------


def _pick_log_ref(probs, y):
    def build(pr):
        lp = pr.log()
        loss = -lp[row_numbers(lp), y].mean()
        return {"logprobs": lp, "probs": pr}, loss, torch.ones((), dtype=pr.dtype)
    return grads_at(["logprobs", "probs"], build, probs)


def _pick_log(probs, y, sign=-1, mean=True, everywhere=False, times_probs=False):
    """(dlogprobs, dprobs) with a slip: the ``sign`` flipped, the ``mean``'s 1/n left out,
    the value put on every entry, or log's derivative multiplied instead of divided."""
    value = sign / (len(probs) if mean else 1)
    dlogprobs = torch.full_like(probs, value) if everywhere else torch.zeros_like(probs)
    dlogprobs[row_numbers(probs), y] = value
    return dlogprobs, dlogprobs * probs if times_probs else dlogprobs / probs


def _normalise_ref(counts, counts_sum, dprobs):
    def build(c):
        s = c.sum(1, keepdim=True)
        inv = s**-1
        return {"inv": inv, "sum": s, "counts": c}, c * inv, dprobs
    return grads_at(["inv", "sum", "counts"], build, counts)


def _normalise(counts, counts_sum, dprobs, inv_sum=(1,), power=-2, sign=-1, paths="both"):
    """(dcounts_sum_inv, dcounts_sum, dcounts) with a slip: the sum for counts_sum_inv over
    ``inv_sum`` (() for none), another ``power`` or ``sign`` in the power rule, or one path
    of counts only."""
    dinv = dprobs * counts
    if inv_sum:
        dinv = dinv.sum(inv_sum, keepdim=True)
    dsum = sign * dinv * counts_sum ** power
    through_probs, through_sum = dprobs / counts_sum, dsum.expand_as(counts)
    dcounts = {"both": through_probs + through_sum, "probs": through_probs,
               "sum": through_sum.clone()}[paths]
    return dinv, dsum, dcounts


def _shift_ref(logits, counts, dcounts):
    def build(z):
        m = z.max(1, keepdim=True).values
        s = z - m
        return {"shifted": s, "maxes": m, "logits": z}, s.exp(), dcounts
    return grads_at(["shifted", "maxes", "logits"], build, logits)


def _shift(logits, counts, dcounts, exp_slope=True, max_sum=True, max_sign=-1, max_path="max",
           zero_maxes=False):
    """(dshifted, dlogit_maxes, dlogits) with a slip: exp's derivative left out, the sum
    for logit_maxes left out or its sign lost, its gradient set to 0, or sent back to
    ``max_path`` "none" (dropped) or "row" (every entry of the row)."""
    dshifted = dcounts * counts if exp_slope else dcounts.clone()
    dmaxes = max_sign * (dshifted.sum(1, keepdim=True) if max_sum else dshifted)
    if zero_maxes:
        dmaxes = torch.zeros_like(dmaxes)
    largest = F.one_hot(logits.argmax(1), logits.shape[1]).to(logits.dtype)
    back = {"max": largest * dmaxes, "row": dmaxes.expand_as(logits), "none": 0}[max_path]
    return dshifted, dmaxes, dshifted + back


def _shift_inputs(gen):
    """A fresh batch's (logits, counts, dcounts) with the last class the smallest logit of
    every row: no row's max, so one_hot(argmax) without num_classes is a column short."""
    logits, dcounts = inputs_of("logits", "dcounts")(gen)
    logits = logits.clone()
    logits[:, -1] = logits.min(1).values - 0.5
    return logits, (logits - logits.max(1, keepdim=True).values).exp(), dcounts


# --------------------------------------------------------------------------
# Transfer: class weights in the fused form
# --------------------------------------------------------------------------


def _weighted_inputs(gen):
    n, classes = randint(6, 13, gen), randint(3, 6, gen)
    logits = torch.randn(n, classes, generator=gen, dtype=torch.float64) * 2
    # the last class is no row's target: one_hot(y) without num_classes is a column short
    y = torch.randint(0, classes - 1, (n,), generator=gen)
    weight = torch.rand(classes, generator=gen, dtype=torch.float64) * 2.5 + 0.25
    return logits, y, weight


def _weighted_ref(logits, y, weight):
    def build(z):
        return {"z": z}, F.cross_entropy(z, y, weight=weight), torch.ones((), dtype=z.dtype)
    return grads_at(["z"], build, logits)[0]


def _weighted(logits, y, weight, per_row=True, divide="picked"):
    """The fused gradient with a slip: each row's weight ``per_row`` "column" (every entry
    weighted by its own column's class) or False (no weight), the mean divided by
    ``divide`` "n", "all" (every class's weight) or "picked" (the picked weights)."""
    rows = weight[y][:, None]
    scale = {True: rows, "column": weight[None, :], False: 1.0}[per_row]
    total = {"picked": weight[y].sum(), "n": len(y), "all": weight.sum()}[divide]
    return scale * (torch.softmax(logits, 1) - F.one_hot(y, logits.shape[1])) / total


PICK_LOG = ByHand(
    name="the pick and the log",
    reference=_pick_log_ref,
    make_inputs=inputs_of("probs", "y"),
    outputs=["dlogprobs", "dprobs"],
    mistakes=slips(_pick_log, {
        "the mean's 1/n is missing: loss = -picked.mean(), so each picked entry gets "
        "-1/n, not -1": {"mean": False},
        "the sign is flipped: loss is minus the mean of the picked log-probabilities":
            {"sign": 1},
        "every entry got -1/n, but only the picked entry of each row (column y) is used "
        "by the loss; the others get 0": {"everywhere": True},
        "dprobs multiplied by probs: the derivative of log(p) is 1/p, so divide":
            {"times_probs": True},
    }),
    advice="Only one entry per row reaches the loss: the one in column y. Work out what a "
           "mean of n numbers gives each of them, then multiply by log's derivative.",
)


NORMALISE = ByHand(
    name="the normalisation",
    reference=_normalise_ref,
    make_inputs=inputs_of("counts", "counts_sum", "dprobs"),
    outputs=["dcounts_sum_inv", "dcounts_sum", "dcounts"],
    mistakes=slips(_normalise, {
        "the sum is missing: counts_sum_inv has one number per row, shape (n, 1), "
        "broadcast over the classes, so its gradient sums over dim 1 (keepdim=True)":
            {"inv_sum": ()},
        "dcounts_sum_inv summed over the batch (dim 0); counts_sum_inv was broadcast over "
        "the classes, so sum over dim 1": {"inv_sum": (0,)},
        "the sign is lost: the derivative of s**-1 is -s**-2": {"sign": 1},
        "the power rule gives -s**-2 for s**-1, not -s**-1": {"power": -1},
        "dcounts has only the path through probs: counts also feeds counts_sum, "
        + SUM_ADDS: {"paths": "probs"},
        "dcounts has only the path through counts_sum: counts is also multiplied into "
        "probs, " + SUM_ADDS: {"paths": "sum"},
    }),
    advice="counts_sum_inv is (n, 1), used once per class; counts_sum_inv = "
           "counts_sum**-1 is the power rule; counts is used twice, one term per use.",
)


SHIFT = ByHand(
    name="exp and the max",
    reference=_shift_ref,
    make_inputs=_shift_inputs,
    outputs=["dshifted", "dlogit_maxes", "dlogits"],
    mistakes=slips(_shift, {
        "exp's local derivative is missing: d/dz exp(z) = exp(z), which the forward pass "
        "already holds as counts; multiply by it": {"exp_slope": False},
        "the sum is missing: logit_maxes has one number per row, shape (n, 1), subtracted "
        "from every class, so its gradient sums over dim 1 (keepdim=True)":
            {"max_sum": False},
        "the sign of dlogit_maxes is lost: logit_maxes is subtracted": {"max_sign": 1},
        "dlogit_maxes was set to 0: what it comes to depends on the gradient that arrives; "
        "the check sends other numbers than the spiral's, so write the step's rule":
            {"zero_maxes": True},
        "dlogits has only the direct path: logits also feeds logit_maxes, and that path's "
        "gradient adds up with it (+=, not =), whatever arrives along it":
            {"max_path": "none"},
        "dlogit_maxes went to every entry of the row, as if the max were made of all of "
        "them; the max is one entry, so its gradient goes to the largest logit only":
            {"max_path": "row"},
    }),
    advice="Three lines, bottom up: exp entry by entry; logit_maxes is (n, 1), subtracted "
           "once per class; logits reaches the loss along two paths (a max picks one "
           "entry per row).",
)


WEIGHTED = ByHand(
    name="dlogits with class weights",
    reference=_weighted_ref,
    make_inputs=_weighted_inputs,
    mistakes=slips(_weighted, {
        "the weighted mean divides by the sum of the picked weights, w[y].sum(), not by "
        "the number of rows n": {"divide": "n"},
        "divided by the sum of every class's weight; the mean's denominator sums the "
        "weight of each row's own class, w[y].sum()": {"divide": "all"},
        "each entry was weighted by its own column's class; a row's loss is w[y_i] times "
        "its -log p, so the whole row carries w[y_i]": {"per_row": "column"},
        "the weights are missing from the rows: each row's loss is w[y_i] times its "
        "-log p, so its gradient carries w[y_i] too": {"per_row": False},
        "the class weights are left out: this is the unweighted (softmax - one_hot) / n":
            {"per_row": False, "divide": "n"},
    }),
    advice="Write the loss of one row with its weight, and the denominator: which of it "
           "depends on the logits? Then reuse the fused form for one row.",
)
