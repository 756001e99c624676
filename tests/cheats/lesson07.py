"""Shortcuts around the checks of 07-retain-graph.ipynb; each must fail its check.

Both exercises are method checks (how many forward and backward passes), so
the shortcuts try to fool the counting or the inputs rather than the maths.
"""

# A table of the visible check's sequences (seed 0; seeds 1 and 2 for good
# measure), made from the lesson module's own input maker: the visible check
# passes, the hidden re-check on another seed must not.
TABLE = '''import torch
from backproplab.lessons import lesson07 as _l06

_TABLE = {}
for _seed in (0, 1, 2):
    _gen = torch.Generator().manual_seed(_seed)
    for _k in range(2):
        _label, _step = _l06.STEPS[(_seed + _k) % len(_l06.STEPS)]
        _w, _h0, _xs = _l06._sequence(_gen)
        _TABLE[tuple(_xs.tolist())] = (
            _l06._unrolled_grad(_step, _w, _h0, _xs, 2),
            _l06._unrolled_grad(_step, _w, _h0, _xs, len(_xs)),
        )


def two_grads(step, w, h0, xs):
    h = h0
    for x_t in xs:  # call step once per input, as the counter expects
        h = step(w, h, x_t)
    return _TABLE.get(tuple(xs.tolist()), (torch.zeros(()), torch.zeros(())))
'''

# Call step once per input to satisfy the counter, then rebuild the loop twice
# with the lesson's own tanh formula: a second forward pass the counter misses.
OWN_FORMULA = '''def two_grads(step, w, h0, xs):
    for x_t in xs:
        step(w, h0, x_t)
    out = []
    for stop in (2, len(xs)):
        h = h0
        for x_t in xs[:stop]:
            h = torch.tanh(w * h + x_t)
        out.append(torch.autograd.grad(h, w)[0])
    return tuple(out)
'''

# Two backward passes straight through the engine, past Tensor.backward.
ENGINE = '''def weighted_backward(losses, weights):
    from torch.autograd import Variable
    for w, loss in zip(weights, losses):
        Variable._execution_engine.run_backward(
            ((w * loss),), (torch.ones((), dtype=loss.dtype),), True, False, (), True, True)
'''

# Each loss on its own pass with the graph kept, then the memory "released" by
# deleting the Python names: the saved tensors are still held by the graph.
DELETE_NAMES = '''def weighted_backward(losses, weights):
    total = None
    for w, loss in zip(weights, losses):
        part = w * loss
        total = part if total is None else total + part
    total.backward(retain_graph=True)
    del total
'''

CHEATS = {
    "l07-two-derivatives": [
        (TABLE, "mismatch"),
        (OWN_FORMULA, "mismatch"),
    ],
    "l07-one-pass": [
        (ENGINE, "backward passes"),
        (DELETE_NAMES, "still alive"),
    ],
}
