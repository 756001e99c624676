"""The small engine of lesson 20's exercise 2, as the notebook's two cells give it, and the
slips a learner's views can make, each as the engine that makes it.

The check builds its graphs with its own copy of this code (compiled once, here), around
the learner's ``view``, ``grad_fn``, ``add_`` and ``copy_``; a test holds the notebook's
cells to this text.

`solution(space, slip)` gives those four functions for the engine living in ``space``,
with one slip of `SLIPS` switched on: the check runs that engine through the cases to get
the observation the slip gives, and names the slip only when a learner's engine gives
exactly that. There is no slip-free variant here: the right engine is the learner's to
write.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["ENGINE_CELLS", "ENGINE_CODE", "SLIPS", "solution"]

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

# --------------------------------------------------------------------------- the slips

SLIPS = {
    "own_counter":
        "your view has a version counter of its own, so a write through the base leaves the "
        "view's counter where it was, and a write through the view its base's: a box that "
        "saved one of them misses a write through the other, and your engine runs where "
        "torch raises. A view shares its base's counter: the same Version object.",
    "no_bump":
        "your writes never move the version counter: a box that saved the memory cannot see "
        "the write (torch raises there), and a view's node is never rebuilt after one. "
        "add_ and copy_ add 1 to the counter's value.",
    "history_kept":
        "a write through a view leaves the base's history as it was: read after add_ or "
        "copy_ into a view, the base sends nothing to the value written. The write gives the "
        "base a new node (torch's CopySlices) whose inputs are the base's old node and b's.",
    "never_rebuilt":
        "a view keeps the node it was made with: a view taken before a write into its base, "
        "read after it, sends nothing to the value written. grad_fn must make a view a new "
        "node from its base's current one when the counter has moved since.",
    "overwrite_passes":
        "copy_ passes the gradient on to the values it overwrote: they no longer reach the "
        "result, so the old node must get zeros under the view (add_ passes all of g, copy_ "
        "none of the overwritten part).",
    "leaf_views":
        "a write into a view of a leaf that requires grad runs in your engine; torch refuses "
        "it with a RuntimeError, as it refuses a write into the leaf itself: check the memory's "
        "owner (the view's base), not only the Var written.",
    "no_write":
        "a write where neither the memory nor b needs a gradient never happens in your "
        "engine: the copy_ of one constant into another left it as it was. Only the node is "
        "unneeded there; the data must change and the counter move all the same.",
    "constant_unrecorded":
        "a write of a constant b is never recorded in your engine: copied into a view of a "
        "base with a history, the old values under the view still get the gradient. Nothing "
        "is recorded only when neither the base nor b needs a gradient.",
    "raise_late":
        "your engine refuses a write into a leaf that requires grad only after writing into "
        "it and moving its counter: torch raises first and leaves the leaf as it was.",
}


def solution(space: dict[str, Any], slip: str) -> tuple:
    """The four functions for the engine in ``space``, ``slip`` (a key of `SLIPS`) on."""
    if slip not in SLIPS:
        raise ValueError(f"slip: expected one of {', '.join(SLIPS)}, got {slip!r}")
    Var, Node = space["Var"], space["Node"]

    def view(a, f):
        v = Var(f(a.data))
        v.version = space["Version"]() if slip == "own_counter" else a.version
        v.base = a if a.base is None else a.base
        v.view_of = f if a.base is None else (lambda t: f(a.view_of(t)))
        v.node_version = None
        grad_fn(v)  # its node now, as a view op records one (rebuilt later, unless the slip)
        return v

    def spread(v, g):
        full = torch.zeros_like(v.base.data)
        v.view_of(full).copy_(g)
        return (full,)

    def grad_fn(a):
        if a.base is None:
            return a.node
        if a.node_version is None or (a.node_version != a.version.value
                                      and slip != "never_rebuilt"):
            base_fn = grad_fn(a.base)
            a.node = None if base_fn is None else Node("AsStridedBackward", (base_fn,),
                                                       lambda g: spread(a, g))
            a.node_version = a.version.value
        return a.node

    def write(a, b, overwrite):
        owner = a if a.base is None or slip == "leaf_views" else a.base
        refused = owner.node is not None and owner.node.name == "AccumulateGrad"
        if refused and slip != "raise_late":
            raise RuntimeError("a leaf that requires grad is being changed in place")
        owner = a if a.base is None else a.base
        before, b_fn = grad_fn(owner), grad_fn(b)
        if slip == "no_write" and before is None and b_fn is None:
            return a
        a.data.copy_(b.data) if overwrite else a.data.add_(b.data)
        a.version.value += 0 if slip == "no_bump" else 1
        if refused:  # raise_late: the refusal after the write
            raise RuntimeError("a leaf that requires grad is being changed in place")
        if (before is None and b_fn is None) or (slip == "history_kept" and a.base is not None) \
                or (slip == "constant_unrecorded" and b_fn is None):
            return a
        region_of = (lambda t: t) if a.base is None else a.view_of

        def rule(g):
            g_before = g.clone()
            region = region_of(g_before)
            g_b = region.clone()
            if overwrite and slip != "overwrite_passes":
                region.zero_()
            return g_before, g_b

        owner.node = Node("CopySlices", (before, b_fn), rule)
        return a

    return view, grad_fn, lambda a, b: write(a, b, False), lambda a, b: write(a, b, True)
