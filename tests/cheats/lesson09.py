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

NORMALIZE_FD = '''def normalize_vjp(x, g):
    h = 1e-6
    dx = torch.zeros_like(x)
    flat, out = x.reshape(-1), dx.reshape(-1)
    for k in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[k] = h
        up, down = (flat + e).reshape(x.shape), (flat - e).reshape(x.shape)
        out[k] = ((up / up.norm(dim=-1, keepdim=True) * g).sum()
                  - (down / down.norm(dim=-1, keepdim=True) * g).sum()) / (2 * h)
    return dx
'''
NORMALIZE_NUMERICAL = '''def normalize_vjp(x, g):
    return bl.numerical_grad(lambda x: (x / x.norm(dim=-1, keepdim=True) * g).sum(), x)
'''
NORMALIZE_NODE = '''def normalize_vjp(x, g):
    with torch.enable_grad():
        x = x.clone().requires_grad_()
        return torch.autograd.grad(torch.nn.functional.normalize(x, dim=-1), x, g)[0]
'''
NORMALIZE_TABLE = _table("l09-normalize", "normalize_vjp(x, g)",
                         "known[0].shape == x.shape and torch.equal(known[0], x)",
                         "torch.zeros_like(x)")

BILINEAR_FD = '''def bilinear_grads(x, W, y, g):
    def loss(x, W, y):
        return (((x @ W) * y).sum(-1) * g).sum()
    h = 1e-6
    grads = []
    for k, t in enumerate((x, W, y)):
        d = torch.zeros_like(t)
        flat = d.reshape(-1)
        for i in range(t.numel()):
            e = torch.zeros(t.numel(), dtype=t.dtype)
            e[i] = h
            up, down = [x, W, y], [x, W, y]
            up[k], down[k] = t + e.reshape(t.shape), t - e.reshape(t.shape)
            flat[i] = (loss(*up) - loss(*down)) / (2 * h)
        grads.append(d)
    return tuple(grads)
'''
BILINEAR_NUMERICAL = '''def bilinear_grads(x, W, y, g):
    return bl.numerical_grad(lambda x, W, y: (((x @ W) * y).sum(-1) * g).sum(), x, W, y)
'''
BILINEAR_NODE = '''def bilinear_grads(x, W, y, g):
    with torch.enable_grad():
        x, W, y = (t.clone().requires_grad_() for t in (x, W, y))
        s = torch.nn.functional.bilinear(x, y, W[None]).squeeze(-1)
        return torch.autograd.grad(s, (x, W, y), g)
'''
BILINEAR_TABLE = _table("l09-bilinear", "bilinear_grads(x, W, y, g)",
                        "known[0].shape == x.shape and torch.equal(known[0], x)",
                        "(torch.zeros_like(x), torch.zeros_like(W), torch.zeros_like(y))")

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
    "l09-normalize": [
        (NORMALIZE_FD, "numerical estimate"),
        (NORMALIZE_NUMERICAL, "numerical_grad"),
        (NORMALIZE_NODE, "enable_grad"),
        (NORMALIZE_TABLE, "hard-coded"),
    ],
    "l09-bilinear": [
        (BILINEAR_FD, "numerical estimate"),
        (BILINEAR_NUMERICAL, "numerical_grad"),
        (BILINEAR_NODE, "enable_grad"),
        (BILINEAR_TABLE, "hard-coded"),
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
