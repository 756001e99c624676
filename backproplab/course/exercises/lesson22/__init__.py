"""Lesson 22, where calculus runs out: its exercises and its predictions.

- ``l22-complex-vjps``: the vector-Jacobian products of ``z * w``, ``|z|**2`` and
  ``exp(z)`` in torch's convention (``.grad`` is ∂L/∂x + i ∂L/∂y), for complex
  ``z``, ``w`` and upstream gradients. The slips: a conjugate left out, the
  conjugate of torch's answer (the other convention), the factor 2 of ``|z|**2``.
- ``l22-complex-linear``: ``x @ W + b`` with complex ``x`` and ``W``: the conjugate
  transposes (``.mH``) where lesson 09's real rule has plain ones.
- ``l22-hinge-kinks``: the gradient of a hinge loss on clipped scores plus a
  group-lasso penalty, on integer data, so that every trial has a margin exactly at
  relu's kink, a score exactly at hardtanh's bound and a pair of weights exactly at the
  norm's zero: the answer must follow torch's choice at each and stay finite. The scores
  are clipped by hardtanh, whose choice at its bounds is the same in torch 2.13 and 2.15 (clamp
  sends 1 there in torch 2.13 and 0 in 2.15).
- ``l22-safe-softplus`` (in ``softplus``): a method exercise. The learner rewrites
  ``soft_relu``, a ``torch.where`` whose unused branch overflows, so that its gradient has
  no NaN; where the answer runs, autograd differentiates the learner's forward on inputs in
  every region, and the grader compares values and gradients with the safe reference
  (the gradient with respect to beta within the round-off of its two terms).
- Three predictions: ``abs`` at its kink, ReLU spelled two ways at 0, and the
  ``.grad`` of ``|z|**2`` at ``z = 1+2j``.

This module holds the three by-hand exercises' checks, the exercises and the predictions;
the method exercise's check is in ``softplus``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import BY_HAND, ByHand, Prediction, randint
from .._spec import vjp as _vjp
from .softplus import SAFE_SOFTPLUS

F64 = torch.float64


def crandn(*shape: int, gen: torch.Generator) -> torch.Tensor:
    """Complex128 numbers with standard normal real and imaginary parts."""
    return torch.complex(torch.randn(*shape, generator=gen, dtype=F64),
                         torch.randn(*shape, generator=gen, dtype=F64))


# The answers to exercises 1 and 2 use z.conj(), .mH and complex arithmetic, which the
# by-hand vocabulary refuses elsewhere (the complex-step trick): here they are the task.
COMPLEX = BY_HAND.allowing(complex_numbers=True)

# --------------------------------------------------------------------------- Exercise 1


def _vjps_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """z, w and g complex, r real: g arrives at z * w and at exp(z), r at |z|**2."""
    n = randint(3, 8, gen)
    z, w, g = (crandn(n, gen=gen) for _ in range(3))
    return z, w, g, torch.randn(n, generator=gen, dtype=F64)


def _vjps_reference(z, w, g, r):
    dz, dw = _vjp(lambda z, w: z * w, [z, w], g)
    return dz, dw, _vjp(lambda z: z.abs() ** 2, [z], r), _vjp(torch.exp, [z], g)


def _vjps(z, w, g, r, *, mul=None, abs2=None, exp=None):
    """The right answers, with the slip's parts put in their place."""
    mul = mul or (g * w.conj(), g * z.conj())
    return (*mul, 2 * r * z if abs2 is None else abs2, g * z.exp().conj() if exp is None else exp)


COMPLEX_VJPS = ByHand(
    name="complex_vjps",
    reference=_vjps_reference,
    make_inputs=_vjps_inputs,
    outputs=["dz of z * w", "dw of z * w", "dz of |z|**2", "dz of exp(z)"],
    mistakes={
        "z * w: no conjugate. In section 6's formula the derivative ∂s/∂z is conjugated "
        "before it meets g; look again at which factor carries the bar":
            lambda z, w, g, r: _vjps(z, w, g, r, mul=(g * w, g * z)),
        "z * w: this is the conjugate of torch's answer (conj(g) * w), the other convention "
        "(∂L/∂z, what JAX returns); torch's .grad is ∂L/∂x + i ∂L/∂y, its conjugate":
            lambda z, w, g, r: _vjps(z, w, g, r, mul=(g.conj() * w, g.conj() * z)),
        "|z|**2: the factor 2 is missing. r * z is r times the conjugate Wirtinger derivative "
        "∂s/∂z* = z; torch's .grad, ∂L/∂x + i ∂L/∂y, is twice that":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=r * z),
        "|z|**2: conjugated. 2 * r * z.conj() is 2r ∂s/∂z, the mirror image of the uphill "
        "direction; section 6's formula takes the other Wirtinger derivative for a real s":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=2 * r * z.conj()),
        "|z|**2: conjugated, and the factor 2 is missing: r * z.conj() is r ∂s/∂z, the "
        "derivative section 6's formula does not take for a real s, and only one of its two "
        "terms":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=r * z.conj()),
        "exp(z): no conjugate. exp is holomorphic, so one term of section 6's formula is "
        "left, and in it the derivative is conjugated":
            lambda z, w, g, r: _vjps(z, w, g, r, exp=g * z.exp()),
        "exp(z): this is the conjugate of torch's answer (conj(g) * exp(z)), the other "
        "convention (∂L/∂z)":
            lambda z, w, g, r: _vjps(z, w, g, r, exp=g.conj() * z.exp()),
    },
    advice="For each operation s = f(z) write ∂s/∂z and ∂s/∂z* (z and z* as independent "
           "variables), then put them in section 6's formula. Check one entry against section "
           "5's numbers.",
    vocabulary=COMPLEX,
)

# --------------------------------------------------------------------------- Exercise 2


def _linear_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """x (N, I), W (I, O), b (O,) and G (N, O), complex, with N, I and O all different."""
    n, i, o = (torch.randperm(6, generator=gen)[:3] + 2).tolist()
    return (crandn(n, i, gen=gen), crandn(i, o, gen=gen), crandn(o, gen=gen),
            crandn(n, o, gen=gen))


def _linear_reference(x, W, b, G):
    return _vjp(lambda x, W, b: x @ W + b, [x, W, b], G)


def _linear(x, W, b, G, *, dx=None, dW=None, db=None):
    """The right answers, with the slip's parts put in their place."""
    return (G @ W.mH if dx is None else dx, x.mH @ G if dW is None else dW,
            G.sum(0) if db is None else db)


COMPLEX_LINEAR = ByHand(
    name="complex_linear_backward",
    reference=_linear_reference,
    make_inputs=_linear_inputs,
    outputs=["dx", "dW", "db"],
    mistakes={
        "no conjugate in either product: G @ W.T and x.T @ G are lesson 09's real rule; with "
        "complex numbers the transposes are conjugate transposes, G @ W.mH and x.mH @ G":
            lambda x, W, b, G: _linear(x, W, b, G, dx=G @ W.T, dW=x.T @ G),
        "dx is missing the conjugate: G @ W.T; the conjugate transpose belongs there, "
        "G @ W.mH": lambda x, W, b, G: _linear(x, W, b, G, dx=G @ W.T),
        "dW is missing the conjugate: x.T @ G; the conjugate transpose belongs there, "
        "x.mH @ G": lambda x, W, b, G: _linear(x, W, b, G, dW=x.T @ G),
        "the conjugates sit on G instead of on x and W: that is the conjugate of torch's "
        "answer (∂L/∂z, the other convention)":
            lambda x, W, b, G: _linear(x, W, b, G, dx=(G @ W.mH).conj(), dW=(x.mH @ G).conj(),
                                       db=G.sum(0).conj()),
        "dx is the conjugate of torch's: G.conj() @ W.T is conj(G @ W.mH); the conjugate "
        "belongs on W, not on G": lambda x, W, b, G: _linear(x, W, b, G, dx=(G @ W.mH).conj()),
        "dW is the conjugate of torch's: x.T @ G.conj() is conj(x.mH @ G); the conjugate "
        "belongs on x, not on G": lambda x, W, b, G: _linear(x, W, b, G, dW=(x.mH @ G).conj()),
        "db is conjugated: b is added, and an addition passes G on unchanged (summed over the "
        "rows), with no conjugate": lambda x, W, b, G: _linear(x, W, b, G, db=G.sum(0).conj()),
        "db is a mean over the rows: every row's contribution adds up, G.sum(0)":
            lambda x, W, b, G: _linear(x, W, b, G, db=G.mean(0)),
    },
    advice="Lesson 09's rule for Y = x @ W + b, with each transpose made a conjugate "
           "transpose (.mH) as the VJP of a holomorphic product asks.",
    vocabulary=COMPLEX,
)

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


EXERCISES = {
    "l22-complex-vjps": COMPLEX_VJPS,
    "l22-complex-linear": COMPLEX_LINEAR,
    "l22-hinge-kinks": HINGE,
    "l22-safe-softplus": SAFE_SOFTPLUS,
}

# --------------------------------------------------------------------------- Predictions


def _grad_of(f, value):
    x = torch.tensor(value, dtype=F64, requires_grad=True)
    f(x).backward()
    return x.grad.item()


def _abs_answer() -> float:
    return _grad_of(lambda pred: (pred - 3.0).abs(), 3.0)


def _relu_answer() -> list[float]:
    return [_grad_of(torch.relu, 0.0),
            _grad_of(lambda x: torch.maximum(x, torch.zeros_like(x)), 0.0)]


def _complex_answer() -> complex:
    z = torch.tensor(1 + 2j, dtype=torch.complex128, requires_grad=True)
    (z.abs() ** 2).backward()
    return z.grad.item()


PREDICTIONS = {
    "l22-predict-abs": Prediction(
        question="pred.grad of the L1 loss (pred - 3.0).abs() when pred is exactly 3.0",
        answer=_abs_answer,
        hint="|u| has slope -1 on one side of its corner and +1 on the other, and every slope "
             "in between fits under the corner. torch picks one of them by a rule made for "
             "descent: what step should a prediction that sits exactly on its target get?",
        why="every slope between -1 and 1 is a subgradient of |u| at its corner, and torch "
            "takes the one of smallest size, {answer} (abs's backward multiplies by sgn(u), "
            "and sgn(0) is 0). A prediction on its target gets no push either way",
    ),
    "l22-predict-relu": Prediction(
        question="x.grad at x = 0 for torch.relu(x) and for "
                 "torch.maximum(x, torch.zeros_like(x)), in that order",
        answer=_relu_answer,
        hint="the two compute the same numbers, but each op has its own backward. Look at "
             "what each takes as inputs (a number, or a second tensor?) and apply the rule to "
             "all of an op's tensor inputs at once.",
        why="relu compares x with a fixed number: a convex kink, smallest subgradient 0. "
            "maximum has two tensor inputs, and the smallest subgradient of the pair is "
            "(1/2, 1/2), so x gets 0.5 although the zeros need no gradient. Together: {answer}",
    ),
    "l22-predict-complex": Prediction(
        question="z.grad after (z.abs() ** 2).backward() at z = 1+2j",
        answer=_complex_answer,
        hint="write z = x + iy, so the loss is x² + y². .grad is one complex number built from "
             "the loss's two real derivatives, arranged so that z - lr * z.grad goes downhill.",
        why="the loss is x² + y², so ∂L/∂x = 2x = 2 and ∂L/∂y = 2y = 4, and torch stores "
            "∂L/∂x + i ∂L/∂y = {answer}. That is 2 ∂L/∂z* = 2z: the conjugate Wirtinger "
            "derivative, times 2",
    ),
}
