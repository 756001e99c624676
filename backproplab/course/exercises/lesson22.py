"""Lesson 22, inside torch's engine: its exercises and its predictions.

Exercise 1 (``l22-executor``) is checked by method. The learner's
``run_backward(roots, grads, inputs)`` runs backward over torch's own graph by
calling each node itself (``node(*grads)``, allowed here), and returns the nodes
in the order it ran them. The check builds graphs the lesson never showed, each
twice from one seed: on one copy torch runs ``torch.autograd.backward`` while
node pre-hooks record the order its engine runs the nodes in; on the other the
learner's function runs, with every backward pass of the engine counted and
refused. Order and gradients must agree. The graphs each put one part of the
engine's bookkeeping to the test (branches whose creation order is not their edge
order, a shared result, several outputs, leaves tied in the ready queue while
other nodes wait, pruning to the inputs asked for, a node with an empty input
slot, a broadcast), then two random graphs mix them. Slips are named when they
hold on every graph: a first-in-first-out or a last-in-first-out queue instead
of the priority queue, ties broken by arrival, no pruning, a node run before all
of its gradient arrived, ``=`` for ``+=`` in the input buffer.

Exercise 2 (``l22-layers``) is checked by method too. The learner's
``watch_layers(model, report)`` arranges hooks so that ``report(name, grads)``
is called once per backward pass for every module with parameters of its own,
as soon as the gradients that pass computes for them exist. The check's own
tensor hooks (registered first) log each parameter's gradient as the engine
produces it; the learner's reports must fall right after a module's last one,
once per pass, with this pass's gradients (None for a parameter the pass does
not reach), and stop once the returned handles are removed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from ._spec import Method, Prediction, Report, attempt, compare, count_autograd, passed
from ._spec import failed as _fail

ACC = 2**64 - 1  # the sequence number of every AccumulateGrad node

# --------------------------------------------------------------------------
# The graphs of Exercise 1
# --------------------------------------------------------------------------


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
    ("a random graph", _random),
    ("another random graph", _random),
)


def _build(maker: Callable[[torch.Generator], Graph], seed: int) -> Graph:
    return maker(torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------
# torch's order, and the check's own executor
# --------------------------------------------------------------------------


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
_BORROWED: dict[str, bool] = {"watching": False, "called": False}


@torch.no_grad()
def execute(graph: Graph, queue: str = "heap", prune: bool = True, add: bool = True
            ) -> list[Any]:
    """The check's executor: torch's bookkeeping, or one slip of it.

    ``queue``: ``"heap"`` is torch's (largest sequence number first, ties as a binary
    heap gives them); ``"arrival"`` breaks ties by arrival; ``"fifo"``/``"lifo"`` keep the
    ready nodes in a plain queue or stack; ``"oldest"`` takes the smallest sequence
    number first. ``prune=False`` runs every node; ``add=False`` keeps the last gradient
    that arrives in an input slot instead of the sum.
    """
    if _BORROWED["watching"]:
        _BORROWED["called"] = True
    nodes = graph_nodes(graph.roots)
    needed = _needed(graph, nodes) if prune else set(nodes)
    waiting = {node: 0 for node in nodes}
    for node in nodes:
        for fn, _ in node.next_functions:
            if fn is not None:
                waiting[fn] += 1
    edges = [(r.grad_fn, r.output_nr) for r in graph.roots]
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


# --------------------------------------------------------------------------
# l22-executor: the check
# --------------------------------------------------------------------------

EXECUTOR = "run_backward"
QUEUE_SLIPS = {
    "fifo": "your ready nodes leave in the order they became ready (first in, first out). "
            "torch's ready queue is a priority queue: it always takes the ready node with the "
            "largest sequence number (node._sequence_nr()), the one made last in the forward "
            "pass",
    "lifo": "your ready nodes leave last in, first out (a stack: depth first). torch's ready "
            "queue is a priority queue: it always takes the ready node with the largest "
            "sequence number (node._sequence_nr()), the one made last in the forward pass",
    "oldest": "your queue takes the smallest sequence number first. torch takes the largest: "
              "the node made last in the forward pass runs first",
    "arrival": "every node is right but for tied AccumulateGrad nodes, which you hand out in "
               "the order they arrived. They all have the same sequence number, 2**64 - 1, "
               "and torch's ready queue is a binary heap that promises nothing about ties: "
               "they leave in the order the heap's sifting gives, which depends on what else "
               "waits in it. Compare by the key alone, in a heap (heapq, as in section 3), "
               "never by a counter",
}


class _Run(NamedTuple):
    """One graph as the check saw it: torch's copy, the learner's copy, both orders
    (as positions in `graph_nodes`)."""

    what: str
    maker: Callable[[torch.Generator], Graph]
    seed: int
    theirs: Graph
    mine: Graph
    want: list[int]
    got: list[int]


def _positions(nodes: list[Any], graph: Graph, what: str) -> tuple[list[int], Report | None]:
    index = {node: i for i, node in enumerate(graph_nodes(graph.roots))}
    if not isinstance(nodes, (list, tuple)):
        return [], _fail(EXECUTOR, f"on a graph with {what}: it returned "
                                   f"{type(nodes).__name__}; return a list of the nodes in the "
                                   "order you ran them.")
    for item in nodes:
        if isinstance(item, str):
            return [], _fail(EXECUTOR, f"on a graph with {what}: the list holds names such as "
                                       f"{item!r}; return the nodes themselves, the objects you "
                                       "called.")
        if item not in index:
            return [], _fail(EXECUTOR, f"on a graph with {what}: the list holds "
                                       f"{type(item).__name__}, which is not a node of the graph "
                                       "your function was given (return the nodes you called, "
                                       "from next_functions).")
    return [index[item] for item in nodes], None


def _raised(err: Exception) -> str:
    text = f"raised {type(err).__name__}: {err}"
    if "arguments, got" in str(err):
        return (f"{text}. A node takes one gradient per output of its forward operation "
                "(len(node._input_metadata) of them), None in a slot nothing arrived at: keep "
                "one buffer slot per input, filled by the input_nr of the edge that delivers.")
    if "broadcast shape" in str(err) or "doesn't match" in str(err):
        return (f"{text}. A node sends a broadcast input a gradient of the broadcast shape; the "
                "engine sums it down to the shape the receiving input had "
                "(fn._input_metadata[input_nr].shape) before it adds it to the buffer.")
    if "'<' not supported" in str(err):
        return (f"{text}. heapq compared two nodes: with equal keys (AccumulateGrad nodes all "
                "share one) a tuple goes on to its next item. Put a small object on the heap "
                "that compares by the key alone (__lt__).")
    return text


def _learner_runs(answer: Any, seed: int) -> tuple[list[_Run], Report | None]:
    runs = []
    for k, (what, maker) in enumerate(GRAPHS):
        graph_seed = seed * 131 + k
        theirs, mine = _build(maker, graph_seed), _build(maker, graph_seed)
        index = {node: i for i, node in enumerate(graph_nodes(theirs.roots))}
        want = [index[node] for node in torch_order(theirs)]
        _BORROWED.update(watching=True, called=False)
        try:
            with torch.no_grad(), count_autograd() as seen:
                got, failure = attempt(EXECUTOR, answer, mine.roots, mine.grads, mine.inputs,
                                       raised=lambda err, what=what: f"on a graph with {what}: "
                                                                     f"{_raised(err)}")
        finally:
            _BORROWED["watching"] = False
        if _BORROWED["called"]:
            return runs, _fail(EXECUTOR, "your code called the check's own executor "
                                         "(execute in the lesson's exercise module). Write "
                                         "your own: count, prune, buffer and queue yourself.")
        if seen.reverse:
            return runs, _fail(EXECUTOR, f"your code ran a backward pass of torch's engine "
                                         f"({seen.calls[0]}). This exercise asks you to be the "
                                         "engine: call each node yourself, node(*grads).",
                               "autograd")
        if failure is not None:
            return runs, failure
        got, failure = _positions(got, mine, what)
        if failure is not None:
            return runs, failure
        runs.append(_Run(what, maker, graph_seed, theirs, mine, want, got))
    return runs, None


def _names(run: _Run, positions: list[int]) -> str:
    nodes = graph_nodes(run.mine.roots)
    return ", ".join(nodes[i].name().replace("torch::autograd::", "") for i in positions)


def _name(run: _Run, position: int) -> str:
    node = graph_nodes(run.mine.roots)[position]
    return node.name().replace("torch::autograd::", "")


def _structure(run: _Run) -> str | None:
    """What is wrong with the set of nodes run, or with when each ran, or None."""
    nodes = graph_nodes(run.mine.roots)
    where = f"on a graph with {run.what}"
    seen: set[int] = set()
    for i in run.got:
        if i in seen:
            return (f"{where}: you ran {_name(run, i)} twice. A node runs once, with everything "
                    "that arrived for it added up: count the edges into each node first, and "
                    "push a node only when its count drops to 0.")
        seen.add(i)
    for step, i in enumerate(run.got):
        users = [j for j, node in enumerate(nodes)
                 if j in run.want and any(fn is nodes[i] for fn, _ in node.next_functions)]
        late = [j for j in users if j not in run.got[:step]]
        if late:
            return (f"{where}: you ran {_name(run, i)} before {_name(run, late[0])}, which "
                    f"sends it part of its gradient: a node ran before all of its gradient had "
                    "arrived. Count the edges into each node first and push a node only when "
                    "its count drops to 0.")
    extra = [i for i in run.got if i not in run.want]
    if extra:
        return (f"{where}: you ran {_name(run, extra[0])}, from which no path leads to the "
                "inputs asked for: no pruning. torch runs only the nodes that lead to an "
                "input's AccumulateGrad node, and fills only the inputs' .grad.")
    missing = [i for i in run.want if i not in run.got]
    if missing and all(nodes[i]._sequence_nr() == ACC for i in missing):
        return (f"{where}: you never ran {_name(run, missing[0])}. It is the node that adds "
                "the gradient into the leaf's .grad: run it like any other node, "
                "node(grad), when its count drops to 0.")
    if missing:
        return (f"{where}: you never ran {_name(run, missing[0])}, which leads to an input "
                "asked for. Every node from which a path leads to an input runs.")
    return None


def _slip_order(runs: list[_Run], **slip: Any) -> bool:
    """Whether the learner's order is the slip's on every graph (and wrong on one)."""
    if all(run.got == run.want for run in runs):
        return False
    for run in runs:
        copy = _build(run.maker, run.seed)
        index = {node: i for i, node in enumerate(graph_nodes(copy.roots))}
        if [index[node] for node in execute(copy, **slip)] != run.got:
            return False
    return True


def _order_message(runs: list[_Run]) -> str:
    for queue, message in QUEUE_SLIPS.items():
        if _slip_order(runs, queue=queue):
            return message + "."
    run = next(r for r in runs if r.got != r.want)
    step = next(k for k, (a, b) in enumerate(zip(run.got, run.want, strict=True)) if a != b)
    nodes = graph_nodes(run.mine.roots)

    def told(i: int) -> str:
        seq = nodes[i]._sequence_nr()
        return f"{_name(run, i)} (sequence number {'2**64 - 1' if seq == ACC else seq})"
    return (f"on a graph with {run.what}: torch ran {_names(run, run.want)}; you ran "
            f"{_names(run, run.got)}. At step {step} (from 0) torch ran {told(run.want[step])}, "
            f"you {told(run.got[step])}: of the ready nodes, torch runs the one with the "
            "largest sequence number, and ties go as the binary heap gives them.")


def _grads_message(runs: list[_Run]) -> str | None:
    wrong = []
    for run in runs:
        for k, (want, got) in enumerate(zip(run.theirs.leaves, run.mine.leaves, strict=True)):
            if (want.grad is None) != (got.grad is None) or (want.grad is not None and not compare(
                    "", got.grad, want.grad, rtol=1e-10, atol=1e-12).ok):
                wrong.append((run, k))
                break
    if not wrong:
        return None
    run, k = wrong[0]
    want, got = run.theirs.leaves[k].grad, run.mine.leaves[k].grad
    where = f"on a graph with {run.what}, leaf {k} (counted from 0)"
    if got is None or want is None:
        return (f"{where}: its .grad is {'None' if got is None else 'filled'}, torch's "
                f"{'None' if want is None else 'filled'}. Only the inputs asked for get a .grad, "
                "from their AccumulateGrad node.")
    if all(_add_slip(r) for r in runs):
        return (f"{where}: where several gradients arrive in one input slot you kept the last "
                "one: the input buffer adds them up (+=, not =).")
    if all(_same_grads(r, _seeded_with_ones(r)) for r in runs):
        return (f"{where}: your gradients are those of outputs seeded with ones. Backward "
                "starts from the gradients it is given: grads[k] arrives at roots[k].")
    return (f"{where}: your .grad differs from torch's (largest difference "
            f"{float((got - want).abs().max()):.3g}), though the order is right. What arrives "
            "in one input slot adds up, and a node is called with its whole buffer.")


def _same_grads(run: _Run, copy: Graph) -> bool:
    """Whether the learner's leaves hold the gradients of ``copy``'s leaves."""
    return all((a.grad is None and b.grad is None) or (
        a.grad is not None and b.grad is not None and compare(
            "", b.grad, a.grad, rtol=1e-10, atol=1e-12).ok)
        for a, b in zip(copy.leaves, run.mine.leaves, strict=True))


def _add_slip(run: _Run) -> bool:
    copy = _build(run.maker, run.seed)
    execute(copy, add=False)
    return _same_grads(run, copy)


def _seeded_with_ones(run: _Run) -> Graph:
    copy = _build(run.maker, run.seed)
    ones = copy._replace(grads=[torch.ones_like(r) for r in copy.roots])
    execute(ones)
    return copy


def _check_executor(answer: Any, seed: int) -> Report:
    runs, failure = _learner_runs(answer, seed)
    if failure is not None:
        return failure
    for run in runs:
        problem = _structure(run)
        if problem is not None:
            return _fail(EXECUTOR, problem)
    if any(run.got != run.want for run in runs):
        return _fail(EXECUTOR, _order_message(runs))
    problem = _grads_message(runs)
    if problem is not None:
        return _fail(EXECUTOR, problem)
    return passed(EXECUTOR, f"torch's order and gradients on {len(runs)} new graphs (branches, "
                            "shared results, several outputs, ties, pruning, an empty slot, a "
                            "broadcast, and two at random)")


# --------------------------------------------------------------------------
# l22-layers: a report per module, as soon as its gradients of a pass exist
# --------------------------------------------------------------------------

LAYERS = "watch_layers"


def layer_model(gen: torch.Generator) -> tuple[nn.Sequential, list[torch.Tensor]]:
    """A new small network in float64 (sizes, layers and weights from ``gen``), and three
    input batches. The global random generator is left as it was."""
    sizes = [int(torch.randint(2, 5, (1,), generator=gen)) for _ in range(3)]
    with torch.random.fork_rng(devices=[]):
        layers: list[nn.Module] = [nn.Linear(sizes[0], sizes[1]), nn.Tanh()]
        if bool(torch.rand((), generator=gen) < 0.5):
            layers.append(nn.LayerNorm(sizes[1]))
        layers += [nn.Linear(sizes[1], sizes[2], bias=bool(torch.rand((), generator=gen) < 0.5)),
                   nn.Tanh(), nn.Linear(sizes[2], 1)]
        model = nn.Sequential(*layers).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    batches = [torch.randn(int(torch.randint(2, 5, (1,), generator=gen)), sizes[0],
                           generator=gen, dtype=torch.float64) for _ in range(3)]
    return model, batches


class _Event(NamedTuple):
    kind: str  # "grad" (the check's own hook saw a parameter's gradient) or "report"
    name: str  # the parameter's full name, or the module the report named
    value: Any  # the gradient, or the grads the report gave
    held: frozenset[str]  # report: the keys whose value *is* that parameter's .grad


def _own(model: nn.Module) -> dict[str, dict[str, torch.Tensor]]:
    """Module name -> its own parameters by name, for modules that have any."""
    return {name: dict(m.named_parameters(recurse=False)) for name, m in model.named_modules()
            if dict(m.named_parameters(recurse=False))}


def _pass_problem(model: nn.Module, events: list[_Event], what: str) -> str | None:
    """What is wrong with the reports of one backward pass, or None."""
    own = _own(model)
    reports = [(k, e) for k, e in enumerate(events) if e.kind == "report"]
    names = [e.name for _, e in reports]
    if len(set(names)) == 1 and len(names) > 1 and len(own) > 1:
        return (f"in {what}, every report named {names[0]!r}. A function made in a loop looks "
                "its loop variables up when it runs, by then their last values: bind them when "
                "you make it (lambda grads, name=name: ...).")
    for name in names:
        if name not in own:
            return (f"in {what}, you reported {name!r}, which has no parameters of its own. "
                    "Report each module that has (named_parameters(recurse=False)), under its "
                    "name in model.named_modules().")
        if names.count(name) > 1:
            return (f"in {what}, you reported {name!r} {names.count(name)} times; once per pass "
                    "(does a count or a record carry over from the pass before?).")
    for module, params in own.items():
        full = {f"{module}.{k}" if module else k: k for k in params}
        grads = [(k, e) for k, e in enumerate(events) if e.kind == "grad" and e.name in full]
        mine = [(k, e) for k, e in reports if e.name == module]
        if not grads and mine:
            return (f"in {what}, you reported {module!r}, though this pass computes none of "
                    "its gradients.")
        if grads and not mine:
            return _never(module, what, len(grads), len(params))
        if not grads:
            continue
        (at, report), last = mine[0], grads[-1][0]
        if at < last:
            done = sum(1 for k, _ in grads if k < at)
            if done == 0:
                return (f"in {what}, you reported {module!r} before any of the gradients this "
                        "pass computes for it existed. A module's backward hook runs when the "
                        "gradient reaches the module, before the engine reaches its "
                        "parameters' AccumulateGrad nodes: hook the parameters.")
            return (f"in {what}, you reported {module!r} after {done} of the {len(grads)} "
                    "gradients this pass computes for it: a report waits for all of them "
                    "(register_multi_grad_hook's mode 'any' fires at the first).")
        if any(e.kind == "grad" for e in events[last + 1:at]):
            return (f"in {what}, you reported {module!r} only after later gradients had come: "
                    "report as soon as its own last gradient exists.")
        problem = _values_problem(module, params, full, grads, report, what)
        if problem is not None:
            return problem
    return None


def _never(module: str, what: str, computed: int, owned: int) -> str:
    if computed < owned:
        return (f"in {what}, which computes only {computed} of the {owned} gradients of "
                f"{module!r}, you never reported it: wait for the gradients this pass "
                "computes, not for all of them, and give None for the others. "
                "register_multi_grad_hook's mode 'all' asks the engine which will come.")
    return f"in {what}, you never reported {module!r}."


def _values_problem(module: str, params: dict[str, torch.Tensor], full: dict[str, str],
                    grads: list[tuple[int, _Event]], report: _Event, what: str) -> str | None:
    given = report.value
    if not isinstance(given, dict) or sorted(given) != sorted(params):
        keys = sorted(given) if isinstance(given, dict) else type(given).__name__
        return (f"in {what}, the grads you reported for {module!r} are {keys}; give a dict "
                f"by parameter name: {sorted(params)}.")
    if report.held:
        return (f"in {what}, you reported {module!r} with the parameters' .grad. That is not "
                "this pass's gradient: .grad adds up across backward passes (lesson 05), and a "
                "tensor hook runs before the new gradient is added to it. Report the gradients "
                "your hooks receive.")
    computed = {full[e.name]: e.value for _, e in grads}
    for key in params:
        want, got = computed.get(key), given[key]
        if want is None and got is not None:
            return (f"in {what}, you gave {module!r}.{key} a gradient, but this pass computes "
                    "none for it: give None.")
        if want is not None and (not isinstance(got, torch.Tensor) or not torch.equal(got, want)):
            return (f"in {what}, the gradient you reported for {module}.{key} is not the one "
                    "this pass computed for it.")
    return None


def _passes(model: nn.Module, batches: list[torch.Tensor]) -> list[tuple[str, Callable[[], None]]]:
    """The backward passes the check runs, each with how a message names it."""
    own = _own(model)
    first, last = next(iter(own.values())), list(own.values())[-1]
    some = [next(iter(first.values())), list(last.values())[-1]]

    def full(x: torch.Tensor) -> Callable[[], None]:
        return lambda: model(x).pow(2).sum().backward()
    return [("a first backward pass", full(batches[0])),
            ("a second backward pass (.grad not zeroed in between)", full(batches[1])),
            ("a pass with inputs=[first weight, last parameter]",
             lambda: model(batches[2]).pow(2).sum().backward(inputs=some))]


def _check_layers(answer: Any, seed: int) -> Report:
    model, batches = layer_model(torch.Generator().manual_seed(seed * 7 + 3))
    names = {p: name for name, p in model.named_parameters()}
    events: list[_Event] = []
    for p, name in names.items():
        p.register_hook(lambda grad, name=name: events.append(_Event("grad", name, grad,
                                                                     frozenset())))

    def report(name: Any, grads: Any) -> None:
        module = dict(model.named_modules()).get(name) if isinstance(name, str) else None
        own = dict(module.named_parameters(recurse=False)) if module is not None else {}
        held = frozenset(k for k, v in (grads.items() if isinstance(grads, dict) else ())
                         if k in own and v is not None and v is own[k].grad)
        events.append(_Event("report", name if isinstance(name, str) else repr(name), grads,
                             held))

    with count_autograd() as seen:
        handles, failure = attempt(LAYERS, answer, model, report)
    if failure is not None:
        return failure
    if seen.reverse:
        return _fail(LAYERS, f"your function ran a backward pass ({seen.calls[0]}); it only "
                             "arranges the hooks, and the check runs the passes.", "autograd")
    for what, run in _passes(model, batches):
        events.clear()
        try:
            run()
        except Exception as err:  # raised inside the learner's hook
            return _fail(LAYERS, f"in {what}, your hook raised {type(err).__name__}: {err}",
                         "error")
        problem = _pass_problem(model, events, what)
        if problem is not None:
            return _fail(LAYERS, problem)
    return _removed(model, batches, handles, events)


def _removed(model: nn.Module, batches: list[torch.Tensor], handles: Any,
             events: list[_Event]) -> Report:
    found = list(handles) if isinstance(handles, (list, tuple)) else [handles] if hasattr(
        handles, "remove") else None
    if not found or not all(hasattr(h, "remove") for h in found):
        return _fail(LAYERS, f"it returned {type(handles).__name__}; return the handles of the "
                             "hooks (a list), so that they can be removed.")
    for handle in found:
        handle.remove()
    events.clear()
    model(batches[0]).pow(2).sum().backward()
    if any(e.kind == "report" for e in events):
        return _fail(LAYERS, "reports still came after every handle your function returned was "
                             "removed: return the handle of each hook you registered.")
    return passed(LAYERS, f"one report per module and pass, right after its last gradient, on a "
                          f"new network ({', '.join(_own(model))}): full, repeated and pruned "
                          "passes, and none once removed")


# --------------------------------------------------------------------------
# The lesson's exercises and predictions
# --------------------------------------------------------------------------

EXERCISES = {
    # VOCABULARY: the executor keeps its ready nodes in a binary heap (heapq, an import)
    # and puts a small class of its own on it, compared by the key alone (__lt__): both
    # are what reproducing torch's order, ties included, needs. A Method check, not ByHand.
    "l22-executor": Method(check=_check_executor),
    "l22-layers": Method(check=_check_layers),
}


def _first_answer() -> str:
    a = torch.tensor(0.5, requires_grad=True)
    b = torch.tensor(1.5, requires_grad=True)
    e = torch.exp(b)  # made first
    s = torch.sin(a)  # made second
    ran: list[str] = []
    for node in (e.grad_fn, s.grad_fn):
        node.register_prehook(lambda grads, node=node: ran.append(node.name()))
    (e + s).backward()
    return ran[0]


def _ties_answer() -> list[int]:
    leaves = [torch.tensor(float(k), requires_grad=True) for k in range(4)]
    out = torch.stack(leaves).sum()
    ran: list[int] = []
    for k, (node, _) in enumerate(out.grad_fn.next_functions[0][0].next_functions):
        node.register_prehook(lambda grads, k=k: ran.append(k))
    out.backward()
    return ran


PREDICTIONS = {
    "l22-predict-first": Prediction(
        question="the node that runs first of ExpBackward0 and SinBackward0",
        answer=_first_answer,
        hint="the engine does not look at the order of next_functions. Ask what it compares "
             "when two nodes are ready at once, and which of the two nodes was made later.",
        why="both are ready once AddBackward0 has run, and the engine's ready queue takes the "
            "node with the largest sequence number: sin(a) was made after exp(b), so {answer} "
            "runs first, though it sits on the second edge",
        choices=("ExpBackward0", "SinBackward0"),
    ),
    "l22-predict-ties": Prediction(
        question="the order in which the four leaves' AccumulateGrad nodes run (by position)",
        answer=_ties_answer,
        hint="all four become ready in the same step and share one sequence number, 2**64 - "
             "1. Ask what kind of queue the engine keeps, and whether it promises anything to "
             "nodes that tie.",
        why="the ready queue is a binary heap (C++'s std::priority_queue) keyed on the sequence "
            "number alone; the four tie, and the heap's sifting hands them out as {answer}, "
            "neither first in, first out nor last in, first out",
    ),
}
