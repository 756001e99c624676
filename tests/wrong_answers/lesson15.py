"""Plausible wrong answers for the exercises of 15-custom-functions.ipynb."""

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
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        {}

    @staticmethod
    def backward(ctx, grad_output):
        {}
'''
SAVE_T = "ctx.save_for_backward(output)"
READ_T = "(t,) = ctx.saved_tensors\n        return "

WRONG = {
    "l15-predict-raises": [
        ("bad_backward_raises = True\n", "not quite"),
    ],
    "l15-predict-once": [
        ("once_second = [8.0, 14.0]\n", "not quite"),
        ('once_second = "error"\n', "not quite"),
    ],
    "l15-power-mix": [
        # No entry for the number p.
        (POWER.format("grad_output * p * x ** (p - 1) * y, grad_output * x**p"),
         "one entry per input"),
        # The power rule without its factor p.
        (POWER.format("grad_output * x ** (p - 1) * y, grad_output * x**p, None"),
         "factor p is missing"),
        # The two gradients swapped.
        (POWER.format("grad_output * x**p, grad_output * p * x ** (p - 1) * y, None"),
         "swapped"),
        # grad_output forgotten: the local derivatives alone.
        (POWER.format("p * x ** (p - 1) * y, x**p, None"), "ignores grad_output"),
        # The exponent not lowered.
        (POWER.format("grad_output * p * x**p * y, grad_output * x**p, None"),
         "not lowered"),
        # y dropped from the gradient for x.
        (POWER.format("grad_output * p * x ** (p - 1), grad_output * x**p, None"),
         "factor y is missing"),
        # A gradient returned for the number p as well.
        (POWER.format("grad_output * p * x ** (p - 1) * y, grad_output * x**p, "
                      "grad_output * 0"), "None in the place"),
    ],
    "l15-tanh-output": [
        # 1 + t**2: a sign slip.
        (TANH.format(SAVE_T, READ_T + "grad_output * (1 + t**2)"), "sign inside is flipped"),
        # The input saved and used as if it were the output.
        (TANH.format("ctx.save_for_backward(inputs[0])", READ_T + "grad_output * (1 - t**2)"),
         "saves the input x"),
        # Right numbers, but both input and output saved.
        (TANH.format("ctx.save_for_backward(inputs[0], output)",
                     "_, t = ctx.saved_tensors\n        return grad_output * (1 - t**2)"),
         "the output alone is enough"),
        # Right numbers from the input, recomputing tanh.
        (TANH.format("ctx.save_for_backward(inputs[0])",
                     "(x,) = ctx.saved_tensors\n        "
                     "return grad_output * (1 - torch.tanh(x) ** 2)"),
         "saves the input x"),
        # grad_output forgotten.
        (TANH.format(SAVE_T, READ_T + "1 - t**2"), "ignores grad_output"),
        # The square forgotten.
        (TANH.format(SAVE_T, READ_T + "grad_output * (1 - t)"), "square is missing"),
        # The output stashed on ctx instead of saved.
        (TANH.format("ctx.t = output", "return grad_output * (1 - ctx.t**2)"),
         "ctx.save_for_backward"),
    ],
}
