"""Plausible wrong answers for the exercises of 14-forward-mode-and-torch-func.ipynb."""

NORMS = (
    "def per_example_norms(model, X, Y):\n"
    "    params = {{k: v.detach() for k, v in model.named_parameters()}}\n"
    "{}"
)

WRONG = {
    "l14-jvp": [
        # The direction ignored: a tangent of ones.
        ("def jacobian_column(f, x, direction):\n    return jvp(f, (x,), (torch.ones_like(x),))[1]\n",
         "mismatch"),
        # Reverse mode's row instead of the column.
        (
            "def jacobian_column(f, x, direction):\n"
            "    _, pullback = vjp(f, x)\n"
            "    return pullback(torch.ones_like(f(x)))[0]\n",
            "reverse mode gives rows",
        ),
        # The full Jacobian by reverse mode, then a product: right numbers, wrong mode.
        (
            "def jacobian_column(f, x, direction):\n"
            "    return jacrev(f)(x) @ direction\n",
            "forward mode's job",
        ),
    ],
    "l14-predict-modes": [
        ('modes = ("jacrev", "jacrev", "jacrev")\n', "one pass per input"),
        ('modes = ("jacrev", "jacfwd", "jacfwd")\n', "one pass per input"),
    ],
    "l14-per-sample": [
        # A loop of backward calls.
        (
            "def per_example_norms(model, X, Y):\n"
            "    out = []\n"
            "    for xi, yi in zip(X, Y):\n"
            "        model.zero_grad()\n"
            "        ((model(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()\n"
            "        out.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm())\n"
            "    return torch.stack(out)\n",
            "loop of backward",
        ),
        # The norm of the batch gradient, repeated.
        (
            "def per_example_norms(model, X, Y):\n"
            "    model.zero_grad()\n"
            "    ((model(X) - Y) ** 2).mean().backward()\n"
            "    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm()\n"
            "    return g.expand(len(X))\n",
            "mismatch",
        ),
        # Only the first parameter's gradient counted.
        (
            NORMS.format(
                "    def loss(p, xi, yi):\n"
                "        return ((functional_call(model, p, (xi.unsqueeze(0),)) - yi.unsqueeze(0)) ** 2).mean()\n"
                "    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, X, Y)\n"
                "    first = next(iter(grads.values()))\n"
                "    return first.reshape(len(X), -1).norm(dim=1)\n"
            ),
            "mismatch",
        ),
    ],
}
