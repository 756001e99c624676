"""Numerical estimates in disguise, for every by-hand exercise: each must be refused.

A motivated student who knows that finite differences are refused tries them in
other clothes: a step so large that a low-degree forward gives the slope exactly,
random sign vectors (SPSA), Richardson extrapolation, a least-squares fit, and
shifted inputs made by multiplication, ``torch.lerp``, ``torch.where``, a stacked
copy, ``roll``, in place, or by way of Python numbers. Each family here is a
function ``estimate(f, x)``: the slope of a scalar function ``f`` at the tensor ``x``,
estimated from values of ``f`` alone.

Each exercise's `Plan` applies it to the lesson's own forward, written out plainly
(the arithmetic a student would write, no autograd): ``laundered(plan, family)`` is the
source of a whole answer cell. The check must refuse every one, naming a numerical
estimate (tests/course/test_estimates.py, every family on every exercise); each
lesson's cheat table (tests/cheats/lessonNN.py) keeps one family per exercise for the
lesson's own runs (`with_disguised`).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

# ---------------------------------------------------------------------------
# The families: each defines estimate(f, x)
# ---------------------------------------------------------------------------

_ONE_HOT = '''\
def bump(x, i, size):
    """x's shape, zero but for entry i, which is size."""
    e = torch.zeros(x.numel(), dtype=x.dtype)
    e[i] = size
    return e.reshape(x.shape)


'''

FAMILIES = {
    # A step so large that central differences are exact on a quadratic forward.
    "central differences, h = 1": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        out[i] = (f(x + e) - f(x - e)) / 2
    return out.reshape(x.shape)
''',
    "central differences, h = 2, steps taken from an identity matrix": '''\
def estimate(f, x):
    steps = 2.0 * torch.eye(x.numel(), dtype=x.dtype)
    slopes = [(f(x + s.reshape(x.shape)) - f(x - s.reshape(x.shape))) / 4 for s in steps]
    return torch.stack(slopes).reshape(x.shape)
''',
    "central differences, h = 0.5, shifts made by multiplication": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    flat = x.reshape(-1)
    for i in range(x.numel()):
        if flat[i] == 0:  # no multiple of 0 moves it: a plain step there
            e = bump(x, i, 1.0)
            out[i] = (f(x + e) - f(x - e)) / 2
        else:
            e = bump(x, i, 0.5)
            out[i] = (f(x * (1 + e)) - f(x * (1 - e))) / flat[i]
    return out.reshape(x.shape)
''',
    "central differences, shifted inputs made by torch.lerp": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        far = x + bump(x, i, 2.0)
        out[i] = (f(torch.lerp(x, far, 0.5)) - f(torch.lerp(x, far, -0.5))) / 2
    return out.reshape(x.shape)
''',
    "central differences, shifted inputs built with torch.where": '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    where = torch.arange(x.numel()).reshape(x.shape)
    for i in range(x.numel()):
        up = torch.where(where == i, x + 1.0, x)
        down = torch.where(where == i, x - 1.0, x)
        out[i] = (f(up) - f(down)) / 2
    return out.reshape(x.shape)
''',
    "central differences, both points indexed from a stacked copy": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        points = torch.stack([x + e, x - e])
        out[i] = (f(points[0]) - f(points[1])) / 2
    return out.reshape(x.shape)
''',
    "central differences, one-hot steps made by roll": '''\
def estimate(f, x):
    first = torch.zeros(x.numel(), dtype=x.dtype)
    first[0] = 1.0
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = first.roll(i).reshape(x.shape)
        out[i] = (f(x + e) - f(x - e)) / 2
    return out.reshape(x.shape)
''',
    # Simultaneous perturbation: every entry moved at once by random signs, the slope
    # along each direction measured, the gradient solved for.
    "SPSA, random sign vectors and a least-squares solve": '''\
def estimate(f, x):
    n = x.numel()
    signs = (torch.randint(0, 2, (2 * n + 8, n)) * 2 - 1).to(x.dtype)
    slopes = torch.stack([(f(x + s.reshape(x.shape)) - f(x - s.reshape(x.shape))) / 2
                          for s in signs])
    return (torch.linalg.pinv(signs) @ slopes).reshape(x.shape)
''',
    "Richardson extrapolation of central differences on h = 1 and h = 1/2": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        wide = (f(x + e) - f(x - e)) / 2
        narrow = f(x + e / 2) - f(x - e / 2)
        out[i] = (4 * narrow - wide) / 3
    return out.reshape(x.shape)
''',
    "a least-squares cubic through f at five shifted points": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    s = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=x.dtype)
    powers = torch.stack([s**0, s, s**2, s**3], dim=1)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        values = torch.stack([f(x + k * e) for k in s.tolist()])
        out[i] = (torch.linalg.pinv(powers) @ values)[1]
    return out.reshape(x.shape)
''',
    "one-sided differences on three points, exact for quadratics": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    here = f(x)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        out[i] = (-3 * here + 4 * f(x + e) - f(x + 2 * e)) / 2
    return out.reshape(x.shape)
''',
    "a forward difference, h = 1 (exact for a linear forward)": _ONE_HOT + '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    here = f(x)
    for i in range(x.numel()):
        out[i] = f(x + bump(x, i, 1.0)) - here
    return out.reshape(x.shape)
''',
    "central differences, the step computed from the input (x * 0 + h)": '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = (x * 0).reshape(-1)
        e[i] += 1.0
        e = e.reshape(x.shape)
        out[i] = (f(x + e) - f(x - e)) / 2
    return out.reshape(x.shape)
''',
    "central differences on a copy of the input made from Python numbers": _ONE_HOT + '''\
def estimate(f, x):
    x = torch.tensor(x.tolist(), dtype=x.dtype)
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        e = bump(x, i, 1.0)
        out[i] = (f(x + e) - f(x - e)) / 2
    return out.reshape(x.shape)
''',
    "central differences, one entry of a clone nudged in place": '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    y = x.clone()
    flat = y.view(-1)
    for i in range(x.numel()):
        flat[i] += 1.0
        up = f(y)
        flat[i] -= 2.0
        down = f(y)
        flat[i] += 1.0
        out[i] = (up - down) / 2
    return out.reshape(x.shape)
''',
    "central differences, the input itself nudged in place and put back": '''\
def estimate(f, x):
    out = torch.zeros(x.numel(), dtype=x.dtype)
    for i in range(x.numel()):
        x.view(-1)[i] += 1.0
        up = f(x)
        x.view(-1)[i] -= 2.0
        down = f(x)
        x.view(-1)[i] += 1.0
        out[i] = (up - down) / 2
    return out.reshape(x.shape)
''',
    "central differences, every shifted point made at once by broadcasting": '''\
def estimate(f, x):
    n = x.numel()
    steps = torch.cat([torch.eye(n, dtype=x.dtype), -torch.eye(n, dtype=x.dtype)])
    points = x.reshape(1, -1) + steps
    values = torch.stack([f(p.reshape(x.shape)) for p in points])
    return ((values[:n] - values[n:]) / 2).reshape(x.shape)
''',
}

# ---------------------------------------------------------------------------
# The exercises: each one's forward, written out, and how its answer is assembled
# ---------------------------------------------------------------------------


class Plan(NamedTuple):
    """An answer cell around ``estimate``: ``signature`` as the lesson names it, ``body``
    (indented, ``estimate`` applied to the forward), ``helpers`` of the cheat's own
    defined before it, and ``lesson``: the lesson's own helpers it calls, written out
    for a run outside the lesson."""

    signature: str
    body: str
    helpers: str = ""
    lesson: str = ""


def gradients(outputs: list[tuple[str, str]]) -> str:
    """``return estimate(lambda t: s1, x1), ...``: one estimate per (scalar in t, point),
    as tests/cheats/builders.py writes ``outputs``."""
    parts = ",\n            ".join(f"estimate(lambda t: {s}, {x})" for s, x in outputs)
    return f"    return ({parts})\n"


# The lesson helpers a plan's forward calls, written out as a learner's cells have them.
MASK = '''\
def future_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)


'''
LSTM = '''\
def lstm_forward(xs, h, c, W, b):
    hs = []
    for x in xs:
        z = torch.cat([x, h], dim=1) @ W + b
        zi, zf, zg, zo = z.chunk(4, dim=1)
        c = torch.sigmoid(zf) * c + torch.sigmoid(zi) * torch.tanh(zg)
        h = torch.sigmoid(zo) * torch.tanh(c)
        hs.append(h)
    return torch.stack(hs)


'''
_HINGE = '''\
def hinge_loss(X, y, w, lam):
    scores = (X @ w).clamp(-2.0, 2.0)
    return torch.relu(1 - y * scores).sum() + lam * w.view(-1, 2).norm(dim=1).sum()


'''
# The gradient of a complex input: the slopes along its real and its imaginary part.
_COMPLEX = '''\
def complex_estimate(S, z):
    re, im = z.real, z.imag
    return torch.complex(estimate(lambda t: S(torch.complex(t, im)), re),
                         estimate(lambda t: S(torch.complex(re, t)), im))


'''
_NLL = "(a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean()"
_HUBER = ("torch.where((w * x + b - y).abs() <= delta, 0.5 * (w * x + b - y) ** 2, "
          "delta * ((w * x + b - y).abs() - 0.5 * delta)).mean()")
_MLP = ("F.binary_cross_entropy_with_logits(torch.tanh(xs @ W1 + b1) @ W2 + b2, ys)")
_MSE = "((x @ W.T + b - t) ** 2).mean()"


PLANS: dict[str, Plan] = {
    "l02-cubic": Plan("cubic_slope(x)", gradients([("(t**3 - 4 * t**2 + 5).sum()", "x")])),
    "l02-chain": Plan("tanh_grads(x, w, b)", gradients([
        ("torch.tanh(w * t + b).sum()", "x"), ("torch.tanh(t * x + b).sum()", "w"),
        ("torch.tanh(w * x + t).sum()", "b")])),
    "l02-shared": Plan("shared_grads(x, y, z)", gradients([
        ("((t * y - z) * torch.sin(t * y)).sum()", "x"),
        ("((x * t - z) * torch.sin(x * t)).sum()", "y"),
        ("((x * y - t) * torch.sin(x * y)).sum()", "z")])),
    "l04-grads": Plan("nll_grads(x, y, w, b, a, c)", gradients([
        (_NLL.replace("w *", "t *"), "w"), (_NLL.replace("+ b", "+ t"), "b"),
        (_NLL.replace("a *", "t *"), "a"), (_NLL.replace("+ c", "+ t"), "c")])),
    "l04-huber": Plan("huber_grads(x, y, w, b, delta)", gradients([
        (_HUBER.replace("w *", "t *"), "w"), (_HUBER.replace("+ b", "+ t"), "b")])),
    "l05-tied": Plan("rnn_grad(W, h0, x1, x2, y)", gradients([
        ("((torch.tanh(torch.tanh(h0 @ t + x1) @ t + x2) - y) ** 2).sum()", "W")])),
    "l06-momentum": Plan("forgot_with_momentum(x, y, w, b, lr, beta, steps)", '''\
    def loss(w, b):
        return ((w * x + b - y) ** 2).mean()

    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)
    velocity_w, velocity_b = torch.zeros_like(w), torch.zeros_like(b)
    for _ in range(steps):
        grad_w = grad_w + estimate(lambda t: loss(t, b), w)
        grad_b = grad_b + estimate(lambda t: loss(w, t), b)
        velocity_w = beta * velocity_w + grad_w
        velocity_b = beta * velocity_b + grad_b
        w, b = w - lr * velocity_w, b - lr * velocity_b
    return w, b
'''),
    "l08-mean-gradient": Plan("last_row_mean_vector(y)",
                              gradients([("t[-1].mean()", "y")])),
    "l08-shares-vjp": Plan("shares_vjp(x, v)", gradients([("(t / t.sum() * v).sum()", "x")])),
    "l09-softmax-vjp": Plan("softmax_vjp(p, g)", gradients([
        ("(torch.softmax(t, dim=-1) * g).sum()", "p.log()")])),
    "l09-normalize": Plan("normalize_vjp(x, g)", gradients([
        ("(t / t.norm(dim=-1, keepdim=True) * g).sum()", "x")])),
    "l09-bilinear": Plan("bilinear_grads(x, W, y, g)", gradients([
        ("(((t @ W) * y).sum(-1) * g).sum()", "x"), ("(((x @ t) * y).sum(-1) * g).sum()", "W"),
        ("(((x @ W) * t).sum(-1) * g).sum()", "y")])),
    "l09-gather": Plan("gather_grad(x, dim, index, g)", gradients([
        ("(torch.gather(t, dim, index) * g).sum()", "x")])),
    "l10-bce": Plan("dlogits_bce(z, y)", gradients([
        ("F.binary_cross_entropy_with_logits(t, y)", "z")])),
    "l10-dlogits": Plan("dlogits_sigmoid_mse(z, y)", gradients([
        ("((torch.sigmoid(t) - y) ** 2).mean()", "z")])),
    "l10-mlp": Plan("mlp_backward(xs, ys, W1, b1, W2, b2)", gradients([
        (_MLP.replace("W1", "t"), "W1"), (_MLP.replace("b1", "t"), "b1"),
        (_MLP.replace("W2", "t"), "W2"), (_MLP.replace("b2", "t"), "b2")])),
    "l17-hvp-by-hand": Plan("hvp(x, W, a, V)", '''\
    def gradient(t):
        T = torch.tanh(x @ t)
        return x.T @ ((1 - T**2) * a)

    return estimate(lambda t: (gradient(t) * V).sum(), W)
'''),
    # J v, one output at a time: the slope of f(x + s v) at s = 0.
    "l18-jvp-by-hand": Plan("tangent(W, b, x, v)", '''\
    def f(t):
        return torch.tanh(W @ t + b) * (t @ t)

    zero = torch.zeros((), dtype=x.dtype)
    return torch.stack([estimate(lambda s: f(x + s * v)[i], zero) for i in range(len(b))])
'''),
    # J v of the RMS norm: the slope of y(x + s x_t, w + s w_t) at s = 0, entry by entry.
    "l27-rms-norm-jvp": Plan("rms_norm_jvp(x, w, eps, x_t, w_t)", '''\
    def y(s):
        a, b = x + s * x_t, w + s * w_t
        return (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * b).reshape(-1)

    zero = torch.zeros((), dtype=x.dtype)
    return torch.stack([estimate(lambda s: y(s)[i], zero)
                        for i in range(x.numel())]).reshape(x.shape)
'''),
    "l24-scale-range": Plan("scale_range(x, W, b, t)", f'''\
    y = x @ W.T + b
    gy = estimate(lambda u: ((u - t) ** 2).mean(), y)
    gW = estimate(lambda u: {_MSE.replace("W", "u")}, W)
    gb = estimate(lambda u: {_MSE.replace("+ b", "+ u")}, b)
    low = gy.abs()[gy != 0].min()
    high = torch.maximum(gW.abs().max(), gb.abs().max())
    return (2.0 ** torch.ceil(torch.log2(2.0**-14 / low)),
            2.0 ** torch.floor(torch.log2(65504.0 / high)))
'''),
    "l25-min-cut-backward": Plan("min_cut_backward(y, x_t, w_t, g)", '''\
    x, w = x_t.T, w_t.T
''' + gradients([("torch.cos(t @ w).pow(2).mean() * g", "x"),
                  ("torch.cos(x @ t).pow(2).mean() * g", "w")])),
    "l22-complex-vjps": Plan("complex_vjps(z, w, g, r)", '''\
    return (complex_estimate(lambda t: (t * w * g.conj()).real.sum(), z),
            complex_estimate(lambda t: (z * t * g.conj()).real.sum(), w),
            complex_estimate(lambda t: (t.abs() ** 2 * r).sum(), z),
            complex_estimate(lambda t: (torch.exp(t) * g.conj()).real.sum(), z))
''', _COMPLEX),
    "l22-complex-linear": Plan("complex_linear_backward(x, W, b, G)", '''\
    return (complex_estimate(lambda t: ((t @ W + b) * G.conj()).real.sum(), x),
            complex_estimate(lambda t: ((x @ t + b) * G.conj()).real.sum(), W),
            complex_estimate(lambda t: ((x @ W + t) * G.conj()).real.sum(), b))
''', _COMPLEX),
    "l22-hinge-kinks": Plan("hinge_grad(X, y, w, lam)",
                            gradients([("hinge_loss(X, y, t, lam)", "w")]), lesson=_HINGE),
}


# Lesson 20's forward: two writes into windows of a copy.
_TWO_WRITES = '''\
def two_writes(x, a, b, i, j):
    k = len(a)
    y = x.clone()
    y[i:i + k].mul_(a)
    y[j:j + k] = b * y[i:i + k].clone()
    return y


'''

PLANS["l20-two-writes"] = Plan(
    "window_grads(x, a, b, i, j, g)",
    gradients([("(two_writes(t, a, b, i, j) * g).sum()", "x"),
               ("(two_writes(x, t, b, i, j) * g).sum()", "a"),
               ("(two_writes(x, a, t, i, j) * g).sum()", "b")]),
    lesson=_TWO_WRITES)


def every_plan() -> dict[str, Plan]:
    """The plans of every by-hand exercise: those above and those the cheat tables of
    lessons 12, 26, 13 and 28 make from their steps."""
    plans = dict(PLANS)
    for lesson in ("lesson12", "lesson26", "lesson13", "lesson28"):
        plans |= importlib.import_module(f"cheats.{lesson}").PLANS
    return plans


def laundered(plan: Plan, family: str, in_lesson: bool = False) -> str:
    """The source of an answer cell that estimates ``plan``'s gradients with ``family``:
    the family's ``estimate``, the helpers (the lesson's own too, unless ``in_lesson``),
    then the answer."""
    helpers = plan.helpers if in_lesson else plan.lesson + plan.helpers
    return f"{FAMILIES[family]}\n\n{helpers}def {plan.signature}:\n{plan.body}"


def with_disguised(cheats: dict[str, list], plans: dict[str, Plan]) -> dict[str, list]:
    """A lesson's cheat table with one disguised estimate more per exercise of ``plans``,
    run in the lesson itself: the family picked by the lesson's number and the exercise's
    place in it, so that the lessons together run every family."""
    names = list(FAMILIES)
    more = {key: (laundered(plans[key], names[(int(key[1:3]) + i) % len(names)], in_lesson=True),
                  "numerical estimate") for i, key in enumerate(sorted(plans))}
    return cheats | {key: [*cheats.get(key, []), cheat] for key, cheat in more.items()}


def lesson_plans(number: str) -> dict[str, Plan]:
    """The plans above of lesson ``number``'s exercises ("04")."""
    return {key: plan for key, plan in PLANS.items() if key[1:3] == number}
