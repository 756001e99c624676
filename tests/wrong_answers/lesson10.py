"""Plausible wrong answers for the exercises of 10-mlp-training.ipynb."""

BCE = "def dlogits_bce(z, y):\n    return {}\n"
MSE = "def dlogits_sigmoid_mse(z, y):\n    p = torch.sigmoid(z)\n    return {}\n"


def mlp(dz="(torch.sigmoid(z) - ys) / z.numel()", da="(dz @ W2.T) * (1 - h**2)",
        out="xs.T @ da, da.sum(dim=0), h.T @ dz, dz.sum(dim=0)"):
    """Exercise 3's backward with one line changed."""
    return ("def mlp_backward(xs, ys, W1, b1, W2, b2):\n"
            "    a = xs @ W1 + b1\n"
            "    h = torch.tanh(a)\n"
            "    z = h @ W2 + b2\n"
            f"    dz = {dz}\n"
            f"    da = {da}\n"
            f"    return {out}\n")


WRONG = {
    "l10-predict-layer": [
        ('larger_layer_guess = "first"\n', "not quite"),
    ],
    "l10-predict-std": [
        # The old claim: std 0.01 starves every layer.
        ("sigmoid_last_10x_smaller = True\n", "not quite"),
    ],
    "l10-bce": [
        (BCE.format("torch.sigmoid(z) - y"), "1/N of the mean is missing"),
        (BCE.format("(torch.sigmoid(z) - y) / len(z)"), "number of rows only"),
        # Rows times columns: right for 2-D z only (the check alternates 2-D and 3-D).
        (BCE.format("(torch.sigmoid(z) - y) / (z.shape[0] * z.shape[1])"),
         "first two sizes only"),
        (BCE.format("(z - y) / z.numel()"), "z stands where sigmoid(z) belongs"),
        (BCE.format("(y - torch.sigmoid(z)) / z.numel()"), "sign is flipped"),
        (
            "def dlogits_bce(z, y):\n"
            "    p = torch.sigmoid(z)\n"
            "    return (p - y) * p * (1 - p) / z.numel()\n",
            "p(1 − p) was multiplied in once too often",
        ),
        # dL/dp only: the chain rule's last factor forgotten.
        (
            "def dlogits_bce(z, y):\n"
            "    p = torch.sigmoid(z)\n"
            "    return (-y / p + (1 - y) / (1 - p)) / z.numel()\n",
            "mismatch",
        ),
        (
            "def dlogits_bce(z, y):\n"
            "    z = z.requires_grad_()\n"
            "    F.binary_cross_entropy_with_logits(z, y).backward()\n"
            "    return z.grad\n",
            "by hand",
        ),
    ],
    "l10-dlogits": [
        # Exercise 1's cross-entropy formula reused.
        ("def dlogits_sigmoid_mse(z, y):\n    return (torch.sigmoid(z) - y) / z.numel()\n",
         "Exercise 1's answer, for cross-entropy"),
        (MSE.format("2 * (p - y) / z.numel()"), "own derivative p(1 − p) is missing"),
        (MSE.format("2 * (p - y) * p * (1 - p)"), "1/N of the mean is missing"),
        (MSE.format("(p - y) * p * (1 - p) / z.numel()"), "factor 2 from the derivative"),
        (MSE.format("2 * (p - y) * p * (1 - p) / (z.shape[0] * z.shape[1])"),
         "first two sizes only"),
        (
            "def dlogits_sigmoid_mse(z, y):\n"
            "    z = z.requires_grad_()\n"
            "    ((torch.sigmoid(z) - y) ** 2).mean().backward()\n"
            "    return z.grad\n",
            "by hand",
        ),
    ],
    "l10-mlp": [
        (mlp(da="dz @ W2.T"), "tanh's derivative is missing"),
        (mlp(da="(dz @ W2.T) * (1 - a**2)"), "taken at the pre-activation"),
        (mlp(out="da.T @ xs, da.sum(dim=0), dz.T @ h, dz.sum(dim=0)"), "transposed"),
        # Only the first layer's weight gradient transposed: compare names the transpose.
        (mlp(out="da.T @ xs, da.sum(dim=0), h.T @ dz, dz.sum(dim=0)"), "transposed"),
        (mlp(out="xs.T @ da, da, h.T @ dz, dz"), "not summed over the rows"),
        (mlp(out="xs.T @ da, da.mean(dim=0), h.T @ dz, dz.mean(dim=0)"),
         "averaged over the rows instead of summed"),
        (mlp(dz="torch.sigmoid(z) - ys"), "1/(N·K) of the mean is missing"),
        (mlp(dz="(torch.sigmoid(z) - ys) / len(z)"), "number of rows only"),
        # The sign of dL/dz flipped: every gradient flips with it.
        (mlp(dz="(ys - torch.sigmoid(z)) / z.numel()"), "sign"),
        (
            "def mlp_backward(xs, ys, W1, b1, W2, b2):\n"
            "    params = [t.requires_grad_() for t in (W1, b1, W2, b2)]\n"
            "    z = torch.tanh(xs @ params[0] + params[1]) @ params[2] + params[3]\n"
            "    F.binary_cross_entropy_with_logits(z, ys).backward()\n"
            "    return tuple(t.grad for t in params)\n",
            "by hand",
        ),
    ],
}
