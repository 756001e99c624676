"""Plausible wrong answers for the exercises of 05-non-scalar-backward.ipynb."""

WRONG = {
    "l05-predict-second-call": [
        # Expects the second call to overwrite.
        ("second_call_guess = (4.0, 2.0)\n", "adds the same 4 and 2 again"),
    ],
    "l05-jacobian-rows": [
        # The zero_() trap: every stored row is the same tensor, emptied and refilled.
        (
            "def jacobian_by_rows(g, x):\n"
            "    x = x.detach().clone().requires_grad_()\n"
            "    rows = []\n"
            "    m = g(x).numel()\n"
            "    for i in range(m):\n"
            "        if x.grad is not None:\n"
            "            x.grad.zero_()\n"
            "        g(x).backward(gradient=torch.eye(m)[i])\n"
            "        rows.append(x.grad)\n"
            "    return torch.stack(rows)\n",
            "mismatch",
        ),
        # No reset at all: each row holds the running sum.
        (
            "def jacobian_by_rows(g, x):\n"
            "    x = x.detach().clone().requires_grad_()\n"
            "    m = g(x).numel()\n"
            "    rows = []\n"
            "    for i in range(m):\n"
            "        g(x).backward(gradient=torch.eye(m)[i])\n"
            "        rows.append(x.grad.clone())\n"
            "    return torch.stack(rows)\n",
            "mismatch",
        ),
        # The shortcut the exercise rules out.
        (
            "def jacobian_by_rows(g, x):\n    return torch.func.jacrev(g)(x)\n",
            "one backward call per output row",
        ),
        # Columns instead of rows.
        (
            "def jacobian_by_rows(g, x):\n"
            "    return torch.autograd.functional.jacobian(g, x).T\n",
            "transposed",
        ),
    ],
    "l05-mean-gradient": [
        # Ones in the last row: the gradient of the row's sum, not its mean.
        (
            "def last_row_mean_vector(y):\n"
            "    v = torch.zeros_like(y)\n"
            "    v[-1] = 1\n"
            "    return v\n",
            "factor",
        ),
        # The mean of the whole matrix.
        ("def last_row_mean_vector(y):\n    return torch.full_like(y, 1 / y.numel())\n", "mismatch"),
        # The first row instead of the last.
        (
            "def last_row_mean_vector(y):\n"
            "    v = torch.zeros_like(y)\n"
            "    v[0] = 1 / y.shape[1]\n"
            "    return v\n",
            "mismatch",
        ),
    ],
}
