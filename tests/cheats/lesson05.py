"""Shortcuts for the exercises of 05-gradient-accumulation.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

CHEATS = {
    "l05-microbatch": [
        # The full-batch gradient by torch.autograd.grad, planted in .grad after one dummy
        # backward per piece: torch.autograd.grad is named.
        (
            "def accumulate(w, X, t, sizes):\n"
            "    (g,) = torch.autograd.grad(((X @ w - t) ** 2).mean(), w)\n"
            "    for _ in sizes:\n"
            "        (w * 0).sum().backward()\n"
            "    w.grad = g\n",
            "torch.autograd.grad",
        ),
        # The full-batch backward plus empty passes to make up the count.
        (
            "def accumulate(w, X, t, sizes):\n"
            "    ((X @ w - t) ** 2).mean().backward()\n"
            "    for _ in sizes[1:]:\n"
            "        (w * 0).sum().backward()\n",
            "did not each carry one piece",
        ),
    ],
    "l05-shared": [
        ("def shared_grad(w, x1, x2):\n"
         "    h = 1e-6\n"
         "    f = lambda v: torch.tanh(v @ x1) + torch.tanh(v @ x2)\n"
         "    return torch.stack([(f(w + h * e) - f(w - h * e)) / (2 * h)\n"
         "                        for e in torch.eye(len(w), dtype=w.dtype)])\n",
         "numerical estimate"),
        ("def shared_grad(w, x1, x2):\n"
         "    return bl.numerical_grad(lambda v: torch.tanh(v @ x1) + torch.tanh(v @ x2), w)[0]\n",
         "numerical_grad"),
        ("def shared_grad(w, x1, x2):\n"
         "    one = torch.ones((), dtype=w.dtype)\n"
         "    return (torch.ops.aten.tanh_backward(one, torch.tanh(w @ x1)) * x1\n"
         "            + torch.ops.aten.tanh_backward(one, torch.tanh(w @ x2)) * x2)\n",
         "backward kernels"),
        # The lesson's own cell computes this gradient with autograd: reused as a function.
        ("def shared_grad(w, x1, x2):\n"
         "    w_once = w.detach().clone().requires_grad_()\n"
         "    (torch.tanh(w_once @ x1) + torch.tanh(w_once @ x2)).backward()\n"
         "    return w_once.grad\n",
         "Tensor.backward()"),
        # A table of the visible check's answers, looked up by the inputs.
        ("from backproplab.lessons import find_exercise\n\n"
         "_exercise = find_exercise('l05-shared')\n"
         "_table = {}\n"
         "for _k in range(3):\n"
         "    _made = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
        "    _inputs = [t.double() for t in _made]\n"
         "    _table[tuple(tuple(t.tolist()) for t in _inputs)] = _exercise.reference(\n"
         "        *[t.clone() for t in _inputs])\n\n\n"
         "def shared_grad(w, x1, x2):\n"
         "    return _table[tuple(tuple(t.tolist()) for t in (w, x1, x2))]\n",
         "raised KeyError"),
    ],
}
