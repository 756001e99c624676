"""Shortcuts for the exercises of 18-forward-mode-and-torch-func.ipynb.

(See tests/lessons/test_exercises.py.)

Exercise 1 asks for forward-mode rules applied by hand, so the shortcuts are the tools
that apply them for you (torch.func.jvp, dual numbers, jacfwd) and estimates (finite
differences, numerical_grad). Exercise 3 asks for one vmapped call, so the shortcuts are
other methods that give the right numbers: a Python loop of torch.func.grad calls, and a
table of the visible check's answer.
"""

from cheats.estimates import lesson_plans, with_disguised

_F = "torch.tanh(W @ t + b) * (t @ t)"

CHEATS = {
    "l18-jvp-by-hand": [
        # Dual numbers do the rules.
        ("import torch.autograd.forward_ad as fwAD\n\n\n"
         "def tangent(W, b, x, v):\n"
         "    with fwAD.dual_level():\n"
         "        t = fwAD.make_dual(x, v)\n"
         f"        return fwAD.unpack_dual({_F}).tangent\n", "make_dual"),
        # The whole Jacobian by jacfwd, then a product.
        ("def tangent(W, b, x, v):\n"
         f"    return torch.func.jacfwd(lambda t: {_F})(x) @ v\n", "torch.func.jacfwd"),
        # A central difference along v.
        ("def tangent(W, b, x, v):\n"
         "    h = 1e-6\n"
         f"    f = lambda t: {_F}\n"
         "    return (f(x + h * v) - f(x - h * v)) / (2 * h)\n", "numerical estimate"),
        # The package's finite differences, one output at a time.
        ("def tangent(W, b, x, v):\n"
         f"    f = lambda t: {_F}\n"
         "    rows = [bl.numerical_grad(lambda t: f(t)[i], x)[0] for i in range(len(b))]\n"
         "    return torch.stack(rows) @ v\n", "numerical_grad"),
    ],
    "l18-clip-per-example": [
        # A Python loop of torch.func.grad calls: no backward call, but one pass per example.
        (
            "def clipped_mean_gradient(model, X, Y, max_norm):\n"
            "    weights = {k: v.detach() for k, v in model.named_parameters()}\n"
            "    def one_loss(weights, x_one, y_one):\n"
            "        out = functional_call(model, weights, (x_one.unsqueeze(0),))\n"
            "        return ((out - y_one.unsqueeze(0)) ** 2).mean()\n"
            "    total = {k: torch.zeros_like(w) for k, w in weights.items()}\n"
            "    for xi, yi in zip(X, Y):\n"
            "        g = grad(one_loss)(weights, xi, yi)\n"
            "        n = sum(t.pow(2).sum() for t in g.values()).sqrt()\n"
            "        for k in g:\n"
            "            total[k] += g[k] * (max_norm / n).clamp(max=1.0) / len(X)\n"
            "    return total\n",
            "loop over the examples",
        ),
        # A table of the answer on the visible check's first model and batch (seed 0: the
        # model of seed 15, 5 examples): right there, wrong on every other batch.
        (
            "from backproplab.course.exercises.lesson18 import _new_net, _loop_gradients\n\n"
            "_net, _X, _Y = _new_net(15, 5)\n"
            "_G = _loop_gradients(_net, _X, _Y)\n\n\n"
            "def clipped_mean_gradient(model, X, Y, max_norm):\n"
            "    grads = vmap(grad(lambda w, x, y: ((functional_call(model, w, (x[None],))\n"
            "                                        - y[None]) ** 2).mean()),\n"
            "                 in_dims=(None, 0, 0))(dict(model.named_parameters()), X, Y)\n"
            "    if not torch.equal(X, _X):\n"
            "        return {k: g.mean(0) for k, g in grads.items()}\n"
            "    n = sum(g.flatten(1).pow(2).sum(1) for g in _G.values()).sqrt()\n"
            "    s = (max_norm / n).clamp(max=1.0)\n"
            "    return {k: (g * s.reshape(-1, *[1] * (g.dim() - 1))).mean(0)\n"
            "            for k, g in _G.items()}\n",
            "differs from a loop",
        ),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("18"))
