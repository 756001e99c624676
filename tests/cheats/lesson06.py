"""Shortcuts for the exercises of 06-zeroing-gradients.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

CHEATS = {
    "l06-accumulate": [
        # Gradients by torch.autograd.grad and a hand-made update: .grad never used, so the
        # zeroing question is dodged.
        (
            "def train_accumulated(model, X, y, steps, k, lr):\n"
            "    params = list(model.parameters())\n"
            "    for _ in range(steps):\n"
            "        total = [torch.zeros_like(p) for p in params]\n"
            "        for X_part, y_part in zip(X.chunk(k), y.chunk(k), strict=True):\n"
            "            loss = F.mse_loss(model(X_part), y_part) / k\n"
            "            grads = torch.autograd.grad(loss, params)\n"
            "            total = [t + g for t, g in zip(total, grads, strict=True)]\n"
            "        with torch.no_grad():\n"
            "            for p, g in zip(params, total, strict=True):\n"
            "                p -= lr * g\n",
            "torch.autograd.grad",
        ),
    ],
    "l06-never-zeroed": [
        # Grad mode switched back on: the real loop, run under the check's nose.
        (
            "def never_zeroed(w, b, X, t, lr, steps):\n"
            "    with torch.enable_grad():\n"
            "        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()\n"
            "        opt = torch.optim.SGD([w, b], lr=lr)\n"
            "        for _ in range(steps):\n"
            "            F.binary_cross_entropy_with_logits(X @ w + b, t).backward()\n"
            "            opt.step()\n"
            "    return w.detach(), b.detach()\n",
            "enable_grad",
        ),
        # The gradient by central differences instead of a derived formula.
        (
            "def never_zeroed(w, b, X, t, lr, steps):\n"
            "    def loss(w, b):\n"
            "        z = X @ w + b\n"
            "        return (torch.log1p(torch.exp(z)) - t * z).mean()\n\n"
            "    def central(f, x, h=1e-6):\n"
            "        out = torch.zeros_like(x).flatten()\n"
            "        for i in range(x.numel()):\n"
            "            step = torch.zeros_like(x).flatten()\n"
            "            step[i] = h\n"
            "            step = step.view_as(x)\n"
            "            out[i] = (f(x + step) - f(x - step)) / (2 * h)\n"
            "        return out.view_as(x)\n\n"
            "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    for _ in range(steps):\n"
            "        grad_w = grad_w + central(lambda v: loss(v, b), w)\n"
            "        grad_b = grad_b + central(lambda v: loss(w, v), b)\n"
            "        w, b = w - lr * grad_w, b - lr * grad_b\n"
            "    return w, b\n",
            "numerical estimate",
        ),
        # bl.numerical_grad for the gradient at every step.
        (
            "def never_zeroed(w, b, X, t, lr, steps):\n"
            "    def loss(w, b):\n"
            "        return F.binary_cross_entropy_with_logits(X @ w + b, t)\n\n"
            "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    for _ in range(steps):\n"
            "        gw, gb = bl.numerical_grad(loss, w, b)\n"
            "        grad_w, grad_b = grad_w + gw, grad_b + gb\n"
            "        w, b = w - lr * grad_w, b - lr * grad_b\n"
            "    return w, b\n",
            "numerical_grad",
        ),
        # A table of the visible check's answers, looked up by the inputs.
        (
            "from backproplab.lessons import find_exercise\n\n"
            "_exercise = find_exercise('l06-never-zeroed')\n"
            "_table = {}\n"
            "for _k in range(3):\n"
            "    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
            "    _table[str(_inputs[2].tolist())] = _exercise.reference(*_inputs)\n\n\n"
            "def never_zeroed(w, b, X, t, lr, steps):\n"
            "    return _table[str(X.tolist())]\n",
            "raised KeyError",
        ),
    ],
}
