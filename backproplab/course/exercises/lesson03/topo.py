"""``l03-topo``: a second topological sort, Kahn's algorithm, without recursion.

The learner's ``my_topo_order`` runs where the answer lives, watched (`CallWatch`, with
``sys.setprofile``): which of the lesson's own sorts ran (or a copy of one, told by its
code), which of the learner's functions ran inside itself (recursion, whatever the
recursion limit), whether graphlib sorted for it. The order it returns comes back as
the indices of the nodes (by identity). The grader checks the order against the graph's
structure: random graphs of about 60 nodes, many used several times, then a chain
10,000 operations deep (not run when the sort was seen to recurse: that would only
overflow the stack).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from .._spec import METHOD, Method, call_answer, failure

__all__ = ["LESSON_SORT", "LESSON_SORT_CODE", "TOPO", "CallWatch"]

CHAIN = 10_000


class _Node:
    """A stand-in for the lesson's Value: a sort reads only ``parents``."""

    def __init__(self, data, parents=()):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents

    def __repr__(self):
        return f"Value({self.data:.4g})"


def _graph_parents(gen: torch.Generator, size: int) -> list[list[int]]:
    """An output that depends on about ``size`` nodes, many of them used several times, as
    each node's parents (by index; the output is the last node)."""
    parents: list[list[int]] = [[] for _ in range(4)]
    for _ in range(size):
        parents.append([int(k) for k in torch.randint(0, len(parents), (2,), generator=gen)])
    made = len(parents)
    for k in torch.randint(0, made, (5,), generator=gen).tolist():
        parents.append([len(parents) - 1, k])  # tie more nodes to the output
    return parents


def _nodes(parents: list[list[int]]) -> list[_Node]:
    nodes: list[_Node] = []
    for i, mine in enumerate(parents):
        nodes.append(_Node(i if not mine else 0.0, tuple(nodes[j] for j in mine)))
    return nodes


# The lesson's own depth-first sort (cell l03-13), compiled here so that a copy of it
# under another name is recognised by its code.
LESSON_SORT = '''
def topo_order(root):
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)  # every parent is already in the order
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order
'''
_space: dict = {}
exec(compile(LESSON_SORT, "<lesson 03's topo_order>", "exec"), _space)
LESSON_SORT_CODE = _space["topo_order"].__code__


class CallWatch:
    """Watches the Python calls a function makes, with ``sys.setprofile``.

    Only functions of the learner's notebook are followed (those whose globals are
    the answer's). ``recursive`` is the first one found running inside itself,
    directly or through other functions; ``codes`` is every one that ran. Counting
    frames does not depend on the recursion limit.
    """

    def __init__(self, namespace):
        self.namespace = namespace
        self.running = {}
        self.codes = set()
        self.modules = set()
        self.recursive = None

    def __call__(self, frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if frame.f_globals is not self.namespace:
                self.modules.add(module.split(".")[0])
                return
            code = frame.f_code
            self.codes.add(code)
            self.running[code] = self.running.get(code, 0) + 1
            if self.running[code] > 1 and self.recursive is None:
                self.recursive = code
        elif event == "return" and frame.f_globals is self.namespace:
            code = frame.f_code
            self.running[code] = self.running.get(code, 1) - 1

    def run(self, fn, *args):
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(before)


def _lesson_sorts(namespace):
    """The lesson's sorts as the notebook defined them: code object -> name."""
    codes = {name: getattr(namespace.get(name), "__code__", None)
             for name in ("topo_order", "topo_recursive")}
    return {code: name for name, code in codes.items() if code is not None}


def _indices(order: Any, nodes: list[_Node]) -> list[int] | dict[str, str]:
    """The order as the nodes' indices (by identity); anything else in it gets a negative
    number of its own (-1, -2, ... by identity)."""
    if not isinstance(order, (list, tuple)):
        return {"returned": type(order).__name__}
    index = {id(n): i for i, n in enumerate(nodes)}
    strangers: dict[int, int] = {}
    return [index[id(o)] if id(o) in index else strangers.setdefault(id(o), -1 - len(strangers))
            for o in order]


def _topo_error(where: str):
    def told(err: Exception) -> str | dict:
        if isinstance(err, RecursionError):
            return failure("fail", _RECURSIVE)
        return f"raised {type(err).__name__}: {err} {where}"
    return told


def _observe_topo(answer: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """On each random graph: the order (as indices), the lesson's sorts that ran (by name,
    or a copy of its depth-first sort), the first of the learner's functions seen inside
    itself, whether graphlib ran; then the order on the chain, or None when the sort was
    seen to recurse (the chain would only overflow the stack)."""
    if not callable(answer):
        return failure("fail", f"expected a function of the output Value, got "
                               f"{type(answer).__name__}")
    namespace = getattr(answer, "__globals__", {})
    lesson = _lesson_sorts(namespace)
    seen = []
    for parents in inputs["graphs"]:
        nodes, watch = _nodes(parents), CallWatch(namespace)
        order, failed = call_answer(watch.run, answer, nodes[-1], what="it",
                                    raised=_topo_error("on a random graph"))
        if failed is not None:
            return failed
        seen.append({"order": _indices(order, nodes),
                     "lesson": sorted(lesson[c] for c in watch.codes
                                      | {getattr(answer, "__code__", None)} if c in lesson),
                     "copied": any(c.co_code == LESSON_SORT_CODE.co_code for c in watch.codes),
                     "recursive": getattr(watch.recursive, "co_name", None),
                     "graphlib": "graphlib" in watch.modules})
    if any(g["recursive"] for g in seen):
        return {"graphs": seen, "chain": None}
    chain = [_Node(0.1)]
    for _ in range(inputs["chain"]):
        chain.append(_Node(0.0, (chain[-1],)))
    order, failed = call_answer(answer, chain[-1], what="it",
                                raised=_topo_error(f"on a chain {inputs['chain']:,} deep"))
    return failed if failed is not None else {"graphs": seen,
                                              "chain": _indices(order, chain)}


def _topo_inputs(gen: torch.Generator) -> dict[str, Any]:
    return {"graphs": [_graph_parents(gen, size) for size in (60, 40, 80)], "chain": CHAIN}


def _reachable(parents: list[list[int]]) -> set[int]:
    """Every node the output (the last) depends on, the output included."""
    found, todo = {len(parents) - 1}, [len(parents) - 1]
    while todo:
        for p in parents[todo.pop()]:
            if p not in found:
                found.add(p)
                todo.append(p)
    return found


def _order_problem(order: Any, parents: list[list[int]]) -> str | None:
    """None when ``order`` lists every node behind the output once, each after its
    parents; else what is wrong."""
    if isinstance(order, dict):
        return f"it returned {order['returned']}; expected a list of the Values"
    place: dict[int, int] = {}
    for k, node in enumerate(order):
        if node in place:
            return ("a node appears twice in your order: remember which nodes are placed "
                    "already (a shared node has several users)")
        place[node] = k
    needed = _reachable(parents)
    if set(place) != needed:
        return (f"your order has {len(place)} nodes; the output depends on {len(needed)} "
                f"({len(needed - set(place))} missing, {len(set(place) - needed)} that are not "
                "in the graph): collect every Value the output depends on, the output included")
    pairs = [(place[n], place[p]) for n in order for p in parents[n]]
    late = [1 for mine, theirs in pairs if theirs > mine]
    if late and all(theirs > mine for mine, theirs in pairs):
        return ("your order is reversed: every node comes before its parents, which is the "
                "order backward walks. A topological order lists each node after the nodes it "
                "was computed from")
    if late:
        return (f"{len(late)} node(s) come before one of their parents: place a node only once "
                "every one of its parents is placed")
    return None


def _topo_problem(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """The first thing wrong, graph by graph in the order the check always looked."""
    for said, parents in zip(got["graphs"], want["graphs"], strict=True):
        if said["lesson"] or said["copied"]:
            which = said["lesson"][0] if said["lesson"] else "topo_order, copied"
            return (f"it runs the lesson's own sort ({which}): this exercise asks for a second "
                    "way, Kahn's algorithm, which counts each node's parents instead of "
                    "searching depth-first")
        if said["recursive"]:
            return _RECURSIVE.replace("is recursive",
                                      f"is recursive ({said['recursive']} calls itself)", 1)
        if said["graphlib"]:
            return ("it hands the graph to graphlib's sorter: write the counting and the placing "
                    "yourself")
        problem = _order_problem(said["order"], parents)
        if problem:
            return f"on a random graph: {problem}"
    chain = [[]] + [[k] for k in range(want["chain"])]
    problem = _order_problem(got["chain"], chain)
    return f"on a chain {want['chain']:,} deep: {problem}" if problem else None


_RECURSIVE = ("your sort is recursive: a function that calls itself stops at Python's "
              "recursion limit (a chain 10,000 deep needs 10,000 nested calls), however "
              "high that limit is set. Keep a list of ready nodes of your own instead")

TOPO = Method(
    name="my_topo_order",
    make_inputs=_topo_inputs,
    observe=_observe_topo,
    reference=lambda inputs: inputs,  # what judging an order needs: each graph's parents
    explain=lambda inputs, got, want: _topo_problem(got, want) or "",
    trials=1,  # one trial of 3 random graphs and the chain, as the check always had
    agree=lambda got, want: _topo_problem(got, want) is None,
    passed="a valid order on 3 new random graphs and on a chain 10,000 operations deep, "
           "without recursion",
    # Raising the recursion limit is a fair try; the check says why it cannot be enough.
    vocabulary=METHOD.allowing("sys.setrecursionlimit", "sys.getrecursionlimit"),
)
