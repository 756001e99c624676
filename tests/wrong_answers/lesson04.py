"""Plausible wrong answers for the exercises of 04-linear-regression.ipynb."""

NLL = (
    "def nll_grads(x, y, w, b, a, c):\n"
    "    r = {r}\n"
    "    u = a * x + c\n"
    "    precision = torch.exp(-2 * u)\n"
    "    d_r = {d_r}\n"
    "    d_u = {d_u}\n"
    "    return {out}\n"
)
RIGHT = dict(r="w * x + b - y", d_r="r * precision", d_u="1 - r**2 * precision",
             out="(d_r * x).mean(), d_r.mean(), (d_u * x).mean(), d_u.mean()")


def nll(**slip: str) -> str:
    return NLL.format(**(RIGHT | slip))


HUBER = "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n    pull = {}\n    return {}\n"
CLIPPED = "r.clamp(-delta, delta)"
TO_W_B = "(pull * x).mean(), pull.mean()"

WRONG = {
    "l04-predict-step": [
        # The gradient added instead of subtracted.
        ("step_guess = (-1.5, -0.23)\n", "not quite"),
    ],
    "l04-grads": [
        # The squared error's habit: the residual alone, no weight by the precision.
        (nll(d_r="r"), "lack the factor e^(-2u)"),
        # The square's 2 kept although the ½ cancels it.
        (nll(d_r="2 * r * precision"), "factor 2 too many"),
        # The chain rule through e^(-2u) stops at the exponential.
        (nll(d_u="1 - 0.5 * r**2 * precision"), "missing its factor -2"),
        # The derivative of the term u forgotten.
        (nll(d_u="-r**2 * precision"), "lacks the 1"),
        # The exponential's derivative taken as +2 e^(-2u).
        (nll(d_u="1 + r**2 * precision"), "wrong sign on its second term"),
        # The residual the other way round.
        (nll(r="y - w * x - b"), "sign of dL/dw and dL/db is flipped"),
        (nll(out="(d_r * x).sum(), d_r.sum(), (d_u * x).sum(), d_u.sum()"),
         "mean was taken as a sum"),
        (nll(out="(d_r * x).mean(), d_r.mean(), d_u.mean(), d_u.mean()"),
         "dL/da lacks the factor x"),
        (nll(out="d_r.mean(), (d_r * x).mean(), (d_u * x).mean(), d_u.mean()"), "swapped"),
        # The lesson's squared-error gradients for the line, and nothing for a and c.
        (nll(out="(2 * r * x).mean(), (2 * r).mean(), 0 * a, 0 * c"), "mismatch"),
        (
            "def nll_grads(x, y, w, b, a, c):\n"
            "    params = [t.requires_grad_() for t in (w, b, a, c)]\n"
            "    u = a * x + c\n"
            "    loss = (u + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * u)).mean()\n"
            "    loss.backward()\n"
            "    return tuple(t.grad for t in params)\n",
            "by hand",
        ),
    ],
    "l04-huber": [
        # The squared error's gradient: no clipping (and no factor 2, as the ½ cancels it).
        (HUBER.format("r", TO_W_B), "treated as inside the threshold"),
        # Beyond delta, +delta whatever the side of the line.
        (HUBER.format("torch.where(r.abs() <= delta, r, delta + 0 * r)", TO_W_B),
         "whatever the sign of r"),
        # The ½ forgotten inside the threshold.
        (HUBER.format("torch.where(r.abs() <= delta, 2 * r, delta * r.sign())", TO_W_B),
         "factor 2 is too many"),
        (HUBER.format(CLIPPED, "(pull * x).sum(), pull.sum()"), "mean was taken as a sum"),
        (HUBER.format("(y - w * x - b).clamp(-delta, delta)", TO_W_B), "sign is flipped"),
        (HUBER.format(CLIPPED, "pull.mean(), pull.mean()"), "lacks the factor x"),
        # Exercise 1's answer, the MSE gradient, handed in again.
        (HUBER.format("2 * r", TO_W_B), "squared error's gradient (the lesson's worked one)"),
        ("def huber_grads(x, y, w, b, delta):\n    return torch.tensor(-0.3), torch.tensor(0.1)\n",
         "hard-coded"),
        (
            "def huber_grads(x, y, w, b, delta):\n"
            "    w, b = w.requires_grad_(), b.requires_grad_()\n"
            "    nn.functional.huber_loss(w * x + b, y, delta=delta).backward()\n"
            "    return w.grad, b.grad\n",
            "by hand",
        ),
    ],
}
