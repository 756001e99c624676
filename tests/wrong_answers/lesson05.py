"""Plausible wrong answers for the exercises of 05-gradient-accumulation.ipynb."""

ACCUMULATE = (
    "def accumulate(w, X, t, sizes):\n"
    "    for X_part, t_part in zip(X.split(sizes), t.split(sizes), strict=True):\n"
    "{}"
)

# Exercise 2's solution, with the line that sums the uses of W to fill in.
RNN = (
    "def rnn_grad(W, h0, x1, x2, y):\n"
    "    h1 = torch.tanh(h0 @ W + x1)\n"
    "    h2 = torch.tanh(h1 @ W + x2)\n"
    "    dpre2 = 2 * (h2 - y) * (1 - h2**2)\n"
    "    dh1 = W @ dpre2\n"
    "    dpre1 = dh1 * (1 - h1**2)\n"
    "    return {dW}\n"
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
    "l05-tied": [
        # only the last step's use of W
        (RNN.format(dW="torch.outer(h1, dpre2)"), "only step 2's use of W is counted"),
        # only the first step's use of W
        (RNN.format(dW="torch.outer(h0, dpre1)"), "only step 1's use of W is counted"),
        # back through step 2's product without the transpose
        (RNN.format(dW="torch.outer(h1, dpre2) + torch.outer(h0, dpre1)").replace(
            "dh1 = W @ dpre2", "dh1 = dpre2 @ W"), "missing its transpose"),
        # tanh' left out at step 1
        (RNN.format(dW="torch.outer(h1, dpre2) + torch.outer(h0, dpre1)").replace(
            "dpre1 = dh1 * (1 - h1**2)", "dpre1 = dh1"), "tanh' is missing at step 1"),
        # tanh' left out at both steps
        (RNN.format(dW="torch.outer(h1, dpre2) + torch.outer(h0, dpre1)").replace(
            "dpre1 = dh1 * (1 - h1**2)", "dpre1 = dh1").replace(
            "dpre2 = 2 * (h2 - y) * (1 - h2**2)", "dpre2 = 2 * (h2 - y)"),
         "tanh' is missing at both steps"),
        # each use's outer product the wrong way round
        (RNN.format(dW="torch.outer(dpre2, h1) + torch.outer(dpre1, h0)"), "transposed"),
        # the shared-weight formula of one step applied to both inputs at once
        (RNN.format(dW="torch.outer(h0 + h1, dpre1 + dpre2)"), "mismatch"),
        # autograd inside the answer
        (
            "def rnn_grad(W, h0, x1, x2, y):\n"
            "    W = W.requires_grad_()\n"
            "    h2 = torch.tanh(torch.tanh(h0 @ W + x1) @ W + x2)\n"
            "    ((h2 - y) ** 2).sum().backward()\n"
            "    return W.grad\n",
            "Tensor.backward()",
        ),
    ],
}
