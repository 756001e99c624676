"""Shortcuts for the exercises of 05-gradient-accumulation.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

from cheats.estimates import lesson_plans, with_disguised

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
    "l05-tied": [
        # Central finite differences, one entry of W at a time.
        ("def rnn_grad(W, h0, x1, x2, y):\n"
         "    def loss(V):\n"
         "        h2 = torch.tanh(torch.tanh(h0 @ V + x1) @ V + x2)\n"
         "        return ((h2 - y) ** 2).sum()\n"
         "    h, out = 1e-6, torch.zeros_like(W)\n"
         "    for i in range(W.shape[0]):\n"
         "        for j in range(W.shape[1]):\n"
         "            E = torch.zeros_like(W)\n"
         "            E[i, j] = h\n"
         "            out[i, j] = (loss(W + E) - loss(W - E)) / (2 * h)\n"
         "    return out\n",
         "numerical estimate"),
        # The package's finite differences.
        ("def rnn_grad(W, h0, x1, x2, y):\n"
         "    def loss(V):\n"
         "        h2 = torch.tanh(torch.tanh(h0 @ V + x1) @ V + x2)\n"
         "        return ((h2 - y) ** 2).sum()\n"
         "    return bl.numerical_grad(loss, W)[0]\n",
         "numerical_grad"),
        # torch's own backward kernel for tanh in place of tanh'.
        ("def rnn_grad(W, h0, x1, x2, y):\n"
         "    h1 = torch.tanh(h0 @ W + x1)\n"
         "    h2 = torch.tanh(h1 @ W + x2)\n"
         "    dpre2 = torch.ops.aten.tanh_backward(2 * (h2 - y), h2)\n"
         "    dpre1 = torch.ops.aten.tanh_backward(W @ dpre2, h1)\n"
         "    return torch.outer(h1, dpre2) + torch.outer(h0, dpre1)\n",
         "backward kernels"),
        # The lesson's shared-weight cell made a function: autograd, with grad mode back on.
        ("def rnn_grad(W, h0, x1, x2, y):\n"
         "    with torch.enable_grad():\n"
         "        W_once = W.detach().clone().requires_grad_()\n"
         "        h2 = torch.tanh(torch.tanh(h0 @ W_once + x1) @ W_once + x2)\n"
         "        ((h2 - y) ** 2).sum().backward()\n"
         "    return W_once.grad\n",
         "enable_grad"),
        # A table of the visible check's answers, looked up by the inputs.
        ("from backproplab.course.exercises import find_exercise\n\n"
         "_exercise = find_exercise('l05-tied')\n"
         "_table = {}\n"
         "for _k in range(3):\n"
         "    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
         "    _table[tuple(tuple(t.reshape(-1).tolist()) for t in _inputs)] = (\n"
         "        _exercise.reference(*[t.clone() for t in _inputs]))\n\n\n"
         "def rnn_grad(W, h0, x1, x2, y):\n"
         "    return _table[tuple(tuple(t.reshape(-1).tolist()) for t in (W, h0, x1, x2, y))]\n",
         "raised KeyError"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("05"))
