"""Lesson 01, the computational graph: its exercises and its predictions.

The exercises of this lesson are about reading the graph, so they are checked
by method: the learner's function is handed *new* graphs, made from a seed,
and must find every leaf of one, or read back the formula it records, by
walking ``next_functions`` (and, for a constant or an exponent, what a node
saved). A backward pass is reported as the wrong method, and so is
``bl.describe``, which would do the walk for it.

Each check observes what the function returns (which leaves, by index; the formula's
text) and the grader judges that. ``l01-find-leaves`` is here; ``l01-formula`` lives in
module ``formula``, which reads the learner's formula with `value`, here too.

A formula is plain text such as ``'(2.5 * torch.sin(p)) - q ** 2'``. `value` reads it
with a small grammar of its own (numbers, the leaves' names, ``+ - * / **``, brackets and
a few calls such as ``torch.sin`` or ``torch.subtract``, or as methods, ``(p - q).sin()``)
and computes it in float64 at given values of the leaves; anything else is refused with
the error Python would give. Nothing is handed to ``eval`` or ``compile``: the text is a
learner's, and the grade reads it in the grader.

>>> value("(2.5 * torch.sin(p)) - q ** 2", {"p": 0.0, "q": 3.0})
-9.0
"""

from __future__ import annotations

import re
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
    further leaf joins in, and the leaf used a second time. The first two leaves hold the
    same value: a walk that tells leaves apart by value keeps only one of them."""
    n = int(torch.randint(2, 5, (1,), generator=gen))
    size = int(torch.randint(1, 4, (1,), generator=gen))
    leaves = [torch.randn(size, generator=gen) for _ in range(n)]
    leaves[1] = leaves[0].clone()
    constant = torch.randn(size, generator=gen)
    steps = [[_pick(gen, ["add", "mul", "sub"]), _pick(gen, _UNARY)] for _ in leaves[1:]]
    return {"leaves": leaves, "constant": constant, "steps": steps,
            "twice": _pick(gen, list(range(n)))}


def _join(a: torch.Tensor, op: str, b: torch.Tensor) -> torch.Tensor:
    return a + b if op == "add" else a * b if op == "mul" else a - b


def _build(inputs: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The expression's scalar output and its leaves, made new (one leaf reached along
    two paths). The last leaf and the second use of that one join in through the third
    input of ``torch.addcmul(value, constant, term)`` (value + constant * term): a node
    can have more than two inputs."""
    leaves = [t.clone().requires_grad_() for t in inputs["leaves"]]
    constant, (*steps, (op, unary)) = inputs["constant"], inputs["steps"]
    value = leaves[0] * constant
    for leaf, (step, call) in zip(leaves[1:-1], steps, strict=True):
        value = _join(value, step, getattr(torch, call)(leaf))
    term = _join(getattr(torch, unary)(leaves[-1]), op, leaves[inputs["twice"]] + constant)
    return torch.addcmul(value, constant, term).sum(), leaves


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
    missed = set(range(n)) - set(got["leaves"])
    facts = "".join(
        words for holds, words in (
            (n - 1 in missed, " The leaf behind the third input of torch.addcmul (a node "
             "with three inputs) is one of those."),
            (len(missed & {0, 1}) == 1, " Two of the leaves hold the same value, and it "
             "returned only one of them: tell leaves apart by identity, never by value."))
        if holds)
    return (f"{where}: it missed {len(missed)} of the {n} leaves.{facts} Follow every "
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


# --------------------------------------------------------------------------
# l01-formula: reading the learner's formula, never running it
# --------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                    r"|([A-Za-z_][A-Za-z_0-9]*(?:\s*\.\s*[A-Za-z_][A-Za-z_0-9]*)*)"
                    r"|(\*\*|[-+*/(),=.]))")
# The calls a formula may make, by their last name (torch.sin, math.sin and sin alike).
_CALLS = {"sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "exp": torch.exp,
          "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh, "abs": torch.abs,
          "neg": torch.neg, "square": torch.square, "pow": torch.pow, "mul": torch.mul,
          "add": torch.add, "sub": torch.sub, "div": torch.div, "subtract": torch.sub,
          "multiply": torch.mul, "divide": torch.div, "negative": torch.neg}
_LONGEST = 10_000  # characters: a formula of this lesson is a few dozen


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) for each token: "number", "name" (dotted names in one), "op"."""
    found, at = [], 0
    while text[at:].strip():
        match = _TOKEN.match(text, at)
        if match is None:
            raise SyntaxError("invalid syntax")
        number, name, op = match.groups()
        found.append(("number", number) if number else ("name", re.sub(r"\s", "", name))
                     if name else ("op", op))
        at = match.end()
    return found


class _Reader:
    """A recursive-descent reader of the grammar, with Python's precedence: ``**`` binds
    tighter than a sign on its left and is right-associative, then ``* /``, then ``+ -``."""

    def __init__(self, text: str) -> None:
        self.tokens, self.at = _tokens(text), 0

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self, op: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens) or (op is not None and self.peek() != op):
            raise SyntaxError("invalid syntax")
        self.at = self.at + 1
        return self.tokens[self.at - 1]

    def formula(self) -> tuple:
        tree = self.sum()
        if self.at != len(self.tokens):
            raise SyntaxError("invalid syntax")
        return tree

    def sum(self) -> tuple:
        tree = self.product()
        while self.peek() in ("+", "-"):
            tree = ("op", self.take()[1], tree, self.product())
        return tree

    def product(self) -> tuple:
        tree = self.signed()
        while self.peek() in ("*", "/"):
            tree = ("op", self.take()[1], tree, self.signed())
        return tree

    def signed(self) -> tuple:
        if self.peek() in ("+", "-"):
            return ("sign", self.take()[1], self.signed())
        base = self.atom()
        while self.peek() == ".":  # a method: (p - q).sin()
            self.take(".")
            kind, name = self.take()
            if kind != "name" or "." in name:
                raise SyntaxError("invalid syntax")
            base = ("method", name, base, *self.arguments())
        return ("op", self.take()[1], base, self.signed()) if self.peek() == "**" else base

    def atom(self) -> tuple:
        kind, text = self.take()
        if kind == "number":
            return ("number", float(text))
        if text == "(":
            tree = self.sum()
            self.take(")")
            return tree
        if kind != "name":
            raise SyntaxError("invalid syntax")
        if self.peek() != "(":
            return ("name", text)
        return ("call", text, *self.arguments())

    def arguments(self) -> tuple[list, list]:
        self.take("(")
        args, keywords = [], []
        while self.peek() != ")":
            if self.at + 1 < len(self.tokens) and self.tokens[self.at + 1][1] == "=":
                keywords.append(self.take()[1])
                self.take("=")
            args.append(self.sum())
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        return args, keywords


def _compute(tree: tuple, leaves: dict[str, torch.Tensor]) -> torch.Tensor:
    kind = tree[0]
    if kind == "number":
        return torch.tensor(tree[1], dtype=torch.float64)
    if kind == "name":
        if tree[1] not in leaves:
            raise NameError(f"name {tree[1]!r} is not defined")
        return leaves[tree[1]]
    if kind == "sign":
        inner = _compute(tree[2], leaves)
        return -inner if tree[1] == "-" else inner
    if kind == "call":
        module, _, last = tree[1].rpartition(".")
        if module in leaves:  # a leaf's method written as one name: p.sin()
            return _compute(("method", last, ("name", module), *tree[2:]), leaves)
        if module not in ("", "torch", "math") or last not in _CALLS:
            raise NameError(f"name {tree[1]!r} is not defined")
        if tree[3]:
            raise TypeError(f"{tree[1]}() got an unexpected keyword argument {tree[3][0]!r}")
        return _CALLS[last](*(_compute(a, leaves) for a in tree[2]))
    if kind == "method":
        if tree[1] not in _CALLS:
            raise AttributeError(f"'Tensor' object has no attribute {tree[1]!r} here")
        if tree[4]:
            raise TypeError(f"{tree[1]}() got an unexpected keyword argument {tree[4][0]!r}")
        return _CALLS[tree[1]](_compute(tree[2], leaves), *(_compute(a, leaves)
                                                             for a in tree[3]))
    a, b = _compute(tree[2], leaves), _compute(tree[3], leaves)
    return {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div,
            "**": torch.pow}[tree[1]](a, b)


def value(text: str, at: dict[str, float]) -> float:
    """The formula ``text`` computed in float64 at the leaves' values ``at``. Raises what
    Python would (SyntaxError, NameError, TypeError, ...) for text outside the grammar."""
    if len(text) > _LONGEST:
        raise ValueError(f"a formula of {len(text)} characters is too long to read")
    tree = _Reader(text).formula()
    leaves = {name: torch.tensor(v, dtype=torch.float64) for name, v in at.items()}
    result = _compute(tree, leaves)
    if result.numel() != 1:
        raise ValueError(f"it gives {result.numel()} numbers, not one")
    return float(result)


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
