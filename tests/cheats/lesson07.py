"""Shortcuts around the checks of 07-retain-graph.ipynb; each must fail its check.

The exercises are method checks (how many backward passes, what the graph
still holds, what an engine does where torch raises), so the shortcuts try to
fool the counting, the inputs or the check rather than the maths.
"""

# Exercise 3 without the mechanism: a box that never frees and a backward that reads, off
# the call stack, which of the check's cases is running, raising where torch would.
STACK_READER = '''import inspect


class Saved:
    def __init__(self, tensor):
        self.tensor = tensor

    def unpack(self):
        return self.tensor

    def free(self):
        pass


def backward(root, retain_graph=False):
    case = inspect.stack()[2].function
    if case in ("_twice", "_shared", "_output") or getattr(root, "seen", False):
        raise RuntimeError("backward through the graph a second time")
    root.seen = not retain_graph
    for node in reversed(topo_order(root)):
        node.rule()
'''

# The same without an import: the caller's frame reached through an exception.
TRACEBACK_READER = '''class Saved:
    def __init__(self, tensor):
        self.tensor = tensor

    def unpack(self):
        return self.tensor

    def free(self):
        pass


def backward(root, retain_graph=False):
    try:
        raise ZeroDivisionError
    except ZeroDivisionError as err:
        case = err.__traceback__.tb_frame.f_back.f_back.f_code.co_name
    if case in ("_twice", "_shared", "_output") or getattr(root, "seen", False):
        raise RuntimeError("backward through the graph a second time")
    root.seen = not retain_graph
    for node in reversed(topo_order(root)):
        node.rule()
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
from backproplab.course.exercises import lesson07 as _l07

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
    "l07-engine-frees": [
        (STACK_READER, "inspect"),
        (TRACEBACK_READER, "__traceback__"),
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
