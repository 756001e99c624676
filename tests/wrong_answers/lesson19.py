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

# PowerMix with its own backward body ({}), forward as in POWER.
POWER_BODY = POWER.replace("        return {}\n", "{}")
# PowerMix through exp(p * log(x)), forward and backward: nan wherever x < 0.
POWER_EXP_LOG = '''class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.save_for_backward(x, y)
        ctx.p = p
        return torch.exp(p * torch.log(x)) * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        p = ctx.p
        return (grad_output * p * torch.exp((p - 1) * torch.log(x)) * y,
                grad_output * torch.exp(p * torch.log(x)), None)
'''
# PowerMix whose gradients are read off the saved output: out / y is 0 / 0 where y = 0.
POWER_FROM_OUTPUT = '''class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        out = x**p * y
        ctx.save_for_backward(x, y, out)
        ctx.p = p
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, y, out = ctx.saved_tensors
        p = ctx.p
        return grad_output * p * out / x, grad_output * out / y, None
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
# Helpers that sum a gradient down to a shape, each wrong for some broadcasting pattern.
FIRST_ONE_ONLY = '''def reduce_to(grad, shape):
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    if 1 in shape:  # the dimension that was broadcast
        grad = grad.sum(list(shape).index(1), keepdim=True)
    return grad


'''
ENDS_ONLY = '''def reduce_to(grad, shape):
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    if shape[0] == 1:
        grad = grad.sum(0, keepdim=True)
    if shape[-1] == 1:
        grad = grad.sum(-1, keepdim=True)
    return grad


'''
SHIFTED = '''def reduce_to(grad, shape):
    lead = grad.dim() - len(shape)
    # dimensions of the output along which the input was stretched
    ones = [lead + d for d, n in enumerate(shape) if n == 1 and grad.shape[lead + d] != 1]
    for _ in range(lead):
        grad = grad.sum(0)
    for d in ones:
        grad = grad.sum(d, keepdim=True)
    return grad


'''
ONE_LEADING = '''def reduce_to(grad, shape):
    if grad.dim() > len(shape):  # one leading dimension added by broadcasting
        grad = grad.sum(0)
    for d, n in enumerate(shape):
        if n == 1 and grad.shape[d] != 1:
            grad = grad.sum(d, keepdim=True)
    return grad


'''
REDUCED = "reduce_to(grad, a.shape), reduce_to(-grad, b.shape)"

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
        # ctx.needs_input_grad read with the indices swapped: x's gradient only when y wants one.
        (POWER_BODY.format(
            "        gx = grad_output * p * x ** (p - 1) * y if ctx.needs_input_grad[1] else None\n"
            "        gy = grad_output * x**p if ctx.needs_input_grad[0] else None\n"
            "        return gx, gy, None\n"), "no gradient reached x"),
        # Two entries, not three, when y needs no gradient.
        (POWER_BODY.format(
            "        gx = grad_output * p * x ** (p - 1) * y\n"
            "        if not ctx.needs_input_grad[1]:\n"
            "            return gx, None\n"
            "        return gx, grad_output * x**p, None\n"),
         "with y not requiring grad (ctx.needs_input_grad[1] False), backward returned 2 entries"),
        # The gradients read off the saved output, out / y: 0 / 0 where y = 0.
        (POWER_FROM_OUTPUT, "one that divides by y"),
        # x**p as exp(p * log(x)): nan for x < 0, where a whole-number p defines x**p.
        (POWER_EXP_LOG, "a formula through log(x)"),
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
        # The stable formula without its abs: log1p(exp(-x)) is softplus(x) - x for x < 0.
        (SOFTPLUS.format("x.copy_(x.clamp(min=0) + torch.log1p(torch.exp(-x)))", MARK_SAVE_Y,
                         READ_Y + "grad_output * -torch.expm1(-y)"),
         "forward does not compute softplus(x)"),
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
        # ctx.needs_input_grad read with the indices swapped: a's gradient only when b wants one.
        (SQUARED_GAP.format("(grad.sum_to_size(a.shape) if ctx.needs_input_grad[1] else None,\n"
                            "                (-grad).sum_to_size(b.shape) "
                            "if ctx.needs_input_grad[0] else None)"),
         "backward returned None for a, which requires grad"),
        # Only the first size-1 dimension summed (shape.index(1)): b of shape (1, 5, 1).
        (FIRST_ONE_ONLY + SQUARED_GAP.format(REDUCED),
         "b was broadcast along dimensions 0 and 2"),
        # Size-1 dimensions summed only at the first and last place: a of shape (2, 1, 3).
        (ENDS_ONLY + SQUARED_GAP.format(REDUCED), "a was broadcast along dimension 1"),
        # Size-1 dimensions found in the output's numbering, summed after the leading ones went.
        (SHIFTED + SQUARED_GAP.format(REDUCED), "inputs of shapes (2, 1, 3) and (4, 1)"),
        # One leading dimension summed (if, not while): b of shape (4,) under (2, 3, 4).
        (ONE_LEADING + SQUARED_GAP.format(REDUCED), "b was broadcast along dimensions 0 and 1"),
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
