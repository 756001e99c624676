"""Plausible wrong answers for the exercises of 07-higher-order-gradients.ipynb."""

WRONG = {
    "l07-predict-second": [
        ("second_works = True\n", "backward records nothing"),
    ],
    "l07-third-derivative": [
        # create_graph forgotten: the second grad call finds no graph.
        (
            "def nth_derivative(f, x, n):\n"
            "    x = x.detach().requires_grad_()\n"
            "    g = f(x)\n"
            "    for _ in range(n):\n"
            "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g))\n"
            "    return g\n",
            "create_graph=True",
        ),
        # One step too few.
        (
            "def nth_derivative(f, x, n):\n"
            "    x = x.detach().requires_grad_()\n"
            "    g = f(x)\n"
            "    for _ in range(n - 1):\n"
            "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g), create_graph=True)\n"
            "    return g.detach()\n",
            "mismatch",
        ),
        # The lesson's exp(2x) answer hard-coded.
        ("def nth_derivative(f, x, n):\n    return torch.full_like(x, 8.0)\n", "mismatch"),
    ],
    "l07-newton-step": [
        # The sign slip.
        (
            "def newton_step(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (d1,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)\n"
            "    (d2,) = torch.autograd.grad(d1.sum(), x)\n"
            "    return d1.detach() / d2\n",
            "sign",
        ),
        # The ratio upside down.
        (
            "def newton_step(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (d1,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)\n"
            "    (d2,) = torch.autograd.grad(d1.sum(), x)\n"
            "    return -d2 / d1.detach()\n",
            "mismatch",
        ),
    ],
    "l07-penalty": [
        # The full Hessian: right numbers, wrong method.
        (
            "def penalty_grad(f, x):\n"
            "    H = torch.autograd.functional.hessian(f, x)\n"
            "    g = torch.autograd.functional.jacobian(f, x)\n"
            "    return 2 * H @ g\n",
            "one per input",
        ),
        # The chain rule's factor 2 forgotten (d|g|^2 = 2 g dg).
        (
            "def penalty_grad(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (g,) = torch.autograd.grad(f(x), x, create_graph=True)\n"
            "    (hg,) = torch.autograd.grad(g, x, grad_outputs=g.detach())\n"
            "    return hg\n",
            "factor 2",
        ),
        # The penalty's value differentiated without create_graph: no graph to walk.
        (
            "def penalty_grad(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (g,) = torch.autograd.grad(f(x), x)\n"
            "    return torch.autograd.grad((g**2).sum(), x)[0]\n",
            "create_graph=True",
        ),
    ],
}
