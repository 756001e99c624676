"""Plausible wrong answers for the lesson 08 exercises (see tests/test_exercises.py)."""

WRONG = {
    # The power rule without its factor: d(x³)/dx written as x².
    "l08-cube": (
        """class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return x ** 2 * grad_output
""",
        "missing factor 3",
    ),
    # sigma * (sigma - 1): the derivative with its sign flipped.
    "l08-sigmoid": (
        """class Sigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = 1 / (1 + torch.exp(-x))
        ctx.save_for_backward(s)
        return s

    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        return grad_output * s * (s - 1)
""",
        "sign",
    ),
}
