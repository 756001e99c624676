"""The small engine of lesson 20's exercise 2, as the notebook's two cells give it.

The check builds its graphs with its own copy of this code (compiled once, here), around
the learner's ``view``, ``grad_fn``, ``add_`` and ``copy_``; a test holds the notebook's
cells to this text.
"""

from __future__ import annotations

__all__ = ["ENGINE_CELLS", "ENGINE_CODE"]

VARS = '''class Version:
    """A version counter: one number that every in-place write to a piece of memory moves
    on (lesson 07's `_version`)."""

    def __init__(self):
        self.value = 0


class Node:
    """A step of the graph: its name, the nodes its inputs' gradients go to (None for an
    input that needs none) and its rule: g -> one gradient per input."""

    def __init__(self, name, inputs, rule):
        self.name, self.inputs, self.rule = name, inputs, rule


class Var:
    """A tensor of the engine: its data (a float64 torch tensor, storage only), its
    version counter, the node that made it (None for a constant) and a leaf's grad."""

    def __init__(self, data, node=None, requires_grad=False):
        self.data = data
        self.version = Version()
        self.node = node
        self.grad = None
        self.base = None  # a view's base: the Var that owns the memory
        if requires_grad:  # a leaf: its node adds what arrives into .grad
            self.node = Node("AccumulateGrad", (), self.accumulate)

    def accumulate(self, g):
        self.grad = g.clone() if self.grad is None else self.grad + g
        return ()


def grad_fn(a):
    """The node that a gradient for `a` goes to (None when `a` needs none)."""
    return a.node
'''

OPS = '''class Saved:
    """Lesson 07's box around a saved Var, its version read from the Var's counter."""

    def __init__(self, var):
        self.var, self.version = var, var.version.value

    def unpack(self):
        if self.var.version.value != self.version:
            raise RuntimeError(f"a saved tensor was changed in place: it is at version "
                               f"{self.var.version.value}, it was saved at {self.version}")
        return self.var.data


def record(name, data, inputs, rule):
    """The result of an operation, with a node only when some input needs a gradient."""
    edges = tuple(grad_fn(a) for a in inputs)
    return Var(data, None if edges == (None,) * len(edges) else Node(name, edges, rule))


def add(a, b):  # saves nothing
    return record("AddBackward", a.data + b.data, (a, b), lambda g: (g, g))


def mul(a, b):  # saves each factor only when the other one needs a gradient, as torch does
    box_a = Saved(a) if grad_fn(b) is not None else None
    box_b = Saved(b) if grad_fn(a) is not None else None
    return record("MulBackward", a.data * b.data, (a, b), lambda g: (
        None if box_b is None else g * box_b.unpack(),
        None if box_a is None else g * box_a.unpack()))


def tanh(a):  # saves its output
    out = record("TanhBackward", torch.tanh(a.data), (a,), None)
    box = Saved(out)
    if out.node is not None:
        out.node.rule = lambda g: ((1 - box.unpack() ** 2) * g,)
    return out


def total(a):
    return record("SumBackward", a.data.sum(), (a,), lambda g: (g.expand(a.data.shape),))


def topo_order(start):  # lesson 03's depth-first sort, over nodes
    order, seen, stack = [], set(), [(start, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((n, False) for n in node.inputs if n is not None)
    return order


def backward(root):  # lesson 11's pass: what meets at a node is added, then its rule runs
    start = grad_fn(root)
    grads = {id(start): torch.ones_like(root.data)}
    for node in reversed(topo_order(start)):
        g = grads.pop(id(node))
        for parent, share in zip(node.inputs, node.rule(g), strict=True):
            if parent is not None:
                grads[id(parent)] = grads[id(parent)] + share if id(parent) in grads else share
'''

ENGINE_CELLS = (VARS, OPS)
# Compiled once, here: each check runs this code into a namespace of its own.
ENGINE_CODE = compile(VARS + "\n\n" + OPS, "<lesson 20's engine>", "exec")
