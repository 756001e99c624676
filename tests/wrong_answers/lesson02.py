"""Plausible wrong answers for the exercises of 02-chain-rule.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment.
"""

WRONG = {
    # Keeps the constant 5 when differentiating.
    "l02-cubic": (
        "x0 = 3.0\n"
        "dfdx = 3 * x0**2 - 8 * x0 + 5\n",
        "expected 3",
    ),
    # Forgets the 2 from d(y**2)/dy = 2y.
    "l02-chain": (
        "x1, w1, b1 = 3.0, -1.0, 0.5\n"
        "y1 = w1 * x1 + b1\n"
        "gx, gw, gb = y1 * w1, y1 * x1, y1\n",
        "factor 2",
    ),
    # Counts only one of the two paths from a to h.
    "l02-paths": (
        "a0 = 4.0\n"
        "dh_da = a0\n",
        "factor 2",
    ),
}
