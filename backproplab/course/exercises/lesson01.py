"""Lesson 01, the computational graph: its exercises and its predictions.

The exercises of this lesson are about reading the graph, so they are checked
by method: the learner's function is handed *new* graphs, made from a seed,
and must find every leaf of one, or read back the formula it records, by
walking ``next_functions`` (and, for a constant or an exponent, what a node
saved). A backward pass is reported as the wrong method, and so is
``bl.describe``, which would do the walk for it.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ... import graph
from ._spec import Method, Prediction, Report, passed
from ._spec import failed as _fail
from ._walk import run_walk

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
        if not ids:
            return _fail(name, f"{where}: it returned no leaf at all. Does the walk recognise a "
                               "leaf's node? It is the AccumulateGrad node, the one with "
                               ".variable; its name() is the full "
                               "'torch::autograd::AccumulateGrad'.")
        if set(ids) < wanted:
            missed = len(wanted - set(ids))
            if ids == [id(t) for t in _first_inputs_only(out)]:
                return _fail(name, f"{where}: it found only the leaf at the end of the first "
                                   "inputs. Every entry of next_functions leads somewhere: "
                                   "follow them all (keep a list of nodes still to visit).")
            return _fail(name, f"{where}: it missed {missed} of the {len(leaves)} leaves. Follow "
                               "every entry of next_functions, from every node.")
    return passed(name, "finds every leaf, once each, in 3 new graphs")


# --------------------------------------------------------------------------
# l01-formula: the formula a graph records, read back from its nodes
# --------------------------------------------------------------------------

_LEAF_NAMES = ("p", "q", "s", "u", "v", "m", "n", "k")
_CONSTANTS = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0)


def _pick(gen: torch.Generator, items: tuple | list) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _namespace(values: dict[str, torch.Tensor]) -> dict[str, Any]:
    """What a formula may use when it is evaluated: the leaves, numbers, torch and math."""
    import math

    constant = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    return {"__builtins__": {}, "torch": torch, "math": math, "sin": torch.sin,
            "exp": torch.exp, "C": constant, **values}


def _random_formula(gen: torch.Generator, leaves: list[str], depth: int) -> tuple[str, set[str]]:
    """A random formula over ``leaves`` as Python (constants on the left written ``C(2.5)``,
    a tensor, so that the product saves them as ``self``), and the kinds of node it uses."""
    if depth == 0:
        return _pick(gen, leaves), set()
    kind = _pick(gen, ("add", "sub", "mul", "scale", "sin", "exp", "pow"))
    left, kinds = _random_formula(gen, leaves, depth - 1)
    kinds = kinds | {kind}
    if kind in ("add", "sub", "mul"):
        right, more = _random_formula(gen, leaves, depth - 1)
        if kind == "sub" and right == left:
            kinds.discard("sub")  # p - p is no test of the order
        op = {"add": "+", "sub": "-", "mul": "*"}[kind]
        return f"({left} {op} {right})", kinds | more
    if kind == "scale":
        c = _pick(gen, _CONSTANTS)
        on_left = bool(torch.randint(0, 2, (1,), generator=gen))
        return (f"(C({c}) * {left})" if on_left else f"({left} * {c})"), kinds
    if kind == "pow":
        return f"({left} ** {_pick(gen, (2, 3))})", kinds
    return f"torch.{kind}({left})", kinds


def _shown(code: str) -> str:
    """A formula as the learner reads it: ``C(2.5)`` written as the number it is."""
    return re.sub(r"C\((-?[\d.]+)\)", r"\1", code)


def _probes(gen: torch.Generator) -> list[tuple[str, str]]:
    """(what it probes, formula): one small graph per thing to find out, then three
    random ones that need all of them."""
    a, b, d = (_LEAF_NAMES[int(i)] for i in torch.randperm(len(_LEAF_NAMES), generator=gen)[:3])
    c = _pick(gen, _CONSTANTS)
    probes = [("order", f"({a} - {b})"), ("brackets", f"(({a} + {b}) * {d})"),
              ("self", f"(C({c}) * torch.sin({a}))"), ("other", f"(torch.exp({a}) * {c})"),
              ("power", f"({a} ** 3)"), ("twice", f"(torch.sin({a}) * {a})")]
    for _ in range(3):
        leaves = [_LEAF_NAMES[int(i)] for i in torch.randperm(len(_LEAF_NAMES), generator=gen)[
            :int(torch.randint(2, 4, (1,), generator=gen))]]
        while True:
            code, kinds = _random_formula(gen, leaves, 3)
            uses = [len(re.findall(rf"\b{n}\b", code)) for n in leaves]
            if {"sub", "scale"} <= kinds and kinds & {"sin", "exp", "pow"} and max(uses) > 1 \
                    and min(uses) > 0 and _tame(gen, code, leaves):
                break
        probes.append(("all", code))
    return probes


def _leaf_values(gen: torch.Generator, names: list[str]) -> dict[str, torch.Tensor]:
    """A value in [-1.5, 1.5] for each leaf, in float64."""
    return {n: torch.rand((), generator=gen, dtype=torch.float64) * 3 - 1.5 for n in names}


def _tame(gen: torch.Generator, code: str, leaves: list[str]) -> bool:
    """Whether a formula stays below 1e4 in size at 20 draws of its leaves (nested exp and
    powers can overflow; such formulas are drawn again)."""
    return all(abs(_evaluate(code, _leaf_values(gen, leaves))) < 1e4 for _ in range(20))


def _evaluate(text: str, values: dict[str, torch.Tensor]) -> float:
    return float(eval(text, _namespace(values)))  # noqa: S307 - the learner's own formula


def _same(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-9 * max(1.0, abs(want))


def _formula_hint(what: str, a: str, b: str, got: str, values: dict[str, torch.Tensor],
                  code: str) -> str | None:
    """A named slip for a probe, when the learner's formula computes what the slip would."""
    def computes(other: str) -> bool:
        return _same(_evaluate(got, values), _evaluate(other, values))

    if what == "twice" and len(re.findall(rf"\b{a}\b", got)) < 2:
        return (f"{a} is used twice, so it must appear twice in the formula: each use is an "
                "entry of next_functions of its own (remembering the nodes you have seen is for "
                "finding leaves, not for reading a formula)")
    if what == "order" and computes(f"({b} - {a})"):
        return ("the operands of the subtraction came out swapped. next_functions lists a "
                "node's inputs in the order the operation took them: first minus second")
    if what == "brackets" and computes(code.replace("((", "(").replace(") *", " *")):
        return ("the formula lost its brackets: (a + b) * c came out as a + b * c. Put each "
                "operation you write inside brackets")
    if what in ("self", "other") and computes(re.sub(r"C\(-?[\d.]+\) \* |\* -?[\d.]+", "",
                                                     code)):
        return ("the constant factor is missing. Its entry in next_functions is (None, 0), but "
                "the product kept its value, because the other factor's gradient needs it: "
                "_saved_self when the constant is the first factor, _saved_other when it is the "
                "second")
    if what == "power" and computes(f"({a} ** 2)"):
        return "the exponent is written in: a power keeps its own in _saved_exponent"
    return None


def _check_formula(answer: Any, seed: int) -> Report:
    name = "formula"
    gen = torch.Generator().manual_seed(seed)
    for what, code in _probes(gen):
        names = sorted(set(re.findall(r"\b[a-z]\b", code)))
        leaves = {n: v.requires_grad_() for n, v in _leaf_values(gen, names).items()}
        out = eval(code, _namespace(leaves))  # noqa: S307 - the check's own formula
        shown = _shown(code)
        got, failure = run_walk(name, answer, out, dict(leaves))
        if failure is not None:
            message = failure[0].message
            if "'NoneType' object has no attribute 'item'" in message:
                return _fail(name, f"on the graph of {shown}: {message}. A saved attribute you "
                                   "read is None: a product keeps only what a gradient needs, so "
                                   "a constant first factor is kept as _saved_self (and "
                                   "_saved_other is not), a constant second factor as "
                                   "_saved_other.")
            if "'NoneType' object has no attribute" in message:
                return _fail(name, f"on the graph of {shown}: {message}. An entry (None, 0) of "
                                   "next_functions is a constant, which has no node: the node "
                                   "that used it may have kept its value (look at its _saved_ "
                                   "attributes).")
            if "has no attribute 'variable'" in message:
                return _fail(name, f"on the graph of {shown}: {message}. Only the AccumulateGrad "
                                   "node of a leaf has .variable.")
            if "not enough values to unpack" in message or "index out of range" in message:
                return _fail(name, f"on the graph of {shown}: {message}. In this graph only the "
                                   "leaves' AccumulateGrad nodes have an empty next_functions: "
                                   "did the walk go on past a leaf? Its node is the one with "
                                   ".variable; its name() is the full "
                                   "'torch::autograd::AccumulateGrad'.")
            return failure
        if not isinstance(got, str):
            return _fail(name, f"expected a string of Python code such as 'torch.sin(p) * q', "
                               f"got {type(got).__name__}.")
        for _ in range(2):  # new values of the leaves: the same function, not the same number
            values = _leaf_values(gen, names)
            try:
                value = _evaluate(got, values)
            except Exception as err:  # the learner's formula, told as a failed check
                slip = _formula_hint(what, names[0], "", got, {}, code) if what == "twice" \
                    else None
                if slip:
                    return _fail(name, f"on the graph of {shown}, your formula {got!r} shows a "
                                       f"slip: {slip}.")
                hint = (" Write a constant as the number it holds (.item() of the saved tensor)."
                        if "'tensor'" in str(err) else "")
                return _fail(name, f"on the graph of {shown}, your formula {got!r} could not be "
                                   f"evaluated ({type(err).__name__}: {err}). Use the leaves' "
                                   f"names, numbers, + - * ** and torch.sin, torch.exp.{hint}")
            want = _evaluate(code, values)
            if not _same(value, want):
                a, b = (re.findall(r"\b[a-z]\b", code) + ["", ""])[:2]
                slip = _formula_hint(what, a, b, got, values, code)
                at = ", ".join(f"{n} = {float(v):.3g}" for n, v in values.items())
                return _fail(name, f"on the graph of {shown}, your formula {got!r} "
                                   + (f"shows a slip: {slip}." if slip else
                                      f"gives {value:.6g} at new values of the leaves ({at}), "
                                      f"where {shown} gives {want:.6g}."))
    return passed(name, "reads back the formula of 9 new graphs")


EXERCISES = {
    "l01-find-leaves": Method(check=_check_find_leaves),
    "l01-formula": Method(check=_check_formula),
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
