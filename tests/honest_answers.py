"""Honest answers in the many styles a learner writes them, each right.

Every one must pass its check in the kernel (feedback never refuses honest code)
and get every point from ``backproplab grade`` (tests/course/test_grade.py).
Entries: ``Honest(key, style, source, earlier)``: ``source`` replaces the solution
cell; ``earlier``, when given, is a cell of the learner's own put just above it
(helpers defined in an earlier cell).
"""

from __future__ import annotations

from typing import NamedTuple


class Honest(NamedTuple):
    key: str
    style: str
    source: str
    earlier: str | None = None


HONEST = [
    # ---------------------------------------------------------------- lesson 02
    Honest("l02-cubic", "other names", "def cubic_slope(t):\n    return 3 * t * t - 8 * t\n"),
    Honest("l02-cubic", "a lambda", "cubic_slope = lambda x: x * (3 * x - 8)\n"),
    Honest("l02-cubic", "torch.no_grad", (
        "def cubic_slope(x):\n    with torch.no_grad():\n        slope = 3 * x.pow(2)\n"
        "        slope -= 8 * x\n    return slope\n")),
    Honest("l02-cubic", "a helper in an earlier cell", "def cubic_slope(x):\n"
           "    return derivative_of_power(x, 3) - 4 * derivative_of_power(x, 2)\n",
           "def derivative_of_power(x, n):\n    return n * x ** (n - 1)\n"),
    Honest("l02-cubic", "a class with __call__", (
        "class Polynomial:\n    def __init__(self, coefficients):\n"
        "        self.coefficients = coefficients\n\n    def __call__(self, x):\n"
        "        return sum(k * c * x ** (k - 1) for k, c in enumerate(self.coefficients)"
        " if k)\n\n\ncubic_slope = Polynomial([5, 0, -4, 1])\n")),
    Honest("l02-cubic", "a bound method", (
        "class Slopes:\n    def cubic(self, x):\n        return 3 * x**2 - 8 * x\n\n\n"
        "cubic_slope = Slopes().cubic\n")),
    Honest("l02-chain", "a residual attribute", (
        "class Layer:\n    def __init__(self):\n        self.residual = None\n\n"
        "    def grads(self, x, w, b):\n        self.residual = 1 - torch.tanh(w * x + b) ** 2\n"
        "        return self.residual * w, self.residual * x, self.residual\n\n\n"
        "def tanh_grads(x, w, b):\n    return Layer().grads(x, w, b)\n")),
    Honest("l02-chain", "in-place ops", (
        "def tanh_grads(x, w, b):\n    outer = torch.tanh(w * x + b)\n    outer.pow_(2)\n"
        "    outer.neg_().add_(1)\n    return outer * w, outer * x, outer.clone()\n")),
    Honest("l02-chain", "cosh", (
        "def tanh_grads(x, w, b):\n    outer = 1 / torch.cosh(w * x + b) ** 2\n"
        "    return outer * w, outer * x, outer\n")),
    Honest("l02-shared", "a dict of partials", (
        "def shared_grads(x, y, z):\n    u = x * y\n"
        "    d = {'u': torch.sin(u) + (u - z) * torch.cos(u)}\n"
        "    return d['u'] * y, d['u'] * x, -torch.sin(u)\n")),
    # ---------------------------------------------------------------- lesson 04
    Honest("l04-grads", "sum divided by len", (
        "def mse_grads(x, y, w, b):\n    r = w * x + b - y\n    n = len(x)\n"
        "    return 2 * (r * x).sum() / n, 2 * r.sum() / n\n")),
    Honest("l04-grads", "a comprehension", (
        "def mse_grads(x, y, w, b):\n    n = len(x)\n"
        "    dw = sum(2 * (w * xi + b - yi) * xi for xi, yi in zip(x, y)) / n\n"
        "    db = sum(2 * (w * xi + b - yi) for xi, yi in zip(x, y)) / n\n    return dw, db\n")),
    Honest("l04-grads", "dot products", (
        "def mse_grads(x, y, w, b):\n    r = w * x + b - y\n"
        "    return 2 * torch.dot(r, x) / x.numel(), 2 * r.mean()\n")),
    Honest("l04-grads", "einsum", (
        "def mse_grads(x, y, w, b):\n    r = w * x + b - y\n"
        "    return 2 * torch.einsum('i,i->', r, x) / len(x), 2 * torch.einsum('i->', r) / len(x)\n")),
    Honest("l04-grads", "a dataclass", (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Line:\n    w: torch.Tensor\n"
        "    b: torch.Tensor\n\n    def residual(self, x, y):\n        return self.w * x + self.b - y\n\n\n"
        "def mse_grads(x, y, w, b):\n    r = Line(w, b).residual(x, y)\n"
        "    return (2 * r * x).mean(), (2 * r).mean()\n")),
    Honest("l04-huber", "torch.where", (
        "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n"
        "    pull = torch.where(r.abs() <= delta, r, delta * torch.sign(r))\n"
        "    return (pull * x).mean(), pull.mean()\n")),
    Honest("l04-huber", "a helper in an earlier cell", (
        "def huber_grads(x, y, w, b, delta):\n    pull = clipped(w * x + b - y, delta)\n"
        "    return (pull * x).mean(), pull.mean()\n"),
        "def clipped(r, limit):\n    return torch.minimum(torch.maximum(r, -limit + 0 * r), "
        "limit + 0 * r)\n"),
    Honest("l04-huber", "a loop with masks", (
        "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n    pull = r.clone()\n"
        "    pull[r > delta] = delta\n    pull[r < -delta] = -delta\n"
        "    return (pull * x).mean(), pull.mean()\n")),
    # ---------------------------------------------------------------- lesson 05, 06
    Honest("l05-tied", "a loop over the steps", (
        "def rnn_grad(W, h0, x1, x2, y):\n    hs = [h0]\n    for x in (x1, x2):\n"
        "        hs.append(torch.tanh(hs[-1] @ W + x))\n"
        "    dh, dW = 2 * (hs[-1] - y), torch.zeros_like(W)\n"
        "    for step in (2, 1):\n        dpre = dh * (1 - hs[step] ** 2)\n"
        "        dW += torch.outer(hs[step - 1], dpre)\n        dh = W @ dpre\n    return dW\n")),
    Honest("l05-tied", "einsum outer products", (
        "def rnn_grad(W, h0, x1, x2, y):\n    h1 = torch.tanh(h0 @ W + x1)\n"
        "    h2 = torch.tanh(h1 @ W + x2)\n    d2 = 2 * (h2 - y) * (1 - h2 * h2)\n"
        "    d1 = (W @ d2) * (1 - h1 * h1)\n"
        "    return torch.einsum('i,j->ij', h1, d2) + torch.einsum('i,j->ij', h0, d1)\n")),
    Honest("l06-never-zeroed", "a running sum in a list", (
        "def never_zeroed(w, b, X, t, lr, steps):\n    sums = [torch.zeros_like(w), "
        "torch.zeros_like(b)]\n    for _ in range(steps):\n"
        "        dz = (torch.sigmoid(X @ w + b) - t) / t.numel()\n"
        "        sums[0] = sums[0] + dz @ X\n        sums[1] = sums[1] + dz.sum()\n"
        "        w, b = w - lr * sums[0], b - lr * sums[1]\n    return w, b\n")),
    # ---------------------------------------------------------------- lesson 08
    Honest("l08-shares-vjp", "a helper", (
        "def shares_vjp(x, v):\n    total = x.sum()\n    return (v - weighted(v, x) / total) / total\n"),
        "def weighted(v, x):\n    return (v * x).sum()\n"),
    Honest("l08-softmax-vjp", "matmul form", (
        "def softmax_vjp(p, g):\n    inner = (g.unsqueeze(-2) @ p.unsqueeze(-1)).squeeze(-1)\n"
        "    return p * (g - inner)\n")),
    Honest("l08-softmax-vjp", "einsum", (
        "def softmax_vjp(p, g):\n    inner = torch.einsum('...i,...i->...', g, p)[..., None]\n"
        "    return p * g - p * inner\n")),
    Honest("l08-broadcast-affine", "sum over a tuple of dims via reshape", (
        "def affine_grads(x, w, b, g):\n    flat_g = g.reshape(-1, g.shape[-1])\n"
        "    flat_x = x.reshape(-1, x.shape[-1])\n"
        "    return g * w, (flat_g * flat_x).sum(0), flat_g.sum(0)\n")),
    Honest("l08-batched-matmul", "transpose and loops", (
        "def batched_matmul_grads(X, W, G):\n    dW = torch.zeros_like(W)\n"
        "    for k in range(X.shape[0]):\n        dW += X[k].T @ G[k]\n"
        "    return G @ W.transpose(-1, -2), dW\n")),
    Honest("l08-gather", "index_put with accumulate", (
        "def gather_grad(x, dim, index, g):\n    out = torch.zeros_like(x)\n"
        "    return out.scatter_add(dim, index, g)\n")),
    Honest("l08-mean-gradient", "new_zeros", (
        "def last_row_mean_vector(y):\n    v = y.new_zeros(y.shape)\n"
        "    v[-1, :] = 1.0 / y.size(1)\n    return v\n")),
    # ---------------------------------------------------------------- lesson 09
    Honest("l09-bce", "1 / (1 + exp)", (
        "def dlogits_bce(z, y):\n    return (1 / (1 + torch.exp(-z)) - y) / z.numel()\n")),
    Honest("l09-dlogits", "math and a helper", (
        "def dlogits_sigmoid_mse(z, y):\n    p = sigmoid(z)\n"
        "    return 2 * (p - y) * p * (1 - p) / math.prod(z.shape)\n"),
        "import math\n\n\ndef sigmoid(t):\n    return torch.special.expit(t)\n"),
    Honest("l09-mlp", "a class of layers", (
        "class Dense:\n    def __init__(self, W, b):\n        self.W, self.b = W, b\n\n"
        "    def forward(self, x):\n        self.x = x\n        return x @ self.W + self.b\n\n"
        "    def backward(self, dout):\n        self.dW, self.db = self.x.T @ dout, dout.sum(0)\n"
        "        return dout @ self.W.T\n\n\n"
        "def mlp_backward(xs, ys, W1, b1, W2, b2):\n    first, second = Dense(W1, b1), Dense(W2, b2)\n"
        "    hidden = torch.tanh(first.forward(xs))\n    logits = second.forward(hidden)\n"
        "    dhidden = second.backward((torch.sigmoid(logits) - ys) / logits.numel())\n"
        "    first.backward(dhidden * (1 - hidden**2))\n"
        "    return first.dW, first.db, second.dW, second.db\n")),
    # ---------------------------------------------------------------- lesson 10
    Honest("l10-linear", "einsum", (
        "def linear_backward(inp, W, dout):\n    return (torch.einsum('nj,ij->ni', dout, W), "
        "torch.einsum('ni,nj->ij', inp, dout), dout.sum(dim=0))\n")),
    Honest("l10-layernorm", "var with unbiased=False", (
        "def layernorm_backward(dout, x, gain, eps):\n    n = x.shape[-1]\n"
        "    xhat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, "
        "keepdim=True) + eps)\n    g = dout * gain\n"
        "    inv = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)\n"
        "    return inv * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, "
        "keepdim=True))\n")),
    Honest("l10-dlogits", "scatter instead of one_hot", (
        "def dlogits(logits, dshifted, dlogit_maxes):\n"
        "    largest = torch.zeros_like(logits).scatter_(1, logits.argmax(1, keepdim=True), 1.0)\n"
        "    return dshifted + largest * dlogit_maxes\n")),
    # ---------------------------------------------------------------- lessons 13, 14, 17, 19
    Honest("l13-hvp-by-hand", "named steps", (
        "def hvp(x, W, a, V):\n    pre = x @ W\n    th = pre.tanh()\n    slope = 1 - th * th\n"
        "    d_slope = -2 * th * slope * (x @ V)\n    return x.t() @ (d_slope * a)\n")),
    Honest("l14-jvp-by-hand", "a dual pair as a tuple", (
        "def tangent(W, b, x, v):\n    def tanh_pair(u, du):\n        h = torch.tanh(u)\n"
        "        return h, (1 - h * h) * du\n"
        "    h, dh = tanh_pair(W @ x + b, W @ v)\n    s, ds = (x * x).sum(), 2 * (x * v).sum()\n"
        "    return dh * s + h * ds\n")),
    Honest("l17-scale-range", "math.log2", (
        "import math\n\n\ndef scale_range(x, W, b, t):\n    r = x @ W.T + b - t\n    dy = 2 * r / r.numel()\n"
        "    dW, db = dy.T @ x, dy.sum(0)\n    tiny = torch.finfo(torch.float16).tiny\n"
        "    big = torch.finfo(torch.float16).max\n    small = dy.abs()[dy != 0].min().item()\n"
        "    large = max(dW.abs().max().item(), db.abs().max().item())\n"
        "    return (torch.tensor(2.0 ** math.ceil(math.log2(tiny / small)), dtype=x.dtype),\n"
        "            torch.tensor(2.0 ** math.floor(math.log2(big / large)), dtype=x.dtype))\n")),
    Honest("l19-heads", "einsum and transpose(-2, -1)", (
        "def attention_backward(Q, K, V, lse, dO):\n    d = Q.size(-1)\n"
        "    keep = torch.ones(Q.size(-2), Q.size(-2)).tril().bool()\n"
        "    P = torch.where(keep, torch.exp(torch.einsum('bhid,bhjd->bhij', Q, K) / d**0.5"
        " - lse), 0.0)\n"
        "    dP = torch.einsum('bhid,bhjd->bhij', dO, V)\n"
        "    dS = P * dP - P * (P * dP).sum(-1, keepdim=True)\n"
        "    return (torch.matmul(dS, K) / d**0.5, torch.matmul(dS.transpose(-2, -1), Q) / d**0.5,"
        "\n            torch.matmul(P.transpose(-2, -1), dO))\n")),
    Honest("l19-flash", "query and key blocks, FlashAttention-2's order", (
        "def flash_backward(Q, K, V, O, lse, dO, block):\n    T = Q.shape[-2]\n"
        "    scale = 1 / math.sqrt(Q.shape[-1])\n    delta = (O * dO).sum(-1, keepdim=True)\n"
        "    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)\n"
        "    for j in range(0, T, block):\n        keys = slice(j, j + block)\n"
        "        for i in range(j, T, block):  # earlier queries see none of these keys\n"
        "            rows = slice(i, i + block)\n"
        "            q_pos = torch.arange(T)[rows].unsqueeze(-1)\n"
        "            k_pos = torch.arange(T)[keys].unsqueeze(0)\n"
        "            S = Q[..., rows, :] @ K[..., keys, :].transpose(-1, -2) * scale\n"
        "            P = torch.exp(S - lse[..., rows, :]) * (k_pos <= q_pos)\n"
        "            dV[..., keys, :] += P.transpose(-1, -2) @ dO[..., rows, :]\n"
        "            dP = dO[..., rows, :] @ V[..., keys, :].transpose(-1, -2)\n"
        "            dS = P * (dP - delta[..., rows, :]) * scale\n"
        "            dQ[..., rows, :] += dS @ K[..., keys, :]\n"
        "            dK[..., keys, :] += dS.transpose(-1, -2) @ Q[..., rows, :]\n"
        "    return dQ, dK, dV\n")),
    # ---------------------------------------------------------------- method exercises
    Honest("l15-softplus-in-place", "the ctx form, x recovered from y", (
        "class SoftplusInPlace(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        ctx.mark_dirty(x)\n"
        "        torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)),"
        " out=x)\n"
        "        ctx.save_for_backward(x)\n        return x\n\n    @staticmethod\n"
        "    def backward(ctx, grad_output):\n        (y,) = ctx.saved_tensors\n"
        "        x = torch.log(torch.expm1(y))  # softplus is invertible\n"
        "        return grad_output / (1 + torch.exp(-x))\n")),
    Honest("l05-microbatch", "an index loop", (
        "def accumulate(w, X, t, sizes):\n    start = 0\n    for size in sizes:\n"
        "        part = slice(start, start + size)\n"
        "        loss = ((X[part] @ w - t[part]) ** 2).sum() / len(X)\n        loss.backward()\n"
        "        start += size\n")),
    Honest("l07-one-backward", "a detached weight", (
        "def one_backward(main, aux):\n    weight = 1 / main.detach()\n"
        "    total = weight * main + aux\n    total.backward()\n")),
    Honest("l11-reverse", "a class-based hook", (
        "class Clip:\n    def __init__(self, limit):\n        self.limit = limit\n\n"
        "    def __call__(self, grad):\n        norm = torch.linalg.vector_norm(grad)\n"
        "        if norm > self.limit:\n            return grad * (self.limit / norm)\n"
        "        return grad\n\n\ndef clip_hook(max_norm):\n    return Clip(max_norm)\n")),
    Honest("l11-reverse", "torch.clamp of the factor", (
        "def clip_hook(max_norm):\n    def hook(g):\n"
        "        return g * torch.clamp(max_norm / g.norm(), max=1.0)\n    return hook\n")),
]
