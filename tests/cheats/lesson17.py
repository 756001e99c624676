"""Shortcuts around the checks of 17-higher-order-gradients.ipynb; each must fail its check.

The first two exercises are method checks (autograd is the point), so their shortcuts are
tables of the visible check's inputs; the third is by hand, so its shortcuts are a numerical
estimate, autograd in its forms, torch's backward kernels and a table.
"""

from cheats.estimates import lesson_plans, with_disguised

# Answers for the inputs of the visible check (seed 0; seeds 1 and 2 too), made
# with the lesson module's own input maker, looked up by the points' values.
NEWTON_TABLE = '''import torch
from backproplab.course.exercises.lesson17 import newton as _l07

_TABLE = {}
for _seed in (0, 1, 2):
    for _case in _l07._newton_inputs(torch.Generator().manual_seed(_seed))["functions"]:
        _TABLE[tuple(_case["points"].tolist())] = (-_l07.derivative(_case, 1)
                                                   / _l07.derivative(_case, 2))


def newton_step(f, x):
    return _TABLE.get(tuple(x.tolist()), torch.zeros_like(x))
'''

# The visible check's critics looked up by their inputs; zeros for anything else.
PENALTY_TABLE = '''import torch
from backproplab.course.exercises.lesson17 import newton as _l13

_TABLE = {}
for _seed in (0, 1, 2):
    _gen = torch.Generator().manual_seed(_seed)
    for _ in range(2):
        _label, _f, _x, _w = _l13._critic(_gen)
        _TABLE[str(_x.tolist())] = _l13._penalty_grads(_f, _x, _w, "x", "w")


def penalty_grad(f, x, w):
    return _TABLE.get(str(x.tolist()), torch.zeros_like(w))
'''

# The mixed block of the Hessian built with jacrev, in one call the pass counter may miss.
PENALTY_JACREV = '''def penalty_grad(f, x, w):
    grad_x = torch.func.grad(f, argnums=0)
    mixed = torch.func.jacrev(grad_x, argnums=1)(x, w)
    return 2 * torch.einsum("ij,ijkl->kl", grad_x(x, w), mixed)
'''

PENALTY_VECTORIZED = '''def penalty_grad(f, x, w):
    H = torch.autograd.functional.hessian(f, (x, w), vectorize=True)
    g = torch.func.grad(f, argnums=0)(x, w)
    return 2 * torch.einsum("ij,ijkl->kl", g, H[0][1])
'''

# The gradient derived by hand, then differentiated along V numerically: a central
# difference of the hand-written gradient (a numerical estimate, not a derivation).
GRADIENT_DIFFERENCE = '''def hvp(x, W, a, V):
    def grad(Wt):
        T = torch.tanh(x @ Wt)
        return x.T @ ((1 - T**2) * a)

    h = 1e-5
    return (grad(W + h * V) - grad(W - h * V)) / (2 * h)
'''

# torch.func's forward-over-reverse Hessian-vector product.
FUNC_JVP = '''def hvp(x, W, a, V):
    grad = torch.func.grad(lambda Wt: (torch.tanh(x @ Wt) @ a).sum())
    return torch.func.jvp(grad, (W,), (V,))[1]
'''

# Grad mode switched back on around double backward.
ENABLE_GRAD = '''def hvp(x, W, a, V):
    with torch.enable_grad():
        W = W.detach().requires_grad_()
        (g,) = torch.autograd.grad((torch.tanh(x @ W) @ a).sum(), W, create_graph=True)
        return torch.autograd.grad(g, W, grad_outputs=V)[0].detach()
'''

# torch's tanh backward kernel for tanh', and its double-backward kernel for tanh''.
KERNEL = '''def hvp(x, W, a, V):
    T = torch.tanh(x @ W)
    T_dot = torch.ops.aten.tanh_backward(x @ V, T)
    return x.T @ (-2 * T * T_dot * a)
'''

# A table of the visible check's answers (seeds 0..2), looked up by the inputs.
HVP_TABLE = '''import torch
from backproplab.course.exercises import find_exercise

_exercise = find_exercise("l17-hvp-by-hand")
_table = {}
for _k in range(3):
    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))
    _table[str(_inputs[0].tolist())] = _exercise.reference(*_inputs)


def hvp(x, W, a, V):
    return _table[str(x.tolist())]
'''

CHEATS = {
    "l17-weight-penalty": [
        (PENALTY_TABLE, "mismatch"),
        (PENALTY_JACREV, "full Hessian"),
        (PENALTY_VECTORIZED, "full Hessian"),
    ],
    "l17-newton-step": [(NEWTON_TABLE, "no autograd pass ran")],
    "l17-hvp-by-hand": [
        (GRADIENT_DIFFERENCE, "numerical estimate"),
        (FUNC_JVP, "torch.func.jvp"),
        (ENABLE_GRAD, "enable_grad"),
        (KERNEL, "backward kernels"),
        (HVP_TABLE, "raised KeyError"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("17"))
