"""Shortcuts for the exercises of 11-a-tensor-engine-of-your-own.ipynb
(see tests/lessons/test_exercises.py).

Every exercise asks for a rule worked out by the learner, so the shortcuts are the
ways of getting the gradient without working it out: torch's autograd inside the
rule, finite differences, the package's estimate, a backward kernel of torch's, a
table of the visible check's inputs, torch.func's vjp.
"""

MATMUL = '''def broadcast_matmul(a, b):
    def rule(g):
{}

    return Tensor(a.data @ b.data, (a, b), "@", rule)
'''

CUMSUM = '''def cumsum(a, dim):
    def rule(g):
{}

    return Tensor(a.data.cumsum(dim), (a,), "cumsum", rule)
'''

AMAX = '''def amax(a, dim, keepdim=False):
    def rule(g):
{}

    return Tensor(a.data.amax(dim, keepdim=keepdim), (a,), "amax", rule)
'''

# Finite differences of a scalar function f at every entry of x.
ESTIMATE = '''def estimate(f, x, h=1e-6):
    grad = torch.zeros_like(x)
    for i in range(x.numel()):
        e = torch.zeros_like(x)
        e.view(-1)[i] = h
        grad.view(-1)[i] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


'''

CHEATS = {
    "l11-matmul": [
        # torch's autograd inside the rule, grad mode switched back on
        (
            MATMUL.format(
                "        with torch.enable_grad():\n"
                "            A = a.data.clone().requires_grad_()\n"
                "            B = b.data.clone().requires_grad_()\n"
                "            return torch.autograd.grad(torch.matmul(A, B), (A, B), g)"
            ),
            "enable_grad",
        ),
        # finite differences, entry by entry
        (
            ESTIMATE + MATMUL.format(
                "        A, B = a.data, b.data\n"
                "        return (estimate(lambda t: (torch.matmul(t, B) * g).sum(), A),\n"
                "                estimate(lambda t: (torch.matmul(A, t) * g).sum(), B))"
            ),
            "numerical estimate",
        ),
        # the package's finite differences
        (
            MATMUL.format(
                "        return bl.numerical_grad(lambda A, B: (torch.matmul(A, B) * g).sum(),\n"
                "                                 a.data, b.data)"
            ),
            "numerical_grad",
        ),
        # a table of the visible check's gradients (its 11 trials): right there, a KeyError
        # on the hidden check's new inputs
        (
            "from backproplab.course.exercises.lesson11 import _matmul_inputs, "
            "_matmul_reference\n\n"
            "TABLE = {}\n"
            "for k in range(11):\n"
            "    A, B, G = _matmul_inputs(torch.Generator().manual_seed(k))\n"
            "    TABLE[round(A.sum().item(), 9)] = _matmul_reference(A, B, G)\n\n\n"
            + MATMUL.format("        return TABLE[round(a.data.sum().item(), 9)]"),
            "raised KeyError",
        ),
    ],
    "l11-cumsum": [
        # torch's autograd inside the rule
        (
            CUMSUM.format(
                "        with torch.enable_grad():\n"
                "            x = a.data.clone().requires_grad_()\n"
                "            return torch.autograd.grad(x.cumsum(dim), x, g)"
            ),
            "enable_grad",
        ),
        # finite differences
        (
            ESTIMATE + CUMSUM.format(
                "        return (estimate(lambda t: (t.cumsum(dim) * g).sum(), a.data),)"
            ),
            "numerical estimate",
        ),
        # the package's finite differences
        (
            CUMSUM.format(
                "        return bl.numerical_grad(lambda t: (t.cumsum(dim) * g).sum(), "
                "a.data)"
            ),
            "numerical_grad",
        ),
        # a table of the visible check's gradients (its 4 cases): right there, a KeyError
        # on the hidden check's new inputs
        (
            "from backproplab.course.exercises.lesson11 import _cumsum_inputs, "
            "_cumsum_reference\n\n"
            "TABLE = {}\n"
            "for k in range(4):\n"
            "    X, d, G = _cumsum_inputs(torch.Generator().manual_seed(k))\n"
            "    TABLE[round(X.sum().item(), 9)] = _cumsum_reference(X, d, G)\n\n\n"
            + CUMSUM.format("        return (TABLE[round(a.data.sum().item(), 9)],)"),
            "raised KeyError",
        ),
        # torch.func's vjp of torch's own cumsum
        (
            CUMSUM.format(
                "        _, pullback = torch.func.vjp(lambda t: t.cumsum(dim), a.data)\n"
                "        return pullback(g)"
            ),
            "torch.func",
        ),
    ],
    "l11-amax": [
        # torch's autograd inside the rule
        (
            AMAX.format(
                "        with torch.enable_grad():\n"
                "            x = a.data.clone().requires_grad_()\n"
                "            return torch.autograd.grad(torch.amax(x, dim, keepdim), x, g)"
            ),
            "enable_grad",
        ),
        # finite differences
        (
            ESTIMATE + AMAX.format(
                "        return (estimate(lambda t: (torch.amax(t, dim, keepdim) * g).sum(),\n"
                "                         a.data),)"
            ),
            "numerical estimate",
        ),
        # the package's finite differences
        (
            AMAX.format(
                "        def f(t):\n"
                "            return (torch.amax(t, dim, keepdim) * g).sum()\n"
                "        return bl.numerical_grad(f, a.data)"
            ),
            "numerical_grad",
        ),
        # torch's own backward kernel for a value-selecting reduction
        (
            AMAX.format(
                "        index = a.data.argmax(dim, keepdim=True)\n"
                "        return (torch.ops.aten.value_selecting_reduction_backward(\n"
                "            g, dim, index if keepdim else index.squeeze(dim), a.data.shape,\n"
                "            keepdim),)"
            ),
            "backward kernels",
        ),
    ],
}
