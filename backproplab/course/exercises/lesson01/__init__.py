"""Lesson 01, the computational graph: its exercises and its predictions.

The exercises of this lesson are about reading the graph, so they are checked
by method: the learner's function is handed *new* graphs, made from a seed,
and must find every leaf of one, or read back the formula it records, by
walking ``next_functions`` (and, for a constant or an exponent, what a node
saved). A backward pass is reported as the wrong method, and so is
``bl.describe``, which would do the walk for it.

Each check observes what the function returns (which leaves, by index; the formula's
text) and the grader judges that: ``l01-formula`` lives in module ``formula``, which
reads a formula with ``reading`` (a small grammar of its own, never ``eval``).
"""

from __future__ import annotations

from typing import Any

import torch

from .... import graph
from .._spec import Method, Prediction
from .._walk import run_walk
from .formula import FORMULA

# --------------------------------------------------------------------------
# l01-find-leaves: every leaf behind an output, each once
# --------------------------------------------------------------------------

_UNARY = ("sin", "tanh", "exp")


def _pick(gen: torch.Generator, items: Any) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _graph_inputs(gen: torch.Generator) -> dict[str, Any]:
    """A new expression, as plain data: its leaves' values, a constant (an input that
    does not require grad, which shows up in next_functions as ``(None, 0)``), how each
    further leaf joins in, and the leaf used a second time."""
    n = int(torch.randint(2, 5, (1,), generator=gen))
    size = int(torch.randint(1, 4, (1,), generator=gen))
    leaves = [torch.randn(size, generator=gen) for _ in range(n)]
    constant = torch.randn(size, generator=gen)
    steps = [[_pick(gen, ["add", "mul", "sub"]), _pick(gen, _UNARY)] for _ in leaves[1:]]
    return {"leaves": leaves, "constant": constant, "steps": steps,
            "twice": _pick(gen, list(range(n)))}


def _build(inputs: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The expression's scalar output and its leaves, made new (one leaf reached along
    two paths)."""
    leaves = [t.clone().requires_grad_() for t in inputs["leaves"]]
    constant = inputs["constant"]
    value = leaves[0] * constant
    for leaf, (op, unary) in zip(leaves[1:], inputs["steps"], strict=True):
        term = getattr(torch, unary)(leaf)
        value = value + term if op == "add" else value * term if op == "mul" else value - term
    value = value * (leaves[inputs["twice"]] + constant)
    return value.sum(), leaves


def _first_inputs_only(inputs: dict[str, Any]) -> list[int]:
    """The slip of following only ``next_functions[0]`` from each node: the leaves found."""
    out, leaves = _build(inputs)
    node = out.grad_fn
    while node is not None and not hasattr(node, "variable"):
        node = node.next_functions[0][0] if node.next_functions else None
    return [i for i, t in enumerate(leaves) if node is not None and node.variable is t]


def _leaves_raised(where: str):
    def told(err: Exception) -> str:
        message = f"{where}: raised {type(err).__name__}: {err}."
        if "'NoneType' object has no attribute" in message:
            return (f"{message} An input that does not require grad (a constant) appears in "
                    "next_functions as (None, 0): skip the entries whose node is None.")
        if "has no attribute 'variable'" in message:
            return (f"{message} Only the AccumulateGrad node of a leaf has .variable; an "
                    "operation node leads on through its own next_functions.")
        return f"raised {type(err).__name__}: {err}"
    return told


def _observe_leaves(answer: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """What the learner's walk returned: for each item, the index of the leaf it is
    (by identity), or a count of backward nodes and of other objects."""
    out, leaves = _build(inputs)
    got, failed = run_walk(answer, out, raised=_leaves_raised(_where(inputs)))
    if failed is not None:
        return failed
    if not isinstance(got, (list, tuple, set)):
        return {"returned": type(got).__name__}
    found = [next((i for i, t in enumerate(leaves) if g is t), None) for g in got]
    nodes = sum(isinstance(g, torch.autograd.graph.Node) for g in got)
    return {"leaves": sorted(i for i in found if i is not None), "nodes": nodes,
            "others": found.count(None) - nodes}


def _where(inputs: dict[str, Any]) -> str:
    return f"on a new graph with {len(inputs['leaves'])} leaves"


def _explain_leaves(inputs: dict[str, Any], got: dict[str, Any], want: dict[str, Any]) -> str:
    where, n = _where(inputs), len(inputs["leaves"])
    if "returned" in got:
        return f"expected a list of tensors, got {got['returned']}."
    if got["nodes"]:
        return (f"{where}: it returned backward nodes, not tensors: the leaf behind an "
                "AccumulateGrad node is its .variable.")
    if len(set(got["leaves"])) < len(got["leaves"]) and not got["others"]:
        return (f"{where}: it lists a leaf more than once. A leaf used twice is reached along "
                "two paths, but it has one AccumulateGrad node: visit each node once "
                "(remember the nodes you have seen).")
    if got["others"]:
        return (f"{where}: it returned {got['others']} tensor(s) that are not leaves of this "
                "graph (copies, or tensors from the notebook?). Return each leaf as .variable "
                "gives it.")
    if not got["leaves"]:
        return (f"{where}: it returned no leaf at all. Either the walk does not recognise a "
                "leaf's node (the AccumulateGrad node, the one with .variable; its name() is "
                "the full 'torch::autograd::AccumulateGrad'), or it stops before reaching one: "
                "a leaf can lie several nodes down, so go on from every node you reach.")
    return (f"{where}: it missed {n - len(set(got['leaves']))} of the {n} leaves. Follow every "
            "entry of next_functions, from every node, and remember the nodes you have seen by "
            "the node itself: two nodes can have the same name().")


FIND_LEAVES = Method(
    name="find_leaves",
    make_inputs=_graph_inputs,
    observe=_observe_leaves,
    reference=lambda inputs: {"leaves": list(range(len(inputs["leaves"]))), "nodes": 0,
                              "others": 0},
    explain=_explain_leaves,
    mistakes={
        "on every graph it found only the leaf at the end of the first inputs. Every entry of "
        "next_functions leads somewhere: follow them all (keep a list of nodes still to "
        "visit).": lambda inputs: {"leaves": _first_inputs_only(inputs), "nodes": 0,
                                   "others": 0},
    },
    trials=3,
    passed="finds every leaf, once each, in 3 new graphs",
)

EXERCISES = {
    "l01-find-leaves": FIND_LEAVES,
    "l01-formula": FORMULA,
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _leaves_answer() -> list[str]:
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    d = torch.tensor(4.0, requires_grad=True)
    c = a + b
    e = c * d
    return [name for name, t in (("a", a), ("c", c), ("e", e)) if t.is_leaf]


def _rows_answer() -> bool:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(5, 3, generator=gen).requires_grad_()
    b = torch.randn(3, generator=gen).requires_grad_()
    z = torch.ones(5) @ w + b
    torch.nn.functional.binary_cross_entropy_with_logits(z, torch.zeros(3)).backward()
    return bool((w.grad == w.grad[0]).all())


def _graph_answer() -> list[str]:
    p = torch.tensor(0.5, requires_grad=True)
    q = torch.tensor(-1.5, requires_grad=True)
    return graph.describe((torch.sigmoid(p * q) - 1) ** 2).names()


PREDICTIONS = {
    "l01-predict-leaves": Prediction(
        question="the leaves among a, c, e",
        answer=_leaves_answer,
        hint="leaves are where the graph starts: tensors no tracked operation produced. Go "
             "through the three names and ask, for each, whether some line computed it from "
             "other tensors that require grad.",
        why="a was made by torch.tensor, not by an operation; c = a + b and e = c * d were "
            "each made by an operation, so each has a grad_fn and is not a leaf",
    ),
    "l01-predict-rows": Prediction(
        question="are all rows of w.grad the same?",
        answer=_rows_answer,
        hint="write one entry of the weight gradient, dloss/dw[i, j], with the chain rule "
             "through z[j], then look at what x_in holds.",
        why="dloss/dw[i, j] = x[i] * dloss/dz[j], so row i is x[i] times dloss/dz; every x[i] "
            "is 1 here, so every row equals dloss/dz (and b.grad)",
        choices=(True, False),
    ),
    "l01-predict-graph": Prediction(
        question="the nodes of r, from the output down",
        answer=_graph_answer,
        hint="every operation in the formula gets a node of its own, subtracting a constant "
             "too, and the list starts at the operation the forward pass ran last. Check how "
             "many names your list has.",
        why="one node per operation, listed against the order of the code: the square ran "
            "last, so it comes first, then the subtraction (- 1 is an operation too), the "
            "sigmoid and the product, whose two inputs are the leaves p and q",
    ),
}
