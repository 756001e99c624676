"""Plausible wrong answers for the exercises of 13-higher-order-gradients.ipynb."""

NTH = "def nth_derivative(f, x, n):\n{}"

WRONG = {
    "l13-predict-second": [
        ("second_works = True\n", "not quite"),
    ],
    "l13-predict-linear": [
        ("linear_second_works = True\n", "not quite"),
    ],
    "l13-third-derivative": [
        # create_graph forgotten: the second grad call finds no graph.
        (
            NTH.format(
                "    x = x.detach().requires_grad_()\n"
                "    g = f(x)\n"
                "    for _ in range(n):\n"
                "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g))\n"
                "    return g\n"
            ),
            "create_graph=True",
        ),
        # The lesson's first loop: right until the derivative runs out of graph.
        (
            NTH.format(
                "    x = x.detach().requires_grad_()\n"
                "    g = f(x)\n"
                "    for _ in range(n):\n"
                "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g), create_graph=True)\n"
                "    return g.detach()\n"
            ),
            "g.requires_grad is False",
        ),
        # One step too few.
        (
            NTH.format(
                "    x = x.detach().requires_grad_()\n"
                "    g = f(x)\n"
                "    for _ in range(n - 1):\n"
                "        if not g.requires_grad:\n"
                "            return torch.zeros_like(x)\n"
                "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g), create_graph=True)\n"
                "    return g.detach()\n"
            ),
            "one order too low",
        ),
        # The derivative of every point summed into one: no grad_outputs.
        (
            NTH.format(
                "    x = x.detach().requires_grad_()\n"
                "    g = f(x)\n"
                "    for _ in range(n):\n"
                "        (g,) = torch.autograd.grad(g, x, create_graph=True)\n"
                "    return g.detach()\n"
            ),
            "ones_like",
        ),
        # materialize_grads does not rescue an output without a graph.
        (
            NTH.format(
                "    x = x.detach().requires_grad_()\n"
                "    g = f(x)\n"
                "    for _ in range(n):\n"
                "        (g,) = torch.autograd.grad(g, x, torch.ones_like(g), create_graph=True,\n"
                "                                   materialize_grads=True)\n"
                "    return g.detach()\n"
            ),
            "g.requires_grad is False",
        ),
        # The lesson's exp(2x) answer hard-coded.
        ("def nth_derivative(f, x, n):\n    return torch.full_like(x, 8.0)\n", "mismatch"),
    ],
    "l13-newton-step": [
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
            "upside down",
        ),
        # f' without a graph: f'' cannot be taken.
        (
            "def newton_step(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (d1,) = torch.autograd.grad(f(x).sum(), x)\n"
            "    (d2,) = torch.autograd.grad(d1.sum(), x)\n"
            "    return -d1 / d2\n",
            "create_graph=True",
        ),
    ],
    "l13-penalty": [
        # The full Hessian: right numbers, wrong method.
        (
            "def penalty_grad(f, x):\n"
            "    H = torch.autograd.functional.hessian(f, x)\n"
            "    g = torch.autograd.functional.jacobian(f, x)\n"
            "    return 2 * H @ g\n",
            "full Hessian",
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
        # One Hessian-vector product per input: the Hessian row by row.
        (
            "def penalty_grad(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (g,) = torch.autograd.grad(f(x), x, create_graph=True)\n"
            "    rows = [torch.autograd.grad(g[i], x, retain_graph=True)[0] for i in range(len(x))]\n"
            "    return 2 * torch.stack(rows) @ g.detach()\n",
            "backward passes",
        ),
    ],
}
