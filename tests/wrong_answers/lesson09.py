"""Plausible wrong answers for lesson 09 (see tests/lessons/test_exercises.py): each must fail
its check with a message naming the mistake."""

NORMALIZE = "def normalize_vjp(x, g):\n    r = x.norm(dim=-1, keepdim=True)\n    y = x / r\n    return {}\n"
BILINEAR = "def bilinear_grads(x, W, y, g):\n    gy, gx = g[:, None] * y, g[:, None] * x\n    return {}\n"
GATHER = "def gather_grad(x, dim, index, g):\n    {}\n"

WRONG = {
    "l09-predict-max-ties": [
        # The whole gradient to the first of the tied entries (max(dim=...)'s convention).
        ("max_ties_guess = [0.0, 1.0, 0.0, 0.0]\n", "not quite"),
        # A full gradient to each tied entry.
        ("max_ties_guess = [0.0, 1.0, 1.0, 0.0]\n", "not quite"),
    ],
    "l09-softmax-vjp": [
        # Right, but through the Jacobian of every row, diag(p) - p pᵀ.
        ("def softmax_vjp(p, g):\n"
         "    J = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)\n"
         "    return (g.unsqueeze(-2) @ J).squeeze(-2)\n", "do without"),
        # The diagonal of the Jacobian only.
        ("def softmax_vjp(p, g):\n    return p * g\n", "only the diagonal"),
        # A sign slip in the second term.
        ("def softmax_vjp(p, g):\n    return p * (g + (g * p).sum(dim=-1, keepdim=True))\n",
         "sign of the second term"),
        # The row sum taken over the first dimension.
        ("def softmax_vjp(p, g):\n    return p * (g - (g * p).sum(dim=0, keepdim=True))\n",
         "summed over the wrong dimension"),
        # The row sum over dim=1: right for 2-D p only (the check alternates 2-D and 3-D).
        ("def softmax_vjp(p, g):\n    return p * (g - (g * p).sum(dim=1, keepdim=True))\n",
         "dim=1 is the last dimension only"),
        # log_softmax's VJP.
        ("def softmax_vjp(p, g):\n    return g - p * g.sum(dim=-1, keepdim=True)\n",
         "log_softmax"),
        # keepdim forgotten: the row sums broadcast along the wrong axis (and the sizes clash).
        ("def softmax_vjp(p, g):\n    return p * (g - (g * p).sum(dim=-1))\n",
         "raised RuntimeError"),
    ],
    "l09-normalize": [
        # the length taken for a constant
        (NORMALIZE.format("g / r"), "treats the length"),
        # a sign slip in the second term
        (NORMALIZE.format("(g + y * (g * y).sum(dim=-1, keepdim=True)) / r"),
         "sign of the second term"),
        # x where y belongs in the second term
        (NORMALIZE.format("(g - x * (g * x).sum(dim=-1, keepdim=True)) / r"),
         "two factors of 1 / r"),
        # the overall 1 / r left out
        (NORMALIZE.format("g - y * (g * y).sum(dim=-1, keepdim=True)"), "its factor 1 / r"),
        # the sum along the first dimension
        (NORMALIZE.format("(g - y * (g * y).sum(dim=0, keepdim=True)) / r"),
         "summed over the wrong dimension"),
        # keepdim forgotten: the sums broadcast along the wrong axis (and the sizes clash)
        (NORMALIZE.format("(g - y * (g * y).sum(dim=-1)) / r"), "raised RuntimeError"),
        # the derivative of the norm alone, x / r, taken for the whole gradient
        (NORMALIZE.format("g * y"), "mismatch"),
        # the length and the sum along dim=1: right for 2-D x only
        ("def normalize_vjp(x, g):\n    r = x.norm(dim=1, keepdim=True)\n    y = x / r\n"
         "    return (g - y * (g * y).sum(dim=1, keepdim=True)) / r\n",
         "dim=1 is the last dimension only"),
    ],
    "l09-bilinear": [
        # g left out everywhere
        (BILINEAR.format("y @ W.T, x.T @ y, x @ W"), "g is missing"),
        # one matrix per example
        (BILINEAR.format("gy @ W.T, x[:, :, None] * gy[:, None, :], gx @ W"),
         "one matrix per example"),
        # dW transposed
        (BILINEAR.format("gy @ W.T, gy.T @ x, gx @ W"), "dw is transposed"),
        # g left out of dW only
        (BILINEAR.format("gy @ W.T, x.T @ y, gx @ W"), "dw lacks g"),
        # g multiplied without its new dimension: (N,) against (N, D) does not broadcast
        (BILINEAR.format("(g * y) @ W.T, x.T @ (g * y), (g * x) @ W"), "raised RuntimeError"),
        # dx sent back through W instead of W.T: the sizes clash
        (BILINEAR.format("gy @ W, x.T @ gy, gx @ W"), "raised RuntimeError"),
    ],
    "l09-gather": [
        # = instead of +=, with scatter_.
        (GATHER.format("return torch.zeros_like(x).scatter_(dim, index, g)"),
         "= instead of +="),
        # = instead of +=, with an indexed assignment.
        (GATHER.format(
            "dx = torch.zeros_like(x)\n"
            "    other = torch.arange(index.shape[1 - dim]).unsqueeze(dim).expand_as(index)\n"
            "    dx[(index, other) if dim == 0 else (other, index)] = g\n"
            "    return dx"),
         "= instead of +="),
        # Scattered along the other dimension.
        (GATHER.format("return torch.zeros_like(x).scatter_add_(1 - dim, index, g)"),
         "other dimension"),
        # The gradient of the output handed back as it is.
        (GATHER.format("return g"), "g itself"),
        # Always along dimension 0: right where dim is 0 only (how many of the three trials
        # that is changes with the seed; the name does not).
        (GATHER.format("return torch.zeros_like(x).scatter_add_(0, index, g)"),
         "does not follow the argument dim"),
        # The same slip: the message names the argument dim that sets the trials apart.
        (GATHER.format("return torch.zeros_like(x).scatter_add_(0, index, g)"),
         "it is right on every input where dim is 0 and wrong on every one where dim is 1: "
         "the answer does not follow the argument dim"),
    ],
}
