"""Plausible wrong answers for the exercises of 10-mlp-training.ipynb."""

RELU = "def relu_layer_grads(x, W, b, g_h):\n    a = x @ W + b\n    da = {}\n    return {}\n"

WRONG = {
    "l10-predict-layer": [
        ('larger_layer_guess = "first"\n', "shrinks towards the input"),
    ],
    "l10-dlogits": [
        # Part 2's cross-entropy formula copied.
        ("def dlogits_sigmoid_mse(z, y):\n    return (torch.sigmoid(z) - y) / z.numel()\n",
         "for cross-entropy, not for a squared error"),
        ("def dlogits_sigmoid_mse(z, y):\n    return 2 * (torch.sigmoid(z) - y) / z.numel()\n",
         "p(1 - p) is missing"),
        # The mean's 1/N forgotten.
        (
            "def dlogits_sigmoid_mse(z, y):\n"
            "    p = torch.sigmoid(z)\n"
            "    return 2 * (p - y) * p * (1 - p)\n",
            "factor",
        ),
        (
            "def dlogits_sigmoid_mse(z, y):\n"
            "    z = z.requires_grad_()\n"
            "    ((torch.sigmoid(z) - y) ** 2).mean().backward()\n"
            "    return z.grad\n",
            "by hand",
        ),
    ],
    "l10-hidden": [
        # The tanh rule from Part 2 copied.
        (RELU.format("g_h * (1 - torch.relu(a) ** 2)", "x.T @ da, da.sum(dim=0), da @ W.T"), "mismatch"),
        (RELU.format("g_h * torch.relu(a)", "x.T @ da, da.sum(dim=0), da @ W.T"), "instead of the 0/1 mask"),
        # The bias gradient not summed over the batch.
        (RELU.format("g_h * (a > 0)", "x.T @ da, da, da @ W.T"), "sum over"),
        # The input gradient without the transpose: shapes only work for square W.
        (RELU.format("g_h * (a > 0)", "x.T @ da, da.sum(dim=0), (W @ da.T).T.T"), "dL/dx"),
    ],
}
