"""The graphs ``l28-ops-by-node`` is checked on, as plain data, and what torch runs on them.

A graph is a small dict (`make_inputs`): its leaves' values, a constant, which operations
join them, and a leaf whose ``.grad`` is already set. It is built anew wherever it is
needed (`build`): in the learner's process, to be handed to the learner's function, and in
the grader, to be run by `timeline`, the check's own recorder. Two shapes of graph:

- ``shared``: ``u = b1(u1(a), b)`` with ``b`` broadcast along the rows of ``a``, then
  ``loss = r((u2(u) + u) * c)``. ``u`` is used twice, so the engine sums its two gradients
  between two nodes; the same-shape addition's node runs no operation at all; the two
  leaves give two ``AccumulateGrad`` nodes.
- ``linear``: ``loss = r(u1(x @ W + bias))``, the bias broadcast (its node sums the
  gradient down to the bias's shape) and, in some graphs, ``W.grad`` already set.
"""

from __future__ import annotations

from typing import Any

import torch

from ....watch import QuietDispatchMode

__all__ = ["build", "describe", "leaves", "make_inputs", "timeline"]

F64 = torch.float64
UNARY = {
    "sin": torch.sin, "cos": torch.cos, "exp": torch.exp, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "neg": torch.neg, "abs": torch.abs,
    "square": lambda t: t**2, "cube": lambda t: t**3,
}
BINARY = {"mul": torch.mul, "add": torch.add, "sub": torch.sub, "div": torch.div}
SYMBOL = {"mul": "*", "add": "+", "sub": "-", "div": "/"}
REDUCE = {"sum": torch.sum, "mean": torch.mean}


def _pick(gen: torch.Generator, items: Any) -> Any:
    items = list(items)
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _size(gen: torch.Generator) -> int:
    return int(torch.randint(2, 5, (1,), generator=gen))


def _away_from_zero(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """Values between 0.5 and 1.5 in size, either sign: safe to divide by."""
    sign = torch.randint(0, 2, shape, generator=gen).to(F64) * 2 - 1
    return sign * (0.5 + torch.rand(*shape, generator=gen, dtype=F64))


def _shared(gen: torch.Generator) -> dict[str, Any]:
    m, n = _size(gen), _size(gen)
    return {"kind": "shared", "a": torch.randn(m, n, generator=gen, dtype=F64),
            "b": _away_from_zero(gen, n), "u1": _pick(gen, UNARY), "b1": _pick(gen, BINARY),
            "u2": _pick(gen, UNARY), "r": _pick(gen, REDUCE),
            "c": torch.randn(m, n, generator=gen, dtype=F64) if _pick(gen, (0, 1)) else None,
            "filled": _pick(gen, ("a", "b", None))}


def _linear(gen: torch.Generator) -> dict[str, Any]:
    m, k, o = _size(gen), _size(gen), _size(gen)
    return {"kind": "linear", "x": torch.randn(m, k, generator=gen, dtype=F64),
            "W": torch.randn(k, o, generator=gen, dtype=F64),
            "bias": torch.randn(o, generator=gen, dtype=F64),
            "x_leaf": bool(_pick(gen, (0, 1))), "u1": _pick(gen, UNARY),
            "r": _pick(gen, REDUCE), "filled": _pick(gen, ("W", None))}


def make_inputs(gen: torch.Generator) -> dict[str, Any]:
    """Three new graphs: one of each shape, and a third of either."""
    third = _pick(gen, (_shared, _linear))
    return {"graphs": [_shared(gen), _linear(gen), third(gen)]}


def _leaf(value: torch.Tensor, filled: bool) -> torch.Tensor:
    leaf = value.clone().requires_grad_()
    if filled:  # a gradient from an earlier pass: AccumulateGrad adds to it
        leaf.grad = torch.full_like(value, 0.5)
    return leaf


def build(spec: dict[str, Any]) -> torch.Tensor:
    """The graph made new from its data: its loss, ready for one backward pass."""
    if spec["kind"] == "shared":
        a, b = _leaf(spec["a"], spec["filled"] == "a"), _leaf(spec["b"], spec["filled"] == "b")
        u = BINARY[spec["b1"]](UNARY[spec["u1"]](a), b)
        v = UNARY[spec["u2"]](u) + u
        return REDUCE[spec["r"]](v if spec["c"] is None else v * spec["c"])
    x = _leaf(spec["x"], False) if spec["x_leaf"] else spec["x"].clone()
    W, bias = _leaf(spec["W"], spec["filled"] == "W"), _leaf(spec["bias"], False)
    return REDUCE[spec["r"]](UNARY[spec["u1"]](x @ W + bias))


def describe(spec: dict[str, Any]) -> str:
    """The graph in a line, as the learner would write it."""
    if spec["kind"] == "shared":
        m, n = spec["a"].shape
        u = f"u = {spec['u1']}(a) {SYMBOL[spec['b1']]} b"
        v = f"{spec['u2']}(u) + u" if spec["c"] is None else f"({spec['u2']}(u) + u) * c"
        shapes = f"a {m}x{n}, b ({n},)" + (", c a constant" if spec["c"] is not None else "")
        filled = f", {spec['filled']}.grad already set" if spec["filled"] else ""
        return f"{u}; loss = {spec['r']}({v}) with {shapes}{filled}"
    x = "x (a leaf)" if spec["x_leaf"] else "x (a constant)"
    filled = ", W.grad already set" if spec["filled"] else ""
    return (f"loss = {spec['r']}({spec['u1']}(x @ W + bias)) with {x} "
            f"{tuple(spec['x'].shape)}, W {tuple(spec['W'].shape)}{filled}")


def _nodes(loss: torch.Tensor) -> list[Any]:
    found, todo = [], [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in found:
            continue
        found.append(node)
        todo.extend(fn for fn, _ in node.next_functions)
    return found


def leaves(loss: torch.Tensor) -> list[torch.Tensor]:
    """The leaves the graph's AccumulateGrad nodes hold."""
    return [node.variable for node in _nodes(loss) if hasattr(node, "variable")]


class _Recorder(QuietDispatchMode):
    """Puts each aten operation under whatever runs now: a node, or None (no node)."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[list[Any]] = [[None, []]]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.entries[-1][1].append(str(func))
        return func(*args, **(kwargs or {}))


def timeline(spec: dict[str, Any]) -> list[tuple[str | None, list[str]]]:
    """One backward pass over the graph, as torch runs it: (who, its aten operations) in
    order, where who is a node's name from the moment it starts (its pre-hook) to the moment
    it finishes (its hook), and None for what runs between nodes (the engine's own work)."""
    loss = build(spec)
    recorder = _Recorder()
    handles = []
    for node in _nodes(loss):
        handles.append(node.register_prehook(
            lambda grads, node=node: recorder.entries.append([node.name(), []])))
        handles.append(node.register_hook(
            lambda grads_in, grads_out: recorder.entries.append([None, []])))
    with recorder:
        loss.backward()
    for handle in handles:
        handle.remove()
    return [(who, ops) for who, ops in recorder.entries if who is not None or ops]
