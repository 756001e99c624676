"""Plausible wrong answers for the lesson 06 exercises (see tests/test_exercises.py)."""

WRONG = {
    # dy_dx is the x.grad tensor itself, so the second backward adds into it.
    "l06-two-derivatives": (
        """x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
h = x ** 2
y = h.sum()
z = (2 * h).sum()
y.backward(retain_graph=True)
dy_dx = x.grad
z.backward()
dz_dx = x.grad
print(dy_dx, dz_dx)
""",
        "not zeroed",
    ),
    # The sum of the two losses instead of their average.
    "l06-one-pass": (
        """x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
h = torch.tanh(x)
loss_a = (h ** 2).sum()
loss_b = h.sum()
(loss_a + loss_b).backward()
grad_avg = x.grad
print(grad_avg)
""",
        "exactly 2 × the reference",
    ),
}
