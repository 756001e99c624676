"""Plausible wrong answers for lesson 11's exercises (see tests/test_exercises.py)."""

WRONG = {
    # Negates a local name but returns None, so the gradient passes unchanged.
    "l11-reverse": (
        "def reverse(grad):\n"
        "    grad = -grad\n",
        "sign",
    ),
    # Looks safe, but sqrt(0) still has an infinite derivative: 0 * inf = NaN at t = 0.
    "l11-safe-sqrt": (
        "def safe_sqrt(t):\n"
        "    return torch.where(t > 0, torch.sqrt(t.clamp(min=0)), torch.zeros_like(t))\n",
        "NaN",
    ),
}
