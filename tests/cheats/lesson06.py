"""Shortcuts for the exercises of 06-zeroing-gradients.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

CHEATS = {
    "l06-find-bug": [
        # Gradients by torch.autograd.grad and a hand-made update: .grad never used, so the
        # zeroing question is dodged.
        (
            "def train_fixed(model, x, y, steps, lr):\n"
            "    for _ in range(steps):\n"
            "        params = list(model.parameters())\n"
            "        grads = torch.autograd.grad(F.mse_loss(model(x), y), params)\n"
            "        with torch.no_grad():\n"
            "            for p, g in zip(params, grads, strict=True):\n"
            "                p -= lr * g\n",
            "torch.autograd.grad",
        ),
    ],
    "l06-per-example": [
        # torch.autograd.grad per example: right numbers, .grad untouched.
        (
            "def per_example_grads(model, X, y):\n"
            "    return [torch.autograd.grad(F.mse_loss(model(X[i:i + 1]), y[i:i + 1]),\n"
            "                                model.weight)[0] for i in range(len(X))]\n",
            "torch.autograd.grad",
        ),
        # A table of the visible check's answers, looked up by the inputs.
        (
            "from backproplab.lessons.lesson06 import _new_examples, _one_example_grad\n\n"
            "_table = {}\n"
            "for _k in range(3):\n"
            "    _start, _X, _y = _new_examples(torch.Generator().manual_seed(_k))\n"
            "    _table[tuple(_X.flatten().tolist())] = [\n"
            "        _one_example_grad(_start, _X, _y, i) for i in range(len(_X))]\n\n\n"
            "def per_example_grads(model, X, y):\n"
            "    for i in range(len(X)):\n"
            "        F.mse_loss(model(X[i:i + 1]), y[i:i + 1]).backward()\n"
            "    return _table[tuple(X.flatten().tolist())]\n",
            "raised KeyError",
        ),
    ],
}
