"""Shortcuts for the exercise of 15-tools-inside-backward.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py.

The exercise is a method check (a hunt with hooks for a vanishing gradient), so the shortcuts
are answers read off the network's structure, retain_grad in place of hooks, and an answer
that fits only the visible check."""

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
VANISH_TABLE = """from backproplab.course.exercises import lesson15 as _lesson

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
    "l15-vanishing": [
        (GATE_SCAN, "does vanish"),
        (RETAIN, "no hook was registered"),
        (VANISH_TABLE, "raised KeyError"),
    ],
}
