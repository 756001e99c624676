"""The graphs lesson 21's executor exercise (``l21-executor``) is checked on, torch's
order on them, and the check's own executor.

Each graph puts one part of the engine's bookkeeping to the test (branches whose creation
order is not their edge order, a shared result, several outputs, leaves tied in the
ready queue while other nodes wait, pruning to the inputs asked for, a node with an
empty input slot, a broadcast, an output that is not its node's output 0); two random
graphs then mix them. Each is made from a seed, so that torch and the learner each get a
copy of the same graph. Torch's order is read with node pre-hooks; the check's own
executor reproduces the engine's bookkeeping (counting, pruning, the input buffers, the
ready queue), or one slip of it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, NamedTuple

import torch


class Graph(NamedTuple):
    """What ``torch.autograd.backward(roots, grads, inputs=inputs)`` is given."""

    roots: list[torch.Tensor]
    grads: list[torch.Tensor]
    inputs: list[torch.Tensor]
    leaves: list[torch.Tensor]


def _pick(gen: torch.Generator, items: Any) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _values(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5


def _leaf(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return _values(gen, *shape).requires_grad_()


def _unary(gen: torch.Generator, t: torch.Tensor) -> torch.Tensor:
    op = _pick(gen, ("sin", "exp", "cos", "square", "log"))
    if op == "sin":
        return torch.sin(t)
    if op == "exp":
        return torch.exp(t * 0.5)
    if op == "cos":
        return torch.cos(t)
    return t**2 if op == "square" else torch.log(t + 1.0)


def _seed(gen: torch.Generator) -> torch.Tensor:
    return torch.randn((), generator=gen, dtype=torch.float64)


def _branches(gen: torch.Generator) -> Graph:
    n = int(torch.randint(1, 4, (1,), generator=gen))
    a, b, c = _leaf(gen, n), _leaf(gen, n), _values(gen, n)
    p = _unary(gen, a)  # made first ...
    q = _unary(gen, b)  # ... then this one
    out = (p * c + q).sum()  # the sum's edges: the product first, then q
    return Graph([out], [_seed(gen)], [a, b], [a, b])


def _shared(gen: torch.Generator) -> Graph:
    n = int(torch.randint(1, 4, (1,), generator=gen))
    a, b = _leaf(gen, n), _leaf(gen, n)
    h = a * b  # used three times below, and a twice
    out = (_unary(gen, h) * a + _unary(gen, h) * h).sum()
    return Graph([out], [_seed(gen)], [a, b], [a, b])


def _two_outputs(gen: torch.Generator) -> Graph:
    n = int(torch.randint(2, 4, (1,), generator=gen))
    a, b, c = _leaf(gen, n), _leaf(gen, n), _values(gen, n)
    y = _unary(gen, a) * b  # an output, and below the other output
    z = (_unary(gen, y) * c).sum()
    grads = [torch.randn(n, generator=gen, dtype=torch.float64), _seed(gen)]
    roots, grads = ([y, z], grads) if bool(torch.rand((), generator=gen) < 0.5) else (
        [z, y], grads[::-1])
    return Graph(roots, grads, [a, b], [a, b])


def _ties(gen: torch.Generator) -> Graph:
    """k leaves into one node while m other nodes wait in the ready queue: their
    AccumulateGrad nodes tie, and the heap does not give them out in arrival order."""
    n = int(torch.randint(1, 3, (1,), generator=gen))
    m, k = _pick(gen, ((0, 4), (0, 5), (1, 4), (1, 5), (2, 4), (2, 5), (3, 4), (3, 5)))
    waiting = [_leaf(gen, n) for _ in range(m)]
    others = [_unary(gen, x) for x in waiting]  # made first: they wait while the stack runs
    stacked = [_leaf(gen, n) for _ in range(k)]
    total = torch.stack(stacked).sum(0)
    for other in others:
        total = total + other
    leaves = waiting + stacked
    return Graph([total.sum()], [_seed(gen)], leaves, leaves)


def _pruned(gen: torch.Generator) -> Graph:
    n = int(torch.randint(1, 4, (1,), generator=gen))
    a, b, c = _leaf(gen, n), _leaf(gen, n), _leaf(gen, n)
    unused = _unary(gen, b)  # leads to b only
    used = _unary(gen, a) * c  # leads to a (and to c, not asked for)
    return Graph([(unused + used).sum()], [_seed(gen)], [a], [a, b, c])


def _empty_slot(gen: torch.Generator) -> Graph:
    a, b, c = _leaf(gen, 3), _leaf(gen, 1), _values(gen, 3)
    first, _, last = (a * c).split(1)  # the middle piece is never used
    return Graph([(first * last * b).sum()], [_seed(gen)], [a, b], [a, b])


def _later_output(gen: torch.Generator) -> Graph:
    """The output is piece k >= 1 of a split: output k of the split's node, so its
    gradient goes into slot root.output_nr of root.grad_fn, and slot 0 stays empty."""
    n = int(torch.randint(2, 5, (1,), generator=gen))
    a, c = _leaf(gen, n), _values(gen, n)
    piece = (_unary(gen, a) * c).split(1)[int(torch.randint(1, n, (1,), generator=gen))]
    grad = torch.randn(1, generator=gen, dtype=torch.float64)
    return Graph([piece], [grad], [a], [a])


def _broadcast(gen: torch.Generator) -> Graph:
    n = int(torch.randint(2, 5, (1,), generator=gen))
    a, s = _leaf(gen, n), _leaf(gen)  # s has no dimensions: it is broadcast to a's shape
    return Graph([(_unary(gen, a) * s).sum()], [_seed(gen)], [a, s], [a, s])


def _random(gen: torch.Generator) -> Graph:
    """A graph of every kind above at once: products, sums, unary ops, stacks and splits
    drawn at random, one to three outputs, and often only some of the leaves asked for."""
    n = int(torch.randint(2, 4, (1,), generator=gen))
    leaves = [_leaf(gen, n) for _ in range(int(torch.randint(3, 6, (1,), generator=gen)))]
    pool, made = list(leaves) + [_values(gen, n)], []
    for _ in range(int(torch.randint(5, 11, (1,), generator=gen))):
        kind = _pick(gen, ("binary", "binary", "unary", "stack", "split"))
        x, y = _pick(gen, pool), _pick(gen, pool)
        if kind == "binary":
            op = _pick(gen, ("mul", "add", "sub"))
            t = x * y if op == "mul" else x + y if op == "add" else x - y
        elif kind == "unary":
            t = _unary(gen, x)
        elif kind == "stack":
            t = torch.stack([_pick(gen, pool) for _ in range(int(
                torch.randint(2, 5, (1,), generator=gen)))]).sum(0)
        else:
            pieces = (x * 1.5).split(1)
            t = pieces[0] * y if n > 2 else pieces[-1] * y
        if t.requires_grad:
            pool.append(t)
            made.append(t)
    made = made or [leaves[0] * 2.0]
    count = int(torch.randint(1, 4, (1,), generator=gen))
    roots = [(_pick(gen, made[-3:]) * (k + 1.0)).sum() for k in range(count)]
    asked = [leaf for leaf in leaves if bool(torch.rand((), generator=gen) < 0.6)]
    return Graph(roots, [_seed(gen) for _ in roots], asked or leaves[:1], leaves)


# (what the graph shows, its maker), in the order the check tries them
GRAPHS: tuple[tuple[str, Callable[[torch.Generator], Graph]], ...] = (
    ("two branches, the one made last on the second edge", _branches),
    ("one result used three times and a leaf used twice", _shared),
    ("two outputs, one of them below the other", _two_outputs),
    ("several leaves into one node while other nodes wait", _ties),
    ("a branch that leads to no input asked for (inputs=[a])", _pruned),
    ("a split whose middle piece is never used", _empty_slot),
    ("a leaf with no dimensions broadcast to a vector", _broadcast),
    # every other output is output 0 of its node (a sum, a product)
    ("an output that is a later piece of a split (output_nr 1 or more)", _later_output),
    ("a random graph", _random),
    ("another random graph", _random),
)


def build(maker: Callable[[torch.Generator], Graph], seed: int) -> Graph:
    return maker(torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- the engine

ACC = 2**64 - 1  # the sequence number of every AccumulateGrad node


def graph_nodes(roots: list[torch.Tensor]) -> list[Any]:
    """Every node behind ``roots``, each once, in a fixed order (depth first)."""
    found, seen = [], set()
    todo = [r.grad_fn for r in reversed(roots) if r.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        found.append(node)
        todo.extend(fn for fn, _ in reversed(node.next_functions) if fn is not None)
    return found


def torch_order(graph: Graph) -> list[Any]:
    """The nodes torch's engine runs for ``graph``, in its order (node pre-hooks)."""
    ran: list[Any] = []
    handles = [node.register_prehook(lambda grads, node=node: ran.append(node))
               for node in graph_nodes(graph.roots)]
    try:
        torch.autograd.backward(graph.roots, graph.grads, inputs=graph.inputs)
    finally:
        for handle in handles:
            handle.remove()
    return ran


class _Ready:
    """A ready node in the check's heap: compared by priority only, as torch compares."""

    def __init__(self, key: Any, node: Any) -> None:
        self.key, self.node = key, node

    def __lt__(self, other: _Ready) -> bool:
        return self.key < other.key


def _needed(graph: Graph, nodes: list[Any]) -> set[Any]:
    """The nodes from which a path leads to an input's AccumulateGrad node."""
    targets = {torch.autograd.graph.get_gradient_edge(t).node for t in graph.inputs}
    needed: set[Any] = set()
    changed = True
    while changed:  # small graphs: repeat until nothing changes
        changed = False
        for node in nodes:
            if node not in needed and (node in targets or any(
                    fn in needed for fn, _ in node.next_functions)):
                needed.add(node)
                changed = True
    return needed


# Set while the learner's function runs: the check's own executor notes that it was called.
BORROWED: dict[str, bool] = {"watching": False, "called": False}


@torch.no_grad()
def execute(graph: Graph, queue: str = "heap", prune: bool = True, add: bool = True,
            output_nr: bool = True) -> list[Any]:
    """The check's executor: torch's bookkeeping, or one slip of it.

    ``queue``: ``"heap"`` is torch's (largest sequence number first, ties as a binary
    heap gives them); ``"arrival"`` breaks ties by arrival; ``"fifo"``/``"lifo"`` keep the
    ready nodes in a plain queue or stack; ``"oldest"`` takes the smallest sequence
    number first. ``prune=False`` runs every node; ``add=False`` keeps the last gradient
    that arrives in an input slot instead of the sum; ``output_nr=False`` gives each
    root's gradient to slot 0 of its node instead of slot ``root.output_nr``.
    """
    if BORROWED["watching"]:
        BORROWED["called"] = True
    nodes = graph_nodes(graph.roots)
    needed = _needed(graph, nodes) if prune else set(nodes)
    waiting = {node: 0 for node in nodes}
    for node in nodes:
        for fn, _ in node.next_functions:
            if fn is not None:
                waiting[fn] += 1
    edges = [(r.grad_fn, r.output_nr if output_nr else 0) for r in graph.roots]
    if len(edges) > 1:  # torch's root node: one edge to each output
        for fn, _ in edges:
            waiting[fn] += 1
    buffers: dict[Any, list[Any]] = {}
    ready: list[Any] = []
    arrivals = [0]

    def deliver(fn: Any, slot: int, grad: torch.Tensor) -> None:
        shape = fn._input_metadata[slot].shape
        grad = grad if grad.shape == shape else grad.sum_to_size(shape)
        buffer = buffers.setdefault(fn, [None] * len(fn._input_metadata))
        buffer[slot] = grad if buffer[slot] is None or not add else buffer[slot] + grad

    def push(fn: Any) -> None:
        if fn not in needed:
            return
        arrivals[0] += 1
        seq = fn._sequence_nr()
        if queue in ("heap", "arrival", "oldest"):
            key = {"heap": -seq, "arrival": (-seq, arrivals[0]), "oldest": seq}[queue]
            heapq.heappush(ready, _Ready(key, fn))
        else:
            ready.append(fn)

    def pop() -> Any:
        if queue in ("heap", "arrival", "oldest"):
            return heapq.heappop(ready).node
        return ready.pop(0) if queue == "fifo" else ready.pop()

    for (fn, slot), grad in zip(edges, graph.grads, strict=True):
        deliver(fn, slot, grad)
        if len(edges) > 1:
            waiting[fn] -= 1
            if waiting[fn] == 0:
                push(fn)
    if len(edges) == 1:
        push(edges[0][0])
    order = []
    while ready:
        node = pop()
        order.append(node)
        sent = node(*buffers.pop(node))
        sent = sent if isinstance(sent, tuple) else (sent,)
        for (fn, slot), grad in zip(node.next_functions, sent, strict=True):
            if fn is None:
                continue
            if grad is not None and fn in needed:
                deliver(fn, slot, grad)
            waiting[fn] -= 1
            if waiting[fn] == 0:
                push(fn)
    return order
