"""Plausible wrong answers for the exercises of 18-forward-mode-and-torch-func.ipynb."""

TANGENT = "def tangent(W, b, x, v):\n    u, du = W @ x + b, W @ v\n    h = torch.tanh(u)\n{}"
CLIP = (
    "def clipped_mean_gradient(model, X, Y, max_norm):\n"
    "    weights = {{key: value.detach() for key, value in model.named_parameters()}}\n"
    "\n"
    "    def one_loss(weights, x_one, y_one):\n"
    "        out = functional_call(model, weights, ({},))\n"
    "        return ((out - y_one.unsqueeze(0)) ** 2).mean()\n"
    "\n"
    "    grads = vmap(grad(one_loss), in_dims=(None, 0, 0))(weights, X, Y)\n"
    "{}"
)
NORMS = "    norms = sum(g.flatten(1).pow(2).sum(1) for g in grads.values()).sqrt()\n"
SCALED = ("    return {{key: (g * scale.reshape(-1, *[1] * (g.dim() - 1))).{}\n"
          "            for key, g in grads.items()}}\n")

WRONG = {
    "l18-jvp-by-hand": [
        # The product rule with one term.
        (TANGENT.format("    return (1 - h**2) * du * (x @ x)\n"), "product rule lost a term"),
        (TANGENT.format("    return h * 2 * (x @ v)\n"), "product rule lost a term"),
        # d(x . x) without its 2.
        (TANGENT.format("    return (1 - h**2) * du * (x @ x) + h * (x @ v)\n"),
         "factor 2 is missing"),
        # tanh' of the input, not of the output.
        (TANGENT.format("    return (1 - u**2) * du * (x @ x) + h * 2 * (x @ v)\n"),
         "with its input"),
        # tanh' without the square.
        (TANGENT.format("    return (1 - h) * du * (x @ x) + h * 2 * (x @ v)\n"),
         "square is missing"),
        # The bias given a tangent.
        (TANGENT.format("    return (1 - h**2) * (du + b) * (x @ x) + h * 2 * (x @ v)\n"),
         "b is a constant"),
        # The value, not the tangent.
        (TANGENT.format("    return h * (x @ x)\n"), "not its tangent"),
        # torch.func's jvp: the exercise asks for the rules by hand.
        ("def tangent(W, b, x, v):\n"
         "    return jvp(lambda t: torch.tanh(W @ t + b) * (t @ t), (x,), (v,))[1]\n",
         "torch.func.jvp"),
        # The worked cell's scalar example: a hard-coded number.
        ("def tangent(W, b, x, v):\n    return torch.tensor(20.0)\n", "hard-coded"),
    ],
    "l18-predict-loss-row": [
        # The modes swapped: one pass per output taken for forward mode.
        ("loss_row_guess = (1, 64)\n", "not quite"),
        # One pass each, as jacfwd and jacrev report.
        ("loss_row_guess = (1, 1)\n", "not quite"),
    ],
    "l18-predict-lesson08": [
        # One pass for everything: lesson 08's loop taken for a batched pass.
        ("passes_05_guess = (1, 1, 1)\n", "not quite"),
        # jacrev and jacfwd taken for loops too.
        ("passes_05_guess = (20, 20, 20)\n", "not quite"),
    ],
    "l18-predict-modes": [
        # The modes swapped: one pass per output taken for forward mode.
        ('modes = ("jacfwd", "jacrev", "jacfwd")\n', "not quite"),
        # Always reverse mode, because training uses it.
        ('modes = ("jacrev", "jacrev", "jacrev")\n', "not quite"),
        # A single word, not one answer per function.
        ('modes = "jacrev"\n', "not quite"),
    ],
    "l18-clip-per-example": [
        # A loop of backward calls, the thing one vmapped call replaces.
        (
            "def clipped_mean_gradient(model, X, Y, max_norm):\n"
            "    total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}\n"
            "    for xi, yi in zip(X, Y):\n"
            "        model.zero_grad()\n"
            "        ((model(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()\n"
            "        g = {k: p.grad.clone() for k, p in model.named_parameters()}\n"
            "        n = sum(t.pow(2).sum() for t in g.values()).sqrt()\n"
            "        for k in g:\n"
            "            total[k] += g[k] * min(1.0, max_norm / n.item()) / len(X)\n"
            "    return total\n",
            "loop over the examples",
        ),
        # The batch gradient, clipped once.
        (
            "def clipped_mean_gradient(model, X, Y, max_norm):\n"
            "    model.zero_grad()\n"
            "    ((model(X) - Y) ** 2).mean().backward()\n"
            "    g = {k: p.grad.clone() for k, p in model.named_parameters()}\n"
            "    n = sum(t.pow(2).sum() for t in g.values()).sqrt()\n"
            "    return {k: t * min(1.0, max_norm / n.item()) for k, t in g.items()}\n",
            "no vmapped call",
        ),
        # The same slip inside one vmapped call: average first, clip after.
        (CLIP.format("x_one.unsqueeze(0)",
                     "    mean = {k: g.mean(0) for k, g in grads.items()}\n"
                     "    n = sum(t.pow(2).sum() for t in mean.values()).sqrt()\n"
                     "    return {k: t * (max_norm / n).clamp(max=1.0) for k, t in mean.items()}\n"),
         "clip every example's gradient first"),
        # No clamp: the small gradients are scaled up.
        (CLIP.format("x_one.unsqueeze(0)", NORMS + "    scale = max_norm / norms\n"
                     + SCALED.format("mean(0)")), "without the clamp"),
        # Each parameter clipped on its own.
        (CLIP.format("x_one.unsqueeze(0)",
                     "    out = {}\n"
                     "    for key, g in grads.items():\n"
                     "        scale = (max_norm / g.flatten(1).norm(dim=1)).clamp(max=1.0)\n"
                     "        out[key] = (g * scale.reshape(-1, *[1] * (g.dim() - 1))).mean(0)\n"
                     "    return out\n"),
         "clipped on its own"),
        # Summed, not averaged.
        (CLIP.format("x_one.unsqueeze(0)", NORMS + "    scale = (max_norm / norms).clamp(max=1.0)\n"
                     + SCALED.format("sum(0)")), "not averaged"),
        # The mean taken over a batch of 7 written in, whatever the batch's size.
        (CLIP.format("x_one.unsqueeze(0)", NORMS + "    scale = (max_norm / norms).clamp(max=1.0)\n"
                     + SCALED.format("sum(0) / 7")), "off by a constant factor"),
        # Nothing clipped: the plain mean.
        (CLIP.format("x_one.unsqueeze(0)", "    return {k: g.mean(0) for k, g in grads.items()}\n"),
         "nothing clipped"),
        # The batch dimension not given back: the model sees a 2 x 3 grid as a batch of 2.
        (CLIP.format("x_one", NORMS + "    scale = (max_norm / norms).clamp(max=1.0)\n"
                     + SCALED.format("mean(0)")), "unsqueeze(0)"),
    ],
}
