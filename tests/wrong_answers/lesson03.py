"""Plausible wrong answers for the exercises of 03-gradient-accumulation.ipynb."""

ACCUMULATE = "def accumulate(w, X, t, sizes):\n{}"

WRONG = {
    "l03-predict-second": [
        # Expects backward to overwrite .grad.
        ("second_guess = 2.0\n", "adds its gradient into .grad"),
    ],
    "l03-microbatch": [
        # The worked cell copied: dividing by the number of pieces (right only for equal sizes).
        (
            ACCUMULATE.format(
                "    k = len(sizes)\n"
                "    for X_part, t_part in zip(X.split(sizes), t.split(sizes), strict=True):\n"
                "        (((X_part @ w - t_part) ** 2).mean() / k).backward()\n"
            ),
            "mismatch",
        ),
        # No scaling at all.
        (
            ACCUMULATE.format(
                "    for X_part, t_part in zip(X.split(sizes), t.split(sizes), strict=True):\n"
                "        ((X_part @ w - t_part) ** 2).mean().backward()\n"
            ),
            "mismatch",
        ),
        # The right gradient by one full-batch backward: the method is not the one asked for.
        (ACCUMULATE.format("    ((X @ w - t) ** 2).mean().backward()\n"), "one backward() per piece"),
    ],
    "l03-shared": [
        (
            "def shared_grad(w, x1, x2):\n    return (1 - torch.tanh(w @ x1) ** 2) * x1\n",
            "only the first use of w counted",
        ),
        # Outer derivative applied to the sum instead of each use.
        (
            "def shared_grad(w, x1, x2):\n    return (1 - torch.tanh(w @ (x1 + x2)) ** 2) * (x1 + x2)\n",
            "mismatch",
        ),
        (
            "def shared_grad(w, x1, x2):\n"
            "    w = w.requires_grad_()\n"
            "    (torch.tanh(w @ x1) + torch.tanh(w @ x2)).backward()\n"
            "    return w.grad\n",
            "by hand",
        ),
    ],
}
