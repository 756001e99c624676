"""The chain rule written out with numbers, for a small graph of single numbers.

`trace_backward` reads the numbers this needs (`read_notes`) while the saved
tensors still exist; `explain` (what ``Trace.explain()`` returns) then writes
the forward pass, each step of the backward pass as a product of the
incoming gradient and the node's local derivative, and the gradients that
land in ``.grad``. Graphs it cannot write out (too big, tensors rather than
single numbers, ops it does not know) are told so, never guessed at.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .graph import Edge, Graph, check_names, saved_attributes

__all__ = ["MAX_NODES", "SUPPORTED", "explain", "read_notes"]

# Explanations are written only for graphs up to this many nodes.
MAX_NODES = 40


def _num(v: float) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _factor(v: float) -> str:
    # A negative number after an operator reads better in parentheses.
    return f"({_num(v)})" if v < 0 else _num(v)


def read_notes(graph: Graph, loss: torch.Tensor, names: Mapping | None) -> dict:
    """The numbers `explain` needs, read before backward frees the saved tensors: each
    node's saved scalars, the names given to intermediate tensors, the loss."""
    check_names(names)
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
        for attr in saved_attributes(type(n.fn)):
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


def _why_not(t: Any) -> str | None:
    g = t.graph
    if t.notes is None:
        return f"this graph has {len(g.nodes)} nodes (explain() stops at {MAX_NODES})"
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


def explain(t: Any) -> str:
    """The chain rule of the recorded backward pass ``t`` (a `backproplab.trace.Trace`),
    written out with numbers: the forward pass, then each step of the backward pass
    with its local derivative, then what lands in each ``.grad``.

    >>> import torch
    >>> from backproplab.trace import trace_backward
    >>> a = torch.tensor(3.0, requires_grad=True)
    >>> print(explain(trace_backward(a * a, {"a": a})))  # doctest: +ELLIPSIS
    Forward pass:
      z = a * a = 9
    Backward pass, in the order autograd ran the nodes (dz/dz = 1):
    ...
    Result (added to .grad): dz/da = 6
    """
    reason = _why_not(t)
    if reason is not None:
        return (
            "explain() writes the chain rule for small graphs of single numbers built from "
            f"{SUPPORTED}; "
            f"it cannot explain this one: {reason}. Trace.to_text() lists the recorded steps."
        )
    scene = _Scene.of(t.graph, t.notes)
    backward = _backward_lines(scene, t.steps)
    if isinstance(backward, str):  # a number the explanation needs was not recorded
        return backward
    lines, infinite = backward
    return "\n".join(_forward_lines(scene) + lines + _result_lines(scene, t.steps, infinite))


@dataclass
class _Scene:
    """What the explanation's steps share: the graph, the numbers read before backward,
    each node's variable name and forward value."""

    graph: Graph
    saved: dict[int, dict[str, float]]
    var: dict[int, str]
    value: dict[int, float | None]
    out_edges: list[tuple[Edge, ...]]
    in_count: list[int]

    @classmethod
    def of(cls, g: Graph, notes: Mapping) -> _Scene:
        out_edges = [g.out_edges(n.id) for n in g.nodes]
        scene = cls(g, notes["saved"], _variable_names(g, notes["labels"]), {}, out_edges,
                    [len(g.in_edges(n.id)) for n in g.nodes])
        scene.value = _forward_values(scene, notes["loss"])
        return scene

    @property
    def z(self) -> str:
        return self.var[self.graph.roots[0]]

    def inputs(self, k: int) -> list[str]:
        """Names of node ``k``'s inputs; an input that needs no grad is a constant."""
        node, s = self.graph.nodes[k], self.saved.get(k, {})
        n_in = len(node.fn.next_functions)
        names = ["c"] * n_in
        consts = {0: s.get("self"), 1: s.get("other")}
        for pos in range(n_in):
            if consts.get(pos) is not None:
                names[pos] = _num(consts[pos])
        for e in self.out_edges[k]:
            names[e.position] = self.var[e.dst]
        return names


def _variable_names(g: Graph, labels: Mapping[int, str]) -> dict[int, str]:
    """Leaves by their names, the output "z" (or its given name), intermediates y, u, v,
    ... in node order."""
    var: dict[int, str] = {}
    taken = {n.leaf.name for n in g.leaves()} | set(labels.values())
    for n in g.nodes:
        if n.leaf is not None:
            var[n.id] = n.leaf.name
        elif n.id in labels:
            var[n.id] = labels[n.id]
    root = g.roots[0]
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
    return var


def _forward_values(scene: _Scene, loss: float | None) -> dict[int, float | None]:
    """Each node's forward value, leaves first."""
    g, value = scene.graph, {}
    for n in reversed(g.nodes):
        if n.leaf is not None:
            value[n.id] = n.leaf.value[0]
            continue
        s = scene.saved.get(n.id, {})
        ins: list[float | None] = [None] * len(n.fn.next_functions)
        for pos, key in ((0, "self"), (1, "other")):
            if pos < len(ins) and key in s:
                ins[pos] = s[key]
        for e in scene.out_edges[n.id]:
            ins[e.position] = value.get(e.dst)
        value[n.id] = s.get("result", _forward_value(n.name, s, ins))
    if loss is not None:
        value[g.roots[0]] = loss
    return value


def _forward_lines(scene: _Scene) -> list[str]:
    lines = ["Forward pass:"]
    for n in reversed(scene.graph.nodes):
        if n.leaf is not None:
            continue
        rhs = _rhs(n.name, scene.inputs(n.id), scene.saved.get(n.id, {}))
        v = scene.value.get(n.id)
        lines.append(f"  {scene.var[n.id]} = {rhs}" + ("" if v is None else f" = {_num(v)}"))
    return lines


def _backward_lines(scene: _Scene, steps: Sequence[Any]) -> tuple[list[str], list[str]] | str:
    """One block per step autograd ran, and the local derivatives that are not finite
    (a division by zero); or the text saying a number was not recorded."""
    z = scene.z
    lines = [f"Backward pass, in the order autograd ran the nodes (d{z}/d{z} = 1):"]
    paths: dict[int, list[float]] = {}
    infinite: list[str] = []
    for step in steps:
        k = step.node_id
        node = scene.graph.nodes[k]
        incoming = step.grad_outputs[0].values[0]
        if scene.in_count[k] > 1:
            parts = " + ".join(
                _num(v) if i == 0 else _factor(v) for i, v in enumerate(paths.get(k, []))
            )
            lines.append(f"  d{z}/d{scene.var[k]} = {parts} = {_num(incoming)}   "
                         "(the paths add up)")
        if node.leaf is not None:
            continue
        ins = scene.inputs(k)
        lines.append(f"  [{node.name}]  {scene.var[k]} = "
                     f"{_rhs(node.name, ins, scene.saved.get(k, {}))}")
        for e in scene.out_edges[k]:
            info = step.grad_inputs[e.position]
            if info is None:
                continue
            line = _edge_line(scene, step, e, ins, paths, infinite)
            if line is None:
                return _explain_missing(node.name)
            lines.append(line)
    return lines, infinite


def _edge_line(scene: _Scene, step: Any, e: Edge, ins: list[str],
               paths: dict[int, list[float]], infinite: list[str]) -> str | None:
    """The chain rule along one edge: the gradient it carries, as a product with its
    local derivative; None when that derivative is unknown."""
    k, c, z = step.node_id, e.dst, scene.z
    node, var = scene.graph.nodes[k], scene.var
    incoming = step.grad_outputs[0].values[0]
    result = step.grad_inputs[e.position].values[0]
    local = _local(node.name, e.position, scene.saved.get(k, {}), ins, var[k])
    if local is None:
        return None
    expr, lval, syms = local
    known = [(sym, v) for sym in dict.fromkeys(syms)
             if (v := _sym_value(sym, var, scene.value)) is not None]
    if not math.isfinite(lval):
        at = ", ".join(f"{sym} = {_num(v)}" for sym, v in known)
        infinite.append(f"{node.name}'s local derivative {expr} is {_num(lval)}"
                        + (f" at {at}" if at else ""))
    lhs = f"d{z}/d{var[c]}"
    if scene.in_count[c] > 1:
        paths.setdefault(c, []).append(result)
        lhs += f" (path {len(paths[c])} of {scene.in_count[c]})"
    plain = expr == _num(lval) or expr in syms
    where = "" if plain or not known else (
        "   (" + ", ".join(f"{sym} = {_num(v)}" for sym, v in known) + ")")
    if k == scene.graph.roots[0] and incoming == 1.0:
        text = f"{lhs} = {expr}" + (f" = {_num(result)}" if expr != _num(result) else "")
        return f"    {text}{where}"
    shown = (expr if expr.startswith("(") or (" " not in expr and not expr.startswith("-"))
             else f"({expr})")
    return (f"    {lhs} = d{z}/d{var[k]} * {shown} = "
            f"{_num(incoming)} * {_factor(lval)} = {_num(result)}{where}")


def _result_lines(scene: _Scene, steps: Sequence[Any], infinite: list[str]) -> list[str]:
    """What lands in each leaf's .grad, and a note for each slope that is not finite."""
    grads = {step.node_id: step.grad_outputs[0].values[0] for step in steps}
    z = scene.z
    leaf_text = ", ".join(
        f"d{z}/d{scene.var[n.id]} = {_num(grads[n.id])}" for n in scene.graph.leaves()
        if n.id in grads
    )
    lines = [f"Result (added to .grad): {leaf_text}"]
    for text in infinite:
        note = (
            f"Note: {text}: the function has no finite slope at this point (a division by "
            "zero), so the gradient is inf or nan there."
        )
        lines.append(textwrap.fill(note, 88, subsequent_indent="  "))
    return lines


def _rhs(name: str, ins: list[str], s: dict) -> str:
    # The extra "" lets one-input formulas ignore a second placeholder.
    return _FORWARD[name].format(*ins, "", p=_num(s.get("exponent", float("nan"))))


def _sym_value(sym: str, var: dict, value: dict) -> float | None:
    for nid, name in var.items():
        if name == sym:
            return value.get(nid)
    return None


def _explain_missing(name: str) -> str:
    return (
        f"explain() cannot explain this graph: a number {name} needs was not recorded "
        "before backward ran. Trace.to_text() lists the recorded steps."
    )
