"""Plausible wrong answers for lesson 10's exercises (see tests/test_exercises.py)."""

WRONG = {
    # The loss is a mean over the batch; forgetting to divide by N.
    "l10-dlogits": (
        "dz_ex = torch.sigmoid(z_ex) - t_ex\n",
        "1/N",
    ),
    # The bias was broadcast over the batch, so its gradient needs a sum.
    "l10-hidden": (
        "h_ex = torch.tanh(x_ex @ W_ex + b_ex)\n"
        "da_ex = g_h * (1 - h_ex**2)\n"
        "dW_ex = x_ex.T @ da_ex\n"
        "db_ex = da_ex\n",
        "sum over dimension 0",
    ),
}
