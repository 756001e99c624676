"""Shortcuts for the exercises of 04-linear-regression.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py."""

from cheats.estimates import lesson_plans, with_disguised

NLL_LOSS = "(a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean()"
NLL_FD = '''def nll_grads(x, y, w, b, a, c):
    def loss(w, b, a, c):
        return LOSS
    h = 1e-6
    return ((loss(w + h, b, a, c) - loss(w - h, b, a, c)) / (2 * h),
            (loss(w, b + h, a, c) - loss(w, b - h, a, c)) / (2 * h),
            (loss(w, b, a + h, c) - loss(w, b, a - h, c)) / (2 * h),
            (loss(w, b, a, c + h) - loss(w, b, a, c - h)) / (2 * h))
'''.replace("LOSS", NLL_LOSS)
NLL_NUMERICAL = '''def nll_grads(x, y, w, b, a, c):
    return bl.numerical_grad(lambda w, b, a, c: LOSS, w, b, a, c)
'''.replace("LOSS", NLL_LOSS)
NLL_KERNEL = '''def nll_grads(x, y, w, b, a, c):
    u = a * x + c
    g = torch.ops.aten.mse_loss_backward(torch.ones((), dtype=x.dtype), w * x + b, y, 0)
    d_r = g * torch.exp(-2 * u) / 2
    d_u = 1 - (w * x + b - y) ** 2 * torch.exp(-2 * u)
    return (d_r * x).mean(), d_r.mean(), (d_u * x).mean(), d_u.mean()
'''
NLL_NODE = '''def nll_grads(x, y, w, b, a, c):
    with torch.enable_grad():
        w, b, a, c = (t.clone().requires_grad_() for t in (w, b, a, c))
        return torch.autograd.grad(LOSS, (w, b, a, c))
'''.replace("LOSS", NLL_LOSS)
# A table of the visible check's inputs (seeds 0, 1, 2) and their answers.
NLL_TABLE = '''from backproplab.course.exercises import find_exercise

_exercise = find_exercise("l04-grads")
_table = []
for _seed in range(3):
    _inputs = tuple(t.double() for t in _exercise.make_inputs(torch.Generator().manual_seed(_seed)))
    _table.append((_inputs, _exercise.reference(*(t.clone() for t in _inputs))))


def nll_grads(x, y, w, b, a, c):
    for inputs, answer in _table:
        if inputs[0].shape == x.shape and torch.equal(inputs[0], x):
            return answer
    return (w * 0, b * 0, a * 0, c * 0)
'''

HUBER_FD = '''def huber_grads(x, y, w, b, delta):
    def loss(w, b):
        r = w * x + b - y
        return torch.where(r.abs() <= delta, 0.5 * r**2, delta * (r.abs() - 0.5 * delta)).mean()
    h = 1e-6
    return ((loss(w + h, b) - loss(w - h, b)) / (2 * h),
            (loss(w, b + h) - loss(w, b - h)) / (2 * h))
'''
HUBER_NUMERICAL = '''def huber_grads(x, y, w, b, delta):
    return bl.numerical_grad(
        lambda w, b: nn.functional.huber_loss(w * x + b, y, delta=delta), w, b)
'''
HUBER_KERNEL = '''def huber_grads(x, y, w, b, delta):
    g = torch.ops.aten.huber_loss_backward(torch.ones((), dtype=x.dtype), w * x + b, y, 1, delta)
    return (g * x).sum(), g.sum()
'''
HUBER_NODE = '''def huber_grads(x, y, w, b, delta):
    with torch.enable_grad():
        w = w.clone().requires_grad_()
        b = b.clone().requires_grad_()
        loss = nn.functional.huber_loss(w * x + b, y, delta=delta)
        return torch.autograd.grad(loss, (w, b))
'''
HUBER_TABLE = '''from backproplab.course.exercises import find_exercise

_exercise = find_exercise("l04-huber")
_table = []
for _seed in range(3):
    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_seed))
    _inputs = tuple(t.double() if isinstance(t, torch.Tensor) else t for t in _inputs)
    _table.append((_inputs, _exercise.reference(*(
        t.clone() if isinstance(t, torch.Tensor) else t for t in _inputs))))


def huber_grads(x, y, w, b, delta):
    for inputs, answer in _table:
        if inputs[0].shape == x.shape and torch.equal(inputs[0], x):
            return answer
    return (w * 0, b * 0)
'''

CHEATS = {
    "l04-grads": [
        (NLL_FD, "numerical estimate"),
        (NLL_NUMERICAL, "numerical_grad"),
        (NLL_KERNEL, "backward kernels"),
        (NLL_NODE, "enable_grad"),
        (NLL_TABLE, "hard-coded"),
    ],
    "l04-huber": [
        (HUBER_FD, "numerical estimate"),
        (HUBER_NUMERICAL, "numerical_grad"),
        (HUBER_KERNEL, "backward kernels"),
        (HUBER_NODE, "enable_grad"),
        (HUBER_TABLE, "hard-coded"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("04"))
