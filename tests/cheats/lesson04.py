"""Shortcuts for the exercises of 04-linear-regression.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py."""

MSE_FD = '''def mse_grads(x, y, w, b):
    def loss(w, b):
        return ((w * x + b - y) ** 2).mean()
    h = 1e-6
    return ((loss(w + h, b) - loss(w - h, b)) / (2 * h),
            (loss(w, b + h) - loss(w, b - h)) / (2 * h))
'''
MSE_NUMERICAL = '''def mse_grads(x, y, w, b):
    return bl.numerical_grad(lambda w, b: ((w * x + b - y) ** 2).mean(), w, b)
'''
MSE_KERNEL = '''def mse_grads(x, y, w, b):
    g = torch.ops.aten.mse_loss_backward(torch.ones((), dtype=x.dtype), w * x + b, y, 1)
    return (g * x).sum(), g.sum()
'''
MSE_NODE = '''def mse_grads(x, y, w, b):
    with torch.enable_grad():
        w = w.clone().requires_grad_()
        b = b.clone().requires_grad_()
        loss = ((w * x + b - y) ** 2).mean()
        return torch.autograd.grad(loss, (w, b))
'''
# A table of the visible check's inputs (seeds 0, 1, 2) and their answers.
MSE_TABLE = '''from backproplab.lessons import find_exercise

_exercise = find_exercise("l04-grads")
_table = []
for _seed in range(3):
    _inputs = tuple(t.double() for t in _exercise.make_inputs(torch.Generator().manual_seed(_seed)))
    _table.append((_inputs, _exercise.reference(*(t.clone() for t in _inputs))))


def mse_grads(x, y, w, b):
    for inputs, answer in _table:
        if inputs[0].shape == x.shape and torch.equal(inputs[0], x):
            return answer
    return (w * 0, b * 0)
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
HUBER_TABLE = '''from backproplab.lessons import find_exercise

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
        (MSE_FD, "numerical estimate"),
        (MSE_NUMERICAL, "numerical_grad"),
        (MSE_KERNEL, "backward kernels"),
        (MSE_NODE, "enable_grad"),
        (MSE_TABLE, "hard-coded"),
    ],
    "l04-huber": [
        (HUBER_FD, "numerical estimate"),
        (HUBER_NUMERICAL, "numerical_grad"),
        (HUBER_KERNEL, "backward kernels"),
        (HUBER_NODE, "enable_grad"),
        (HUBER_TABLE, "hard-coded"),
    ],
}
