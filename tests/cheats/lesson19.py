"""Shortcuts around the checks of 19-custom-functions.ipynb; each must fail its check.

Both exercises ask for a backward formula worked out by the learner. gradcheck
alone would pass every shortcut below (it compares with finite differences to
1e-3); the checks call backward directly, with autograd switched off, and
demand float64 round-off.
"""

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
{}
'''

SOFTPLUS = '''class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.copy_(x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_dirty(inputs[0])
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        x = torch.log(torch.expm1(y))  # the input, recovered from the output
{}
'''

# Central differences written out in backward.
POWER_FD = POWER.format(
    "        h = 1e-6\n"
    "        dx = ((x + h) ** p * y - (x - h) ** p * y) / (2 * h)\n"
    "        dy = (x**p * (y + h) - x**p * (y - h)) / (2 * h)\n"
    "        return grad_output * dx, grad_output * dy, None"
)
# bl.numerical_grad in backward.
POWER_NUMERICAL = POWER.format(
    "        (dx,) = bl.numerical_grad(lambda a: (a**p * y * grad_output).sum(), x)\n"
    "        (dy,) = bl.numerical_grad(lambda b: (x**p * b * grad_output).sum(), y)\n"
    "        return dx, dy, None"
)
# Autograd inside backward, on a recomputed forward.
POWER_AUTOGRAD = POWER.format(
    "        with torch.enable_grad():\n"
    "            xx, yy = x.detach().requires_grad_(), y.detach().requires_grad_()\n"
    "            dx, dy = torch.autograd.grad(xx**p * yy, (xx, yy), grad_output)\n"
    "        return dx, dy, None"
)
# torch.func inside backward.
POWER_FUNC = POWER.format(
    "        dx = torch.func.grad(lambda a: (a**p * y * grad_output).sum())(x)\n"
    "        dy = torch.func.grad(lambda b: (x**p * b * grad_output).sum())(y)\n"
    "        return dx, dy, None"
)
# A table of the visible check's inputs, from the lesson module's own input maker.
POWER_TABLE = '''import torch
from backproplab.course.exercises import lesson19 as _l08

_TABLE = {}
for _seed in (0, 1, 2, 3, 4):
    _inputs = _l08.POWER_MIX.make_inputs(torch.Generator().manual_seed(_seed))
    for _x, _y, _p, _g in [*_inputs["trials"], _inputs["edge"]]:
        _TABLE[(tuple(_x.tolist()), _p)] = (_p * _x ** (_p - 1) * _y, _x**_p)


class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.save_for_backward(x, y)
        ctx.p = p
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        dx, dy = _TABLE.get((tuple(x.tolist()), ctx.p), (torch.ones_like(x), torch.ones_like(y)))
        return grad_output * dx, grad_output * dy, None
'''

# torch's own backward kernel for softplus.
SOFTPLUS_KERNEL = SOFTPLUS.format(
    "        return torch.ops.aten.softplus_backward(grad_output, x, 1.0, 20.0)")
# Calling the backward node of torch's own softplus.
SOFTPLUS_NODE = SOFTPLUS.format(
    "        with torch.enable_grad():\n"
    "            x = x.detach().requires_grad_()\n"
    "            return torch.nn.functional.softplus(x).grad_fn(grad_output)")
# Central differences on softplus, at the recovered input.
SOFTPLUS_FD = SOFTPLUS.format(
    "        h = 1e-6\n"
    "        up, down = torch.log1p(torch.exp(x + h)), torch.log1p(torch.exp(x - h))\n"
    "        return grad_output * (up - down) / (2 * h)")
# The complex-step trick.
SOFTPLUS_COMPLEX = SOFTPLUS.format(
    "        h = 1e-20\n"
    "        return grad_output * torch.log1p(torch.exp(x.to(torch.complex128) + 1j * h)).imag / h")
# bl.numerical_grad at the recovered input.
SOFTPLUS_NUMERICAL = SOFTPLUS.format(
    "        (d,) = bl.numerical_grad(\n"
    "            lambda t: (torch.nn.functional.softplus(t) * grad_output).sum(), x)\n"
    "        return d")
# A table of the visible check's inputs, from the lesson module's own input maker.
SOFTPLUS_TABLE = '''import torch
from backproplab.course.exercises.lesson19 import softplus as _l15

_TABLE = {}
for _seed in (0, 1, 2, 3, 4):
    _x, _g = _l15.softplus_inputs(torch.Generator().manual_seed(_seed))
    _y = _x.clamp(min=0) + torch.log1p(torch.exp(-_x.abs()))
    _TABLE[tuple(_y.flatten().tolist())] = torch.sigmoid(_x)


class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.copy_(x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_dirty(inputs[0])
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        local = _TABLE.get(tuple(y.flatten().tolist()), torch.ones_like(y))
        return grad_output * local
'''

_GAP = '''class SquaredGap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (a - b) ** 2

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
{}
'''
# backward asks autograd for its own answer.
GAP_NODE = _GAP.format('''        with torch.enable_grad():
            a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
            return torch.autograd.grad((a - b) ** 2, (a, b), grad_output)''')
# backward by central differences of its own.
GAP_FD = _GAP.format('''        def loss(a, b):
            return (((a - b) ** 2) * grad_output).sum()
        h = 1e-6
        grads = []
        for k, t in enumerate((a, b)):
            d = torch.zeros_like(t)
            flat = d.reshape(-1)
            for i in range(t.numel()):
                e = torch.zeros(t.numel(), dtype=t.dtype)
                e[i] = h
                up, down = [a, b], [a, b]
                up[k], down[k] = t + e.reshape(t.shape), t - e.reshape(t.shape)
                flat[i] = (loss(*up) - loss(*down)) / (2 * h)
            grads.append(d)
        return tuple(grads)''')
# backward estimated numerically.
GAP_NUMERICAL = _GAP.format(
    "        return bl.numerical_grad(lambda a, b: (((a - b) ** 2) * grad_output).sum(), a, b)")

_LSE = '''class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=-1, keepdim=True)
        out = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(dim=-1))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
{}
'''
# backward asks autograd for torch's own logsumexp gradient.
LSE_NODE = _LSE.format('''        with torch.enable_grad():
            xx = x.detach().requires_grad_()
            return torch.autograd.grad(torch.logsumexp(xx, -1), xx, grad_output)[0]''')
# backward estimated numerically.
LSE_NUMERICAL = _LSE.format(
    "        return bl.numerical_grad(\n"
    "            lambda t: (torch.logsumexp(t, -1) * grad_output).sum(), x)[0]")
# backward by central differences of its own, entry by entry.
LSE_FD = _LSE.format('''        h, flat = 1e-6, x.reshape(-1)
        grad = torch.zeros_like(flat)
        for i in range(flat.numel()):
            e = torch.zeros_like(flat)
            e[i] = h
            up = (torch.logsumexp((flat + e).reshape(x.shape), -1) * grad_output).sum()
            down = (torch.logsumexp((flat - e).reshape(x.shape), -1) * grad_output).sum()
            grad[i] = (up - down) / (2 * h)
        return grad.reshape(x.shape)''')
# torch.func's grad inside backward.
LSE_FUNC = _LSE.format(
    "        return torch.func.grad(lambda t: (torch.logsumexp(t, -1) * grad_output).sum())(x)")

# Exercise 5's Gate, right but for jvp's body ({}): forward mode run by torch, a finite
# difference along the tangent, dual numbers.
_GATE = (
    "class Gate(torch.autograd.Function):\n"
    "    generate_vmap_rule = True\n\n"
    "    @staticmethod\n"
    "    def forward(x, g):\n"
    "        return x * torch.sigmoid(g)\n\n"
    "    @staticmethod\n"
    "    def setup_context(ctx, inputs, output):\n"
    "        x, g = inputs\n"
    "        ctx.save_for_backward(x, torch.sigmoid(g))\n"
    "        ctx.save_for_forward(x, torch.sigmoid(g))\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, grad_output):\n"
    "        x, s = ctx.saved_tensors\n"
    "        return grad_output * s, grad_output * x * s * (1 - s)\n\n"
    "    @staticmethod\n"
    "    def jvp(ctx, x_t, g_t):\n"
    "        x, s = ctx.saved_tensors\n"
    "        gate = lambda a, b: a * torch.sigmoid(b)\n"
    "{}"
)
GATE_FUNC = _GATE.format(
    "        return torch.func.jvp(gate, (x, torch.logit(s)), (x_t, g_t))[1]\n")
GATE_FD = _GATE.format(
    "        g, h = torch.logit(s), 1e-6\n"
    "        return (gate(x + h * x_t, g + h * g_t) - gate(x - h * x_t, g - h * g_t)) / (2 * h)\n")
GATE_DUAL = _GATE.format(
    "        import torch.autograd.forward_ad as fwAD\n"
    "        with fwAD.dual_level():\n"
    "            out = gate(fwAD.make_dual(x, x_t), fwAD.make_dual(torch.logit(s), g_t))\n"
    "            return fwAD.unpack_dual(out).tangent\n")

CHEATS = {
    "l19-power-mix": [
        (POWER_FD, "numerical estimate"),
        (POWER_NUMERICAL, "numerical_grad"),
        (POWER_AUTOGRAD, "enable_grad"),
        (POWER_FUNC, "torch.func.grad"),
        (POWER_TABLE, "mismatch"),
    ],
    "l19-softplus-in-place": [
        (SOFTPLUS_KERNEL, "backward kernels"),
        (SOFTPLUS_NODE, "enable_grad"),
        (SOFTPLUS_FD, "numerical estimate"),
        (SOFTPLUS_COMPLEX, "complex"),
        (SOFTPLUS_NUMERICAL, "numerical_grad"),
        (SOFTPLUS_TABLE, "backward gives"),  # the table knows nothing of x = 800
    ],
    "l19-broadcast-function": [
        (GAP_NODE, "enable_grad"),
        (GAP_FD, "numerical estimate"),
        (GAP_NUMERICAL, "numerical_grad"),
    ],
    "l19-logsumexp": [
        (LSE_NODE, "enable_grad"),
        (LSE_NUMERICAL, "numerical_grad"),
        (LSE_FD, "numerical estimate"),
        (LSE_FUNC, "torch.func.grad"),
    ],
    "l19-gate-jvp": [
        (GATE_FUNC, "torch.func.jvp"),
        (GATE_FD, "numerical estimate"),
        (GATE_DUAL, "dual numbers"),
    ],
}
