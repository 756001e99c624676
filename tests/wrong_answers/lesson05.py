"""Plausible wrong answers for the exercises of 05-gradient-accumulation.ipynb."""

ACCUMULATE = (
    "def accumulate(w, X, t, sizes):\n"
    "    for X_part, t_part in zip(X.split(sizes), t.split(sizes), strict=True):\n"
    "{}"
)

WRONG = {
    "l05-predict-second": [
        # Expects backward to overwrite .grad.
        ("second_guess = 2.0\n", "not quite"),
    ],
    "l05-predict-batchnorm": [
        # Expects micro-batches to be just a smaller batch, as for the linear model.
        ('bn_guess = "equal"\n', "not quite"),
        ('bn_guess = "same"\n', "not one of the choices"),
    ],
    "l05-microbatch": [
        # The worked cell copied: dividing by the number of pieces (right only for equal sizes).
        (ACCUMULATE.format(
            "        (((X_part @ w - t_part) ** 2).mean() / len(sizes)).backward()\n"),
         "divided by the number of pieces"),
        # No scaling at all.
        (ACCUMULATE.format("        ((X_part @ w - t_part) ** 2).mean().backward()\n"),
         "added unscaled"),
        # The share upside down.
        (ACCUMULATE.format(
            "        (((X_part @ w - t_part) ** 2).mean() * len(X) / len(X_part)).backward()\n"),
         "upside down"),
        # Resets .grad before every piece: only the last one survives.
        (ACCUMULATE.format(
            "        w.grad = None\n"
            "        (((X_part @ w - t_part) ** 2).mean() * len(X_part) / len(X)).backward()\n"),
         "only the last piece"),
        # The right gradient by one full-batch backward: the method is not the one asked for.
        ("def accumulate(w, X, t, sizes):\n    ((X @ w - t) ** 2).mean().backward()\n",
         "1 backward pass for"),
    ],
    "l05-shared": [
        (
            "def shared_grad(w, x1, x2):\n    return (1 - torch.tanh(w @ x1) ** 2) * x1\n",
            "only the first use of w counted",
        ),
        # Outer derivative applied to the sum instead of each use.
        (
            "def shared_grad(w, x1, x2):\n"
            "    return (1 - torch.tanh(w @ (x1 + x2)) ** 2) * (x1 + x2)\n",
            "merged into one",
        ),
        # tanh' forgotten: only the inner derivatives added.
        ("def shared_grad(w, x1, x2):\n    return x1 + x2\n", "mismatch"),
        (
            "def shared_grad(w, x1, x2):\n"
            "    w = w.requires_grad_()\n"
            "    (torch.tanh(w @ x1) + torch.tanh(w @ x2)).backward()\n"
            "    return w.grad\n",
            "Tensor.backward()",
        ),
    ],
}
