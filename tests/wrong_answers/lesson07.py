"""Plausible wrong answers for the lesson 07 exercises (see tests/test_exercises.py)."""

WRONG = {
    # Off by one in the loop: the second derivative, half the third for exp(2x).
    "l07-third-derivative": (
        """x = torch.tensor(0.0, requires_grad=True)
g = torch.exp(2 * x)
for _ in range(2):
    (g,) = torch.autograd.grad(g, x, create_graph=True)
d3f = g
print(d3f)
""",
        "1/2",
    ),
    # The minus sign of the Newton step forgotten.
    "l07-newton-step": (
        """x = torch.tensor(2.0, requires_grad=True)
fx = x ** 4 - 3 * x ** 2
(df,) = torch.autograd.grad(fx, x, create_graph=True)
(d2f,) = torch.autograd.grad(df, x)
newton_step = df.detach() / d2f
print(newton_step)
""",
        "sign is flipped",
    ),
}
