"""Plausible wrong answers for the exercises of 02-chain-rule.ipynb (see tests/lessons/test_exercises.py)."""

SHARED = "def shared_grads(x, y, z):\n    u = x * y\n    du = {}\n    return {}\n"
TANH = "def tanh_grads(x, w, b):\n    outer = {}\n    return {}\n"

BACKWARD = 'def backward_by_walking(out, leaves):\n    """The gradients of out.sum() for each of leaves, by walking out\'s graph by hand."""\n    # First pass: how many edges come into each node.\n    edges_in, todo, seen = {}, [out.grad_fn], set()\n    while todo:\n        node = todo.pop()\n        if node in seen:\n            continue\n        seen.add(node)\n        for fn, _ in node.next_functions:\n            if fn is not None:\n                edges_in[fn] = edges_in.get(fn, 0) + 1\n                todo.append(fn)\n\n    def local(node, g):\n        """What node sends to each of its inputs, for the gradient g at its output."""\n        name = node.name()\n        if name == "AddBackward0":\n            return [g, g]\n        if name == "SubBackward0":\n            return [g, -g]\n        if name == "MulBackward0":\n            a, b = node._saved_self, node._saved_other\n            return [None if b is None else g * b, None if a is None else g * a]\n        if name == "SinBackward0":\n            return [g * torch.cos(node._saved_self)]\n        if name == "ExpBackward0":\n            return [g * node._saved_result]  # exp saved its output: exp(x) itself\n        if name == "PowBackward0":\n            n = node._saved_exponent\n            return [g * n * node._saved_self ** (n - 1)]\n        raise ValueError(f"no rule for {name}")\n\n    # Second pass: a node runs once every edge into it has delivered its part.\n    grad_at = {out.grad_fn: torch.ones_like(out)}\n    ready, leaf_grads = [out.grad_fn], {}\n    while ready:\n        node = ready.pop()\n        g = grad_at.pop(node)\n        if hasattr(node, "variable"):\n            leaf_grads[id(node.variable)] = g\n            continue\n        for (fn, _), sent in zip(node.next_functions, local(node, g), strict=True):\n            if fn is None:\n                continue\n            grad_at[fn] = grad_at[fn] + sent if fn in grad_at else sent\n            edges_in[fn] -= 1\n            if edges_in[fn] == 0:\n                ready.append(fn)\n    return [leaf_grads[id(leaf)] for leaf in leaves]\n'


def _backward(*edits: tuple[str, str]) -> str:
    """The lesson's walk with some lines changed: each (old, new) must occur once."""
    source = BACKWARD
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


ADD_AT_NODE = "            grad_at[fn] = grad_at[fn] + sent if fn in grad_at else sent\n"
COUNTED = ("            edges_in[fn] -= 1\n"
           "            if edges_in[fn] == 0:\n"
           "                ready.append(fn)\n")


WRONG = {
    "l02-predict-match": [
        # Expects autograd to be an estimate, like finite differences.
        ('match_guess = "close"\n', "not quite"),
        # Not one of the two words.
        ('match_guess = "roughly"\n', "not one of the choices"),
    ],
    "l02-predict-paths": [
        # One path only: the second use of a is overlooked.
        ("aa_guess = 1.0\n", "not quite"),
        # The paths multiplied.
        ("aa_guess = 1.0 * 1.0\n", "not quite"),
    ],
    "l02-cubic": [
        # The power rule dropped for the middle term.
        ("def cubic_slope(x):\n    return 3 * x**2 - 4 * x\n", "8x, not 4x"),
        # A sign slip.
        ("def cubic_slope(x):\n    return 3 * x**2 + 8 * x\n", "-8x, not +8x"),
        # The power rule dropped for the cube.
        ("def cubic_slope(x):\n    return x**2 - 8 * x\n", "3x**2, not x**2"),
        # The number from the old exercise (at x = 3), hard-coded.
        ("def cubic_slope(x):\n    return torch.full_like(x, 3.0) * 0 + 3.0\n", "hard-coded"),
        # The autograd shortcut.
        (
            "def cubic_slope(x):\n"
            "    x = x.requires_grad_()\n"
            "    (x**3 - 4 * x**2 + 5).sum().backward()\n"
            "    return x.grad\n",
            "Tensor.backward()",
        ),
    ],
    "l02-chain": [
        # The chain rule's inner factor forgotten.
        (TANH.format("1 - torch.tanh(w * x + b) ** 2", "outer, outer, outer"),
         "inner derivative"),
        # x and w swapped at the multiply.
        (TANH.format("1 - torch.tanh(w * x + b) ** 2", "outer * x, outer * w, outer"),
         "dz/dx and dz/dw are swapped"),
        # tanh' written as 1 - tanh (the square forgotten).
        (TANH.format("1 - torch.tanh(w * x + b)", "outer * w, outer * x, outer"),
         "square is missing"),
        # The worked example's formula (z = y**2) copied: 2y * w and so on.
        (TANH.format("2 * (w * x + b)", "outer * w, outer * x, outer"), "mismatch"),
        # The autograd shortcut, through torch.func.
        (
            "def tanh_grads(x, w, b):\n"
            "    return torch.func.grad(\n"
            "        lambda x, w, b: torch.tanh(w * x + b).sum(), argnums=(0, 1, 2))(x, w, b)\n",
            "torch.func.grad",
        ),
    ],
    "l02-shared": [
        # A path forgotten: only the sine's path back to u.
        (SHARED.format("(u - z) * torch.cos(u)", "du * y, du * x, -torch.sin(u)"),
         "only the sine's path"),
        # A path forgotten: only the subtraction's path back to u.
        (SHARED.format("torch.sin(u)", "du * y, du * x, -torch.sin(u)"),
         "only the subtraction's path"),
        # The two paths multiplied instead of added.
        (SHARED.format("torch.sin(u) * (u - z) * torch.cos(u)", "du * y, du * x, -torch.sin(u)"),
         "paths to u are multiplied"),
        # The product rule missed: d/du of (u - z) sin u taken as 1 * cos u.
        (SHARED.format("torch.cos(u)", "du * y, du * x, -torch.sin(u)"), "product rule"),
        # The minus of u - z forgotten for z.
        (SHARED.format("torch.sin(u) + (u - z) * torch.cos(u)", "du * y, du * x, torch.sin(u)"),
         "sign of df/dz"),
        # x and y swapped at the multiply u = x * y.
        (SHARED.format("torch.sin(u) + (u - z) * torch.cos(u)", "du * x, du * y, -torch.sin(u)"),
         "swapped"),
        # The chain stops at u: df/du handed to x and y.
        (SHARED.format("torch.sin(u) + (u - z) * torch.cos(u)", "du, du, -torch.sin(u)"),
         "inner derivative"),
        # Differentiates as if x were used once and z not at all: nothing common fits.
        ("def shared_grads(x, y, z):\n    return y + torch.cos(x), x, torch.zeros_like(z)\n",
         "mismatch"),
        # The autograd shortcut.
        (
            "def shared_grads(x, y, z):\n"
            "    leaves = [t.requires_grad_() for t in (x, y, z)]\n"
            "    u = x * y\n"
            "    return torch.autograd.grad(((u - z) * torch.sin(u)).sum(), leaves)\n",
            "torch.autograd.grad",
        ),
    ],
    "l02-backward": [
        # A leaf's gradient stored with = as it arrives: a leaf used twice keeps one part.
        (_backward((ADD_AT_NODE, "            if hasattr(fn, 'variable'):\n"
                                 "                leaf_grads[id(fn.variable)] = sent\n"
                                 "                continue\n" + ADD_AT_NODE)),
         "only one edge's part"),
        # = instead of + at every node.
        (_backward((ADD_AT_NODE, "            grad_at[fn] = sent\n")), "kept only the last part"),
        # Each node run the first time the walk meets it, with what has arrived so far.
        (_backward(("    ready, leaf_grads = [out.grad_fn], {}\n",
                    "    ready, leaf_grads, met = [out.grad_fn], {}, set()\n"),
                   ("        g = grad_at.pop(node)\n", "        g = grad_at[node]\n"),
                   (COUNTED, "            if fn not in met:\n"
                             "                met.add(fn)\n"
                             "                ready.append(fn)\n")),
         "before all of it had arrived"),
        # exp applied to ExpBackward0's saved output, taken for its input.
        (_backward(("return [g * node._saved_result]", "return [g * torch.exp(node._saved_result)]")),
         "applies exp twice"),
        # The derivative of sin taken as -cos.
        (_backward(("return [g * torch.cos(node._saved_self)]",
                    "return [-g * torch.cos(node._saved_self)]")), "sign is off"),
        # The local derivative sent on without the incoming gradient.
        (_backward(("return [g * torch.cos(node._saved_self)]",
                    "return [torch.cos(node._saved_self)]")), "incoming gradient is missing"),
        # The power rule without lowering the exponent.
        (_backward(("return [g * n * node._saved_self ** (n - 1)]",
                    "return [g * n * node._saved_self ** n]")), "lowers the exponent"),
        # The subtraction's second input given +g.
        (_backward(("return [g, -g]", "return [g, g]")), "minus the incoming gradient"),
        # Each factor of a product given its own value instead of the other's.
        (_backward(("return [None if b is None else g * b, None if a is None else g * a]",
                    "return [None if a is None else g * a, None if b is None else g * b]")),
         "the *other* factor"),
        # A constant's (None, 0) entry not skipped: the unsaved factor is None.
        (_backward(("return [None if b is None else g * b, None if a is None else g * a]",
                    "return [g * b, g * a]")), "skip the inputs whose node is None"),
    ],
}
