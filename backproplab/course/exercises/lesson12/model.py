"""Lesson 12's classifier: its forward pass in named steps (the lesson's own code), the
spiral model the predictions run on, and the fresh random batches every check draws; and
what the exercise modules share: `grads_at`, the references' autograd step, and `slips`."""

from __future__ import annotations

import torch

from .._spec import randint

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
