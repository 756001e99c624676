"""The graphs of ``l02-backward`` and the check's own walk over them.

A graph is plain data (`make_inputs`: its leaves' values, its constant, which operation
joins what) and is built anew wherever it is needed (`build`): in the learner's process to
be walked, in the grader to be walked by `walk`, the reference, and by its slips.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OPS", "PROBES", "build", "edge_grads", "make_inputs", "walk"]

# The operations the graphs of this exercise are made of, by node name.
OPS = ("MulBackward0", "AddBackward0", "SubBackward0", "SinBackward0", "ExpBackward0",
       "PowBackward0")
# The graphs that try one node at a time, in this order: each after x * c (a product
# with a constant) relies only on rules tried before it.
PROBES = ("x * y", "x * c") + OPS[1:]


def _local(node: Any, g: torch.Tensor) -> list[torch.Tensor | None]:
    """The gradients ``node`` sends to its inputs for the gradient ``g`` at its output
    (None for an input that needs none): the check's own walk, read from saved tensors."""
    name = node.name()
    needs = [fn is not None for fn, _ in node.next_functions]
    if name == "AddBackward0":
        sent = [g, g]
    elif name == "SubBackward0":
        sent = [g, -g]
    elif name == "MulBackward0":
        sent = [g * node._saved_other if needs[0] else None,
                g * node._saved_self if needs[1] else None]
    elif name == "SinBackward0":
        sent = [g * torch.cos(node._saved_self)]
    elif name == "ExpBackward0":
        sent = [g * node._saved_result]
    elif name == "PowBackward0":
        n = node._saved_exponent
        sent = [g * n * node._saved_self ** (n - 1)]
    else:  # the check builds its graphs from OPS only
        raise ValueError(f"no rule for {name}")
    return [s if need else None for s, need in zip(sent, needs, strict=True)]


def _users(out: torch.Tensor) -> dict[Any, int]:
    """Every node behind ``out`` -> the number of edges that come into it."""
    users: dict[Any, int] = {out.grad_fn: 0}
    todo, seen = [out.grad_fn], set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for fn, _ in node.next_functions:
            if fn is not None:
                users[fn] = users.get(fn, 0) + 1
                todo.append(fn)
    return users


@torch.no_grad()
def walk(out: torch.Tensor, leaves: list[torch.Tensor], order: str = "ready",
         add: bool = True) -> list[torch.Tensor]:
    """The gradients of ``out`` (with ones arriving at it) for each leaf, by walking.

    ``order="ready"`` is the right walk: a node runs once every edge into it has
    delivered. ``"stack"`` and ``"queue"`` are the slip of running a node as soon as the
    walk first meets it, with whatever has arrived by then (depth first, breadth first).
    ``"ready-queue"`` is the right order taken first in, first out. ``add=False`` is the
    slip of keeping only the last part that arrives at a node (``=`` for ``+=``).
    """
    users = _users(out)
    grads = {out.grad_fn: torch.ones_like(out)}
    done: set[Any] = set()
    todo = [out.grad_fn]
    found: dict[int, torch.Tensor] = {}
    while todo:
        node = todo.pop(0) if order in ("queue", "ready-queue") else todo.pop()
        if node in done:
            continue
        done.add(node)
        g = grads[node]
        if hasattr(node, "variable"):
            found[id(node.variable)] = g
            continue
        for (fn, _), sent in zip(node.next_functions, _local(node, g), strict=True):
            if fn is None:
                continue
            grads[fn] = grads[fn] + sent if add and fn in grads else sent
            users[fn] -= 1
            if not order.startswith("ready") or users[fn] == 0:
                todo.append(fn)
    return [found[id(leaf)] for leaf in leaves]


@torch.no_grad()
def edge_grads(out: torch.Tensor, leaf: torch.Tensor) -> list[torch.Tensor]:
    """What the right walk sends along each edge that ends at ``leaf``'s node."""
    users = _users(out)
    grads = {out.grad_fn: torch.ones_like(out)}
    ready, sent_to_leaf = [out.grad_fn], []
    while ready:
        node = ready.pop()
        if hasattr(node, "variable"):
            continue
        for (fn, _), sent in zip(node.next_functions, _local(node, grads[node]), strict=True):
            if fn is None:
                continue
            if hasattr(fn, "variable") and fn.variable is leaf:
                sent_to_leaf.append(sent)
            grads[fn] = grads[fn] + sent if fn in grads else sent
            users[fn] -= 1
            if users[fn] == 0:
                ready.append(fn)
    return sent_to_leaf


# ----------------------------------------------------------------- the graphs, as data


def _pick(gen: torch.Generator, items: Any) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _uniform(gen: torch.Generator, size: int) -> torch.Tensor:
    return torch.rand(size, generator=gen, dtype=torch.float64) * 2 - 1


def _unary_spec(gen: torch.Generator) -> list[Any]:
    op = _pick(gen, ("sin", "exp", "pow"))
    return [op, _pick(gen, (2, 3))] if op == "pow" else [op]


def _unary(spec: list[Any], t: torch.Tensor) -> torch.Tensor:
    return t ** spec[1] if spec[0] == "pow" else getattr(torch, spec[0])(t)


def _probe_inputs(gen: torch.Generator, op: str) -> dict[str, Any]:
    """A graph with one node of ``op`` under a constant factor (so that the gradient that
    arrives at the node is not all ones)."""
    size = int(torch.randint(1, 4, (1,), generator=gen))
    x, y = _uniform(gen, size), _uniform(gen, size)
    c = torch.rand(size, generator=gen, dtype=torch.float64) + 0.5 if op != "x * y" else None
    n = _pick(gen, (2, 3)) if op == "PowBackward0" else None
    return {"probe": op, "x": x, "y": y, "c": c, "n": n}


def _graph_inputs(gen: torch.Generator) -> dict[str, Any]:
    """A graph of OPS where gradients meet: a constant factor (an input with no node), a
    leaf used twice, and an intermediate result used in both branches of the final sum,
    so that a walk that runs a node as soon as it first meets it runs that result too
    early (depth first or breadth first)."""
    n = int(torch.randint(2, 5, (1,), generator=gen))
    size = int(torch.randint(1, 4, (1,), generator=gen))
    leaves = [_uniform(gen, size) for _ in range(n)]
    constant = torch.rand(size, generator=gen, dtype=torch.float64) + 0.5
    steps = [[_unary_spec(gen), _pick(gen, ("add", "sub", "mul"))] for _ in leaves[1:]]
    again = _pick(gen, list(range(n)))
    return {"probe": None, "leaves": leaves, "constant": constant, "steps": steps,
            "again": again, "tail": [_unary_spec(gen), _unary_spec(gen)]}


def make_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The seven one-node graphs and the three where gradients meet, each from a
    generator of its own seeded from this one's seed (as the check always seeded them)."""
    seed = gen.initial_seed()
    return {"graphs": [_probe_inputs(torch.Generator().manual_seed(seed * 31 + k), op)
                       for k, op in enumerate(PROBES)]
            + [_graph_inputs(torch.Generator().manual_seed(seed + k)) for k in range(3)]}


def build(spec: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A graph made new from its data: (its output, its leaves)."""
    if spec["probe"] is not None:
        op = spec["probe"]
        x, y = spec["x"].clone().requires_grad_(), spec["y"].clone().requires_grad_()
        if op == "x * y":
            return x * y, [x, y]
        if op == "x * c":
            return x * spec["c"], [x]
        made = {"AddBackward0": lambda: x + y, "SubBackward0": lambda: x - y,
                "SinBackward0": lambda: torch.sin(x), "ExpBackward0": lambda: torch.exp(x),
                "PowBackward0": lambda: x ** spec["n"]}[op]()
        return made * spec["c"], [x, y] if op in ("AddBackward0", "SubBackward0") else [x]
    leaves = [t.clone().requires_grad_() for t in spec["leaves"]]
    value = leaves[0] * spec["constant"]
    for leaf, (unary, op) in zip(leaves[1:], spec["steps"], strict=True):
        term = _unary(unary, leaf)
        value = value + term if op == "add" else value - term if op == "sub" else value * term
    shared, first, second = value, *spec["tail"]  # shared: used three times below
    return (shared * _unary(first, shared)
            + _unary(second, shared) * leaves[spec["again"]]), leaves
