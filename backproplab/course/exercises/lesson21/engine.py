"""Torch's order, and the check's own executor: the engine's bookkeeping reproduced
(counting, pruning, the input buffers, the ready queue), or one slip of it."""

from __future__ import annotations

import heapq
from typing import Any

import torch

from .graphs import Graph

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
def execute(graph: Graph, queue: str = "heap", prune: bool = True, add: bool = True
            ) -> list[Any]:
    """The check's executor: torch's bookkeeping, or one slip of it.

    ``queue``: ``"heap"`` is torch's (largest sequence number first, ties as a binary
    heap gives them); ``"arrival"`` breaks ties by arrival; ``"fifo"``/``"lifo"`` keep the
    ready nodes in a plain queue or stack; ``"oldest"`` takes the smallest sequence
    number first. ``prune=False`` runs every node; ``add=False`` keeps the last gradient
    that arrives in an input slot instead of the sum.
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
