"""Plausible wrong answers for the exercises of 04-zeroing-gradients.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment.
"""

WRONG = {
    # The loop exactly as given: no zero_grad(), so gradients pile up.
    "l04-find-bug": (
        "model_fixed = make_model()\n"
        "opt_fixed = torch.optim.SGD(model_fixed.parameters(), lr=0.01)\n"
        "for _ in range(60):\n"
        "    loss = F.mse_loss(model_fixed(x), y)\n"
        "    loss.backward()\n"
        "    opt_fixed.step()\n",
        "expected",
    ),
    # Runs backward again without clearing the stale gradient first.
    "l04-stale-grad": (
        "loss_fn(q).backward()\n",
        "accumulated over 3 backward passes",
    ),
}
