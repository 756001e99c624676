"""Plausible wrong answers for the exercises of 02-chain-rule.ipynb (see tests/test_exercises.py)."""

WRONG = {
    "l02-predict-paths": [
        # One path only: the second use of a is overlooked.
        ("aa_guess = 1.0\n", "paths add up"),
    ],
    "l02-cubic": [
        # The power rule dropped for the middle term.
        ("def cubic_slope(x):\n    return 3 * x**2 - 4 * x\n", "8x, not 4x"),
        # A sign slip.
        ("def cubic_slope(x):\n    return 3 * x**2 + 8 * x\n", "mismatch"),
        # The number from the old exercise (at x = 3), hard-coded.
        ("def cubic_slope(x):\n    return torch.full_like(x, 3.0) * 0 + 3.0\n", "hard-coded"),
        # The autograd shortcut.
        (
            "def cubic_slope(x):\n"
            "    x = x.requires_grad_()\n"
            "    (x**3 - 4 * x**2 + 5).sum().backward()\n"
            "    return x.grad\n",
            "by hand",
        ),
    ],
    "l02-chain": [
        # The worked example's formula (z = y**2) copied: 2y * w and so on.
        (
            "def tanh_grads(x, w, b):\n"
            "    y = w * x + b\n"
            "    return 2 * y * w, 2 * y * x, 2 * y\n",
            "mismatch",
        ),
        # The chain rule's inner factor forgotten.
        (
            "def tanh_grads(x, w, b):\n"
            "    outer = 1 - torch.tanh(w * x + b) ** 2\n"
            "    return outer, outer, outer\n",
            "inner derivative",
        ),
        # tanh' written as 1 - tanh (the square forgotten).
        (
            "def tanh_grads(x, w, b):\n"
            "    outer = 1 - torch.tanh(w * x + b)\n"
            "    return outer * w, outer * x, outer\n",
            "mismatch",
        ),
        # The autograd shortcut, through torch.func.
        (
            "def tanh_grads(x, w, b):\n"
            "    return torch.func.grad(\n"
            "        lambda x, w, b: torch.tanh(w * x + b).sum(), argnums=(0, 1, 2))(x, w, b)\n",
            "by hand",
        ),
    ],
    "l02-paths": [
        ("def paths_grads(a, b):\n    return b, a\n", "sin path adds cos(a)"),
        ("def paths_grads(a, b):\n    return torch.cos(a), a\n", "product adds b"),
        # Swapped outputs.
        ("def paths_grads(a, b):\n    return a, b + torch.cos(a)\n", "mismatch"),
    ],
}
