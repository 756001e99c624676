"""Plausible wrong answers for the exercises of 04-zeroing-gradients.ipynb."""

TRAIN = (
    "def train_fixed(model, x, y, steps, lr):\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
    "    for _ in range(steps):\n{}"
)
PER_EXAMPLE = (
    "def per_example_grads(model, X, y):\n"
    "    grads = []\n"
    "    for i in range(len(X)):\n{}"
    "    return grads\n"
)

WRONG = {
    "l04-predict-zero-grad": [
        ('zero_grad_guess = "zeros"\n', "set_to_none=True"),
    ],
    "l04-find-bug": [
        # The buggy loop copied unchanged.
        (
            TRAIN.format(
                "        loss = F.mse_loss(model(x), y)\n"
                "        loss.backward()\n"
                "        opt.zero_grad()\n"
                "        opt.step()\n"
            ),
            "did not move",
        ),
        # The zeroing dropped altogether: gradients pile up.
        (
            TRAIN.format(
                "        F.mse_loss(model(x), y).backward()\n"
                "        opt.step()\n"
            ),
            "trained weight",
        ),
        # Zeroing the data instead of the parameters.
        (
            TRAIN.format(
                "        x.grad = None\n"
                "        F.mse_loss(model(x), y).backward()\n"
                "        opt.step()\n"
            ),
            "trained weight",
        ),
    ],
    "l04-per-example": [
        # No zeroing: each entry holds the running sum.
        (
            PER_EXAMPLE.format(
                "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
                "        grads.append(model.weight.grad.clone())\n"
            ),
            "gradient of example 1",
        ),
        # The same tensor appended every time, then zeroed in place: all entries alias.
        (
            PER_EXAMPLE.format(
                "        if model.weight.grad is not None:\n"
                "            model.weight.grad.zero_()\n"
                "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
                "        grads.append(model.weight.grad)\n"
            ),
            "gradient of example 0",
        ),
        # One backward on the whole batch, then split: right numbers? No: a mean over 4.
        (
            "def per_example_grads(model, X, y):\n"
            "    model.zero_grad()\n"
            "    F.mse_loss(model(X), y).backward()\n"
            "    return [model.weight.grad.clone() for _ in range(len(X))]\n",
            "backward passes for 4 examples",
        ),
    ],
}
