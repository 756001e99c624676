"""Lesson 01, the computational graph: its exercises and its predictions.

The exercises of this lesson are about reading the graph, so they are checked
by method: the learner's function is handed a *new* graph, made from a seed,
and must find something in it (a leaf, every leaf) by walking
``next_functions``. A backward pass is reported as the wrong method, and so is
``bl.describe``, which would do the walk for it.
"""

from __future__ import annotations

from typing import Any

import torch

from ... import graph
from ._spec import Method, Prediction, Report, passed
from ._spec import failed as _fail
from ._walk import run_walk

# --------------------------------------------------------------------------
# l01-walk-leaf: the bias of loss = (X @ W + bias).sum()
# --------------------------------------------------------------------------


def _linear_loss(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, inner, cols = (int(v) for v in torch.randint(2, 6, (3,), generator=gen))
    W = torch.randn(inner, cols, generator=gen).requires_grad_()
    bias = torch.randn(cols, generator=gen).requires_grad_()
    X = torch.randn(rows, inner, generator=gen)
    return (X @ W + bias).sum(), W, bias


def _check_find_bias(answer: Any, seed: int) -> Report:
    name = "find_bias"
    for k in range(3):
        loss, W, bias = _linear_loss(torch.Generator().manual_seed(seed + k))
        got, failure = run_walk(name, answer, loss)
        if failure is not None:
            if "'NoneType' object has no attribute" in failure[0].message:
                return _fail(name, f"{failure[0].message}. Your walk reached an entry (None, 0) "
                                   "of next_functions: X does not require grad, so it has no "
                                   "node. The bias hangs off AddBackward0 itself.")
            if "has no attribute 'variable'" in failure[0].message:
                return _fail(name, "your code asked an operation node for .variable: only the "
                                   "AccumulateGrad node of a leaf has one. Print the name() of "
                                   "each node on your way down to see where you are.")
            return failure
        if got is bias:
            continue
        if got is W:
            return _fail(name, "it returned the weight W, not the bias. AddBackward0 has two "
                               "inputs: X @ W comes first and the bias second.")
        if isinstance(got, torch.autograd.graph.Node):
            return _fail(name, f"it returned a backward node ({got.name()}), not a tensor: the "
                               "leaf behind an AccumulateGrad node is its .variable.")
        if isinstance(got, torch.Tensor) and got.shape == bias.shape and torch.equal(got, bias):
            return _fail(name, "it returned a copy of the bias (equal values, another tensor). "
                               "Return .variable as it is: it is the leaf itself.")
        if isinstance(got, torch.Tensor):
            return _fail(name, f"it returned a tensor of shape {tuple(got.shape)} that is not in "
                               f"the graph it was given (whose bias has shape "
                               f"{tuple(bias.shape)}): a tensor from this notebook? Walk the graph "
                               "of the loss it gets.")
        return _fail(name, f"expected the bias tensor, got {type(got).__name__}.")
    return passed(name, "finds the bias of 3 new graphs")


# --------------------------------------------------------------------------
# l01-find-leaves: every leaf behind an output, each once
# --------------------------------------------------------------------------

_UNARY = (torch.sin, torch.tanh, torch.exp)


def _random_graph(gen: torch.Generator) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A new expression: (its scalar output, every leaf that requires grad).

    It mixes leaves with a constant (an input that does not require grad, which
    shows up in next_functions as ``(None, 0)``) and uses one leaf twice.
    """
    n = int(torch.randint(2, 5, (1,), generator=gen))
    size = int(torch.randint(1, 4, (1,), generator=gen))
    leaves = [torch.randn(size, generator=gen).requires_grad_() for _ in range(n)]
    constant = torch.randn(size, generator=gen)

    def pick(items: list[Any]) -> Any:
        return items[int(torch.randint(0, len(items), (1,), generator=gen))]

    value = leaves[0] * constant
    for leaf in leaves[1:]:
        op = pick(["add", "mul", "sub"])
        term = pick(list(_UNARY))(leaf)
        value = value + term if op == "add" else value * term if op == "mul" else value - term
    twice = pick(leaves)
    value = value * (twice + constant)  # one leaf reached along two paths
    return value.sum(), leaves


def _first_inputs_only(out: torch.Tensor) -> list[torch.Tensor]:
    """The slip of following only ``next_functions[0]`` from each node."""
    found, node = [], out.grad_fn
    while node is not None:
        if hasattr(node, "variable"):
            found.append(node.variable)
            break
        node = node.next_functions[0][0] if node.next_functions else None
    return found


def _check_find_leaves(answer: Any, seed: int) -> Report:
    name = "find_leaves"
    for k in range(3):
        out, leaves = _random_graph(torch.Generator().manual_seed(seed + k))
        where = f"on a new graph with {len(leaves)} leaves"
        got, failure = run_walk(name, answer, out)
        if failure is not None:
            message = failure[0].message
            if "'NoneType' object has no attribute" in message:
                return _fail(name, f"{where}: {message}. An input that does not require grad (a "
                                   "constant) appears in next_functions as (None, 0): skip the "
                                   "entries whose node is None.")
            if "has no attribute 'variable'" in message:
                return _fail(name, f"{where}: {message}. Only the AccumulateGrad node of a leaf "
                                   "has .variable; an operation node leads on through its own "
                                   "next_functions.")
            return failure
        if not isinstance(got, (list, tuple, set)):
            return _fail(name, f"expected a list of tensors, got {type(got).__name__}.")
        got = list(got)
        if any(isinstance(g, torch.autograd.graph.Node) for g in got):
            return _fail(name, f"{where}: it returned backward nodes, not tensors: the leaf "
                               "behind an AccumulateGrad node is its .variable.")
        ids = [id(g) for g in got]
        wanted = {id(t) for t in leaves}
        if len(set(ids)) < len(ids) and set(ids) <= wanted:
            return _fail(name, f"{where}: it lists a leaf more than once. A leaf used twice is "
                               "reached along two paths, but it has one AccumulateGrad node: "
                               "visit each node once (remember the nodes you have seen).")
        strangers = [g for g in got if id(g) not in wanted]
        if strangers:
            return _fail(name, f"{where}: it returned {len(strangers)} tensor(s) that are not "
                               "leaves of this graph (copies, or tensors from the notebook?). "
                               "Return each leaf as .variable gives it.")
        if set(ids) < wanted:
            missed = len(wanted - set(ids))
            if ids == [id(t) for t in _first_inputs_only(out)]:
                return _fail(name, f"{where}: it found only the leaf at the end of the first "
                                   "inputs. Every entry of next_functions leads somewhere: "
                                   "follow them all (keep a list of nodes still to visit).")
            return _fail(name, f"{where}: it missed {missed} of the {len(leaves)} leaves. Follow "
                               "every entry of next_functions, from every node.")
    return passed(name, "finds every leaf, once each, in 3 new graphs")


EXERCISES = {
    "l01-walk-leaf": Method(check=_check_find_bias),
    "l01-find-leaves": Method(check=_check_find_leaves),
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
