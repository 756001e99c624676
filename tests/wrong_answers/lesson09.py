"""Plausible wrong answers for the exercises of 09-linear-regression.ipynb."""

MSE = "def mse_grads(x, y, w, b):\n    residual = w * x + b - y\n    return {}\n"
LIN = (
    "def linear_grads(inputs, weight, bias, targets):\n"
    "    out = inputs @ weight.T + bias\n"
    "    grad_out = {}\n"
    "    return {}\n"
)

WRONG = {
    "l09-predict-lr": [
        ("lr_003_diverges = False\n", "largest stable rate"),
    ],
    "l09-grads": [
        (MSE.format("(residual * x).mean(), residual.mean()"), "factor"),
        (MSE.format("(2 * residual * x).sum(), (2 * residual).sum()"), "mean was taken as a sum"),
        (MSE.format("(2 * residual).mean(), (2 * residual * x).mean()"), "mismatch"),
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
    "l09-linear": [
        # The weight gradient transposed.
        (LIN.format("2 * (out - targets) / out.numel()", "inputs.T @ grad_out, grad_out.sum(dim=0)"),
         "transposed"),
        # The bias gradient not summed over the batch.
        (LIN.format("2 * (out - targets) / out.numel()", "grad_out.T @ inputs, grad_out"), "sum over"),
        # The mean's 1/N forgotten.
        (LIN.format("2 * (out - targets)", "grad_out.T @ inputs, grad_out.sum(dim=0)"), "factor"),
    ],
}
