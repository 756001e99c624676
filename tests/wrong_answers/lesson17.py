"""Plausible wrong answers for the exercises of 17-higher-order-gradients.ipynb."""

PENALTY = (
    "def penalty_grad(f, x, w):\n"
    "    x = x.detach().requires_grad_()\n"
    "    w = w.detach().requires_grad_()\n"
    "    {}\n"
)

HVP = "def hvp(x, W, a, V):\n    {}\n"

WRONG = {
    "l17-predict-second": [
        ("second_works = True\n", "not quite"),
    ],
    "l17-predict-linear": [
        ("linear_second_works = True\n", "not quite"),
    ],
    "l17-newton-step": [
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
        # f' and f'' from five-point finite-difference stencils, no autograd.
        (
            "def newton_step(f, x):\n"
            "    h = 0.1\n"
            "    a, b, c, d, e = f(x - 2 * h), f(x - h), f(x), f(x + h), f(x + 2 * h)\n"
            "    d1 = (a - 8 * b + 8 * d - e) / (12 * h)\n"
            "    d2 = (-a + 16 * b - 30 * c + 16 * d - e) / (12 * h * h)\n"
            "    return -d1 / d2\n",
            "no autograd pass ran",
        ),
        # The second pass from the mean of f': f'' divided by the number of points.
        (
            "def newton_step(f, x):\n"
            "    x = x.detach().requires_grad_()\n"
            "    (d1,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)\n"
            "    (d2,) = torch.autograd.grad(d1.mean(), x)\n"
            "    return -d1.detach() / d2\n",
            "N times the right one",
        ),
    ],
    "l17-weight-penalty": [
        # create_graph forgotten: the input-gradient has no graph for the second pass.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x)\n"
                        "    return torch.autograd.grad((g**2).sum(), w)[0]"),
         "create_graph=True"),
        # w left as it came: the second pass has nothing to differentiate with respect to.
        ("def penalty_grad(f, x, w):\n"
         "    x = x.detach().requires_grad_()\n"
         "    (g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
         "    return torch.autograd.grad((g**2).sum(), w)[0]\n",
         "does not require grad"),
        # The second pass with respect to x, as section 5's Hv does.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
                        "    return torch.autograd.grad((g**2).sum(), x)[0]"),
         "shaped like x"),
        # The gradient with respect to w penalised instead of the input-gradient.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), w, create_graph=True)\n"
                        "    return torch.autograd.grad((g**2).sum(), w)[0]"),
         "penalises the gradient with respect to w"),
        # d|g|^2 = 2 g dg: the 2 forgotten (g as the weights of the second pass).
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
                        "    return torch.autograd.grad(g, w, grad_outputs=g.detach())[0]"),
         "factor 2"),
        # The entries of g summed, not squared.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
                        "    return torch.autograd.grad(g.sum(), w)[0]"),
         "not of their squares"),
        # The input-gradient detached before it is squared: the second pass finds no graph.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
                        "    g = g.detach()\n"
                        "    return torch.autograd.grad((g**2).sum(), w)[0]"),
         "not detached afterwards"),
        # Each example's penalty averaged over the batch, not the whole batch's |g|^2.
        (PENALTY.format("(g,) = torch.autograd.grad(f(x, w), x, create_graph=True)\n"
                        "    return torch.autograd.grad((g**2).sum(1).mean(), w)[0]"),
         "divided by n, the number of examples"),
        # Hessian blocks built in full.
        ("def penalty_grad(f, x, w):\n"
         "    H = torch.autograd.functional.hessian(f, (x, w))\n"
         "    g = torch.autograd.functional.jacobian(lambda t: f(t, w), x)\n"
         "    return 2 * torch.einsum('ij,ijkl->kl', g, H[0][1])\n",
         "full Hessian"),
    ],
    "l17-hvp-by-hand": [
        # tanh' where tanh'' belongs: the factor (1 - T**2) treated as if it did not move.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ ((1 - T**2) * (x @ V) * a)"),
         "tanh'' is missing"),
        # The sign of tanh'' lost.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ (2 * T * (1 - T**2) * (x @ V) * a)"),
         "sign of tanh'' is flipped"),
        # d tanh**2 = 2 tanh dtanh: the 2 forgotten.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ (-T * (1 - T**2) * (x @ V) * a)"),
         "factor 2 of tanh''"),
        # tanh'' taken as -2 tanh.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ (-2 * T * (x @ V) * a)"),
         "chain rule multiplies by tanh' once more"),
        # The direction never pushed through the layer.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ (-2 * T * (1 - T**2) * a)"),
         "direction V is not propagated"),
        # ... or multiplied in at the end, entry by entry.
        (HVP.format("T = torch.tanh(x @ W)\n    return (x.T @ (-2 * T * (1 - T**2) * a)) * V"),
         "multiplied in entry by entry at the end"),
        # The gradient, not its change along V.
        (HVP.format("T = torch.tanh(x @ W)\n    return x.T @ ((1 - T**2) * a)"),
         "gradient itself"),
        # Section 6's double backward, copied: autograd is what the exercise replaces.
        (HVP.format("W = W.detach().requires_grad_()\n"
                    "    (g,) = torch.autograd.grad((torch.tanh(x @ W) @ a).sum(), W, "
                    "create_graph=True)\n"
                    "    return torch.autograd.grad(g, W, grad_outputs=V)[0]"),
         "autograd"),
    ],
}
