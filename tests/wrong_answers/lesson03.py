"""Plausible wrong answers for the exercises of 03-gradient-accumulation.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment.
"""

WRONG = {
    # Forgets that each of the three backward calls adds: answers one call's gradient.
    "l03-count": (
        "final_grad = 2 * 3.0\n",
        "accumulated 3 backward passes",
    ),
    # Accumulates the micro-batch means without dividing by k.
    "l03-microbatch": (
        "for X_part, t_part in zip(X_ex.chunk(k_ex), t_ex.chunk(k_ex), strict=True):\n"
        "    ((X_part @ w_acc - t_part) ** 2).mean().backward()\n",
        "factor 3",
    ),
}
