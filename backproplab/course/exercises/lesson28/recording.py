"""``l28-ops-by-node``: which aten operations each node of a backward pass runs, and the
graphs the check runs it on.

The learner's ``ops_by_node(loss)`` runs ``loss.backward()`` and returns, for every node
that runs, in the order the engine runs them, ``(node.name(), ops)``: the aten operations
the node ran from its start to its finish, each as ``str(func)``. What runs between nodes
(the ``ones_like`` that ``backward()`` makes, the sum the engine makes where two gradients
meet) belongs to no node and is left out.

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

The observation is what the function returned on each of three new graphs, as plain data.
The reference is the check's own recorder on the same graphs, built anew in the grader.
The slips are the ways a recorder gets the bounds of a node wrong, or the report's shape:
each is what that recorder would return.
"""

from __future__ import annotations

from typing import Any

import torch

from ....watch import QuietDispatchMode
from .._spec import METHOD, Method, call_answer
from ..lesson03 import CallWatch

__all__ = ["OPS_BY_NODE", "build", "describe", "leaves", "make_inputs", "timeline"]

# The answer is a TorchDispatchMode: it imports torch.utils._python_dispatch, a private
# module, and defines __torch_dispatch__, a class hook. Both are the task.
DISPATCH = METHOD.allowing("torch.utils._python_dispatch.", "__torch_dispatch__")
_PREFIX = "torch::autograd::"  # AccumulateGrad's name(); bl.describe shows it without


# ----------------------------------------------------------------- the graphs, as data

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


# ----------------------------------------------------------------- what the function returned


def _op(op: Any) -> Any:
    """One reported operation as plain data: its text (an OpOverload prints as
    ``aten.mul.Tensor``), or the type of what was there instead."""
    if isinstance(op, str) or type(op).__name__ == "OpOverload":
        return str(op)
    return {"type": type(op).__name__}


def _entry(entry: Any) -> Any:
    """One reported node as plain data: [name, [ops]], or what it was instead."""
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        return {"entry": type(entry).__name__}
    name, ops = entry
    if hasattr(name, "name") and callable(name.name):  # the node itself: its name is meant
        name = name.name()
    if not isinstance(name, str) or not isinstance(ops, (list, tuple)):
        return {"entry": f"({type(name).__name__}, {type(ops).__name__})"}
    return [name, [_op(op) for op in ops]]


def _plain(got: Any) -> Any:
    return [_entry(e) for e in got] if isinstance(got, (list, tuple)) \
        else {"returned": type(got).__name__}


def _hooks_left(answer: Any, loss: Any, got: Any) -> bool:
    """Whether hooks of the answer's are still on the graph: a later backward through its
    leaves (their AccumulateGrad nodes are the graph's own) calls a function of the
    answer's (one that shares its globals: a hook, a dispatch mode left on), adds to the
    report returned, or raises."""
    before = _plain(got)
    watch = CallWatch(getattr(answer, "__globals__", None))
    try:
        watch.run(lambda: sum(leaf.sum() for leaf in leaves(loss)).backward())
    except Exception:  # our backward is plain: what raised is a hook of the answer's
        return True
    return bool(watch.running) or _plain(got) != before


def _observe(answer: Any, inputs: dict[str, Any]) -> list[Any] | dict:
    """What the learner's function returned on each graph, as plain data; where a later
    backward shows hooks it left on the graph, only that."""
    said = []
    for spec in inputs["graphs"]:
        loss = build(spec)
        got, failed = call_answer(
            answer, loss, what="ops_by_node",
            not_callable=f"expected the function ops_by_node(loss), got "
                         f"{type(answer).__name__}.",
            raised=lambda err, spec=spec: (f"on a new graph ({describe(spec)}), ops_by_node "
                                           f"raised {type(err).__name__}: {err}"))
        if failed is not None:
            return failed
        said.append({"hooks left": True} if _hooks_left(answer, loss, got) else _plain(got))
    return said


# ----------------------------------------------------------------- the judge's side


def _nodes_only(line: list[tuple[str | None, list[str]]]) -> list[list[Any]]:
    return [[who, list(ops)] for who, ops in line if who is not None]


def _reference(inputs: dict[str, Any]) -> list[list[list[Any]]]:
    return [_nodes_only(timeline(spec)) for spec in inputs["graphs"]]


def _to_previous(line: list[tuple[str | None, list[str]]]) -> list[list[Any]]:
    """A recorder that starts a node at its pre-hook and never ends it: what runs between
    nodes goes to the node before (and nothing runs before the first)."""
    shown: list[list[Any]] = []
    for who, ops in line:
        if who is not None:
            shown.append([who, list(ops)])
        elif shown:
            shown[-1][1].extend(ops)
    return shown


def _to_next(line: list[tuple[str | None, list[str]]]) -> list[list[Any]]:
    """A recorder that hands a node whatever ran since the node before it finished."""
    shown, waiting = [], []
    for who, ops in line:
        if who is None:
            waiting.extend(ops)
        else:
            shown.append([who, waiting + list(ops)])
            waiting = []
    return shown


def _merged(line: list[tuple[str | None, list[str]]]) -> dict[str, list[Any]]:
    """One entry per name (a dict keyed by the name), in the order names first ran: the ops
    of same-named nodes added up, or the last one's kept."""
    added: dict[str, list[str]] = {}
    last: dict[str, list[str]] = {}
    for who, ops in _nodes_only(line):
        added.setdefault(who, []).extend(ops)
        last[who] = list(ops)
    return {"one of": [[[who, ops] for who, ops in table.items()] for table in (added, last)]}


def _slip(shows):
    return lambda inputs: [shows(timeline(spec)) for spec in inputs["graphs"]]


def _name(name: str) -> str:
    return name.removeprefix(_PREFIX)


def _plain_names(observation: Any) -> Any:
    """Node names as bl.describe shows them (AccumulateGrad either way), the rest as is."""
    if isinstance(observation, list) and len(observation) == 2 and isinstance(observation[0], str) \
            and isinstance(observation[1], list):
        return [_name(observation[0]), observation[1]]
    if isinstance(observation, list):
        return [_plain_names(o) for o in observation]
    return observation


def _same_graph(got: Any, want: Any) -> bool:
    """One graph's report against what is expected there: equal, node names as bl.describe
    shows them; a slip's ``{"one of": [...]}`` agrees with any of the reports it lists."""
    if isinstance(want, dict) and "one of" in want:
        return any(_same_graph(got, w) for w in want["one of"])
    return _plain_names(got) == _plain_names(want)


def _agree(got: Any, want: Any) -> bool:
    return (isinstance(got, list) and isinstance(want, list) and len(got) == len(want)
            and all(_same_graph(g, w) for g, w in zip(got, want, strict=True)))


_TOLD = ("Each op as str(func), e.g. 'aten.mul.Tensor': the overload after the last dot is "
         "part of the name (section 1's digit).")


def _explain(inputs: dict[str, Any], got: list[Any], want: list[Any]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not _same_graph(g, w))
    where = f"on a new graph ({describe(inputs['graphs'][at])})"
    said, right = _plain_names(got[at]), _plain_names(want[at])
    if isinstance(said, dict) and "hooks left" in said:
        return f"{where}, the hooks were left on the graph: after ops_by_node returned, " \
               "another backward through the same leaves still ran them. Remove every " \
               "hook you registered (handle.remove()) before returning."
    if isinstance(said, dict):
        return f"{where}, ops_by_node returned a {said['returned']}; expected a list of pairs " \
               "(node name, list of ops), one per node that ran, in the order they ran."
    odd = next((e for e in said if isinstance(e, dict)), None)
    if odd is not None:
        return f"{where}, an entry of the list is a {odd['entry']}; expected a pair (the node's " \
               "name as node.name() gives it, the list of its ops)."
    names, right_names = [n for n, _ in said], [n for n, _ in right]
    if names != right_names:
        return f"{where}, the nodes that ran, in order, are {right_names}; your report lists " \
               f"{names}. Every node that runs gets one entry, even one that runs no op."
    k = next(k for k, (s, r) in enumerate(zip(said, right, strict=True)) if s != r)
    ops, right_ops = said[k][1], right[k][1]
    text = [o if isinstance(o, str) else f"a {o['type']}" for o in ops]
    base = f"{where}, node number {k + 1} to run, {right_names[k]}, ran {right_ops}; " \
           f"your report gives it {text}."
    if names[k] == "AccumulateGrad" and "aten.copy_.default" in ops \
            and "aten.detach.default" in right_ops:
        return base + " AccumulateGrad copied the gradient where torch alone takes it over " \
                      "(detach): something in your code keeps the tensors it sees alive (a " \
                      "list of func's arguments or results?). Keep the ops' names only."
    if any(isinstance(o, str) and (not o.startswith("aten.") or o.count(".") < 2)
           for o in ops):
        return base + " " + _TOLD
    return base


OPS_BY_NODE = Method(
    name="ops_by_node",
    make_inputs=make_inputs,
    observe=_observe,
    reference=_reference,
    explain=_explain,
    mistakes={
        "what runs between two nodes went to the node that ran before it: the sum the engine "
        "makes where two gradients meet (lesson 21's input buffer, an aten.add.Tensor) runs "
        "after that node has finished. End a node's list when the node finishes (a hook "
        "registered with node.register_hook runs then), not when the next one starts.":
            _slip(_to_previous),
        "what ran before a node started went to that node: the ones_like that backward() makes "
        "before any node runs, and the engine's sum where two gradients meet, belong to no "
        "node. Start a node's list when it starts (its pre-hook), and end it when it finishes "
        "(its hook).": _slip(_to_next),
        "nodes that run no op are missing: every node that runs gets an entry, and one that "
        "only passes its gradient on (an addition of two tensors of the same shape) gets an "
        "empty list.": _slip(lambda line: [e for e in _nodes_only(line) if e[1]]),
        "each node name appears once: two nodes of the same class (the two AccumulateGrad "
        "nodes, say) are two nodes, each with its own entry. Keep a list of pairs in the "
        "order the nodes ran, not a dict keyed by the name.": _slip(_merged),
        "every list of ops is empty: was the dispatch mode active while loss.backward() ran?":
            _slip(lambda line: [[who, []] for who, _ in _nodes_only(line)]),
        "each op lost its overload ('aten.mul' for 'aten.mul.Tensor'): str(func) names the "
        "overload that ran, and it is the overload that picks the formula (section 1).":
            _slip(lambda line: [[w, [o.rsplit(".", 1)[0] for o in ops]]
                                for w, ops in _nodes_only(line)]),
        "each op lost its namespace ('mul.Tensor' for 'aten.mul.Tensor'): report str(func).":
            _slip(lambda line: [[w, [o.removeprefix("aten.") for o in ops]]
                                for w, ops in _nodes_only(line)]),
    },
    agree=_agree,
    vocabulary=DISPATCH,
    passed="the aten ops of every node, in the order torch ran them, on 6 new graphs (what "
           "runs between nodes left out)",
)
