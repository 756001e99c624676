"""Plausible wrong answers for lesson 09 (see tests/lessons/test_exercises.py): each must fail
its check with a message naming the mistake."""

AFFINE = "def affine_grads(x, w, b, g):\n    return {}\n"
BMM = "def batched_matmul_grads(X, W, G):\n    return {}\n"
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
        # log_softmax's VJP.
        ("def softmax_vjp(p, g):\n    return g - p * g.sum(dim=-1, keepdim=True)\n",
         "log_softmax"),
        # keepdim forgotten: the row sums broadcast along the wrong axis (and the sizes clash).
        ("def softmax_vjp(p, g):\n    return p * (g - (g * p).sum(dim=-1))\n",
         "raised RuntimeError"),
    ],
    "l09-broadcast-affine": [
        # No sums at all.
        (AFFINE.format("g * w, g * x, g"), "keeps the shape (B, T, C)"),
        # Summed over the batch only.
        (AFFINE.format("g * w, (g * x).sum(0), g.sum(0)"), "batch dimension only"),
        # keepdim=True leaves (1, 1, C).
        (AFFINE.format("g * w, (g * x).sum((0, 1), keepdim=True), g.sum((0, 1), keepdim=True)"),
         "keepdim=True leaves shape (1, 1, C)"),
        # The factor w forgotten in dx.
        (AFFINE.format("g, (g * x).sum((0, 1)), g.sum((0, 1))"), "g times w"),
        # Summed over the channel dimension instead.
        (AFFINE.format("g * w, (g * x).sum(-1), g.sum(-1)"), "summed over the wrong dimension"),
        # A mean for the sums: off by exactly 1/(B*T).
        ("def affine_grads(x, w, b, g):\n    dx = g * w\n    dw = (g * x).mean(dim=(0, 1))\n"
         "    db = g.mean(dim=(0, 1))\n    return dx, dw, db\n",
         "(the number of entries along dimensions 0 and 1 of x): a mean where the gradient"),
    ],
    "l09-batched-matmul": [
        # dW kept per batch entry.
        (BMM.format("G @ W.mT, X.mT @ G"), "not summed over the batch"),
        # dW transposed.
        (BMM.format("G @ W.mT, (G.mT @ X).sum(0)"), "transposed"),
        # Summed over the wrong dimension.
        (BMM.format("G @ W.mT, (X.mT @ G).sum(1)"), "summed over the wrong dimension"),
        # .T on a 3-D tensor reverses all its dimensions.
        (BMM.format("G @ W.T, (X.T @ G).sum(0)"), "raised RuntimeError"),
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
        # Always along dimension 0: right on half the inputs only.
        (GATHER.format("return torch.zeros_like(x).scatter_add_(0, index, g)"),
         "matches on 2 of 3"),
        # The same slip: the message names the argument dim that sets the trials apart.
        (GATHER.format("return torch.zeros_like(x).scatter_add_(0, index, g)"),
         "it is right on every input where dim is 0 and wrong on every one where dim is 1: "
         "the answer does not follow the argument dim"),
    ],
}
