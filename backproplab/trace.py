"""Record a real backward pass: which node ran when, and the gradients in and out.

`trace_backward` describes the graph first (while its saved tensors still
exist), puts a pre-hook and a hook on every node, calls ``loss.backward``
and removes the hooks again, also when backward raises. The hooks only read
gradients, so every ``.grad`` is bitwise what an untraced backward gives.

>>> import torch
>>> x = torch.tensor(1.0, requires_grad=True)
>>> w = torch.tensor(2.0, requires_grad=True)
>>> b = torch.tensor(3.0, requires_grad=True)
>>> t = trace_backward((w * x + b) ** 2, names={"x": x, "w": w, "b": b})
>>> [s.name for s in t.steps][:3]
['PowBackward0', 'AddBackward0', 'AccumulateGrad']
>>> t.leaf_grad("x").values
(20.0,)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from . import explain
from .graph import SMALL, Graph, describe

__all__ = ["TensorInfo", "Step", "Trace", "trace_backward"]


@dataclass(frozen=True)
class TensorInfo:
    """Shape, dtype and (for at most 16 elements) the flattened values of a tensor."""

    shape: tuple[int, ...]
    dtype: str
    values: tuple[float, ...] | None

    @classmethod
    def of(cls, t: torch.Tensor | None) -> TensorInfo | None:
        """Summarise ``t``; None stays None.

        >>> TensorInfo.of(torch.ones(2))
        TensorInfo(shape=(2,), dtype='float32', values=(1.0, 1.0))
        """
        if t is None:
            return None
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"t: expected a torch.Tensor or None, got {type(t).__name__}")
        values = None
        if t.numel() <= SMALL and not t.is_sparse:
            vals = t.detach().reshape(-1).tolist()
            try:
                values = tuple(float(v) for v in vals)
            except TypeError:  # complex values stay complex
                values = tuple(vals)
        return cls(tuple(t.shape), str(t.dtype).removeprefix("torch."), values)

    def __str__(self) -> str:
        if self.values is None:
            return f"shape {self.shape}"
        if not self.shape:
            return _num(self.values[0])
        return "[" + ", ".join(map(_num, self.values)) + "]"


@dataclass(frozen=True)
class Step:
    """One node run by backward; ``index`` counts from 0 in execution order.

    ``grad_outputs`` arrive at the node (one per output of the forward op);
    ``grad_inputs`` leave it (one per ``next_functions`` entry).
    """

    index: int
    node_id: int
    name: str
    grad_outputs: tuple[TensorInfo | None, ...]
    grad_inputs: tuple[TensorInfo | None, ...]


@dataclass(frozen=True)
class Trace:
    """A recorded backward pass over `graph` (described before backward ran).

    ``leaf_grads`` pairs each leaf name with its ``.grad`` after backward
    (leaves left without a gradient are absent).
    """

    graph: Graph
    steps: tuple[Step, ...]
    leaf_grads: tuple[tuple[str, TensorInfo], ...]
    # The numbers explain() needs (see explain.read_notes); small graphs only.
    notes: Mapping | None = field(default=None, compare=False, repr=False)

    def leaf_grad(self, name: str) -> TensorInfo | None:
        """The final ``.grad`` of the leaf called ``name`` (None if it got none)."""
        if not isinstance(name, str):
            raise TypeError(f"name: expected a leaf name (str), got {type(name).__name__}")
        for n, info in self.leaf_grads:
            if n == name:
                return info
        known = [n.leaf.name for n in self.graph.leaves()]
        if name in known:
            return None
        raise KeyError(f"name: expected one of the leaf names {known}, got {name!r}")

    def to_text(self) -> str:
        """A numbered table of the steps, then the leaf gradients."""
        rows = [("step", "node", "name", "grad_outputs (in)", "grad_inputs (out)")]
        for s in self.steps:
            rows.append(
                (
                    str(s.index),
                    f"[{s.node_id}]",
                    s.name,
                    _infos(s.grad_outputs),
                    _infos(s.grad_inputs),
                )
            )
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        lines = [
            "  ".join(
                [
                    r[0].rjust(widths[0]),
                    r[1].ljust(widths[1]),
                    r[2].ljust(widths[2]),
                    r[3].ljust(widths[3]),
                    r[4],
                ]
            ).rstrip()
            for r in rows
        ]
        grads = ", ".join(f"{n} = {info}" for n, info in self.leaf_grads) or "(none)"
        lines.append(f"leaf grads: {grads}")
        return "\n".join(lines)

    def explain(self) -> str:
        """The chain rule written out with numbers, for small graphs of scalars.

        For other graphs it says why it cannot, instead of guessing.
        """
        return explain.explain(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Trace({len(self.steps)} steps over {self.graph!r})"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython/Jupyter text display
        p.text(self.to_text())


def _num(v: float) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _infos(infos: tuple[TensorInfo | None, ...]) -> str:
    return ", ".join("None" if i is None else str(i) for i in infos) or "-"


def trace_backward(
    loss: torch.Tensor,
    names: Mapping[str, torch.Tensor] | None = None,
    *,
    gradient: torch.Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> Trace:
    """Run ``loss.backward(...)`` while recording every node it executes.

    ``gradient``, ``retain_graph`` and ``create_graph`` go to backward
    unchanged. ``names`` names leaves (and, for `Trace.explain`, any
    intermediate tensor or the loss itself).

    >>> import torch
    >>> a = torch.tensor(2.0, requires_grad=True)
    >>> print(trace_backward(a * a, {"a": a}).to_text())
    step  node  name            grad_outputs (in)  grad_inputs (out)
       0  [0]   MulBackward0    1                  2, 2
       1  [1]   AccumulateGrad  4                  -
    leaf grads: a = 4
    """
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"loss: expected a torch.Tensor, got {type(loss).__name__}")
    if not loss.requires_grad:
        raise ValueError(
            "loss: expected a tensor that requires grad, got one with requires_grad=False "
            "(it has no autograd graph to trace)"
        )
    if loss.is_complex():
        raise TypeError(
            "loss: expected a real tensor, got a complex one: backward of a complex loss "
            "needs an explicit gradient and is not traced here; trace loss.real or loss.abs()"
        )
    for arg, value in (("retain_graph", retain_graph), ("create_graph", create_graph)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{arg}: expected True, False or None, got {value!r}")
    if gradient is not None and not isinstance(gradient, torch.Tensor):
        raise TypeError(
            f"gradient: expected a tensor shaped like loss or None, got {type(gradient).__name__}"
        )
    if gradient is None and loss.numel() != 1:
        raise ValueError(
            f"gradient: loss has shape {tuple(loss.shape)}, not a single number, so backward "
            "needs gradient= (a tensor of the same shape: the vector in the vector-Jacobian "
            "product, lesson 08)"
        )
    if gradient is not None and gradient.shape != loss.shape:
        raise ValueError(
            f"gradient: expected shape {tuple(loss.shape)} (the loss's), "
            f"got {tuple(gradient.shape)}"
        )
    graph = describe(loss, names)
    notes = (explain.read_notes(graph, loss, names)
             if len(graph.nodes) <= explain.MAX_NODES else None)

    steps: list[Step] = []
    started = [0]  # nodes run one at a time, so pre-hook order is execution order
    pending: dict[int, tuple[int, tuple]] = {}  # node id -> (step index, grad_outputs)
    handles = []
    info = TensorInfo.of

    def pre(k: int):
        def hook(grad_outputs):
            pending[k] = (started[0], tuple(map(info, grad_outputs)))
            started[0] += 1

        return hook

    def post(k: int, name: str):
        def hook(grad_inputs, grad_outputs):
            index, outs = pending.pop(k)
            steps.append(Step(index, k, name, outs, tuple(map(info, grad_inputs))))

        return hook

    try:
        for n in graph.nodes:
            if n.fn is not None:
                handles.append(n.fn.register_prehook(pre(n.id)))
                handles.append(n.fn.register_hook(post(n.id, n.name)))
        loss.backward(gradient, retain_graph=retain_graph, create_graph=create_graph)
    finally:
        for h in handles:
            h.remove()

    steps.sort(key=lambda s: s.index)
    leaf_grads = []
    for n in graph.leaves():
        g = n.leaf.tensor.grad
        if g is not None:
            leaf_grads.append((n.leaf.name, TensorInfo.of(g)))
    return Trace(graph, tuple(steps), tuple(leaf_grads), notes)


# ---------------------------------------------------------------------------
# explain: chain-rule text for small scalar graphs
