"""Lesson 12, backprop through a classifier: its exercises and its predictions.

The lesson writes a small classifier's forward pass in named steps (`forward`
below is the same code) and asks for the backward of its cross-entropy and its
batch norm a few lines at a time: each exercise takes the forward values of its
lines and the gradient arriving at the last of them, and returns the gradient at
every intermediate of those lines. A check makes a fresh random model and batch
(other sizes than the lesson's spiral), runs `forward` in float64, and hands the
learner's function that batch's forward values and, for the gradient arriving
from above, random numbers of the right shape. The reference is autograd's
gradient at each of those intermediates, given the same numbers (`_grads_at`).

A slip early in an exercise's lines carries into the gradients after it, so each
slip below is written as the whole chain with the slip in it (`_pick_log`,
`_normalise`, `_shift`, `_scale`, `_centre`, `_lookup`): a learner who makes one
slip and derives the rest right is told the slip. Two transfers follow the same
rules: class weights in cross-entropy's fused form, and layer norm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._spec import ByHand, Prediction

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
    from ... import data

    x32, y = data.spiral_data()
    x = x32.double()
    p = {name: t.requires_grad_() for name, t in spiral_model().items()}
    named = {**p, **forward(p, x, spiral_tokens(x), y)}
    return dict(zip(named, torch.autograd.grad(named["loss"], list(named.values())),
                    strict=True))


# --------------------------------------------------------------------------
# Fresh batches for the checks, and the reference
# --------------------------------------------------------------------------


def _randint(low, high, gen):
    return int(torch.randint(low, high, (1,), generator=gen))


def fresh_batch(gen):
    """A random model and batch, new sizes each time, run forward.

    Returns the forward values by name; for each of them, ``d<name>``: random
    numbers of its shape standing for the gradient arriving from above (a
    step's backward must be right whatever arrives, and a real one can be
    round-off, as at logit_maxes); and ``x``, ``tokens``, ``y``, ``eps``, the
    parameters and ``num_rows``.
    """
    n, classes, hidden = _randint(8, 17, gen), _randint(3, 6, gen), _randint(4, 9, gen)
    per_point, dim, rows = _randint(2, 4, gen), _randint(2, 5, gen), _randint(5, 9, gen)

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


def _inputs(*names):
    """make_inputs for an exercise whose arguments are these values of a fresh batch."""
    def make(gen):
        batch = fresh_batch(gen)
        return tuple(batch[name] for name in names)
    return make


def _grads_at(names, build, *leaves):
    """autograd's gradients at the tensors ``names`` of the graph that ``build`` makes from
    ``leaves``: ``build`` returns (its tensors by name, its outputs, the gradients arriving
    at those outputs)."""
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    made, outs, arriving = build(*leaves)
    return torch.autograd.grad(outs, [made[name] for name in names], arriving)


def _rows(t):
    return torch.arange(len(t))


# --------------------------------------------------------------------------
# Cross-entropy: the pick and the log; the normalisation; exp and the max
# --------------------------------------------------------------------------


def _pick_log_ref(probs, y):
    def build(pr):
        lp = pr.log()
        loss = -lp[_rows(lp), y].mean()
        return {"logprobs": lp, "probs": pr}, loss, torch.ones((), dtype=pr.dtype)
    return _grads_at(["logprobs", "probs"], build, probs)


def _pick_log(probs, y, sign=-1, mean=True, everywhere=False, times_probs=False):
    """(dlogprobs, dprobs) with a slip: the ``sign`` flipped, the ``mean``'s 1/n left out,
    the value put on every entry, or log's derivative multiplied instead of divided."""
    value = sign / (len(probs) if mean else 1)
    dlogprobs = torch.full_like(probs, value) if everywhere else torch.zeros_like(probs)
    dlogprobs[_rows(probs), y] = value
    return dlogprobs, dlogprobs * probs if times_probs else dlogprobs / probs


def _normalise_ref(counts, counts_sum, dprobs):
    def build(c):
        s = c.sum(1, keepdim=True)
        inv = s**-1
        return {"inv": inv, "sum": s, "counts": c}, c * inv, dprobs
    return _grads_at(["inv", "sum", "counts"], build, counts)


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
    return _grads_at(["shifted", "maxes", "logits"], build, logits)


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


# --------------------------------------------------------------------------
# Transfer: class weights in the fused form
# --------------------------------------------------------------------------


def _weighted_inputs(gen):
    n, classes = _randint(6, 13, gen), _randint(3, 6, gen)
    logits = torch.randn(n, classes, generator=gen, dtype=torch.float64) * 2
    y = torch.randint(0, classes, (n,), generator=gen)
    weight = torch.rand(classes, generator=gen, dtype=torch.float64) * 2.5 + 0.25
    return logits, y, weight


def _weighted_ref(logits, y, weight):
    def build(z):
        return {"z": z}, F.cross_entropy(z, y, weight=weight), torch.ones((), dtype=z.dtype)
    return _grads_at(["z"], build, logits)[0]


def _weighted(logits, y, weight, per_row=True, divide="picked"):
    """The fused gradient with a slip: each row's weight ``per_row`` "column" (every entry
    weighted by its own column's class) or False (no weight), the mean divided by
    ``divide`` "n", "all" (every class's weight) or "picked" (the picked weights)."""
    rows = weight[y][:, None]
    scale = {True: rows, "column": weight[None, :], False: 1.0}[per_row]
    total = {"picked": weight[y].sum(), "n": len(y), "all": weight.sum()}[divide]
    return scale * (torch.softmax(logits, 1) - F.one_hot(y, logits.shape[1])) / total


# --------------------------------------------------------------------------
# Batch norm: scale, shift and normalise; the variance and the centring
# --------------------------------------------------------------------------


def _scale_ref(diff, invstd, gain, dhbn):
    def build(d, s, g, b):
        xhat = d * s
        return {"xhat": xhat, "gain": g, "bias": b, "invstd": s}, g * xhat + b, dhbn
    return _grads_at(["xhat", "gain", "bias", "invstd"], build, diff, invstd, gain,
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
    return _grads_at(["var", "diff2", "diff", "mean", "hpre"], build, diff)


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


# --------------------------------------------------------------------------
# The first layer's input: un-concatenate, un-view, scatter-add
# --------------------------------------------------------------------------


def _lookup_ref(dxin, tokens, num_rows):
    n, per_point = tokens.shape
    dim = (dxin.shape[1] - 2) // per_point

    def build(table, x):
        emb = table[tokens]
        return {"emb": emb, "C": table}, torch.cat([x, emb.view(n, -1)], dim=1), dxin
    return _grads_at(["emb", "C"], build, dxin.new_zeros(num_rows, dim), dxin.new_zeros(n, 2))


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


# --------------------------------------------------------------------------
# Transfer: layer norm
# --------------------------------------------------------------------------


def _layernorm_inputs(gen):
    n, features = _randint(4, 9, gen), _randint(9, 14, gen)  # never square
    x = torch.randn(n, features, generator=gen, dtype=torch.float64) * 2 + 0.5
    dout = torch.randn(n, features, generator=gen, dtype=torch.float64)
    gain = torch.rand(features, generator=gen, dtype=torch.float64) + 0.5
    return dout, x, gain, 0.01 + 0.2 * float(torch.rand(1, generator=gen))


def _layernorm_ref(dout, x, gain, eps):
    def build(t):
        return {"x": t}, F.layer_norm(t, (t.shape[1],), gain, None, eps), dout
    return _grads_at(["x"], build, x)[0]


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


def _slips(chain, table):
    """{message: the chain with that slip}, from {message: the slip's switches}."""
    return {message: (lambda *a, _k=switches: chain(*a, **_k))
            for message, switches in table.items()}


SUM_ADDS = "and the gradients of the two uses add up (+=, not =)"

EXERCISES = {
    # ---- cross-entropy ------------------------------------------------------
    "l12-pick-log": ByHand(
        name="the pick and the log",
        reference=_pick_log_ref,
        make_inputs=_inputs("probs", "y"),
        outputs=["dlogprobs", "dprobs"],
        mistakes=_slips(_pick_log, {
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
    ),
    "l12-normalise": ByHand(
        name="the normalisation",
        reference=_normalise_ref,
        make_inputs=_inputs("counts", "counts_sum", "dprobs"),
        outputs=["dcounts_sum_inv", "dcounts_sum", "dcounts"],
        mistakes=_slips(_normalise, {
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
    ),
    "l12-shift": ByHand(
        name="exp and the max",
        reference=_shift_ref,
        make_inputs=_inputs("logits", "counts", "dcounts"),
        outputs=["dshifted", "dlogit_maxes", "dlogits"],
        mistakes=_slips(_shift, {
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
    ),
    "l12-weighted": ByHand(
        name="dlogits with class weights",
        reference=_weighted_ref,
        make_inputs=_weighted_inputs,
        mistakes=_slips(_weighted, {
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
    ),
    # ---- batch norm -----------------------------------------------------------
    "l12-scale-normalise": ByHand(
        name="scale, shift and normalise",
        reference=_scale_ref,
        make_inputs=_inputs("diff", "invstd", "gain", "dhbn"),
        outputs=["dxhat", "dgain", "dbias", "dinvstd"],
        mistakes=_slips(_scale, {
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
    ),
    "l12-centre": ByHand(
        name="the variance and the centring",
        reference=_centre_ref,
        make_inputs=_inputs("diff", "var", "eps", "dxhat", "dinvstd"),
        outputs=["dvar", "ddiff2", "ddiff", "dmean", "dhpre"],
        mistakes=_slips(_centre, {
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
    ),
    # ---- the input: concat, view, lookup -------------------------------------
    "l12-embedding": ByHand(
        name="back to the table",
        reference=_lookup_ref,
        make_inputs=_inputs("dxin", "tokens", "num_rows"),
        outputs=["demb", "dC"],
        mistakes=_slips(_lookup, {
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
    ),
    # ---- transfer ---------------------------------------------------------------
    "l12-layernorm": ByHand(
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
    ),
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
