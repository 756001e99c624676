"""Shortcuts for the exercises of 11-pitfalls-and-tools.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py.

Both exercises are method checks (overlapping truncation windows, a hunt with hooks for a
vanishing gradient), so the shortcuts are a numerical estimate, answers read off the
network's structure, retain_grad in place of hooks, and answers that fit only the visible
check."""

# A table of the visible check's gradients, looked up by the sequence: nothing on the hidden seed.
WINDOWS_TABLE = '''from backproplab.course.exercises import lesson11 as _lesson

_gen = torch.Generator().manual_seed(0)
_table = {}
for _ in range(3):
    _W, _xs, _k1, _k2 = _lesson.overlap_case(_gen)
    _table[str(_xs.tolist())] = _lesson.window_gradients(_W, _xs, _k1, _k2)


def tbptt_gradients(W, xs, k1, k2):
    return _table[str(xs.tolist())]
'''
# A numerical estimate of each window's gradient (central differences): close, not exact.
WINDOWS_ESTIMATE = """def tbptt_gradients(W, xs, k1, k2):
    states = [torch.zeros(W.shape[0], dtype=W.dtype)]
    for x_t in xs:
        states.append(torch.tanh(W @ states[-1] + x_t))
    grads = []
    for t in range(k1, len(xs) + 1, k1):
        start = max(0, t - k2)

        def window_loss(V):
            h, loss = states[start], 0
            for s in range(start + 1, t + 1):
                h = torch.tanh(V @ h + xs[s - 1])
                if s > t - k1:
                    loss = loss + (h ** 2).sum()
            return loss

        g = torch.zeros_like(W)
        for i in range(W.shape[0]):
            for j in range(W.shape[1]):
                step = torch.zeros_like(W)
                step[i, j] = 1e-5
                g[i, j] = (window_loss(W + step) - window_loss(W - step)) / 2e-5
        grads.append(g)
    return grads
"""
# A hook for show, then the answer read off the structure: a gate set to 0.
GATE_SCAN = """def first_vanishing_layer(model, x, threshold):
    handle = model.register_full_backward_hook(lambda module, gi, go: None)
    model(x).sum().backward()
    handle.remove()
    for name, layer in model.named_children():
        if getattr(layer, "factor", 1.0) == 0:
            return name
    return None
"""
# retain_grad on every layer's input: .grad then holds it, and no hook is registered.
RETAIN = """def first_vanishing_layer(model, x, threshold):
    inputs, h = {}, x
    for name, layer in model.named_children():
        h.retain_grad()
        inputs[name] = h
        h = layer(h)
    h.sum().backward()
    for name in reversed(list(inputs)):
        if inputs[name].grad.norm() < threshold:
            return name
    return None
"""
# A table of the visible check's networks (replayed from seed 0), looked up by the input.
VANISH_TABLE = """from backproplab.course.exercises import lesson11 as _lesson

_gen = torch.Generator().manual_seed(0)
_kinds = [("gate", "sigmoid", "tanh")[i] for i in torch.randperm(3, generator=_gen).tolist()]
_table = {}
for _kind in [*_kinds, "healthy"]:
    _model, _x, _threshold, _culprit, _norms = _lesson.broken_network(_gen, _kind)
    _table[str(_x.tolist())] = _culprit


def first_vanishing_layer(model, x, threshold):
    handle = model.register_full_backward_hook(lambda module, gi, go: None)
    model(x).sum().backward()
    handle.remove()
    return _table[str(x.tolist())]
"""

CHEATS = {
    "l11-windows": [
        (WINDOWS_TABLE, "raised KeyError"),
        (WINDOWS_ESTIMATE, "relative to the expected one"),
    ],
    "l11-vanishing": [
        (GATE_SCAN, "does vanish"),
        (RETAIN, "no hook was registered"),
        (VANISH_TABLE, "raised KeyError"),
    ],
}
