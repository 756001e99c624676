"""Shortcuts for the exercises of 11-a-tensor-engine-of-your-own.ipynb
(see tests/lessons/test_exercises.py).

Exercises 1 and 3 ask for a rule worked out by the learner, so the shortcuts are the
ways of getting the gradient without working it out: torch's autograd inside the
rule, finite differences, the package's estimate, a backward kernel of torch's, a
table of the visible check's inputs. Exercise 2's are the ways of not writing the
counting pass: the lesson's own pass, or its sort, called or copied.
"""

MATMUL = '''def broadcast_matmul(a, b):
    def rule(g):
{}

    return Tensor(a.data @ b.data, (a, b), "@", rule)
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
        # a table of the visible check's gradients (its 6 trials): right there, a KeyError
        # on the hidden check's new inputs
        (
            "from backproplab.course.exercises.lesson11.matmul import _matmul_inputs, "
            "_matmul_reference\n\n"
            "TABLE = {}\n"
            "for k in range(6):\n"
            "    A, B, G = _matmul_inputs(torch.Generator().manual_seed(k))\n"
            "    TABLE[round(A.sum().item(), 9)] = _matmul_reference(A, B, G)\n\n\n"
            + MATMUL.format("        return TABLE[round(a.data.sum().item(), 9)]"),
            "raised KeyError",
        ),
    ],
    "l11-backward": [
        # the lesson's pass, under the new name
        ("backward_by_counting = backward\n", "lesson's own backward"),
        # the lesson's sort, then the rules in its order
        (
            "def backward_by_counting(root):\n"
            "    arrived = {id(root): torch.ones_like(root.data)}\n"
            "    for node in reversed(topo_order(root)):\n"
            "        g = arrived.pop(id(node))\n"
            "        if node.rule is None:\n"
            "            node.grad = g if node.grad is None else node.grad + g\n"
            "            continue\n"
            "        for parent, share in zip(node.parents, node.rule(g)):\n"
            "            key = id(parent)\n"
            "            arrived[key] = arrived[key] + share if key in arrived else share\n",
            "lesson's own topo_order",
        ),
        # the lesson's pass copied under other names
        (
            "def order_of(out):\n"
            "    found, done = [], set()\n"
            "    todo = [(out, False)]\n"
            "    while todo:\n"
            "        v, ok = todo.pop()\n"
            "        if ok:\n"
            "            found.append(v)\n"
            "        elif id(v) not in done:\n"
            "            done.add(id(v))\n"
            "            todo.append((v, True))\n"
            "            todo.extend((p, False) for p in v.parents if id(p) not in done)\n"
            "    return found\n\n\n"
            "def backward_by_counting(root):\n"
            "    if root.data.numel() != 1:\n"
            "        raise ValueError(f\"backward: expected a Tensor holding one number (a loss), "
            "got \"\n"
            "                         f\"shape {root.shape}\")\n"
            "    buffers = {id(root): torch.ones_like(root.data)}\n"
            "    for v in reversed(order_of(root)):\n"
            "        g = buffers.pop(id(v))\n"
            "        if v.rule is None:\n"
            "            v.grad = g if v.grad is None else v.grad + g\n"
            "            continue\n"
            "        for p, s in zip(v.parents, v.rule(g), strict=True):\n"
            "            if id(p) in buffers:\n"
            "                buffers[id(p)] = buffers[id(p)] + s\n"
            "            else:\n"
            "                buffers[id(p)] = s\n",
            "lesson's own",
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
