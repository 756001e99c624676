"""Plausible wrong answers for the exercises of 14-forward-mode-and-torch-func.ipynb."""

COLUMN = "def jacobian_column(f, x, direction):\n{}"
NORMS = (
    "def per_example_norms(model, X, Y):\n"
    "    weights = {{key: value.detach() for key, value in model.named_parameters()}}\n"
    "\n"
    "    def one_loss(weights, x_one, y_one):\n"
    "        out = functional_call(model, weights, ({},))\n"
    "        return ((out - y_one.unsqueeze(0)) ** 2).mean()\n"
    "\n"
    "    grads = vmap(grad(one_loss), in_dims=(None, 0, 0))(weights, X, Y)\n"
    "{}"
)
ALL_SQUARES = (
    "    squares = sum(g.flatten(1).pow(2).sum(1) for g in grads.values())\n"
)

WRONG = {
    "l14-jvp": [
        # The direction ignored: a tangent of ones.
        (COLUMN.format("    return jvp(f, (x,), (torch.ones_like(x),))[1]\n"),
         "vector of ones"),
        # Reverse mode's row instead of the column.
        (
            COLUMN.format(
                "    _, pullback = vjp(f, x)\n"
                "    return pullback(torch.ones_like(f(x)))[0]\n"
            ),
            "reverse mode gives rows",
        ),
        # A hard-coded column: the worked example's column 2 of `spread`.
        (COLUMN.format("    return column_2\n"), "hard-coded"),
        # The whole Jacobian column by column, then a product: one pass per input.
        (
            COLUMN.format(
                "    eye = torch.eye(len(x), dtype=x.dtype)\n"
                "    J = torch.stack([jvp(f, (x,), (e,))[1] for e in eye], dim=1)\n"
                "    return J @ direction\n"
            ),
            "one JVP along the direction",
        ),
        # The whole Jacobian in one call, then a product: right numbers, n tangents.
        (COLUMN.format("    return jacfwd(f)(x) @ direction\n"), "builds the whole"),
        # The same through reverse mode: rows, not a column.
        (COLUMN.format("    return jacrev(f)(x) @ direction\n"), "reverse mode gives rows"),
        # Finite differences: no forward mode at all.
        (
            COLUMN.format(
                "    eps = 1e-6\n"
                "    return (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)\n"
            ),
            "no forward-mode pass",
        ),
        # A one-hot tangent instead of the direction.
        (COLUMN.format("    return jvp(f, (x,), (torch.eye(len(x), dtype=x.dtype)[0],))[1]\n"),
         "one-hot tangent"),
    ],
    "l14-predict-loss-row": [
        # The modes swapped: one pass per output taken for forward mode.
        ("loss_row_guess = (1, 64)\n", "not quite"),
        # One pass each, as jacfwd and jacrev report.
        ("loss_row_guess = (1, 1)\n", "not quite"),
    ],
    "l14-predict-lesson08": [
        # One pass for everything: lesson 08's loop taken for a batched pass.
        ("passes_05_guess = (1, 1, 1)\n", "not quite"),
        # jacrev and jacfwd taken for loops too.
        ("passes_05_guess = (20, 20, 20)\n", "not quite"),
    ],
    "l14-predict-modes": [
        # The modes swapped: one pass per output taken for forward mode.
        ('modes = ("jacfwd", "jacrev", "jacfwd")\n', "not quite"),
        # Always reverse mode, because training uses it.
        ('modes = ("jacrev", "jacrev", "jacrev")\n', "not quite"),
        # A single word, not one answer per function.
        ('modes = "jacrev"\n', "not quite"),
    ],
    "l14-per-sample": [
        # A loop of backward calls, the thing vmap replaces.
        (
            "def per_example_norms(model, X, Y):\n"
            "    out = []\n"
            "    for xi, yi in zip(X, Y):\n"
            "        model.zero_grad()\n"
            "        ((model(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()\n"
            "        out.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm())\n"
            "    return torch.stack(out)\n",
            "loop of backward calls",
        ),
        # The norm of the batch gradient, repeated for every example.
        (
            "def per_example_norms(model, X, Y):\n"
            "    model.zero_grad()\n"
            "    ((model(X) - Y) ** 2).mean().backward()\n"
            "    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm()\n"
            "    return g.expand(len(X))\n",
            "norm of the batch gradient",
        ),
        # The batch dimension not given back: the model sees a 2 x 3 grid as a batch of 2.
        (NORMS.format("x_one", ALL_SQUARES + "    return squares.sqrt()\n"), "unsqueeze(0)"),
        # The parameters' norms added instead of one norm over all of them.
        (
            NORMS.format(
                "x_one.unsqueeze(0)",
                "    return sum(g.flatten(1).norm(dim=1) for g in grads.values())\n",
            ),
            "added up",
        ),
        # The square root forgotten.
        (NORMS.format("x_one.unsqueeze(0)", ALL_SQUARES + "    return squares\n"),
         "square root is missing"),
        # A Python loop of torch.func.grad calls: no backward, but one pass per example.
        (
            "def per_example_norms(model, X, Y):\n"
            "    weights = {k: v.detach() for k, v in model.named_parameters()}\n"
            "    def one_loss(weights, x_one, y_one):\n"
            "        out = functional_call(model, weights, (x_one.unsqueeze(0),))\n"
            "        return ((out - y_one.unsqueeze(0)) ** 2).mean()\n"
            "    norms = []\n"
            "    for xi, yi in zip(X, Y):\n"
            "        g = grad(one_loss)(weights, xi, yi)\n"
            "        norms.append(torch.cat([t.reshape(-1) for t in g.values()]).norm())\n"
            "    return torch.stack(norms)\n",
            "Python loop over the examples",
        ),
    ],
}
