"""Plausible wrong answers for lesson 08's two notebooks, 08-non-scalar-backward.ipynb and
08-tensor-op-vjps.ipynb (see tests/lessons/test_exercises.py): each must fail its check with a
message naming the mistake."""

BAND = '''def band_jacobian(g, x):
    n = x.numel()
    rows = torch.arange(n)
    in_band = (rows[:, None] - rows[None, :]).abs() <= 1
    J = torch.zeros(n, n, dtype=x.dtype)
{prepare}    for c in range({colours}):
{leaf}        g(xc).backward(gradient=(rows % {colours} == c).to(x.dtype))
        {place}
    return J{end}
'''
FRESH = "        xc = x.detach().clone().requires_grad_()\n"
ON_BAND = "J += (in_band & (rows[:, None] % {} == c)) * {}"


def band(prepare="", colours=3, leaf=FRESH, place=None, end=""):
    return BAND.format(prepare=prepare, colours=colours, leaf=leaf, end=end,
                       place=place or ON_BAND.format(colours, "xc.grad"))


SHARED = "    xc = x.detach().clone().requires_grad_()\n"

LAST_ROW = "def last_row_mean_vector(y):\n    v = torch.zeros_like(y)\n    {}\n    return v\n"
SHARES = "def shares_vjp(x, v):\n    return {}\n"

AFFINE = "def affine_grads(x, w, b, g):\n    return {}\n"
BMM = "def batched_matmul_grads(X, W, G):\n    return {}\n"
GATHER = "def gather_grad(x, dim, index, g):\n    {}\n"

WRONG = {
    # ------------------------------------------------------------ 08-non-scalar-backward
    "l08-predict-weights": [
        # The weights ignored: backward with ones.
        ("weights_guess = (4.0, 2.0)\n", "not quite"),
        # The weights differentiated too: the gradient of (out * out).sum().
        ("weights_guess = (32.0, 4.0)\n", "not quite"),
    ],
    "l08-band-jacobian": [
        # One backward call per row: section 2's loop, correct but not what is asked.
        ("def band_jacobian(g, x):\n"
         "    rows = []\n"
         "    n = x.numel()\n"
         "    for i in range(n):\n"
         "        xi = x.detach().clone().requires_grad_()\n"
         "        g(xi).backward(gradient=torch.eye(n)[i])\n"
         "        rows.append(xi.grad)\n"
         "    return torch.stack(rows)\n", "one per output"),
        # One leaf for the three passes, .grad never reset: each pass holds the earlier ones.
        (band(prepare=SHARED, leaf="", place=ON_BAND.format(3, "xc.grad.clone()")),
         "accumulated across your backward calls"),
        # The zero_() trap: the three passes are one tensor, emptied and refilled.
        ("def band_jacobian(g, x):\n"
         "    n = x.numel()\n"
         "    rows = torch.arange(n)\n"
         "    in_band = (rows[:, None] - rows[None, :]).abs() <= 1\n"
         "    xc = x.detach().clone().requires_grad_()\n"
         "    passes = []\n"
         "    for c in range(3):\n"
         "        if xc.grad is not None:\n"
         "            xc.grad.zero_()\n"
         "        g(xc).backward(gradient=(rows % 3 == c).to(x.dtype))\n"
         "        passes.append(xc.grad)\n"
         "    J = torch.zeros(n, n, dtype=x.dtype)\n"
         "    for c, found in enumerate(passes):\n"
         "        J += (in_band & (rows[:, None] % 3 == c)) * found\n"
         "    return J\n", "zero_() empties"),
        # Each row gets its whole pass, the other rows' numbers included.
        (band(place="J[rows % 3 == c] = xc.grad"), "the other rows of the pass"),
        # Two passes, rows two apart: they share a column.
        (band(colours=2), "column i + 1, which both of them read"),
        # Rows stacked as columns.
        (band(end=".T"), "transposed"),
        # The shortcut the exercise rules out.
        ("def band_jacobian(g, x):\n    return torch.func.jacrev(g)(x)\n",
         "backward calls only"),
    ],
    "l08-mean-gradient": [
        # Ones in the last row: the gradient of the row's sum, not its mean.
        (LAST_ROW.format("v[-1] = 1"), "gradient of the row's sum"),
        # The mean of the whole matrix.
        ("def last_row_mean_vector(y):\n    return torch.full_like(y, 1 / y.numel())\n",
         "mean of the whole matrix"),
        # The first row instead of the last.
        (LAST_ROW.format("v[0] = 1 / y.shape[1]"), "first row"),
        # Divided by the number of rows.
        (LAST_ROW.format("v[-1] = 1 / y.shape[0]"), "number of rows"),
    ],
    "l08-shares-vjp": [
        # Right, but through the full Jacobian the exercise asks to do without.
        ("def shares_vjp(x, v):\n    S = x.sum()\n"
         "    J = torch.eye(len(x), dtype=x.dtype) / S - x[:, None] / S**2\n    return v @ J\n",
         "do without"),
        # Only the diagonal: y_i = x_i / S treated as if S did not depend on x.
        (SHARES.format("v / x.sum()"), "only the diagonal of J"),
        # J v, rows where backward needs columns.
        (SHARES.format("(v - x / x.sum() * v.sum()) / x.sum()"), "that is J v"),
        # The coupling term added.
        (SHARES.format("v / x.sum() + (v * x).sum() / x.sum() ** 2"), "sign of the coupling"),
        # 1/S forgotten on the diagonal term and the coupling term alike.
        (SHARES.format("v - (v * x).sum() / x.sum()"), "the 1/S is missing"),
        # The quotient rule's 1/S**2 written as 1/S.
        (SHARES.format("v / x.sum() - (v * x).sum() / x.sum()"), "needs 1/S**2"),
        # The lesson's J @ v cell, with the Jacobian built: autograd is what it replaces.
        ("def shares_vjp(x, v):\n"
         "    J = torch.autograd.functional.jacobian(lambda t: t / t.sum(), x)\n"
         "    return v @ J\n", "by hand"),
        # A number worked out once.
        (SHARES.format("torch.full_like(x, 0.1)"), "hard-coded"),
    ],
    # ------------------------------------------------------------ 08-tensor-op-vjps
    "l08-predict-max-ties": [
        # The whole gradient to the first of the tied entries (max(dim=...)'s convention).
        ("max_ties_guess = [0.0, 1.0, 0.0, 0.0]\n", "not quite"),
        # A full gradient to each tied entry.
        ("max_ties_guess = [0.0, 1.0, 1.0, 0.0]\n", "not quite"),
    ],
    "l08-softmax-vjp": [
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
    "l08-broadcast-affine": [
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
    "l08-batched-matmul": [
        # dW kept per batch entry.
        (BMM.format("G @ W.mT, X.mT @ G"), "not summed over the batch"),
        # dW transposed.
        (BMM.format("G @ W.mT, (G.mT @ X).sum(0)"), "transposed"),
        # Summed over the wrong dimension.
        (BMM.format("G @ W.mT, (X.mT @ G).sum(1)"), "summed over the wrong dimension"),
        # .T on a 3-D tensor reverses all its dimensions.
        (BMM.format("G @ W.T, (X.T @ G).sum(0)"), "raised RuntimeError"),
    ],
    "l08-gather": [
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
