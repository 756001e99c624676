"""Shortcuts around the checks of 07-retain-graph.ipynb; each must fail its check.

Both exercises are method checks (how many forward and backward passes, what
the graph still holds), so the shortcuts try to fool the counting or the
inputs rather than the maths.
"""

# A table of the visible check's sequences (seed 0; seeds 1 and 2 for good
# measure), made from the lesson module's own input maker: the visible check
# passes, the hidden re-check on another seed must not.
TABLE = '''import torch
from backproplab.lessons import lesson07 as _l07

_TABLE = {}
for _seed in (0, 1, 2):
    _gen = torch.Generator().manual_seed(_seed)
    for _k in range(2):
        _label, _step = _l07.STEPS[(_seed + _k) % len(_l07.STEPS)]
        _w, _h0, _xs = _l07._sequence(_gen)
        _TABLE[tuple(_xs.tolist())] = (
            _l07._unrolled_grad(_step, _w, _h0, _xs, 2),
            _l07._unrolled_grad(_step, _w, _h0, _xs, len(_xs)),
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
ENGINE = '''def one_backward(main, aux):
    from torch.autograd import Variable
    one = torch.ones((), dtype=main.dtype)
    Variable._execution_engine.run_backward(
        (main / main.item(),), (one,), True, False, (), True, True)
    Variable._execution_engine.run_backward((aux,), (one,), False, False, (), True, True)
'''

# One pass with the graph kept, then the memory "released" by deleting the Python
# names: the saved tensors are still held by the graph.
DELETE_NAMES = '''def one_backward(main, aux):
    total = main / main.item() + aux
    total.backward(retain_graph=True)
    del total
'''

# The lesson's two-pass step called on the leaves found by walking the graph.
TWO_PASS_ON_LEAVES = '''def one_backward(main, aux):
    leaves, todo = [], [main.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        todo.extend(fn for fn, _ in node.next_functions)
    two_pass_step(main, aux, list({id(t): t for t in leaves}.values()))
'''

# torch.autograd.grad with retain_graph, its results written into .grad by hand, and a
# last backward that frees the graph: two passes.
GRAD_THEN_BACKWARD = '''def one_backward(main, aux):
    leaves, todo = [], [main.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        todo.extend(fn for fn, _ in node.next_functions)
    leaves = list({id(t): t for t in leaves}.values())
    grads = torch.autograd.grad(main, leaves, retain_graph=True)
    aux.backward()
    for leaf, g in zip(leaves, grads):
        leaf.grad = g / main.item() if leaf.grad is None else leaf.grad + g / main.item()
'''

# The visible check's problems looked up by the value of loss_a, their right weights
# copied in; on the hidden seed's problems it does nothing.
PLAYERS_TABLE = '''import torch
from backproplab.lessons import lesson07 as _l07

_TABLE = {}
for _seed in (0, 1, 2):
    _gen = torch.Generator().manual_seed(_seed)
    for _ in range(2):
        _where, _lr, _build = _l07._players(_gen)
        _A, _B, _la, _lb = _build()
        _TABLE[round(_la.item(), 12)] = _l07._after(_l07._reference_step, _build, _lr)


def two_player_step(loss_a, loss_b, A, B, lr):
    known = _TABLE.get(round(loss_a.item(), 12))
    if known is not None:
        with torch.no_grad():
            for p, value in zip(A + B, known):
                p.copy_(value)
'''

# The broken step with the version counter wound back by hand: no error, and B's
# gradient computed with A's new values.
PLAYERS_VERSION = '''def two_player_step(loss_a, loss_b, A, B, lr):
    loss_a.backward(retain_graph=True)
    versions = [p._version for p in A]
    with torch.no_grad():
        for p in A:
            p -= lr * p.grad
    for p, v in zip(A, versions):
        torch._C._autograd._unsafe_set_version_counter((p,), (v,))
    for p in B:
        p.grad = None
    loss_b.backward()
    with torch.no_grad():
        for p in B:
            p -= lr * p.grad
'''

CHEATS = {
    "l07-two-derivatives": [
        (TABLE, "mismatch"),
        (OWN_FORMULA, "mismatch"),
    ],
    "l07-one-backward": [
        (ENGINE, "_execution_engine"),
        (DELETE_NAMES, "still alive"),
        (TWO_PASS_ON_LEAVES, "backward passes"),
        (GRAD_THEN_BACKWARD, "backward passes"),
    ],
    "l07-two-players": [
        (PLAYERS_TABLE, "did not change"),
        (PLAYERS_VERSION, "_unsafe_set_version_counter"),
    ],
}
