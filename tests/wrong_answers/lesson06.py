"""Plausible wrong answers for the exercises of 06-zeroing-gradients.ipynb."""

TRAIN = (
    "def train_accumulated(model, X, y, steps, k, lr):\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
    "    for _ in range(steps):\n{}"
)
PIECES = "        for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):\n"
PIECE_BACKWARD = "            (F.mse_loss(model(X_part), y_part) / k).backward()\n"
NEVER = (
    "def never_zeroed(w, b, X, t, lr, steps):\n"
    "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
    "{}"
    "    return w, b\n"
)
RIGHT_GRAD = "        dz = (torch.sigmoid(X @ w + b) - t) / len(t)\n"
SUM_AND_STEP = (
    "        grad_w = grad_w + X.T @ dz\n"
    "        grad_b = grad_b + dz.sum()\n"
    "        w = w - lr * grad_w\n"
    "        b = b - lr * grad_b\n"
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
    "l06-accumulate": [
        # Zeroed before every micro-batch: only the last one's share is stepped on.
        (TRAIN.format(PIECES + "            opt.zero_grad()\n" + PIECE_BACKWARD
                      + "        opt.step()\n"),
         "before every micro-batch"),
        # Never zeroed.
        (TRAIN.format(PIECES + PIECE_BACKWARD + "        opt.step()\n"), "never cleared"),
        # Zeroed between the last backward and step(): the gradient thrown away.
        (TRAIN.format(PIECES + PIECE_BACKWARD + "        opt.zero_grad()\n"
                      "        opt.step()\n"),
         "did not move"),
        # The / k left out.
        (TRAIN.format("        opt.zero_grad()\n" + PIECES
                      + "            F.mse_loss(model(X_part), y_part).backward()\n"
                      "        opt.step()\n"),
         "divide each micro-batch's loss by k"),
        # A step after every micro-batch.
        (TRAIN.format("        opt.zero_grad()\n" + PIECES + PIECE_BACKWARD
                      + "            opt.step()\n"),
         "optimizer steps; expected"),
        # The whole batch at once: no micro-batches.
        (TRAIN.format("        opt.zero_grad()\n"
                      "        F.mse_loss(model(X), y).backward()\n"
                      "        opt.step()\n"),
         "one per micro-batch"),
        # Zeroing the data instead of the parameters: the gradients pile up.
        (TRAIN.format("        X.grad = None\n" + PIECES + PIECE_BACKWARD
                      + "        opt.step()\n"),
         "never cleared"),
    ],
    "l06-never-zeroed": [
        # The loop that zeroes: each step uses only its own gradient.
        (
            NEVER.format(
                "    for _ in range(steps):\n" + RIGHT_GRAD
                + "        w = w - lr * X.T @ dz\n"
                "        b = b - lr * dz.sum()\n"
            ),
            "loop that zeroes",
        ),
        # One step too few.
        (NEVER.format("    for _ in range(steps - 1):\n" + RIGHT_GRAD + SUM_AND_STEP),
         "one step too few"),
        # One step too many.
        (NEVER.format("    for _ in range(steps + 1):\n" + RIGHT_GRAD + SUM_AND_STEP),
         "one step too many"),
        # The updates summed: the running sum of the gradients summed once more.
        (
            NEVER.format(
                "    moved_w, moved_b = torch.zeros_like(w), torch.zeros_like(b)\n"
                "    for _ in range(steps):\n" + RIGHT_GRAD
                + "        grad_w = grad_w + X.T @ dz\n"
                "        grad_b = grad_b + dz.sum()\n"
                "        moved_w = moved_w + lr * grad_w\n"
                "        moved_b = moved_b + lr * grad_b\n"
                "        w = w - moved_w\n"
                "        b = b - moved_b\n"
            ),
            "summed the updates instead of the gradients",
        ),
        # The gradient taken once, at the starting weights, and counted `steps` times.
        (
            NEVER.format(
                "    dz = (torch.sigmoid(X @ w + b) - t) / len(t)\n"
                "    for _ in range(steps):\n" + SUM_AND_STEP
            ),
            "starting weights",
        ),
        # A sum over the examples, not the mean.
        (NEVER.format("    for _ in range(steps):\n"
                      "        dz = torch.sigmoid(X @ w + b) - t\n" + SUM_AND_STEP),
         "1/n of the mean"),
        # t - sigmoid(z): the sign of the gradient flipped.
        (NEVER.format("    for _ in range(steps):\n"
                      "        dz = (t - torch.sigmoid(X @ w + b)) / len(t)\n" + SUM_AND_STEP),
         "sign"),
        # The starting weights handed back.
        ("def never_zeroed(w, b, X, t, lr, steps):\n    return w, b\n", "mismatch"),
        # The real loop, run inside the check: autograd is switched off there.
        (
            "def never_zeroed(w, b, X, t, lr, steps):\n"
            "    w, b = w.clone().requires_grad_(), b.clone().requires_grad_()\n"
            "    opt = torch.optim.SGD([w, b], lr=lr)\n"
            "    for _ in range(steps):\n"
            "        F.binary_cross_entropy_with_logits(X @ w + b, t).backward()\n"
            "        opt.step()\n"
            "    return w.detach(), b.detach()\n",
            "Tensor.backward()",
        ),
    ],
}
