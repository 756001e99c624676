"""Plausible wrong answers for the exercises of 08-custom-functions.ipynb."""

POWER = '''class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.save_for_backward(x, y)
        ctx.p = p
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        p = ctx.p
        return {}
'''
TANH = '''class Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        ctx.save_for_backward({})
        return t

    @staticmethod
    def backward(ctx, grad_output):
        {}
'''

WRONG = {
    "l08-predict-raises": [
        ("bad_backward_raises = True\n", "autograd trusts whatever backward returns"),
    ],
    "l08-cube": [
        # No entry for the number p.
        (POWER.format("grad_output * p * x ** (p - 1) * y, grad_output * x**p"), "incorrect number of gradients"),
        # The power rule without its factor p.
        (POWER.format("grad_output * x ** (p - 1) * y, grad_output * x**p, None"), "mismatch"),
        # The two gradients swapped.
        (POWER.format("grad_output * x**p, grad_output * p * x ** (p - 1) * y, None"), "mismatch"),
    ],
    "l08-sigmoid": [
        # 1 + t**2: a sign slip.
        (TANH.format("t", "(t,) = ctx.saved_tensors\n        return grad_output * (1 + t**2)"), "mismatch"),
        # The input saved and used as if it were the output.
        (TANH.format("x", "(t,) = ctx.saved_tensors\n        return grad_output * (1 - t**2)"), "mismatch"),
        # Right numbers, but both input and output saved.
        (
            TANH.format("x, t", "_, t = ctx.saved_tensors\n        return grad_output * (1 - t**2)"),
            "the output alone is enough",
        ),
    ],
}
