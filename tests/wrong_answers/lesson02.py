"""Plausible wrong answers for the exercises of 02-chain-rule.ipynb (see tests/lessons/test_exercises.py)."""

SHARED = "def shared_grads(x, y, z):\n    u = x * y\n    du = {}\n    return {}\n"
TANH = "def tanh_grads(x, w, b):\n    outer = {}\n    return {}\n"

RULE = 'def node_rule(node, grad):\n    """What node sends along each edge of node.next_functions, for grad at its output."""\n    name = node.name()\n    if name == "AddBackward0":\n        sent = [grad, grad]\n    elif name == "SubBackward0":\n        sent = [grad, -grad]\n    elif name == "MulBackward0":\n        a, b = node._saved_self, node._saved_other  # a factor is None if only the other needs it\n        sent = [None if b is None else grad * b, None if a is None else grad * a]\n    elif name == "DivBackward0":\n        a, b = node._saved_self, node._saved_other  # a / b; a is None when only a needs a grad\n        sent = [grad / b, None if a is None else -grad * a / b**2]\n    elif name == "SinBackward0":\n        sent = [grad * torch.cos(node._saved_self)]\n    elif name == "ExpBackward0":\n        sent = [grad * node._saved_result]  # exp saved its output, which is its own derivative\n    elif name == "PowBackward0":\n        n = node._saved_exponent\n        sent = [grad * n * node._saved_self ** (n - 1)]\n    elif name == "SqrtBackward0":\n        sent = [grad / (2 * node._saved_result)]  # the saved output is sqrt(x) itself\n    elif name == "TanhBackward0":\n        sent = [grad * (1 - node._saved_result**2)]  # section 8\'s rule, from the saved output\n    else:\n        raise ValueError(f"no rule for {name}")\n    # An edge whose node is None leads to a constant: send nothing there.\n    return [None if fn is None else s for (fn, _), s in zip(node.next_functions, sent, strict=True)]\n'


def _rule(*edits: tuple[str, str]) -> str:
    """The lesson's rule with some lines changed: each (old, new) must occur once."""
    source = RULE
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


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
    "l02-rule": [
        # exp applied to ExpBackward0's saved output, taken for its input.
        (_rule(("[grad * node._saved_result]", "[grad * torch.exp(node._saved_result)]")),
         "applies exp twice"),
        # The derivative of sin taken as -cos.
        (_rule(("[grad * torch.cos(node._saved_self)]", "[-grad * torch.cos(node._saved_self)]")),
         "sign is off"),
        # The local derivative sent on without the incoming gradient.
        (_rule(("[grad * torch.cos(node._saved_self)]", "[torch.cos(node._saved_self)]")),
         "incoming gradient is missing"),
        # The power rule without lowering the exponent.
        (_rule(("grad * n * node._saved_self ** (n - 1)", "grad * n * node._saved_self ** n")),
         "lowers the exponent"),
        # The subtraction's second input given +grad.
        (_rule(("sent = [grad, -grad]", "sent = [grad, grad]")), "minus the incoming gradient"),
        # Each factor of a product given its own value instead of the other's.
        (_rule(("[None if b is None else grad * b, None if a is None else grad * a]",
                "[None if a is None else grad * a, None if b is None else grad * b]")),
         "the *other* factor"),
        # A constant's unsaved factor used anyway: it is None.
        (_rule(("[None if b is None else grad * b, None if a is None else grad * a]",
                "[grad * b, grad * a]")), "send None along an edge whose node is None"),
        # Only the second factor guarded: right for x * c, not for c * x.
        (_rule(("[None if b is None else grad * b, None if a is None else grad * a]",
                "[grad * b, None if a is None else grad * a]")),
         "send None along an edge whose node is None"),
        # The quotient rule's sign lost.
        (_rule(("-grad * a / b**2", "grad * a / b**2")), "wrong sign: y sits in the denominator"),
        # The numerator left out of the divisor's gradient.
        (_rule(("-grad * a / b**2", "-grad / b**2")), "lost the numerator"),
        # The numerator's gradient multiplied by the divisor.
        (_rule(("sent = [grad / b,", "sent = [grad * b,")), "multiplies by the divisor"),
        # sqrt without its 1/2.
        (_rule(("[grad / (2 * node._saved_result)]", "[grad / node._saved_result]")),
         "the factor 1/2 is missing"),
        # The root of the saved root.
        (_rule(("[grad / (2 * node._saved_result)]",
                "[grad / (2 * torch.sqrt(node._saved_result))]")), "takes the root twice"),
        # tanh of the saved output, taken for the input.
        (_rule(("[grad * (1 - node._saved_result**2)]",
                "[grad * (1 - torch.tanh(node._saved_result) ** 2)]")), "applies tanh twice"),
        # 1 - tanh instead of 1 - tanh**2.
        (_rule(("[grad * (1 - node._saved_result**2)]", "[grad * (1 - node._saved_result)]")),
         "the square is missing"),
        # One value for every node: the list is not one per edge.
        (_rule(("    return [None if fn is None else s for (fn, _), s in "
                "zip(node.next_functions, sent, strict=True)]\n", "    return sent[0]\n")),
         "expected a list with one gradient per edge"),
        # Tanh not handled: the rule raises for a node it does not know.
        (_rule(('    elif name == "TanhBackward0":\n'
                "        sent = [grad * (1 - node._saved_result**2)]  # section 8's rule, from the "
                "saved output\n", "")), "no rule for TanhBackward0"),
    ],
}
