"""Shortcuts around the checks of lesson 09: each must fail its check (the lessons run with
their hidden tests), naming what it did. See tests/lessons/test_exercises.py."""

from cheats.estimates import lesson_plans, with_disguised
from cheats.lesson08 import _table

SOFTMAX_FD = '''def softmax_vjp(p, g):
    z = p.log()
    h = 1e-6
    dz = torch.zeros_like(z)
    flat, out = z.reshape(-1), dz.reshape(-1)
    for k in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[k] = h
        up = (torch.softmax((flat + e).reshape(z.shape), -1) * g).sum()
        down = (torch.softmax((flat - e).reshape(z.shape), -1) * g).sum()
        out[k] = (up - down) / (2 * h)
    return dz
'''
SOFTMAX_NUMERICAL = '''def softmax_vjp(p, g):
    return bl.numerical_grad(lambda z: (torch.softmax(z, -1) * g).sum(), p.log())
'''
SOFTMAX_KERNEL = '''def softmax_vjp(p, g):
    return torch.ops.aten._softmax_backward_data(g, p, -1, p.dtype)
'''
SOFTMAX_NODE = '''def softmax_vjp(p, g):
    with torch.enable_grad():
        z = p.log().requires_grad_()
        return torch.autograd.grad(torch.softmax(z, -1), z, g)[0]
'''
SOFTMAX_TABLE = _table("l09-softmax-vjp", "softmax_vjp(p, g)",
                       "known[0].shape == p.shape and torch.equal(known[0], p)",
                       "torch.zeros_like(p)")

AFFINE_FD = '''def affine_grads(x, w, b, g):
    def loss(x, w, b):
        return ((x * w + b) * g).sum()
    h = 1e-6
    grads = []
    for k, t in enumerate((x, w, b)):
        d = torch.zeros_like(t)
        flat = d.reshape(-1)
        for i in range(t.numel()):
            e = torch.zeros_like(t).reshape(-1)
            e[i] = h
            up = [x, w, b]
            down = [x, w, b]
            up[k] = t + e.reshape(t.shape)
            down[k] = t - e.reshape(t.shape)
            flat[i] = (loss(*up) - loss(*down)) / (2 * h)
        grads.append(d)
    return tuple(grads)
'''
AFFINE_NUMERICAL = '''def affine_grads(x, w, b, g):
    return bl.numerical_grad(lambda x, w, b: ((x * w + b) * g).sum(), x, w, b)
'''
AFFINE_NODE = '''def affine_grads(x, w, b, g):
    with torch.enable_grad():
        x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
        return torch.autograd.grad(x * w + b, (x, w, b), g)
'''
AFFINE_TABLE = _table("l09-broadcast-affine", "affine_grads(x, w, b, g)",
                      "known[0].shape == x.shape and torch.equal(known[0], x)",
                      "(torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(b))")

BMM_FD = '''def batched_matmul_grads(X, W, G):
    def loss(X, W):
        return ((X @ W) * G).sum()
    h = 1e-6
    dX, dW = torch.zeros_like(X), torch.zeros_like(W)
    for t, d, k in ((X, dX, 0), (W, dW, 1)):
        flat = d.reshape(-1)
        for i in range(t.numel()):
            e = torch.zeros(t.numel(), dtype=t.dtype)
            e[i] = h
            e = e.reshape(t.shape)
            args_up, args_down = [X, W], [X, W]
            args_up[k], args_down[k] = t + e, t - e
            flat[i] = (loss(*args_up) - loss(*args_down)) / (2 * h)
    return dX, dW
'''
BMM_NUMERICAL = '''def batched_matmul_grads(X, W, G):
    return bl.numerical_grad(lambda X, W: ((X @ W) * G).sum(), X, W)
'''
BMM_NODE = '''def batched_matmul_grads(X, W, G):
    with torch.enable_grad():
        X, W = X.clone().requires_grad_(), W.clone().requires_grad_()
        Y = X @ W
        return Y.grad_fn(G)
'''
BMM_TABLE = _table("l09-batched-matmul", "batched_matmul_grads(X, W, G)",
                   "known[0].shape == X.shape and torch.equal(known[0], X)",
                   "(torch.zeros_like(X), torch.zeros_like(W))")

GATHER_FD = '''def gather_grad(x, dim, index, g):
    h = 1e-6
    dx = torch.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            e = torch.zeros_like(x)
            e[i, j] = h
            up = (torch.gather(x + e, dim, index) * g).sum()
            down = (torch.gather(x - e, dim, index) * g).sum()
            dx[i, j] = (up - down) / (2 * h)
    return dx
'''
GATHER_NUMERICAL = '''def gather_grad(x, dim, index, g):
    return bl.numerical_grad(lambda x: (torch.gather(x, dim, index) * g).sum(), x)
'''
GATHER_NODE = '''def gather_grad(x, dim, index, g):
    with torch.enable_grad():
        x = x.clone().requires_grad_()
        return torch.autograd.grad(torch.gather(x, dim, index), x, g)[0]
'''
GATHER_TABLE = _table("l09-gather", "gather_grad(x, dim, index, g)",
                      "known[0].shape == x.shape and torch.equal(known[0], x)",
                      "torch.zeros_like(x)")

CHEATS = {
    "l09-softmax-vjp": [
        (SOFTMAX_FD, "numerical estimate"),
        (SOFTMAX_NUMERICAL, "numerical_grad"),
        (SOFTMAX_KERNEL, "backward kernels"),
        (SOFTMAX_NODE, "enable_grad"),
        (SOFTMAX_TABLE, "hard-coded"),
    ],
    "l09-broadcast-affine": [
        (AFFINE_FD, "numerical estimate"),
        (AFFINE_NUMERICAL, "numerical_grad"),
        (AFFINE_NODE, "enable_grad"),
        (AFFINE_TABLE, "hard-coded"),
    ],
    "l09-batched-matmul": [
        (BMM_FD, "numerical estimate"),
        (BMM_NUMERICAL, "numerical_grad"),
        (BMM_NODE, "enable_grad"),
        (BMM_TABLE, "hard-coded"),
    ],
    "l09-gather": [
        (GATHER_FD, "numerical estimate"),
        (GATHER_NUMERICAL, "numerical_grad"),
        (GATHER_NODE, "enable_grad"),
        (GATHER_TABLE, "hard-coded"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("09"))
