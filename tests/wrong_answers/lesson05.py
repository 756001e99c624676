"""Plausible wrong answers for the lesson 05 exercises (see tests/test_exercises.py)."""

WRONG = {
    # Rows stacked as columns: the Jacobian comes out transposed.
    "l05-jacobian-rows": (
        """rows = []
for i in range(3):
    x = x0.clone().requires_grad_()
    f(x).backward(gradient=torch.eye(3)[i])
    rows.append(x.grad)
J_rows = torch.stack(rows, dim=1)
print(J_rows)
""",
        "transposed",
    ),
    # A gradient of ones gives the gradient of the sum, N = 4 times too big.
    "l05-mean-gradient": (
        """x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
y = x ** 2
y.backward(gradient=torch.ones_like(y))
grad_of_mean = x.grad
print(grad_of_mean)
""",
        "factor of N = 4",
    ),
}
