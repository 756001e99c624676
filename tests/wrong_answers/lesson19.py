"""Plausible wrong answers for the exercises of 19-custom-functions.ipynb."""

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
SOFTPLUS = '''class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return {}

    @staticmethod
    def setup_context(ctx, inputs, output):
        {}

    @staticmethod
    def backward(ctx, grad_output):
        {}
'''
STABLE = "x.copy_(x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))"
MARK_SAVE_Y = "ctx.mark_dirty(inputs[0])\n        ctx.save_for_backward(output)"
READ_Y = "(y,) = ctx.saved_tensors\n        return "
# The old form, forward(ctx, x): a copy of x saved before it is overwritten.
SOFTPLUS_SAVES_X = '''class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.clone())
        ctx.mark_dirty(x)
        return x.copy_(x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''

SQUARED_GAP = '''class SquaredGap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (a - b) ** 2

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad = 2 * (a - b) * grad_output
        return {}
'''
LSE = '''class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        out = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(dim=-1))
        {}
        return out

    @staticmethod
    def backward(ctx, grad_output):
        {}
'''
SAVE_X_OUT = "ctx.save_for_backward(x, out)"
READ_X_OUT = "x, out = ctx.saved_tensors\n        return "
ONCE = '''from torch.autograd.function import once_differentiable


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        out = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(dim=-1))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
        return grad_output.unsqueeze(-1) * torch.exp(x - out.unsqueeze(-1))
'''
NAIVE_FORWARD = '''class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.log(torch.exp(x).sum(dim=-1))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
        return grad_output.unsqueeze(-1) * torch.exp(x - out.unsqueeze(-1))
'''

# Exercise 5's Gate, right, as plain text: each wrong answer changes one piece.
GATE = (
    'class Gate(torch.autograd.Function):\n'
    '    generate_vmap_rule = True  # jacfwd runs jvp under vmap\n'
    '\n'
    '    @staticmethod\n'
    '    def forward(x, g):\n'
    '        return x * torch.sigmoid(g)\n'
    '\n'
    '    @staticmethod\n'
    '    def setup_context(ctx, inputs, output):\n'
    '        x, g = inputs\n'
    '        s = torch.sigmoid(g)\n'
    '        ctx.save_for_backward(x, s)\n'
    '        ctx.save_for_forward(x, s)  # what jvp will find in ctx.saved_tensors\n'
    '\n'
    '    @staticmethod\n'
    '    def backward(ctx, grad_output):\n'
    '        x, s = ctx.saved_tensors\n'
    '        return grad_output * s, grad_output * x * s * (1 - s)\n'
    '\n'
    '    @staticmethod\n'
    '    def jvp(ctx, x_t, g_t):\n'
    '        x, s = ctx.saved_tensors\n'
    '        return x_t * s + x * s * (1 - s) * g_t\n'
    '\n'
)


def _gate(old: str, new: str) -> str:
    assert GATE.count(old) == 1, old
    return GATE.replace(old, new)


JVP = "return x_t * s + x * s * (1 - s) * g_t"


# The form with ctx in forward, which torch.func's transforms refuse.
CTX_FORWARD = _gate(
    "    def forward(x, g):\n"
    "        return x * torch.sigmoid(g)\n"
    "\n"
    "    @staticmethod\n"
    "    def setup_context(ctx, inputs, output):\n"
    "        x, g = inputs\n",
    "    def forward(ctx, x, g):\n")
CTX_FORWARD = CTX_FORWARD.replace(
    "        ctx.save_for_forward(x, s)  # what jvp will find in ctx.saved_tensors\n",
    "        ctx.save_for_forward(x, s)\n        return x * s\n")

WRONG = {
    "l19-predict-raises": [
        ("bad_backward_raises = True\n", "not quite"),
    ],
    "l19-predict-once": [
        ("once_second = [8.0, 14.0]\n", "not quite"),
        ('once_second = "error"\n', "not quite"),
    ],
    "l19-power-mix": [
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
    "l19-softplus-in-place": [
        # The saved output read as if it still were x.
        (SOFTPLUS.format(STABLE, MARK_SAVE_Y, READ_Y + "grad_output * torch.sigmoid(y)"),
         "the saved tensor holds y = softplus(x), not x"),
        # exp(-y): sigmoid(-x), the other side.
        (SOFTPLUS.format(STABLE, MARK_SAVE_Y, READ_Y + "grad_output * torch.exp(-y)"),
         "which is sigmoid(-x)"),
        # grad_output forgotten.
        (SOFTPLUS.format(STABLE, MARK_SAVE_Y, READ_Y + "-torch.expm1(-y)"),
         "ignores grad_output"),
        # The change not declared: saving the returned input is refused.
        (SOFTPLUS.format(STABLE, "ctx.save_for_backward(output)",
                         READ_Y + "grad_output * -torch.expm1(-y)"), "ctx.mark_dirty"),
        # The change not declared, the output kept on ctx: the graph lies about x.
        (SOFTPLUS.format(STABLE, "ctx.y = output",
                         "return grad_output * -torch.expm1(-ctx.y)"), "its grad_fn is still"),
        # Not in place: a new tensor returned.
        (SOFTPLUS.format("x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))",
                         "ctx.save_for_backward(output)",
                         READ_Y + "grad_output * -torch.expm1(-y)"), "returned a new tensor"),
        # Declared in place, but a new tensor returned.
        (SOFTPLUS.format("x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))", MARK_SAVE_Y,
                         READ_Y + "grad_output * -torch.expm1(-y)"), "marked dirty"),
        # A copy of x kept: the memory working in place was to spare.
        (SOFTPLUS_SAVES_X, "a copy of the input x is saved"),
        # The output kept on ctx, declared in place.
        (SOFTPLUS.format(STABLE, "ctx.mark_dirty(inputs[0])\n        ctx.y = output",
                         "return grad_output * -torch.expm1(-ctx.y)"), "ctx.save_for_backward"),
        # Section 6's naive formula: inf at x = 800.
        (SOFTPLUS.format("x.copy_(torch.log(1 + torch.exp(x)))", MARK_SAVE_Y,
                         READ_Y + "grad_output * -torch.expm1(-y)"), "stable formula"),
    ],
    "l19-broadcast-function": [
        # No sum: the output's shape (the engine would hide this one).
        (SQUARED_GAP.format("grad, -grad"), "still has the output's shape"),
        # Summed, but keepdim forgotten.
        (SQUARED_GAP.format("grad.sum_to_size(a.shape).squeeze(), "
                            "(-grad).sum_to_size(b.shape).squeeze()"),
         "keepdim=True"),
        # Summed over the wrong dimension for a.
        (SQUARED_GAP.format("grad.sum(0, keepdim=True), (-grad).sum(1, keepdim=True)"),
         "summed over the wrong dimensions"),
        # The minus sign for b lost.
        (SQUARED_GAP.format("grad.sum_to_size(a.shape), grad.sum_to_size(b.shape)"),
         "sign is flipped"),
        # One gradient for both inputs.
        (SQUARED_GAP.format("grad.sum_to_size(a.shape)"), "one gradient per input"),
    ],
    "l19-logsumexp": [
        # The max shift forgotten in backward: fine near 0, inf / inf far from it.
        (LSE.format(SAVE_X_OUT, "x, _ = ctx.saved_tensors\n        e = torch.exp(x)\n"
                                "        return grad_output.unsqueeze(-1) * e "
                                "/ e.sum(-1, keepdim=True)"),
         "max shift is forgotten in backward"),
        # The max shift forgotten in forward.
        (NAIVE_FORWARD, "Shift by the row's maximum"),
        # The shift by the whole tensor's maximum, not each row's: rows far apart fail.
        (LSE.replace("x.amax(dim=-1, keepdim=True)", "x.amax().expand(*x.shape[:-1], 1)")
         .format(SAVE_X_OUT, READ_X_OUT + "grad_output.unsqueeze(-1) * "
                                          "torch.exp(x - out.unsqueeze(-1))"),
         "not by the whole tensor's maximum"),
        # The same in backward only.
        (LSE.format(SAVE_X_OUT, "x, _ = ctx.saved_tensors\n        e = torch.exp(x - x.amax())\n"
                                "        return grad_output.unsqueeze(-1) * e "
                                "/ e.sum(-1, keepdim=True)"),
         "its shift is not each row's own maximum"),
        # The softmax weights kept on ctx, not saved.
        (LSE.format("ctx.p = torch.exp(x - out.unsqueeze(-1))",
                    "return grad_output.unsqueeze(-1) * ctx.p"),
         "not saved"),
        # The softmax weights computed in forward and saved: double backward loses them.
        (LSE.format("ctx.save_for_backward(torch.exp(x - out.unsqueeze(-1)))",
                    "(p,) = ctx.saved_tensors\n        return grad_output.unsqueeze(-1) * p"),
         "computed in forward and saved"),
        # once_differentiable: the first derivative is right, the second is not there.
        (ONCE, "once_differentiable"),
        # A backward that leaves autograd: detach.
        (LSE.format(SAVE_X_OUT, READ_X_OUT + "grad_output.unsqueeze(-1) * "
                                             "torch.exp(x - out.unsqueeze(-1)).detach()"),
         "gradgradcheck failed"),
        # grad_output forgotten.
        (LSE.format(SAVE_X_OUT, READ_X_OUT + "torch.exp(x - out.unsqueeze(-1))"),
         "ignores grad_output"),
        # grad_output not unsqueezed: it does not line up with the weights.
        (LSE.format(SAVE_X_OUT, READ_X_OUT + "grad_output * torch.exp(x - out.unsqueeze(-1))"),
         "unsqueeze(-1)"),
        # The backward of a plain sum.
        (LSE.format(SAVE_X_OUT, READ_X_OUT + "grad_output.unsqueeze(-1).expand_as(x)"),
         "plain sum"),
        # exp(x) without out.
        (LSE.format(SAVE_X_OUT, READ_X_OUT + "grad_output.unsqueeze(-1) * torch.exp(x)"),
         "not exp(x - out)"),
    ],
    "l19-gate-jvp": [
        # The tangents left out: the partial derivatives summed.
        (_gate(JVP, "return s + x * s * (1 - s)"), "ignores the tangents"),
        # Only x's tangent, only g's.
        (_gate(JVP, "return x_t * s"), "only x's tangent counts"),
        (_gate(JVP, "return x * s * (1 - s) * g_t"), "only g's tangent counts"),
        # sigmoid' taken as sigmoid.
        (_gate(JVP, "return x_t * s + x * s * g_t"), "not sigmoid(g)"),
        # x dropped from g's term.
        (_gate(JVP, "return x_t * s + s * (1 - s) * g_t"), "factor x is missing"),
        # The tangents swapped.
        (_gate(JVP, "return g_t * s + x * s * (1 - s) * x_t"), "tangents are swapped"),
        # Nothing saved for forward: jvp finds ctx.saved_tensors empty.
        (_gate("        ctx.save_for_forward(x, s)  # what jvp will find in ctx.saved_tensors\n",
               ""), "save_for_forward"),
        # No vmap rule: jacfwd cannot batch jvp.
        (_gate("    generate_vmap_rule = True  # jacfwd runs jvp under vmap\n\n", ""),
         "generate_vmap_rule"),
        # backward's two gradients swapped.
        (_gate("return grad_output * s, grad_output * x * s * (1 - s)",
               "return grad_output * x * s * (1 - s), grad_output * s"),
         "two gradients are swapped"),
        # The old form, ctx in forward: torch.func refuses it.
        (CTX_FORWARD, "takes ctx in forward"),
    ],
}
