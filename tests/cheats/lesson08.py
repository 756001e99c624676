"""Shortcuts around the checks of lesson 08: each must fail its check (the lessons run with
their hidden tests), naming what it did. See tests/lessons/test_exercises.py."""

from cheats.estimates import lesson_plans, with_disguised


def _table(grade_id, signature, match, fallback):
    """A lookup table of the visible check's inputs (seeds 0, 1, 2) and their answers, made
    from the lesson module's own input maker and reference: it passes the visible check; on
    the hidden re-check's seed it returns zeros whatever the inputs, which is told apart."""
    return f'''from backproplab.course.exercises import find_exercise

_exercise = find_exercise("{grade_id}")
_table = []
for _seed in range(3):
    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_seed))
    _inputs = tuple(t.double() if torch.is_tensor(t) and t.is_floating_point() else t
                    for t in _inputs)
    _copies = tuple(t.clone() if torch.is_tensor(t) else t for t in _inputs)
    _table.append((_inputs, _exercise.reference(*_copies)))


def {signature}:
    for known, answer in _table:
        if {match}:
            return answer
    return {fallback}
'''


MEAN_FD = '''def last_row_mean_vector(y):
    def loss(t):
        return t[-1].mean()
    h = 1e-6
    v = torch.zeros_like(y)
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            e = torch.zeros_like(y)
            e[i, j] = h
            v[i, j] = (loss(y + e) - loss(y - e)) / (2 * h)
    return v
'''
MEAN_NUMERICAL = '''def last_row_mean_vector(y):
    return bl.numerical_grad(lambda t: t[-1].mean(), y)
'''
MEAN_NODE = '''def last_row_mean_vector(y):
    with torch.enable_grad():
        y = y.clone().requires_grad_()
        return torch.autograd.grad(y[-1].mean(), y)[0]
'''
MEAN_TABLE = _table("l08-mean-gradient", "last_row_mean_vector(y)",
                    "known[0].shape == y.shape and torch.equal(known[0], y)",
                    "torch.zeros_like(y)")

SHARES_FD = '''def shares_vjp(x, v):
    def shares(t):
        return t / t.sum()
    h = 1e-6
    out = torch.zeros_like(x)
    for j in range(len(x)):
        e = torch.zeros_like(x)
        e[j] = h
        out[j] = (v * (shares(x + e) - shares(x - e))).sum() / (2 * h)
    return out
'''
SHARES_NUMERICAL = '''def shares_vjp(x, v):
    return bl.numerical_grad(lambda t: (v * t / t.sum()).sum(), x)
'''
SHARES_NODE = '''def shares_vjp(x, v):
    with torch.enable_grad():
        x = x.clone().requires_grad_()
        return torch.autograd.grad(x / x.sum(), x, v)[0]
'''
SHARES_FUNC = '''def shares_vjp(x, v):
    _, pullback = torch.func.vjp(lambda t: t / t.sum(), x)
    return pullback(v)[0]
'''
SHARES_TABLE = _table("l08-shares-vjp", "shares_vjp(x, v)",
                      "known[0].shape == x.shape and torch.equal(known[0], x)",
                      "torch.zeros_like(x)")

# Each row through the engine directly, past Tensor.backward and the counter's names.
BAND_ENGINE = '''def band_jacobian(g, x):
    from torch.autograd import Variable
    x = x.detach().clone().requires_grad_()
    y = g(x)
    rows = []
    for e in torch.eye(y.numel()):
        (row,) = Variable._execution_engine.run_backward(
            (y,), (e,), True, False, (x,), False, False)
        rows.append(row)
    return torch.stack(rows)
'''
# All rows at once with a vmapped VJP.
BAND_VMAP = '''def band_jacobian(g, x):
    _, pullback = torch.func.vjp(g, x)
    return torch.vmap(pullback)(torch.eye(g(x).numel()))[0]
'''
# Three backward calls to please the counter, the Jacobian from forward-mode jvp calls.
BAND_JVP = '''def band_jacobian(g, x):
    for _ in range(3):
        x.detach().clone().requires_grad_().sum().backward()
    return torch.stack([torch.func.jvp(g, (x,), (e,))[1] for e in torch.eye(x.numel())], dim=1)
'''

CHEATS = {
    "l08-mean-gradient": [
        (MEAN_FD, "numerical estimate"),
        (MEAN_NUMERICAL, "numerical_grad"),
        (MEAN_NODE, "enable_grad"),
        (MEAN_TABLE, "hard-coded"),
    ],
    "l08-band-jacobian": [
        (BAND_ENGINE, "_execution_engine"),
        (BAND_VMAP, "backward calls only"),
        (BAND_JVP, "backward calls only"),
    ],
    "l08-shares-vjp": [
        (SHARES_FD, "numerical estimate"),
        (SHARES_NUMERICAL, "numerical_grad"),
        (SHARES_NODE, "enable_grad"),
        (SHARES_FUNC, "torch.func.vjp"),
        (SHARES_TABLE, "hard-coded"),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("08"))
