"""Lesson 10, backprop through a classifier: its exercises and its predictions.

The lesson writes a small classifier's forward pass in named steps (`forward`
below is the same code) and asks for the backward of every step, one small
function each. A check makes a fresh random model and batch (other sizes than
the lesson's spiral), runs `forward` in float64, and hands the learner's
function the arguments its exercise names: forward values of that batch, and
random numbers standing for the gradient arriving from above. The reference is
autograd's gradient through that one step, given the same numbers (`_vjp`).

The slips listed with each exercise are the ones the lesson warns about: a
missing sum where the forward pass broadcast, 1/N, Bessel's N - 1, a path left
out (``=`` where two paths must add up), the wrong axis.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._spec import ByHand, Prediction
from ._spec import vjp as _vjp

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


def _spiral_pass():
    """The lesson's first forward and backward pass: (params, intermediates)."""
    from ... import data

    x32, y = data.spiral_data()
    x = x32.double()
    p = {name: t.requires_grad_() for name, t in spiral_model().items()}
    f = forward(p, x, spiral_tokens(x), y)
    for t in f.values():
        t.retain_grad()
    f["loss"].backward()
    return p, f


# --------------------------------------------------------------------------
# Fresh batches for the checks
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


def _rows(t):
    return torch.arange(len(t))


# --------------------------------------------------------------------------
# Cross-entropy, step by step
# --------------------------------------------------------------------------


def _dlogprobs_ref(logprobs, y):
    return _vjp(lambda lp: -lp[_rows(lp), y].mean(), [logprobs], torch.tensor(1.0).double())


def _picked_only(logprobs, y, value):
    out = torch.zeros_like(logprobs)
    out[_rows(logprobs), y] = value
    return out


def _dprobs_ref(probs, dlogprobs):
    return _vjp(torch.log, [probs], dlogprobs)


def _dcounts_sum_inv_ref(counts, dprobs):
    # probs = counts * counts_sum_inv; the gradient at counts_sum_inv does not
    # depend on its own value, so any stand-in of its shape will do.
    return _vjp(lambda inv: counts * inv, [counts.new_ones(len(counts), 1)], dprobs)


def _dcounts_sum_ref(counts_sum, dcounts_sum_inv):
    return _vjp(lambda s: s**-1, [counts_sum], dcounts_sum_inv)


def _dcounts_ref(counts_sum_inv, dprobs, dcounts_sum):
    # counts is used twice: in probs and in counts_sum (its value does not matter).
    return _vjp(lambda c: (c * counts_sum_inv, c.sum(1, keepdim=True)),
                [torch.zeros_like(dprobs)], dprobs, dcounts_sum)


def _dshifted_ref(counts, dcounts):
    return _vjp(torch.exp, [counts.log()], dcounts)


def _dlogit_maxes_ref(dshifted):
    logits = torch.zeros_like(dshifted)
    return _vjp(lambda m: logits - m, [dshifted.new_zeros(len(dshifted), 1)], dshifted)


def _dlogits_ref(logits, dshifted, dlogit_maxes):
    return _vjp(lambda z: (z * 1, z.max(1, keepdim=True).values), [logits],
                dshifted, dlogit_maxes)


def _at_the_max(logits, dlogit_maxes):
    return F.one_hot(logits.argmax(1), logits.shape[1]) * dlogit_maxes


# --------------------------------------------------------------------------
# The output layer and tanh
# --------------------------------------------------------------------------


def _linear_inputs(gen):
    """Either layer of a fresh batch: the second (h, W2) or the first (xin, W1)."""
    batch = fresh_batch(gen)
    if _randint(0, 2, gen):
        return batch["h"], batch["W2"], batch["dlogits"]
    return batch["xin"], batch["W1"], batch["dhpre"]


def _linear_ref(inp, W, dout):
    return _vjp(lambda i, w, b: i @ w + b, [inp, W, W.new_zeros(W.shape[1])], dout)


def _dhbn_ref(h, dh):
    return _vjp(torch.tanh, [h.atanh()], dh)


# --------------------------------------------------------------------------
# Batch norm, step by step
# --------------------------------------------------------------------------


def _scale_shift_ref(xhat, gain, dhbn):
    return _vjp(lambda xh, g, b: g * xh + b, [xhat, gain, torch.zeros_like(gain)], dhbn)


def _dinvstd_ref(diff, dxhat):
    return _vjp(lambda s: diff * s, [diff.new_ones(1, diff.shape[1])], dxhat)


def _dvar_ref(var, dinvstd, eps):
    return _vjp(lambda v: (v + eps) ** -0.5, [var], dinvstd)


def _ddiff2_ref(diff2, dvar):
    return _vjp(lambda d2: d2.mean(0, keepdim=True), [diff2], dvar)


def _ddiff_ref(diff, invstd, dxhat, ddiff2):
    return _vjp(lambda d: (d * invstd, d**2), [diff], dxhat, ddiff2)


def _dmean_ref(ddiff):
    hpre = torch.zeros_like(ddiff)
    return _vjp(lambda m: hpre - m, [ddiff.new_zeros(1, ddiff.shape[1])], ddiff)


def _dhpre_ref(ddiff, dmean):
    # hpre is used twice: in diff = hpre - mean, and in mean itself.
    return _vjp(lambda hp: (hp * 1, hp.mean(0, keepdim=True)), [torch.zeros_like(ddiff)],
                ddiff, dmean)


# --------------------------------------------------------------------------
# The first layer's input: un-concatenate, un-view, scatter-add
# --------------------------------------------------------------------------


def _demb_ref(dxin, emb):
    n, width = len(emb), dxin.shape[1] - emb[0].numel()
    return _vjp(lambda e: torch.cat([e.new_zeros(n, width), e.view(n, -1)], dim=1), [emb], dxin)


def _dC_ref(tokens, demb, num_rows):
    return _vjp(lambda table: table[tokens], [demb.new_zeros(num_rows, demb.shape[-1])], demb)


def _assigned(tokens, demb, num_rows):
    dC = demb.new_zeros(num_rows, demb.shape[-1])
    dC[tokens.reshape(-1)] = demb.reshape(-1, demb.shape[-1])  # repeated rows: one write wins
    return dC


def _first_token_only(tokens, demb, num_rows):
    dC = demb.new_zeros(num_rows, demb.shape[-1])
    return dC.index_add_(0, tokens[:, 0], demb[:, 0])


# --------------------------------------------------------------------------
# Transfer: layer norm
# --------------------------------------------------------------------------


def _layernorm_inputs(gen):
    n, features = _randint(4, 9, gen), _randint(5, 11, gen)
    while features == n:
        features = _randint(5, 11, gen)
    x = torch.randn(n, features, generator=gen, dtype=torch.float64) * 2 + 0.5
    dout = torch.randn(n, features, generator=gen, dtype=torch.float64)
    gain = torch.rand(features, generator=gen, dtype=torch.float64) + 0.5
    return dout, x, gain, 0.01 + 0.2 * float(torch.rand(1, generator=gen))


def _layernorm_ref(dout, x, gain, eps):
    return _vjp(lambda t: F.layer_norm(t, (t.shape[1],), gain, None, eps), [x], dout)


def _norm_backward(dout, x, gain, eps, dim, correction=0, mean_term=True, var_term=True,
                   use_gain=True):
    """The compact normalisation backward over ``dim``, with the slips as switches."""
    d = x.shape[dim]
    centred = x - x.mean(dim, keepdim=True)
    invstd = ((centred**2).sum(dim, keepdim=True) / (d - correction) + eps) ** -0.5
    xhat = centred * invstd
    g = dout * gain if use_gain else dout
    out = d * g
    if mean_term:
        out = out - g.sum(dim, keepdim=True)
    if var_term:
        out = out - xhat * (g * xhat).sum(dim, keepdim=True)
    return invstd / d * out


EXERCISES = {
    # ---- cross-entropy ------------------------------------------------------
    "l10-dlogprobs": ByHand(
        name="dlogprobs",
        reference=_dlogprobs_ref,
        make_inputs=_inputs("logprobs", "y"),
        mistakes={
            "the mean's 1/n is missing: loss = -picked.mean(), so each picked entry gets "
            "-1/n, not -1": lambda lp, y: _picked_only(lp, y, -1.0),
            "the sign is flipped: loss is minus the mean of the picked log-probabilities":
                lambda lp, y: _picked_only(lp, y, 1.0 / len(lp)),
            "every entry got -1/n, but only the picked entry of each row (column y) is "
            "used by the loss; the others get 0": lambda lp, y: torch.full_like(lp, -1.0 / len(lp)),
        },
        advice="Only one entry per row reaches the loss: the one in column y. Work out what "
               "a mean of n numbers gives each of them.",
    ),
    "l10-dprobs": ByHand(
        name="dprobs",
        reference=_dprobs_ref,
        make_inputs=_inputs("probs", "dlogprobs"),
        mistakes={
            "multiplied by probs: the derivative of log(p) is 1/p, so divide":
                lambda probs, d: d * probs,
            "the gradient arriving from above is missing: the chain rule multiplies "
            "log's local derivative 1/probs by dlogprobs": lambda probs, d: 1 / probs,
        },
        advice="logprobs = probs.log(), entry by entry: multiply dlogprobs by log's "
               "derivative at each entry.",
    ),
    "l10-dcounts-sum-inv": ByHand(
        name="dcounts_sum_inv",
        reference=_dcounts_sum_inv_ref,
        make_inputs=_inputs("counts", "dprobs"),
        mistakes={
            "the sum is missing: counts_sum_inv has one number per row, shape (n, 1), "
            "broadcast over the classes, so its gradient sums over dim 1 (keepdim=True)":
                lambda counts, d: counts * d,
            "summed over the batch (dim 0); counts_sum_inv was broadcast over the classes, "
            "so sum over dim 1": lambda counts, d: (counts * d).sum(0, keepdim=True),
            "summed over dim 1 without keepdim=True: counts_sum_inv has shape (n, 1), and "
            "so must its gradient": lambda counts, d: (counts * d).sum(1),
        },
        advice="probs = counts * counts_sum_inv: counts_sum_inv is (n, 1), used once per "
               "class. Multiply, then add up the uses.",
    ),
    "l10-dcounts-sum": ByHand(
        name="dcounts_sum",
        reference=_dcounts_sum_ref,
        make_inputs=_inputs("counts_sum", "dcounts_sum_inv"),
        mistakes={
            "the sign is lost: the derivative of s**-1 is -s**-2":
                lambda s, d: s**-2 * d,
            "the power rule gives -s**-2 for s**-1, not -s**-1":
                lambda s, d: -(s**-1) * d,
        },
        advice="counts_sum_inv = counts_sum**-1: the power rule, times the gradient from above.",
    ),
    "l10-dcounts": ByHand(
        name="dcounts",
        reference=_dcounts_ref,
        make_inputs=_inputs("counts_sum_inv", "dprobs", "dcounts_sum"),
        mistakes={
            "only the path through probs is there: counts also feeds counts_sum, and the "
            "gradients of the two uses add up (+=, not =)": lambda inv, dp, ds: inv * dp,
            "only the path through counts_sum is there: counts is also multiplied into "
            "probs, and the gradients of the two uses add up (+=, not =)":
                lambda inv, dp, ds: ds.expand_as(dp).clone(),
        },
        advice="counts is used twice, in probs = counts * counts_sum_inv and in counts_sum "
               "= counts.sum(1): one term per use, added.",
    ),
    "l10-dshifted": ByHand(
        name="dshifted",
        reference=_dshifted_ref,
        make_inputs=_inputs("counts", "dcounts"),
        mistakes={
            "exp's local derivative is missing: d/dz exp(z) = exp(z), which the forward "
            "pass already holds as counts; multiply by it": lambda counts, d: d,
            "the gradient arriving from above is missing: exp's derivative (counts) "
            "multiplies dcounts": lambda counts, d: counts,
        },
        advice="counts = shifted.exp(), entry by entry: exp's derivative is exp itself.",
    ),
    "l10-dlogit-maxes": ByHand(
        name="dlogit_maxes",
        reference=_dlogit_maxes_ref,
        make_inputs=_inputs("dshifted"),
        mistakes={
            "the sum is missing: logit_maxes has one number per row, shape (n, 1), "
            "subtracted from every class, so its gradient sums over dim 1 (keepdim=True)":
                lambda d: -d,
            "the sign is lost: logit_maxes is subtracted": lambda d: d.sum(1, keepdim=True),
        },
        advice="shifted = logits - logit_maxes: logit_maxes is (n, 1), subtracted once per "
               "class.",
    ),
    "l10-dlogits": ByHand(
        name="dlogits",
        reference=_dlogits_ref,
        make_inputs=_inputs("logits", "dshifted", "dlogit_maxes"),
        mistakes={
            "only the direct path is there: logits also feeds logit_maxes, and that path's "
            "gradient adds up with it (+=, not =), even though on the spiral it is about 0":
                lambda z, ds, dm: ds,
            "dlogit_maxes went to every entry of the row, as if the max were made of all "
            "of them; the max is one entry, so its gradient goes to the largest logit only":
                lambda z, ds, dm: ds + dm,
        },
        advice="logits reaches the loss along two paths: directly into shifted, and through "
               "logit_maxes (a max picks one entry per row).",
    ),
    # ---- output layer, tanh ---------------------------------------------------
    "l10-linear": ByHand(
        name="linear layer",
        reference=_linear_ref,
        make_inputs=_linear_inputs,
        outputs=["dinp", "dW", "db"],
        mistakes={
            "dinp came out transposed: it must have inp's shape (n, k), which is dout @ W.T":
                lambda i, w, d: (w @ d.T, i.T @ d, d.sum(0)),
            "dW came out transposed: it must have W's shape (k, m), which is inp.T @ dout":
                lambda i, w, d: (d @ w.T, d.T @ i, d.sum(0)),
            "db is not summed over the batch: b (m,) was added to every row, so its "
            "gradient is dout.sum(0)": lambda i, w, d: (d @ w.T, i.T @ d, d),
            "divided by the batch size: dout already carries the loss's 1/n, so the sums "
            "need no second one": lambda i, w, d: (d @ w.T, i.T @ d / len(i), d.mean(0)),
        },
        advice="Let the shapes decide: each gradient has the shape of its tensor, and lesson "
               "08's matmul rule (part 2) gives the products.",
    ),
    "l10-dhbn": ByHand(
        name="dhbn",
        reference=_dhbn_ref,
        make_inputs=_inputs("h", "dh"),
        mistakes={
            "tanh was applied to h again: h is already tanh(hbn), so tanh's derivative is "
            "1 - h**2": lambda h, d: (1 - torch.tanh(h) ** 2) * d,
            "the square is missing: tanh's derivative is 1 - tanh**2 = 1 - h**2":
                lambda h, d: (1 - h) * d,
            "the gradient arriving from above is missing: multiply tanh's derivative by dh":
                lambda h, d: 1 - h**2,
        },
        advice="h = tanh(hbn), entry by entry; write tanh's derivative with the output h.",
    ),
    # ---- batch norm -----------------------------------------------------------
    "l10-scale-shift": ByHand(
        name="scale and shift",
        reference=_scale_shift_ref,
        make_inputs=_inputs("xhat", "gain", "dhbn"),
        outputs=["dxhat", "dgain", "dbias"],
        mistakes={
            "the gain is missing from dxhat: hbn = gain * xhat + bias, so dxhat = gain * dhbn":
                lambda xh, g, d: (d, (d * xh).sum(0), d.sum(0)),
            "dgain and dbias are not summed over the batch: gain and bias (one number per "
            "feature) were broadcast over every row":
                lambda xh, g, d: (g * d, d * xh, d),
            "dgain used the gain instead of xhat: hbn = gain * xhat, so dgain sums dhbn * xhat":
                lambda xh, g, d: (g * d, (d * g).sum(0), d.sum(0)),
        },
        advice="hbn = gain * xhat + bias: gain and bias are (H,), broadcast over the n rows.",
    ),
    "l10-dinvstd": ByHand(
        name="dinvstd",
        reference=_dinvstd_ref,
        make_inputs=_inputs("diff", "dxhat"),
        mistakes={
            "the sum is missing: invstd has one number per feature, shape (1, H), broadcast "
            "over the batch, so its gradient sums over dim 0 (keepdim=True)":
                lambda diff, d: diff * d,
            "summed without keepdim=True: invstd has shape (1, H), and so must its gradient":
                lambda diff, d: (diff * d).sum(0),
        },
        advice="xhat = diff * invstd, with invstd (1, H) used once per row.",
    ),
    "l10-dvar": ByHand(
        name="dvar",
        reference=_dvar_ref,
        make_inputs=_inputs("var", "dinvstd", "eps"),
        mistakes={
            "the power rule lowers the exponent by one: the derivative of v**-0.5 is "
            "-0.5 * v**-1.5": lambda v, d, eps: -0.5 * (v + eps) ** -0.5 * d,
            "the sign is lost: the derivative of v**-0.5 is -0.5 * v**-1.5":
                lambda v, d, eps: 0.5 * (v + eps) ** -1.5 * d,
            "eps is missing: invstd = (var + eps)**-0.5, so the derivative is taken at var "
            "+ eps": lambda v, d, eps: -0.5 * v**-1.5 * d,
        },
        advice="invstd = (var + eps) ** -0.5: the power rule, at var + eps.",
    ),
    "l10-ddiff2": ByHand(
        name="ddiff2",
        reference=_ddiff2_ref,
        make_inputs=_inputs("diff2", "dvar"),
        mistakes={
            "divided by n - 1 (Bessel's correction), but this var divides by n, as batch "
            "norm does in training": lambda d2, dv: torch.ones_like(d2) * dv / (len(d2) - 1),
            "the mean's 1/n is missing: var = diff2.mean(0) gives each row 1/n of dvar":
                lambda d2, dv: torch.ones_like(d2) * dv,
            "not spread over the batch: diff2 has shape (n, H), and so must its gradient "
            "(every row gets dvar / n)": lambda d2, dv: dv / len(d2),
        },
        advice="var = diff2.mean(0, keepdim=True): a mean of n rows. Each row gets its share "
               "of dvar, and the result has diff2's shape.",
    ),
    "l10-ddiff": ByHand(
        name="ddiff",
        reference=_ddiff_ref,
        make_inputs=_inputs("diff", "invstd", "dxhat", "ddiff2"),
        mistakes={
            "only the path through xhat is there: diff also feeds diff2, and the gradients "
            "of the two uses add up (+=, not =)": lambda d, s, dx, d2: dx * s,
            "only the path through diff2 is there: diff is also multiplied into xhat, and "
            "the gradients of the two uses add up (+=, not =)": lambda d, s, dx, d2: 2 * d * d2,
            "the square's factor 2 is missing: the derivative of diff**2 is 2 * diff":
                lambda d, s, dx, d2: dx * s + d * d2,
        },
        advice="diff is used twice, in xhat = diff * invstd and in diff2 = diff**2: one "
               "term per use, added.",
    ),
    "l10-dmean": ByHand(
        name="dmean",
        reference=_dmean_ref,
        make_inputs=_inputs("ddiff"),
        mistakes={
            "the sum is missing: mean has one number per feature, shape (1, H), subtracted "
            "from every row, so its gradient sums over dim 0 (keepdim=True)": lambda d: -d,
            "the sign is lost: the mean is subtracted": lambda d: d.sum(0, keepdim=True),
        },
        advice="diff = hpre - mean: mean is (1, H), subtracted once per row.",
    ),
    "l10-dhpre": ByHand(
        name="dhpre",
        reference=_dhpre_ref,
        make_inputs=_inputs("ddiff", "dmean"),
        mistakes={
            "only the direct path is there: hpre also feeds the mean, and the gradients of "
            "the two uses add up (+=, not =)": lambda d, dm: d,
            "the mean's 1/n is missing on the path through the mean":
                lambda d, dm: d + dm,
            "divided by n - 1 (Bessel's correction), but the mean of n rows divides by n":
                lambda d, dm: d + dm / (len(d) - 1),
        },
        advice="hpre is used twice: in diff = hpre - mean, and in mean = hpre.mean(0).",
    ),
    # ---- the input: concat, view, lookup -------------------------------------
    "l10-demb": ByHand(
        name="demb",
        reference=_demb_ref,
        make_inputs=_inputs("dxin", "emb"),
        mistakes={
            "the first columns were taken: torch.cat put the point's 2 coordinates first, "
            "so embcat's gradient is the columns after them":
                lambda dxin, emb: dxin[:, :emb[0].numel()].reshape(emb.shape),
            "the columns went back in the wrong order: view(n, -1) laid each point's T rows "
            "of E numbers side by side, so undo it with view(n, T, E)":
                lambda dxin, emb: dxin[:, 2:].reshape(len(emb), emb.shape[2], emb.shape[1])
                .transpose(1, 2),
        },
        advice="Undo the forward steps in reverse: first the concatenation (which columns "
               "were embcat's?), then the view.",
    ),
    "l10-embedding": ByHand(
        name="dC",
        reference=_dC_ref,
        make_inputs=_inputs("tokens", "demb", "num_rows"),
        mistakes={
            "a row looked up several times keeps only one lookup's gradient: writing "
            "dC[ids] = ... (or dC[ids] += ..., which is the same write with advanced "
            "indexing) stores each repeated row once. Add every lookup with index_add_, or "
            "loop over the lookups with +=": _assigned,
            "only each point's first token was sent back: the lookup used all T tokens of "
            "a point; flatten tokens to (n*T,) and demb to (n*T, E)": _first_token_only,
        },
        advice="Every lookup sends its row of demb back to the table row it read; a row read "
               "several times collects the sum.",
    ),
    # ---- transfer ---------------------------------------------------------------
    "l10-layernorm": ByHand(
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
    _, f = _spiral_pass()
    return round(float(f["logit_maxes"].grad.abs().max()), 12)


def _largest_db1():
    p, _ = _spiral_pass()
    return round(float(p["b1"].grad.abs().max()), 12)


def _nonzero_rows():
    table = torch.zeros(5, 2, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([3, 0, 3, 1])
    grads = torch.tensor([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0], [1000.0, 2000.0]],
                         dtype=torch.float64)
    table[ids].backward(grads)
    return tuple(table.grad.abs().sum(1).nonzero().flatten().tolist())


PREDICTIONS = {
    "l10-predict-maxes": Prediction(
        question="the largest |entry| of dlogit_maxes on the spiral batch",
        answer=_largest_dlogit_max,
        hint="add the same number c to every logit of a row: what happens to the row's "
             "probabilities, and so to the loss, as c moves?",
        why="shifting a row of logits by any number c leaves its softmax unchanged, so the "
            "loss does not depend on logit_maxes at all and its gradient there vanishes (what "
            "is left is round-off, below 1e-15). Subtracting the max only keeps exp from "
            "overflowing",
    ),
    "l10-predict-db1": Prediction(
        question="the largest |entry| of db1 on the spiral batch",
        answer=_largest_db1,
        hint="batch norm subtracts each feature's batch mean. Add the same number to every "
             "row of hpre: what changes after the subtraction?",
        why="adding a number to every row of hpre moves the batch mean by the same number, "
            "so diff = hpre - mean, and everything after it, stays as it was: the loss does "
            "not depend on b1, and its gradient vanishes (what is left is round-off)",
    ),
    "l10-predict-rows": Prediction(
        question="the non-zero rows of the table's gradient",
        answer=_nonzero_rows,
        hint="which rows did the lookup read? A row that was never read cannot have "
             "affected the output.",
        why="ids [3, 0, 3, 1] read rows {answer}; rows 2 and 4 were never read, so the "
            "output does not depend on them",
        unordered=True,
    ),
}
