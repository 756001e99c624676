"""Plausible wrong answers for the exercises of 02-chain-rule.ipynb (see tests/lessons/test_exercises.py)."""

TANH = "def tanh_grads(x, w, b):\n    outer = {}\n    return {}\n"

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
    "l02-paths": [
        # The lesson's point: the two paths' contributions multiplied instead of added.
        ("def paths_grads(a, b):\n    return b * torch.cos(a), a\n", "paths from a are multiplied"),
        ("def paths_grads(a, b):\n    return b, a\n", "sin path adds cos(a)"),
        ("def paths_grads(a, b):\n    return torch.cos(a), a\n", "product adds b"),
        # Swapped outputs.
        ("def paths_grads(a, b):\n    return a, b + torch.cos(a)\n", "dh/da and dh/db are swapped"),
    ],
}
