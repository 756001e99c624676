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

LIN_FD = '''def linear_grads(inputs, weight, bias, targets):
    def loss(weight, bias):
        return ((inputs @ weight.T + bias - targets) ** 2).mean()
    h = 1e-6
    gw = torch.zeros_like(weight)
    for i in range(weight.shape[0]):
        for j in range(weight.shape[1]):
            e = torch.zeros_like(weight)
            e[i, j] = h
            gw[i, j] = (loss(weight + e, bias) - loss(weight - e, bias)) / (2 * h)
    gb = torch.zeros_like(bias)
    for i in range(bias.shape[0]):
        e = torch.zeros_like(bias)
        e[i] = h
        gb[i] = (loss(weight, bias + e) - loss(weight, bias - e)) / (2 * h)
    return gw, gb
'''
LIN_NUMERICAL = '''def linear_grads(inputs, weight, bias, targets):
    return bl.numerical_grad(
        lambda weight, bias: nn.functional.mse_loss(inputs @ weight.T + bias, targets),
        weight, bias)
'''
LIN_KERNEL = '''def linear_grads(inputs, weight, bias, targets):
    out = inputs @ weight.T + bias
    g = torch.ops.aten.mse_loss_backward(torch.ones((), dtype=out.dtype), out, targets, 1)
    return g.T @ inputs, g.sum(dim=0)
'''
LIN_NODE = '''def linear_grads(inputs, weight, bias, targets):
    with torch.enable_grad():
        weight = weight.clone().requires_grad_()
        bias = bias.clone().requires_grad_()
        loss = nn.functional.mse_loss(inputs @ weight.T + bias, targets)
        return loss.grad_fn(torch.ones(()))
'''
LIN_TABLE = '''from backproplab.lessons import find_exercise

_exercise = find_exercise("l04-linear")
_table = []
for _seed in range(3):
    _inputs = tuple(t.double() for t in _exercise.make_inputs(torch.Generator().manual_seed(_seed)))
    _table.append((_inputs, _exercise.reference(*(t.clone() for t in _inputs))))


def linear_grads(inputs, weight, bias, targets):
    for known, answer in _table:
        if known[0].shape == inputs.shape and torch.equal(known[0], inputs):
            return answer
    return torch.zeros_like(weight), torch.zeros_like(bias)
'''

CHEATS = {
    "l04-grads": [
        (MSE_FD, "numerical estimate"),
        (MSE_NUMERICAL, "numerical_grad"),
        (MSE_KERNEL, "backward kernels"),
        (MSE_NODE, "enable_grad"),
        (MSE_TABLE, "hard-coded"),
    ],
    "l04-linear": [
        (LIN_FD, "numerical estimate"),
        (LIN_NUMERICAL, "numerical_grad"),
        (LIN_KERNEL, "backward kernels"),
        (LIN_NODE, "enable_grad"),
        (LIN_TABLE, "hard-coded"),
    ],
}
