"""Shortcuts for the exercises of 02-chain-rule.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

from cheats.estimates import lesson_plans, with_disguised


def _lookup(key: str, signature: str, inputs: str) -> str:
    """A table of the visible check's answers (seeds 0..2), looked up by the inputs: it
    passes the visible check and fails the hidden one, whose inputs are not in it."""
    return (
        "from backproplab.course.exercises import find_exercise\n\n"
        f"_exercise = find_exercise({key!r})\n"
        "_table = {}\n"
        "for _k in range(3):\n"
        "    _made = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
        "    _inputs = [t.double() for t in _made]\n"
        "    _key = tuple(tuple(t.tolist()) for t in _inputs)\n"
        "    _table[_key] = _exercise.reference(*[t.clone() for t in _inputs])\n\n\n"
        f"def {signature}:\n"
        f"    return _table[tuple(tuple(t.tolist()) for t in {inputs})]\n"
    )


CHEATS = {
    "l02-cubic": [
        # Central finite differences, written out.
        ("def cubic_slope(x):\n"
         "    h = 1e-6\n"
         "    f = lambda t: t**3 - 4 * t**2 + 5\n"
         "    return (f(x + h) - f(x - h)) / (2 * h)\n", "numerical estimate"),
        ("def cubic_slope(x):\n"
         "    return bl.numerical_grad(lambda t: (t**3 - 4 * t**2 + 5).sum(), x)[0]\n",
         "numerical_grad"),
        # Building a graph inside (grad mode back on) and calling its node by hand.
        ("def cubic_slope(x):\n"
         "    with torch.enable_grad():\n"
         "        t = x.detach().requires_grad_()\n"
         "        y = t**3 - 4 * t**2 + 5\n"
         "    return y.grad_fn(torch.ones_like(x))\n", "enable_grad"),
        (_lookup("l02-cubic", "cubic_slope(x)", "(x,)"), "raised KeyError"),
    ],
    "l02-chain": [
        ("def tanh_grads(x, w, b):\n"
         "    h = 1e-6\n"
         "    f = lambda x, w, b: torch.tanh(w * x + b)\n"
         "    return ((f(x + h, w, b) - f(x - h, w, b)) / (2 * h),\n"
         "            (f(x, w + h, b) - f(x, w - h, b)) / (2 * h),\n"
         "            (f(x, w, b + h) - f(x, w, b - h)) / (2 * h))\n", "numerical estimate"),
        ("def tanh_grads(x, w, b):\n"
         "    return bl.numerical_grad(lambda x, w, b: torch.tanh(w * x + b).sum(), x, w, b)\n",
         "numerical_grad"),
        # torch's own backward kernel for tanh.
        ("def tanh_grads(x, w, b):\n"
         "    outer = torch.ops.aten.tanh_backward(torch.ones_like(x), torch.tanh(w * x + b))\n"
         "    return outer * w, outer * x, outer\n", "backward kernels"),
        (_lookup("l02-chain", "tanh_grads(x, w, b)", "(x, w, b)"), "raised KeyError"),
    ],
    "l02-shared": [
        ("def shared_grads(x, y, z):\n"
         "    h = 1e-6\n"
         "    f = lambda x, y, z: (x * y - z) * torch.sin(x * y)\n"
         "    return ((f(x + h, y, z) - f(x - h, y, z)) / (2 * h),\n"
         "            (f(x, y + h, z) - f(x, y - h, z)) / (2 * h),\n"
         "            (f(x, y, z + h) - f(x, y, z - h)) / (2 * h))\n",
         "numerical estimate"),
        ("def shared_grads(x, y, z):\n"
         "    return bl.numerical_grad(\n"
         "        lambda x, y, z: ((x * y - z) * torch.sin(x * y)).sum(), x, y, z)\n",
         "numerical_grad"),
        # Complex step for x and y: exact to round-off, but a numerical trick.
        ("def shared_grads(x, y, z):\n"
         "    h = 1e-20\n"
         "    f = lambda x, y: (x * y - z) * torch.sin(x * y)\n"
         "    return f(x + 1j * h, y).imag / h, f(x, y + 1j * h).imag / h, -torch.sin(x * y)\n",
         "complex"),
        (_lookup("l02-shared", "shared_grads(x, y, z)", "(x, y, z)"), "raised KeyError"),
    ],
    "l02-rule": [
        # The node called like a function: backward's own formula.
        ("def node_rule(node, grad):\n    return list(node(grad))\n", "called a node itself"),
        # A node that saved its output holds a tensor whose grad_fn is the node: backward
        # through it runs the node.
        ("def node_rule(node, grad):\n"
         "    leaves = [fn.variable for fn, _ in node.next_functions]\n"
         "    node._saved_result.backward(grad)\n"
         "    return [leaf.grad for leaf in leaves]\n", "Tensor.backward()"),
        ("def node_rule(node, grad):\n"
         "    leaves = [fn.variable for fn, _ in node.next_functions]\n"
         "    return list(torch.autograd.grad(node._saved_result, leaves, grad))\n",
         "torch.autograd.grad"),
        # bl.trace_backward runs a real backward pass.
        ("def node_rule(node, grad):\n"
         "    leaves = [fn.variable for fn, _ in node.next_functions]\n"
         "    bl.trace_backward(node._saved_result, gradient=grad)\n"
         "    return [leaf.grad for leaf in leaves]\n", "bl.trace_backward"),
        # Grad mode switched back on, to build the forward again and differentiate it.
        ("def node_rule(node, grad):\n"
         "    x = node.next_functions[0][0].variable\n"
         "    with torch.enable_grad():\n"
         "        return list(torch.autograd.grad(torch.exp(x), [x], grad))\n", "enable_grad"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("02"))
