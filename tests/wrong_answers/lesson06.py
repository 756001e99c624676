"""Plausible wrong answers for the exercises of 06-zeroing-gradients.ipynb."""

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
    "l06-predict-zero-grad": [
        ('zero_grad_guess = "zeros"\n', "not quite"),
        ("zero_grad_guess = 0\n", "not one of the choices"),
    ],
    "l06-predict-forgot": [
        # Expects the summed gradients to be just a slower descent.
        ('settles_guess = "yes"\n', "not quite"),
    ],
    "l06-find-bug": [
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
            "never zeroes",
        ),
        # Zeroing the data instead of the parameters.
        (
            TRAIN.format(
                "        x.grad = None\n"
                "        F.mse_loss(model(x), y).backward()\n"
                "        opt.step()\n"
            ),
            "the model's, not the data's",
        ),
        # Two backward passes per step.
        (
            TRAIN.format(
                "        opt.zero_grad()\n"
                "        loss = F.mse_loss(model(x), y)\n"
                "        loss.backward(retain_graph=True)\n"
                "        loss.backward()\n"
                "        opt.step()\n"
            ),
            "expected one per step",
        ),
    ],
    "l06-per-example": [
        # The default path into the trap: zero_() in place, the tensor itself appended.
        (
            PER_EXAMPLE.format(
                "        model.weight.grad.zero_()\n"
                "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
                "        grads.append(model.weight.grad)\n"
            ),
            "one and the same tensor",
        ),
        # No zeroing: each entry holds the running sum.
        (
            PER_EXAMPLE.format(
                "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
                "        grads.append(model.weight.grad.clone())\n"
            ),
            "sum of the gradients of examples 0 to i",
        ),
        # zero_grad() with its default: right numbers, but the gradient tensor is replaced.
        (
            PER_EXAMPLE.format(
                "        model.zero_grad()\n"
                "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
                "        grads.append(model.weight.grad)\n"
            ),
            "set_to_none=True",
        ),
        # One backward on the whole batch, then copies: not one gradient per example.
        (
            "def per_example_grads(model, X, y):\n"
            "    model.zero_grad(set_to_none=False)\n"
            "    F.mse_loss(model(X), y).backward()\n"
            "    return [model.weight.grad.clone() for _ in range(len(X))]\n",
            "expected one per example",
        ),
    ],
}
