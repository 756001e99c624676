"""Shortcuts around the check of 24-custom-ops.ipynb; each must fail it.

The exercise asks for a backward derived by the learner. The check calls the learner's
setup_context and backward as plain functions with autograd switched off, on float64 inputs,
and asks for round-off agreement: autograd inside the backward (on a recomputed forward in
torch operations), torch.func, and central differences or bl.numerical_grad through the numpy
forward are refused.
"""

PIECES = (
    "def rms_norm_fake(x, w, eps):\n"
    "    return torch.empty_like(x)\n\n\n"
    "def rms_norm_setup_context(ctx, inputs, output):\n"
    "    x, w, eps = inputs\n"
    "    ctx.save_for_backward(x, w)\n"
    "    ctx.eps = eps\n\n\n"
    "def rms_norm_backward(ctx, grad):\n"
    "    x, w = ctx.saved_tensors\n"
    "    eps = ctx.eps\n"
    "{}"
)

CHEATS = {
    "l24-rms-norm-op": [
        # Autograd on the RMS norm written in torch operations, inside the backward.
        (PIECES.format(
            "    with torch.enable_grad():\n"
            "        xx, ww = x.detach().requires_grad_(), w.detach().requires_grad_()\n"
            "        y = xx * torch.rsqrt(xx.pow(2).mean(-1, keepdim=True) + eps) * ww\n"
            "        dx, dw = torch.autograd.grad(y, (xx, ww), grad)\n"
            "    return dx, dw, None\n"), "by hand"),
        # torch.func's vjp of the same.
        (PIECES.format(
            "    def y(a, b):\n"
            "        return a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * b\n"
            "    _, pull = torch.func.vjp(y, x, w)\n"
            "    dx, dw = pull(grad)\n"
            "    return dx, dw, None\n"), "by hand"),
        # torch's own rms_norm differentiated with autograd.
        (PIECES.format(
            "    with torch.enable_grad():\n"
            "        xx, ww = x.detach().requires_grad_(), w.detach().requires_grad_()\n"
            "        y = torch.nn.functional.rms_norm(xx, (xx.shape[-1],), ww, eps)\n"
            "        y.backward(grad)\n"
            "    return xx.grad, ww.grad, None\n"), "by hand"),
        # Central differences through the numpy forward, entry by entry.
        (PIECES.format(
            "    def loss(a, b):\n"
            "        return (rms_norm_forward(a, b, eps) * grad).sum()\n"
            "    grads = []\n"
            "    for t in (x, w):\n"
            "        d = torch.zeros_like(t)\n"
            "        for i in range(t.numel()):\n"
            "            e = torch.zeros_like(t)\n"
            "            e.view(-1)[i] = 1e-6\n"
            "            plus = loss(x + e, w) if t is x else loss(x, w + e)\n"
            "            minus = loss(x - e, w) if t is x else loss(x, w - e)\n"
            "            d.view(-1)[i] = (plus - minus) / 2e-6\n"
            "        grads.append(d)\n"
            "    return grads[0], grads[1], None\n"), "numerical estimate"),
        # bl.numerical_grad through the numpy forward.
        (PIECES.format(
            "    def loss(a, b):\n"
            "        return (rms_norm_forward(a, b, eps) * grad).sum()\n"
            "    (dx,) = bl.numerical_grad(lambda a: loss(a, w), x)\n"
            "    (dw,) = bl.numerical_grad(lambda b: loss(x, b), w)\n"
            "    return dx, dw, None\n"), "evaluates at nudged inputs"),
    ],
}
