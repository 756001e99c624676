"""Lesson 04, linear regression: its exercises and its predictions.

The lesson works out the gradients of the mean squared error of a straight
line; its exercises transfer that to losses no cell differentiates. Exercise 1
asks for the gradients of a Gaussian negative log-likelihood whose line also
predicts the log of the noise's standard deviation, u = a·x + c (two
quantities per point, r and u, and the chain rule through exp(-2u));
Exercise 2 for the gradients of the line under a Huber loss, whose derivative
has two pieces. Both stay with scalar parameters. Each reference uses
autograd; each slip below is a wrong answer a learner is likely to write, and
the check names it when the learner's result equals it on every trial.
"""

from __future__ import annotations

import torch
from torch import nn

from ... import data
from ._spec import ByHand, Prediction

# --------------------------------------------------------------------------- Exercise 1


def _new_data(gen):
    """A new line with its own slope, intercept, length and noise; w and b anywhere."""
    n = int(torch.randint(5, 30, (1,), generator=gen))
    slope, intercept = (torch.randn(2, generator=gen) * 3).tolist()
    xs = torch.rand(n, generator=gen) * 10
    ys = slope * xs + intercept + torch.randn(n, generator=gen)
    return xs, ys, torch.randn((), generator=gen), torch.randn((), generator=gen)


def _residual(x, y, w, b):
    return w * x + b - y


def _nll(x, y, w, b, a, c):
    """The mean Gaussian negative log-likelihood (without its constant): u + ½ r² e^(-2u)."""
    u = a * x + c
    return (u + 0.5 * _residual(x, y, w, b) ** 2 * torch.exp(-2 * u)).mean()


def _nll_reference(x, y, w, b, a, c):
    params = [t.requires_grad_() for t in (w, b, a, c)]
    return torch.autograd.grad(_nll(x, y, *params), params)


def _new_noisy_data(gen):
    """A line whose noise grows with x (its log-sd a0·x + c0), on x in [0, 5], with the
    four parameters anywhere near it."""
    n = int(torch.randint(5, 30, (1,), generator=gen))
    slope, intercept = (torch.randn(2, generator=gen) * 3).tolist()
    a0 = 0.3 * float(torch.rand((), generator=gen))
    c0 = -float(torch.rand((), generator=gen))
    xs = torch.rand(n, generator=gen) * 5
    ys = slope * xs + intercept + torch.exp(a0 * xs + c0) * torch.randn(n, generator=gen)
    w, b = torch.randn(2, generator=gen)
    a, c = torch.randn(2, generator=gen) * torch.tensor([0.2, 0.5])
    return xs, ys, w, b, a, c


def _nll_slip(x, y, w, b, a, c, *, d_r=None, d_u=None, mean=True, sign=1.0):
    """The four gradients from dℓ/dr and dℓ/du per point, each given as a function of
    (r, precision) to put a slip in; the defaults are right."""
    r = sign * _residual(x, y, w, b)
    precision = torch.exp(-2 * (a * x + c))
    g_r = (d_r or (lambda r, p: r * p))(r, precision)
    g_u = (d_u or (lambda r, p: 1 - r**2 * p))(r, precision)
    reduce = (lambda t: t.mean()) if mean else (lambda t: t.sum())
    return reduce(g_r * x), reduce(g_r), reduce(g_u * x), reduce(g_u)


NLL_SLIPS = {
    "the line's gradients lack the factor e^(-2u), one over the variance: a point's residual "
    "counts in proportion to how precise the point is":
        lambda *args: _nll_slip(*args, d_r=lambda r, p: r),
    "the line's gradients carry a factor 2 too many: the ½ in ½·r²·e^(-2u) cancels the 2 "
    "from the square":
        lambda *args: _nll_slip(*args, d_r=lambda r, p: 2 * r * p),
    "the chain rule through e^(-2u) is missing its factor -2: d/du (½·r²·e^(-2u)) = "
    "-r²·e^(-2u), so dℓ/du = 1 - r²·e^(-2u)":
        lambda *args: _nll_slip(*args, d_u=lambda r, p: 1 - 0.5 * r**2 * p),
    "dℓ/du lacks the 1 that the term u itself contributes: dℓ/du = 1 - r²·e^(-2u)":
        lambda *args: _nll_slip(*args, d_u=lambda r, p: -(r**2) * p),
    "dℓ/du has the wrong sign on its second term: e^(-2u) falls as u grows, so d/du "
    "(½·r²·e^(-2u)) = -r²·e^(-2u)":
        lambda *args: _nll_slip(*args, d_u=lambda r, p: 1 + r**2 * p),
    "the sign of dL/dw and dL/db is flipped: the residual is w·x + b − y, and its "
    "derivative with respect to w is +x":
        lambda *args: _nll_slip(*args, sign=-1.0),
    "the mean was taken as a sum (a factor of N too large): the loss averages over the "
    "points, so each point's share carries 1/N":
        lambda *args: _nll_slip(*args, mean=False),
    "dL/da lacks the factor x (or dL/da and dL/dc are swapped): a multiplies x in u = a·x + c":
        lambda *args: (lambda g: (g[0], g[1], g[3], g[3]))(_nll_slip(*args)),
    "dL/dw lacks the factor x (or dL/dw and dL/db are swapped): w multiplies x in the "
    "residual": lambda *args: (lambda g: (g[1], g[1], g[2], g[3]))(_nll_slip(*args)),
}

# --------------------------------------------------------------------------- Exercise 2


def _huber_reference(x, y, w, b, delta):
    w, b = w.requires_grad_(), b.requires_grad_()
    loss = nn.functional.huber_loss(w * x + b, y, delta=delta)
    return torch.autograd.grad(loss, (w, b))


def _new_robust_data(gen):
    """A noisy line with a few far-off points, w and b anywhere, and a threshold delta that
    leaves some residuals inside (the quadratic piece) and some outside (the linear piece),
    none at the joint, so every slip below shows on every trial. The far-off points lie
    beyond every other residual, at least one on each side of the line (a slip of the
    negative side shows even where w and b put every other point on one side)."""
    xs, ys, w, b = _new_data(gen)
    n = len(xs)
    far = torch.randperm(n, generator=gen)[: max(2, n // 5)]
    signs = torch.randint(0, 2, (len(far),), generator=gen) * 2 - 1
    signs[:2] = torch.tensor([1, -1])
    reach = float((w * xs + b - ys).abs().max())
    ys[far] = w * xs[far] + b - signs * (reach + 8 + 8 * torch.rand(len(far), generator=gen))
    sizes = (w * xs + b - ys).abs().sort().values
    k = int(torch.randint(n // 4, 3 * n // 4, (1,), generator=gen))
    k = min(k, n - len(far) - 1)  # delta below every far-off point
    delta = round(float(sizes[k] + sizes[k + 1]) / 2, 3)
    if not sizes[k] < delta < sizes[k + 1]:  # rounding crossed a residual: keep the midpoint
        delta = float(sizes[k] + sizes[k + 1]) / 2
    return xs, ys, w, b, delta


def _huber_slope(x, y, w, b, delta, *, inside=1.0, outside=None):
    """dL/dr per point, mean not yet taken: ``inside`` times r where |r| <= delta, and
    ``outside`` (default delta * sign(r)) elsewhere."""
    r = _residual(x, y, w, b)
    beyond = delta * r.sign() if outside is None else outside
    return torch.where(r.abs() <= delta, inside * r, beyond)


def _to_w_b(g, x):
    return (g * x).mean(), g.mean()


HUBER_SLIPS = {
    "the mean was taken as a sum (a factor of N too large): huber_loss averages over the "
    "points, so each point's share carries 1/N":
        lambda x, y, w, b, d: ((_huber_slope(x, y, w, b, d) * x).sum(),
                               _huber_slope(x, y, w, b, d).sum()),
    "the sign is flipped: the residual is w·x + b − y, and its derivative with respect to w "
    "is +x":
        lambda x, y, w, b, d: _to_w_b(-_huber_slope(x, y, w, b, d), x),
    "every point was treated as inside the threshold (the squared error's gradient): beyond "
    "delta the loss grows linearly, so a far-off point pulls with delta·sign(r), not r":
        lambda x, y, w, b, d: _to_w_b(_residual(x, y, w, b), x),
    "this is the squared error's gradient (the lesson's worked one), 2r at every point: the "
    "Huber loss "
    "is ½r² inside delta, whose derivative is r, and linear beyond it, with slope "
    "delta·sign(r)":
        lambda x, y, w, b, d: _to_w_b(2 * _residual(x, y, w, b), x),
    "beyond delta the pull was taken as +delta whatever the sign of r: the linear piece is "
    "delta·(|r| − delta/2), whose slope is delta·sign(r)":
        lambda x, y, w, b, d: _to_w_b(
            _huber_slope(x, y, w, b, d, outside=torch.full_like(x, d)), x),
    "inside delta the factor 2 is too many: the quadratic piece is ½r², so its derivative is "
    "r (the ½ cancels the 2)":
        lambda x, y, w, b, d: _to_w_b(_huber_slope(x, y, w, b, d, inside=2.0), x),
    "dL/dw lacks the factor x (or the two gradients are swapped): w multiplies x, so the "
    "gradient with x in it belongs to w":
        lambda x, y, w, b, d: (_huber_slope(x, y, w, b, d).mean(),
                               _huber_slope(x, y, w, b, d).mean()),
}

EXERCISES = {
    "l04-grads": ByHand(
        name="Gaussian NLL gradients",
        reference=_nll_reference,
        make_inputs=_new_noisy_data,
        outputs=["dL/dw", "dL/db", "dL/da", "dL/dc"],
        mistakes=NLL_SLIPS,
        advice="Write one point's loss, u + ½·r²·e^(-2u), and find its derivatives with "
               "respect to r and to u on paper; then follow r to w and b, and u to a and c, "
               "and average.",
    ),
    "l04-huber": ByHand(
        name="Huber gradients",
        reference=_huber_reference,
        make_inputs=_new_robust_data,
        outputs=["dL/dw", "dL/db"],
        mistakes=HUBER_SLIPS,
        advice="First write dL/dr for one point in each of the two pieces (sketch them: where "
               "do they meet, and with what slope?), then follow r to w and to b as the "
               "lesson's squared error does, and average.",
    ),
}

# --------------------------------------------------------------------------- predictions


def _lesson_data():
    return data.linear_data(n=100, slope=2.0, intercept=1.0, noise=1.5, low=0.0, high=10.0,
                            seed=42)


def _one_step_answer():
    """w and b after one step of gradient descent from zero with lr = 0.01, rounded."""
    x, y = _lesson_data()
    w = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    ((w * x + b - y) ** 2).mean().backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        b -= 0.01 * b.grad
    return round(w.item(), 2), round(b.item(), 2)


PREDICTIONS = {
    "l04-predict-step": Prediction(
        question="(w, b) after one step with lr = 0.01, to two decimals",
        answer=_one_step_answer,
        hint="the update subtracts lr times the gradient, and both gradients printed above are "
             "negative: what does subtracting a negative number do? Start from w = b = 0.",
        why="w − lr·dL/dw = 0 − 0.01 · (−149.80) = 1.498 and b = 0 − 0.01 · (−22.61) = 0.226, "
            "so {answer} to two decimals: one step moves both up, w far more than b",
    ),
}
