"""Shortcuts for the exercises of 06-zeroing-gradients.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

from cheats.estimates import lesson_plans, with_disguised

CHEATS = {
    "l06-where": [
        # The step's own variables read through its closure instead of watching what it does.
        (
            "def where_zeroed(step, model, X, y, k):\n"
            "    zero = [c.cell_contents for c in step.__closure__][-1]\n"
            "    return [c.cell_contents for c in zero.__closure__][0]\n",
            "__closure__",
        ),
        # The same through inspect.
        (
            "import inspect\n\n\n"
            "def where_zeroed(step, model, X, y, k):\n"
            "    zero = inspect.getclosurevars(step).nonlocals['zero']\n"
            "    return inspect.getclosurevars(zero).nonlocals['place']\n",
            "inspect",
        ),
    ],
    "l06-momentum": [
        # Grad mode switched back on: the real loop, run under the check's nose.
        (
            "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
            "    with torch.enable_grad():\n"
            "        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()\n"
            "        opt = torch.optim.SGD([w, b], lr=lr, momentum=beta)\n"
            "        for _ in range(steps):\n"
            "            ((w * x + b - y) ** 2).mean().backward()\n"
            "            opt.step()\n"
            "    return w.detach(), b.detach()\n",
            "enable_grad",
        ),
        # The gradient by central differences instead of lesson 04's formula.
        (
            "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
            "    def loss(w, b):\n"
            "        return ((w * x + b - y) ** 2).mean()\n\n"
            "    h = 1e-6\n"
            "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    velocity_w, velocity_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    for _ in range(steps):\n"
            "        grad_w = grad_w + (loss(w + h, b) - loss(w - h, b)) / (2 * h)\n"
            "        grad_b = grad_b + (loss(w, b + h) - loss(w, b - h)) / (2 * h)\n"
            "        velocity_w = beta * velocity_w + grad_w\n"
            "        velocity_b = beta * velocity_b + grad_b\n"
            "        w, b = w - lr * velocity_w, b - lr * velocity_b\n"
            "    return w, b\n",
            "numerical estimate",
        ),
        # bl.numerical_grad for the gradient at every step.
        (
            "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
            "    def loss(w, b):\n"
            "        return ((w * x + b - y) ** 2).mean()\n\n"
            "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    velocity_w, velocity_b = torch.zeros_like(w), torch.zeros_like(b)\n"
            "    for _ in range(steps):\n"
            "        gw, gb = bl.numerical_grad(loss, w, b)\n"
            "        grad_w, grad_b = grad_w + gw, grad_b + gb\n"
            "        velocity_w = beta * velocity_w + grad_w\n"
            "        velocity_b = beta * velocity_b + grad_b\n"
            "        w, b = w - lr * velocity_w, b - lr * velocity_b\n"
            "    return w, b\n",
            "numerical_grad",
        ),
        # A table of the visible check's answers, looked up by the inputs.
        (
            "from backproplab.course.exercises import find_exercise\n\n"
            "_exercise = find_exercise('l06-momentum')\n"
            "_table = {}\n"
            "for _k in range(3):\n"
            "    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
            "    _table[str(_inputs[0].tolist())] = _exercise.reference(*_inputs)\n\n\n"
            "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
            "    return _table[str(x.tolist())]\n",
            "raised KeyError",
        ),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("06"))
