"""Plausible wrong answers for the exercises of 04-linear-regression.ipynb."""

MSE = "def mse_grads(x, y, w, b):\n    residual = w * x + b - y\n    return {}\n"
HUBER = "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n    pull = {}\n    return {}\n"
CLIPPED = "r.clamp(-delta, delta)"
TO_W_B = "(pull * x).mean(), pull.mean()"

WRONG = {
    "l04-predict-step": [
        # The gradient added instead of subtracted.
        ("step_guess = (-1.5, -0.23)\n", "not quite"),
    ],
    "l04-predict-lr": [
        ("lr_003_diverges = False\n", "not quite"),
    ],
    "l04-grads": [
        (MSE.format("(residual * x).mean(), residual.mean()"), "factor 2 from the derivative"),
        (MSE.format("(2 * residual * x).sum(), (2 * residual).sum()"), "mean was taken as a sum"),
        (MSE.format("(2 * residual).mean(), (2 * residual * x).mean()"), "swapped"),
        (MSE.format("(2 * residual).mean(), (2 * residual).mean()"), "lacks the factor x"),
        (MSE.format("(2 * (y - w * x - b) * x).mean(), (2 * (y - w * x - b)).mean()"),
         "sign is flipped"),
        # The lesson's first gradients, hard-coded.
        ("def mse_grads(x, y, w, b):\n    return torch.tensor(-149.8011), torch.tensor(-22.6109)\n",
         "hard-coded"),
        (
            "def mse_grads(x, y, w, b):\n"
            "    w, b = w.requires_grad_(), b.requires_grad_()\n"
            "    ((w * x + b - y) ** 2).mean().backward()\n"
            "    return w.grad, b.grad\n",
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
        (HUBER.format("2 * r", TO_W_B), "squared error's gradient (Exercise 1's)"),
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
