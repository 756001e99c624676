"""Lesson 22's third exercise: a hinge loss on clipped scores with a group-lasso penalty,
its gradient following torch's choice at every kink."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, randint

F64 = torch.float64

# --------------------------------------------------------------------------- Exercise 3

CLIP = 2.0  # scores are clipped to [-CLIP, CLIP]


def hinge_loss(X, y, w, lam):
    """The lesson's loss: a hinge on scores clipped to [-2, 2], plus a group-lasso penalty
    on the pairs of weights (w[0:2], w[2:4], ...)."""
    scores = F.hardtanh(X @ w, -CLIP, CLIP)
    return torch.relu(1 - y * scores).sum() + lam * w.view(-1, 2).norm(dim=1).sum()


def _hinge_row(target: int, w: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A row x of small integers with x @ w == target exactly (|target| <= nonzeros of w),
    and random entries where w is 0 (they do not change the score)."""
    row = torch.randint(-1, 2, w.shape, generator=gen).to(F64) * (w == 0)
    nonzero = torch.nonzero(w).flatten()
    picked = nonzero[torch.randperm(len(nonzero), generator=gen)[:abs(target)]]
    row[picked] = w[picked] * (1 if target > 0 else -1)
    return row


def hinge_inputs(gen: torch.Generator) -> tuple:
    """X, y, w (small integers in float64) and lam, made so that every trial meets each
    kink: a margin exactly 0 (y * score = 1), a score exactly at a clip bound with its
    margin positive (y * score = -2), a score beyond the bound (|score| = 3) and a pair
    of weights that is exactly (0, 0). One row is plainly violated (y * score = -1), so
    the hinge always sends a gradient: its sign and its sum show on every trial."""
    pairs = randint(3, 5, gen)
    w = torch.randint(-1, 2, (pairs, 2), generator=gen).to(F64)
    w[0] = torch.randint(0, 2, (2,), generator=gen).to(F64) * 2 - 1  # two pairs of nonzeros
    w[1] = torch.randint(0, 2, (2,), generator=gen).to(F64) * 2 - 1
    w[2] = 0.0  # a pair exactly at the norm's kink
    w = w[torch.randperm(pairs, generator=gen)].flatten()
    rows, labels = [], []
    for kind in (1, -2, -3, -1):  # y * score: relu's kink, the clip's bound, beyond, inside
        label = float(torch.randint(0, 2, (1,), generator=gen)) * 2 - 1
        rows.append(_hinge_row(int(kind * label), w, gen))
        labels.append(label)
    for _ in range(randint(2, 5, gen)):  # and some ordinary rows
        rows.append(torch.randint(-1, 2, w.shape, generator=gen).to(F64))
        labels.append(float(torch.randint(0, 2, (1,), generator=gen)) * 2 - 1)
    order = torch.randperm(len(rows), generator=gen)
    X = torch.stack(rows)[order]
    y = torch.tensor(labels, dtype=F64)[order]
    lam = round(0.1 + 0.9 * float(torch.rand((), generator=gen, dtype=F64)), 3)
    return X, y, w, lam


def _hinge_reference(X, y, w, lam):
    w = w.requires_grad_()
    return torch.autograd.grad(hinge_loss(X, y, w, lam), w)[0]


def _hinge_slip(relu_at_kink=0.0, bounds=False, clip=True, zero_pair=True, sign=1.0,
                mean=False):
    """dL/dw with one of torch's choices made otherwise."""
    def grad(X, y, w, lam):
        s = X @ w
        margin = 1 - y * F.hardtanh(s, -CLIP, CLIP)
        slope = (margin > 0).to(F64) + relu_at_kink * (margin == 0)
        if not clip:
            inside = torch.ones_like(s)
        elif bounds:
            inside = ((s >= -CLIP) & (s <= CLIP)).to(F64)
        else:
            inside = ((s > -CLIP) & (s < CLIP)).to(F64)
        pairs = w.view(-1, 2)
        norm = pairs.norm(dim=1, keepdim=True)
        unit = torch.where(norm > 0, pairs / norm, 0.0) if zero_pair else pairs / norm
        hinge = X.T @ (-sign * y * slope * inside) / (len(y) if mean else 1)
        return hinge + lam * unit.flatten()
    return grad


HINGE = ByHand(
    name="hinge_grad",
    reference=_hinge_reference,
    make_inputs=hinge_inputs,
    mistakes={
        "relu's slope at its kink was taken as 1: where a margin is exactly 0 (y * score = 1) "
        "torch's relu sends nothing back, its smallest subgradient, 0":
            _hinge_slip(relu_at_kink=1.0),
        "the clip's bounds let the gradient through: at a score of exactly -2 or 2 hardtanh "
        "sends its smallest subgradient, 0 (1 there is clamp's choice in torch 2.13, never "
        "hardtanh's)": _hinge_slip(bounds=True),
        "the clip was ignored: a score beyond -2 or 2 is clipped to a constant, so it passes "
        "no gradient": _hinge_slip(clip=False),
        "a pair of zero weights gave NaN: w / norm is 0 / 0 there, while torch's norm sends "
        "0 at the zero vector (its smallest subgradient)": _hinge_slip(zero_pair=False),
        "the hinge's gradient has the wrong sign: d/ds relu(1 - y s) is -y where the margin "
        "is positive (the minus comes from 1 - y s)": _hinge_slip(sign=-1.0),
        "the hinge was averaged over the examples: the loss sums it, so each row counts in "
        "full, with no division by their number": _hinge_slip(mean=True),
    },
    advice="Go through the loss op by op and ask, at each kink the inputs can hit, what "
           "torch sends back there (sections 1 to 3): relu at 0, hardtanh at a bound, the "
           "norm at a pair of zeros.",
)
