"""Plausible wrong answers for the exercises of 04-linear-regression.ipynb."""

MSE = "def mse_grads(x, y, w, b):\n    residual = w * x + b - y\n    return {}\n"
LIN = (
    "def linear_grads(inputs, weight, bias, targets):\n"
    "    out = inputs @ weight.T + bias\n"
    "    grad_out = {}\n"
    "    return {}\n"
)
RIGHT_GRAD_OUT = "2 * (out - targets) / out.numel()"

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
    "l04-linear": [
        # The weight gradient transposed.
        (LIN.format(RIGHT_GRAD_OUT, "inputs.T @ grad_out, grad_out.sum(dim=0)"), "transpose"),
        # The bias gradient not summed over the batch.
        (LIN.format(RIGHT_GRAD_OUT, "grad_out.T @ inputs, grad_out"), "sum over"),
        # The mean's 1/N forgotten.
        (LIN.format("2 * (out - targets)", "grad_out.T @ inputs, grad_out.sum(dim=0)"),
         "1/N of the mean is missing"),
        # Divided by the batch size, as if mse_loss averaged over rows only.
        (LIN.format("2 * (out - targets) / len(out)", "grad_out.T @ inputs, grad_out.sum(dim=0)"),
         "batch size only"),
        # The bias gradient averaged over the batch.
        (LIN.format(RIGHT_GRAD_OUT, "grad_out.T @ inputs, grad_out.mean(dim=0)"),
         "averaged over the batch instead of summed"),
    ],
}
