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

import math
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from .graph import SMALL, Graph, _check_names, describe

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
    # Forward values and names for explain(); filled for small graphs only.
    _notes: Mapping | None = field(default=None, compare=False, repr=False)

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
        return _explain(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Trace({len(self.steps)} steps over {self.graph!r})"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython/Jupyter text display
        p.text(self.to_text())


def _num(v: float) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _factor(v: float) -> str:
    # A negative number after an operator reads better in parentheses.
    return f"({_num(v)})" if v < 0 else _num(v)


def _infos(infos: tuple[TensorInfo | None, ...]) -> str:
    return ", ".join("None" if i is None else str(i) for i in infos) or "-"


# Explanations are written only for graphs up to this many nodes.
EXPLAIN_MAX_NODES = 40


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
            "product, lesson 05)"
        )
    if gradient is not None and gradient.shape != loss.shape:
        raise ValueError(
            f"gradient: expected shape {tuple(loss.shape)} (the loss's), "
            f"got {tuple(gradient.shape)}"
        )
    graph = describe(loss, names)
    notes = _notes(graph, loss, names) if len(graph.nodes) <= EXPLAIN_MAX_NODES else None

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


def _notes(graph: Graph, loss: torch.Tensor, names: Mapping | None) -> dict:
    """Numbers explain() needs, read before backward frees the saved tensors."""
    _check_names(names)
    labels = {}
    for key, t in (names or {}).items():
        if t.grad_fn is not None:
            labels.setdefault(id(t.grad_fn), key)
    saved: dict[int, dict[str, float]] = {}
    label_of: dict[int, str] = {}
    for n in graph.nodes:
        if n.fn is None or n.kind != "op":
            continue
        if id(n.fn) in labels:
            label_of[n.id] = labels[id(n.fn)]
        vals = {}
        for attr in dir(type(n.fn)):
            if not attr.startswith("_saved_"):
                continue
            try:
                v = getattr(n.fn, attr)
            except RuntimeError:
                continue  # already freed: backward will say so itself
            if isinstance(v, torch.Tensor):
                if v.numel() == 1:
                    vals[attr[7:]] = float(v.detach())
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                vals[attr[7:]] = float(v)
        saved[n.id] = vals
    value = float(loss.detach()) if loss.numel() == 1 else None
    return {"saved": saved, "labels": label_of, "loss": value}


_FORWARD = {
    "AddBackward0": "{0} + {1}",
    "SubBackward0": "{0} - {1}",
    "RsubBackward0": "{1} - {0}",
    "RsubBackward1": "c - {0}",
    "MulBackward0": "{0} * {1}",
    "DivBackward0": "{0} / {1}",
    "PowBackward0": "{0}**{p}",
    "NegBackward0": "-{0}",
    "ReciprocalBackward0": "1/{0}",
    "SinBackward0": "sin({0})",
    "CosBackward0": "cos({0})",
    "ExpBackward0": "exp({0})",
    "LogBackward0": "log({0})",
    "TanhBackward0": "tanh({0})",
    "SigmoidBackward0": "sigmoid({0})",
    "ReluBackward0": "relu({0})",
}
SUPPORTED = "+ - * / ** (by a number), neg, reciprocal, sin, cos, exp, log, tanh, sigmoid, relu"


def _symbol_times(coef: float, sym: str, power: float | None = None) -> str:
    # "2y", "3y^2", "0.5*leaf0^-0.5": short when the symbol is one letter.
    body = sym if power is None else f"{sym}^{_num(power)}"
    return f"{_num(coef)}{body}" if len(sym) == 1 else f"{_num(coef)}*{body}"


def _div(a: float, b: float) -> float:
    """a / b as the tensors compute it: dividing by zero gives inf (or nan for 0/0)."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * (
            math.copysign(1.0, b)
        )
    return a / b


def _pow(x: float, p: float) -> float:
    try:
        return x**p
    except ZeroDivisionError:  # 0 to a negative power
        return math.inf


def _local(
    name: str, pos: int, s: dict, ins: list[str], out: str
) -> tuple[str, float, list[str]] | None:
    """(expression, value, symbols it uses) of d out / d input[pos], or None if unknown."""
    try:
        if name in ("AddBackward0",):
            a = s.get("alpha", 1.0) if pos == 1 else 1.0
            return _num(a), a, []
        if name == "SubBackward0":
            a = -s.get("alpha", 1.0) if pos == 1 else 1.0
            return _num(a), a, []
        if name in ("RsubBackward0", "RsubBackward1"):
            a = -s.get("alpha", 1.0) if pos == 0 else 1.0
            return _num(a), a, []
        if name == "MulBackward0":
            other = s["other"] if pos == 0 else s["self"]
            return ins[1 - pos], other, [ins[1 - pos]]
        if name == "DivBackward0":
            if pos == 0:
                return f"1/{ins[1]}", _div(1.0, s["other"]), [ins[1]]
            return f"-{ins[0]}/{ins[1]}^2", _div(-s["self"], s["other"] ** 2), ins[:2]
        if name == "PowBackward0":
            p, x = s["exponent"], s["self"]
            if p == 1:
                return "1", 1.0, []
            expr = _symbol_times(p, ins[0], None if p == 2 else p - 1)
            return expr, p * _pow(x, p - 1), [ins[0]]
        if name == "NegBackward0":
            return "-1", -1.0, []
        if name == "ReciprocalBackward0":
            return f"-1/{ins[0]}^2", -(s["result"] ** 2), [ins[0]]
        if name == "SinBackward0":
            return f"cos({ins[0]})", math.cos(s["self"]), [ins[0]]
        if name == "CosBackward0":
            return f"-sin({ins[0]})", -math.sin(s["self"]), [ins[0]]
        if name == "ExpBackward0":
            return f"exp({ins[0]})", s["result"], [ins[0]]
        if name == "LogBackward0":
            return f"1/{ins[0]}", _div(1.0, s["self"]), [ins[0]]
        if name == "TanhBackward0":
            return f"1 - {out}^2", 1.0 - s["result"] ** 2, [out]
        if name == "SigmoidBackward0":
            return f"{out}(1 - {out})", s["result"] * (1.0 - s["result"]), [out]
        if name == "ReluBackward0":
            return f"(1 if {ins[0]} > 0 else 0)", 1.0 if s["result"] > 0 else 0.0, [ins[0]]
    except (KeyError, ZeroDivisionError, ValueError, OverflowError):
        return None
    return None


def _forward_value(name: str, s: dict, ins: list[float | None]) -> float | None:
    """The op's output from its inputs (None where an input is unknown)."""
    x = ins[0] if ins else None
    y = ins[1] if len(ins) > 1 else None
    alpha = s.get("alpha", 1.0)
    try:
        if name == "AddBackward0" and x is not None and y is not None:
            return x + alpha * y
        if name == "SubBackward0" and x is not None and y is not None:
            return x - alpha * y
        if name == "MulBackward0" and x is not None and y is not None:
            return x * y
        if name == "DivBackward0" and x is not None and y is not None:
            return x / y
        if x is None:
            return None
        if name == "PowBackward0":
            return x ** s["exponent"]
        simple = {
            "NegBackward0": lambda v: -v,
            "ReciprocalBackward0": lambda v: 1.0 / v,
            "SinBackward0": math.sin,
            "CosBackward0": math.cos,
            "ExpBackward0": math.exp,
            "LogBackward0": math.log,
            "TanhBackward0": math.tanh,
            "SigmoidBackward0": lambda v: 1.0 / (1.0 + math.exp(-v)),
            "ReluBackward0": lambda v: max(v, 0.0),
        }
        f = simple.get(name)
        return None if f is None else f(x)
    except (KeyError, ZeroDivisionError, ValueError, OverflowError, TypeError):
        return None


def _why_not(t: Trace) -> str | None:
    g = t.graph
    if t._notes is None:
        return f"this graph has {len(g.nodes)} nodes (explain() stops at {EXPLAIN_MAX_NODES})"
    if len(set(g.roots)) != 1:
        return "this graph has several outputs"
    if not t.steps:
        return "backward ran no nodes"
    for n in g.nodes:
        if n.kind == "custom":
            return f"it contains the custom Function node {n.name}"
        if n.kind == "op" and n.name not in _FORWARD:
            return f"it contains {n.name}, which explain() does not cover"
        if n.leaf is not None and n.leaf.shape and math.prod(n.leaf.shape) != 1:
            return f"leaf {n.leaf.name} has shape {n.leaf.shape}, not a single number"
    for s in t.steps:
        for info in s.grad_outputs + s.grad_inputs:
            if info is not None and (info.values is None or len(info.values) != 1):
                return f"{s.name} passes a gradient of shape {info.shape}, not a single number"
    return None


def _explain(t: Trace) -> str:
    reason = _why_not(t)
    if reason is not None:
        return (
            "explain() writes the chain rule for small graphs of single numbers built from "
            f"{SUPPORTED}; "
            f"it cannot explain this one: {reason}. Trace.to_text() lists the recorded steps."
        )
    g = t.graph
    notes = t._notes
    saved, labels = notes["saved"], notes["labels"]
    root = g.roots[0]
    out_edges = [g.out_edges(n.id) for n in g.nodes]
    in_count = [len(g.in_edges(n.id)) for n in g.nodes]

    # Names: leaves by their names, the output "z" (or its given name),
    # intermediates y, u, v, ... in node order.
    var: dict[int, str] = {}
    taken = {n.leaf.name for n in g.leaves()} | set(labels.values())
    for n in g.nodes:
        if n.leaf is not None:
            var[n.id] = n.leaf.name
        elif n.id in labels:
            var[n.id] = labels[n.id]
    if root not in var:
        var[root] = "z" if "z" not in taken else "out"
    taken.add(var[root])
    pool = iter(
        ["y", "u", "v", "p", "q", "r", "s", "h", "k", "m"] + [f"y{i}" for i in range(1, 100)]
    )
    for n in g.nodes:
        if n.id not in var:
            name = next(pool)
            while name in taken:
                name = next(pool)
            var[n.id] = name
            taken.add(name)
    z = var[root]

    def inputs(k: int) -> list[str]:
        # Names of the op's inputs; an input that needs no grad is a constant.
        node, s = g.nodes[k], saved.get(k, {})
        n_in = len(node.fn.next_functions)
        names = ["c"] * n_in
        consts = {0: s.get("self"), 1: s.get("other")}
        for pos in range(n_in):
            if consts.get(pos) is not None:
                names[pos] = _num(consts[pos])
        for e in out_edges[k]:
            names[e.position] = var[e.dst]
        return names

    # Forward values, leaves first.
    value: dict[int, float | None] = {}
    for n in reversed(g.nodes):
        if n.leaf is not None:
            value[n.id] = n.leaf.value[0]
            continue
        s = saved.get(n.id, {})
        ins: list[float | None] = [None] * len(n.fn.next_functions)
        for pos, key in ((0, "self"), (1, "other")):
            if pos < len(ins) and key in s:
                ins[pos] = s[key]
        for e in out_edges[n.id]:
            ins[e.position] = value.get(e.dst)
        value[n.id] = s.get("result", _forward_value(n.name, s, ins))
    if notes["loss"] is not None:
        value[root] = notes["loss"]

    lines = ["Forward pass:"]
    for n in reversed(g.nodes):
        if n.leaf is not None:
            continue
        s = saved.get(n.id, {})
        rhs = _rhs(n.name, inputs(n.id), s)
        v = value.get(n.id)
        lines.append(f"  {var[n.id]} = {rhs}" + ("" if v is None else f" = {_num(v)}"))
    lines.append(f"Backward pass, in the order autograd ran the nodes (d{z}/d{z} = 1):")

    paths: dict[int, list[float]] = {}
    grads: dict[int, float] = {}
    infinite: list[str] = []  # local derivatives that are not finite (a division by zero)
    for step in t.steps:
        k = step.node_id
        node = g.nodes[k]
        incoming = step.grad_outputs[0].values[0]
        if in_count[k] > 1:
            parts = " + ".join(
                _num(v) if i == 0 else _factor(v) for i, v in enumerate(paths.get(k, []))
            )
            lines.append(f"  d{z}/d{var[k]} = {parts} = {_num(incoming)}   (the paths add up)")
        grads[k] = incoming
        if node.leaf is not None:
            continue
        ins = inputs(k)
        lines.append(f"  [{node.name}]  {var[k]} = {_rhs(node.name, ins, saved.get(k, {}))}")
        for e in out_edges[k]:
            info = step.grad_inputs[e.position]
            if info is None:
                continue
            result = info.values[0]
            c = e.dst
            local = _local(node.name, e.position, saved.get(k, {}), ins, var[k])
            if local is None:
                return _explain_missing(node.name)
            expr, lval, syms = local
            if not math.isfinite(lval):
                at = ", ".join(f"{sym} = {_num(v)}" for sym in dict.fromkeys(syms)
                               if (v := _sym_value(sym, k, c, ins, var, value)) is not None)
                infinite.append(f"{node.name}'s local derivative {expr} is {_num(lval)}"
                                + (f" at {at}" if at else ""))
            lhs = f"d{z}/d{var[c]}"
            if in_count[c] > 1:
                paths.setdefault(c, []).append(result)
                lhs += f" (path {len(paths[c])} of {in_count[c]})"
            plain = expr == _num(lval) or expr in syms
            where = ""
            if not plain:
                known = [
                    (sym, _sym_value(sym, k, c, ins, var, value)) for sym in dict.fromkeys(syms)
                ]
                where = (
                    "   ("
                    + ", ".join(f"{sym} = {_num(v)}" for sym, v in known if v is not None)
                    + ")"
                )
                where = "" if where == "   ()" else where
            if k == root and incoming == 1.0:
                text = f"{lhs} = {expr}"
                text += f" = {_num(result)}" if expr != _num(result) else ""
                lines.append(f"    {text}{where}")
            else:
                shown = (
                    expr
                    if expr.startswith("(") or (" " not in expr and not expr.startswith("-"))
                    else f"({expr})"
                )
                lines.append(
                    f"    {lhs} = d{z}/d{var[k]} * {shown} = "
                    f"{_num(incoming)} * {_factor(lval)} = {_num(result)}{where}"
                )
    leaf_text = ", ".join(
        f"d{z}/d{var[n.id]} = {_num(grads[n.id])}" for n in g.leaves() if n.id in grads
    )
    lines.append(f"Result (added to .grad): {leaf_text}")
    for text in infinite:
        note = (
            f"Note: {text}: the function has no finite slope at this point (a division by "
            "zero), so the gradient is inf or nan there."
        )
        lines.append(textwrap.fill(note, 88, subsequent_indent="  "))
    return "\n".join(lines)


def _rhs(name: str, ins: list[str], s: dict) -> str:
    # The extra "" lets one-input formulas ignore a second placeholder.
    return _FORWARD[name].format(*ins, "", p=_num(s.get("exponent", float("nan"))))


def _sym_value(sym: str, k: int, c: int, ins: list[str], var: dict, value: dict) -> float | None:
    for nid, name in var.items():
        if name == sym:
            return value.get(nid)
    return None


def _explain_missing(name: str) -> str:
    return (
        f"explain() cannot explain this graph: a number {name} needs was not recorded "
        "before backward ran. Trace.to_text() lists the recorded steps."
    )
