"""Plausible wrong answers for lesson 08 (see tests/lessons/test_exercises.py): each must fail
its check with a message naming the mistake."""

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

WRONG = {
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
}
