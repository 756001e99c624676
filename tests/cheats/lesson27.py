"""Shortcuts around the check of 27-custom-ops.ipynb; each must fail it.

The exercise asks for a backward derived by the learner. The check calls the learner's
setup_context and backward as plain functions with autograd switched off, on float64 inputs,
and asks for round-off agreement: autograd inside the backward (on a recomputed forward in
torch operations), torch.func, and central differences or bl.numerical_grad through the numpy
forward are refused. Exercise 2 asks for a forward-mode rule derived by hand: forward mode
done by torch (torch.func.jvp, dual numbers) and estimates along the tangents are refused.
"""

from cheats.estimates import lesson_plans, with_disguised

_NORM = "a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * b"

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
    "l27-rms-norm-op": [
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
    "l27-rms-norm-jvp": [
        # torch.func's jvp of the norm in torch operations.
        ("def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
         f"    return torch.func.jvp(lambda a, b: {_NORM}, (x, w), (x_t, w_t))[1]\n",
         "by hand"),
        # Dual numbers carry the tangents.
        ("import torch.autograd.forward_ad as fwAD\n\n\n"
         "def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
         "    with fwAD.dual_level():\n"
         "        a, b = fwAD.make_dual(x, x_t), fwAD.make_dual(w, w_t)\n"
         f"        return fwAD.unpack_dual({_NORM}).tangent\n", "make_dual"),
        # torch's own rms_norm under jvp.
        ("def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
         "    def y(a, b):\n"
         "        return torch.nn.functional.rms_norm(a, (a.shape[-1],), b, eps)\n"
         "    return torch.func.jvp(y, (x, w), (x_t, w_t))[1]\n", "by hand"),
        # A central difference along the tangents, through the numpy forward.
        ("def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
         "    h = 1e-6\n"
         "    plus = rms_norm_forward(x + h * x_t, w + h * w_t, eps)\n"
         "    minus = rms_norm_forward(x - h * x_t, w - h * w_t, eps)\n"
         "    return (plus - minus) / (2 * h)\n", "another numeric or symbolic library"),
        # The same central difference through the norm in torch operations.
        ("def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
         "    def y(a, b):\n"
         f"        return {_NORM}\n"
         "    h = 1e-6\n"
         "    return (y(x + h * x_t, w + h * w_t) - y(x - h * x_t, w - h * w_t)) / (2 * h)\n",
         "numerical estimate"),
    ],
    "l27-rms-norm-vmap": [
        # the norm written again in torch operations: the op's kernel never runs
        ("def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    x_dim, w_dim, _ = in_dims\n"
         "    if x_dim is not None:\n"
         "        x = x.movedim(x_dim, 0)\n"
         "    if w_dim is not None:\n"
         "        w = w.movedim(w_dim, 0).unsqueeze(1)\n"
         "    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n"
         "    return x * r * w, 0\n",
         "never called rms_norm_forward"),
        # a table of the visible check's results (its 4 batches): the op's kernel never runs
        ("from backproplab.course.exercises.lesson27 import _one_by_one, vmap_inputs\n\n"
         "TABLE = {}\n"
         "for case in vmap_inputs(torch.Generator().manual_seed(0))['cases']:\n"
         "    TABLE[round(case['x'].sum().item(), 9)] = _one_by_one(case)\n\n\n"
         "def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    return TABLE[round(x.sum().item(), 9)], 0\n",
         "never called rms_norm_forward"),
        # vmap's own loop, asked for by name
        ("def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    one = lambda a, b: rms_norm_forward(a, b, eps)\n"
         "    return torch.vmap(one, in_dims=in_dims[:2])(x, w), 0\n",
         "raised"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py) for the by-hand exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("27"))
