"""Shortcuts for the exercises of 22-where-calculus-runs-out.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs
with its hidden tests, as nbgrader grades it. The complex exercises allow complex
arithmetic, so a complex estimate must still be seen for what it is: central differences
along the real axis of a complex input, a tiny imaginary step on the real input r, and
torch.func's own VJP. The kinks: finite differences straddle them, and a table of the
visible inputs knows nothing of the hidden ones. The where rewrite: the check's own
reference imported from the package, and the visible values made differentiable by x * 0.
"""

from cheats.builders import lookup
from cheats.estimates import lesson_plans, with_disguised

VJPS = "complex_vjps(z, w, g, r)"
LINEAR = "complex_linear_backward(x, W, b, G)"
HINGE = "hinge_grad(X, y, w, lam)"


CHEATS = {
    "l22-complex-vjps": [
        # f'(z) of the holomorphic ones by central differences along the real axis.
        ("def complex_vjps(z, w, g, r):\n"
         "    h = 1e-6\n"
         "    d_exp = (torch.exp(z + h) - torch.exp(z - h)) / (2 * h)\n"
         "    return g * w.conj(), g * z.conj(), 2 * r * z, g * d_exp.conj()\n",
         "numerical estimate"),
        # The complex-step trick on the real input r, for the |z|**2 part.
        ("def complex_vjps(z, w, g, r):\n"
         "    h = 1e-20\n"
         "    through_abs2 = ((r + h * 1j) * z.abs() ** 2).imag / h * 2 * z / z.abs() ** 2\n"
         "    return g * w.conj(), g * z.conj(), r * through_abs2, g * torch.exp(z).conj()\n",
         "numerical estimate"),
        ("def complex_vjps(z, w, g, r):\n"
         "    _, pull = torch.func.vjp(lambda z, w: z * w, z, w)\n"
         "    return (*pull(g), 2 * r * z, g * torch.exp(z).conj())\n", "torch.func"),
        (lookup("l22-complex-vjps", VJPS), "raised KeyError"),
    ],
    "l22-complex-linear": [
        # Each entry of W moved by a real step: a Jacobian column by central differences.
        ("def complex_linear_backward(x, W, b, G):\n"
         "    dW = torch.zeros_like(W)\n"
         "    for i in range(W.numel()):\n"
         "        e = torch.zeros_like(W)\n"
         "        e.view(-1)[i] = 1e-6\n"
         "        slope = ((x @ (W + e) - x @ (W - e)) / 2e-6)\n"
         "        dW.view(-1)[i] = (G * slope.conj()).sum()\n"
         "    return G @ W.mH, dW, G.sum(0)\n", "numerical estimate"),
        ("def complex_linear_backward(x, W, b, G):\n"
         "    with torch.enable_grad():\n"
         "        W = W.detach().requires_grad_()\n"
         "        return G @ W.mH, torch.autograd.grad(x @ W, W, G)[0], G.sum(0)\n",
         "enable_grad"),
        (lookup("l22-complex-linear", LINEAR), "raised KeyError"),
    ],
    "l22-hinge-kinks": [
        # Central differences, entry by entry: a step straddles every kink it meets.
        ("def hinge_grad(X, y, w, lam):\n"
         "    def loss(v):\n"
         "        s = (X @ v).clamp(-2.0, 2.0)\n"
         "        return (1 - y * s).clamp(min=0).sum() + lam * v.view(-1, 2).norm(dim=1).sum()\n"
         "    grad = torch.zeros_like(w)\n"
         "    for i in range(w.numel()):\n"
         "        e = torch.zeros_like(w)\n"
         "        e[i] = 1e-7\n"
         "        grad[i] = (loss(w + e) - loss(w - e)) / 2e-7\n"
         "    return grad\n", "numerical estimate"),
        ("def hinge_grad(X, y, w, lam):\n"
         "    loss = lambda v: (1 - y * (X @ v).clamp(-2, 2)).clamp(min=0).sum()\n"
         "    return bl.numerical_grad(loss, w)[0]\n", "numerical_grad"),
        (lookup("l22-hinge-kinks", HINGE), "raised KeyError"),
    ],
    "l22-safe-softplus": [
        # The check's own reference, imported from the package.
        ("from backproplab.course.exercises.lesson22.softplus import soft_relu_reference\n\n\n"
         "def safe_soft_relu(x, beta):\n"
         "    return soft_relu_reference(x, beta)\n", "soft_relu_reference, which is"),
        # The visible check's values, made differentiable: no gradient comes through.
        ("from backproplab.course.exercises.lesson22 import softplus as _l23\n\n"
         "_table = {}\n"
         "for _k in range(3):\n"
         "    _x, _beta = _l23.soft_inputs(torch.Generator().manual_seed(_k))\n"
         "    _table[str(_x.tolist())] = _l23.soft_relu(_x, _beta)\n\n\n"
         "def safe_soft_relu(x, beta):\n"
         "    return _table[str(x.tolist())] + 0 * x + 0 * beta\n",
         "differs from the function's"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("22"))
