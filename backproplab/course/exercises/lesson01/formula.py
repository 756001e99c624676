"""``l01-formula``: the formula a graph records, read back from its nodes.

A trial is ten small formulas, written as trees of plain data (a leaf's name, or
``[kind, ...]``): seven probes that each isolate one thing to get right (the order of a
subtraction, whose two leaves hold the same value, so that only their identity tells
them apart; brackets; a constant kept as ``_saved_self`` or ``_saved_other``, the latter
one that needs all its digits; an exponent; a leaf used twice; a product and a constant
factor each under a power, and a power under a power, where their brackets matter) and
three random formulas that need all of them. The
observation is the text the learner's function returns for each graph; the grader
reads it with `value` at new values of the leaves and compares it with the formula's own
values there. A slip is the formula the solution's walk writes with that one slip, read
the same way: named when the answer gives it on every graph.

`value`, the reader, is the package's (``lesson01``), which imports this module as it
loads: `_value` looks it up when it is called.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .._spec import Method, close
from .._walk import run_walk

__all__ = ["FORMULA", "build", "make_inputs", "text"]

_LEAF_NAMES = ("p", "q", "s", "u", "v", "m", "n", "k")
_CONSTANTS = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0)
_SIGNS = {"add": "+", "sub": "-", "mul": "*"}


def _pick(gen: torch.Generator, items: tuple | list) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _random_tree(gen: torch.Generator, leaves: list[str], depth: int) -> tuple[Any, set[str]]:
    """A random formula over ``leaves``, and the kinds of node it uses."""
    if depth == 0:
        return _pick(gen, leaves), set()
    kind = _pick(gen, ("add", "sub", "mul", "scale", "sin", "exp", "pow"))
    left, kinds = _random_tree(gen, leaves, depth - 1)
    kinds = kinds | {kind}
    if kind in _SIGNS:
        right, more = _random_tree(gen, leaves, depth - 1)
        if kind == "sub" and right == left:
            kinds.discard("sub")  # p - p is no test of the order
        return [kind, left, right], kinds | more
    if kind == "scale":  # a constant factor, on the left (saved as self) or the right
        return ["scale", _pick(gen, _CONSTANTS), left,
                bool(torch.randint(0, 2, (1,), generator=gen))], kinds
    if kind == "pow":
        return ["pow", left, _pick(gen, (2, 3))], kinds
    return [kind, left], kinds


def text(tree: Any, *, brackets: bool = True, swap: bool = False, constants: bool = True,
         square: bool = False, once: bool = False, powers: bool = True) -> str:
    """The formula as the lesson's solution writes it (``(2.5 * torch.sin(p))``), or as it
    writes it with one slip: no brackets around ``+ - *``, operands swapped, constant
    factors left out, every power a square, (``once``) a leaf met again written as
    nothing, or no brackets around a power (``x ** 2 ** 3``).

    >>> text(["mul", ["add", "p", "q"], "s"], brackets=False)
    'p + q * s'
    """
    seen: set[str] = set()

    def write(t: Any) -> str:
        if isinstance(t, str):
            if once and t in seen:
                return ""
            seen.add(t)
            return t
        kind = t[0]
        if kind in _SIGNS:
            left, right = write(t[1]), write(t[2])
            shown = f"{right} {_SIGNS[kind]} {left}" if swap else f"{left} {_SIGNS[kind]} {right}"
            return f"({shown})" if brackets else shown
        if kind == "scale":
            _, c, operand, on_left = t
            inner = write(operand)
            return inner if not constants else f"({c} * {inner})" if on_left else f"({inner} * {c})"
        if kind == "pow":
            shown = f"{write(t[1])} ** {2 if square else t[2]}"
            return f"({shown})" if powers else shown
        return f"torch.{kind}({write(t[1])})"

    return write(tree)


def build(tree: Any, leaves: dict[str, torch.Tensor]) -> torch.Tensor:
    """The formula computed by torch on ``leaves``: the graph the learner's walk reads. A
    constant on the left is a tensor, so that the product saves it as ``self``."""
    if isinstance(tree, str):
        return leaves[tree]
    kind, parts = tree[0], [build(t, leaves) if not isinstance(t, (int, float, bool)) else t
                            for t in tree[1:]]
    if kind == "add":
        return parts[0] + parts[1]
    if kind == "sub":
        return parts[0] - parts[1]
    if kind == "mul":
        return parts[0] * parts[1]
    if kind == "scale":
        c, operand, on_left = parts
        return torch.tensor(c, dtype=torch.float64) * operand if on_left else operand * c
    if kind == "pow":
        return parts[0] ** parts[1]
    return getattr(torch, kind)(parts[0])


def _value(formula: str, at: dict[str, float]) -> float:
    """The package's reader, ``lesson01.value``, found when called (see above)."""
    from . import value

    return value(formula, at)


def _names(tree: Any) -> list[str]:
    """The leaves a formula uses, each once, in alphabetical order."""
    return sorted(set(re.findall(r"\b[a-z]\b", text(tree))))


def _draw(gen: torch.Generator, names: list[str]) -> dict[str, float]:
    """A value in [-1.5, 1.5] for each leaf, in float64."""
    return {n: float(torch.rand((), generator=gen, dtype=torch.float64) * 3 - 1.5)
            for n in names}


def _tame(gen: torch.Generator, tree: Any, names: list[str]) -> bool:
    """Whether a formula stays below 1e4 in size at 20 draws of its leaves (nested exp and
    powers can overflow; such formulas are drawn again)."""
    return all(abs(_value(text(tree), _draw(gen, names))) < 1e4 for _ in range(20))


def make_inputs(gen: torch.Generator) -> dict[str, Any]:
    """Ten formulas (what each probes, its tree), the values of their leaves in the graph,
    and two new sets of values to read the learner's formula at."""
    a, b, d = (_LEAF_NAMES[int(i)] for i in torch.randperm(len(_LEAF_NAMES), generator=gen)[:3])
    c = _pick(gen, _CONSTANTS)
    # A constant factor and a product under a power: (c * x) ** 2 written without the
    # product's brackets reads as c * x ** 2, a slip no other probe shows; a power under a
    # power, (x ** 2) ** 3 written as x ** 2 ** 3, reads as x ** 8. The constant 1/3 needs
    # all its digits: rounded to 0.33, it gives other values.
    probes = [("order", ["sub", a, b]), ("brackets", ["mul", ["add", a, b], d]),
              ("self", ["pow", ["scale", c, ["sin", a], True], 2]),
              ("other", ["scale", 1 / 3, ["exp", a], False]),
              ("power", ["pow", ["mul", a, b], 3]), ("twice", ["mul", ["sin", a], a]),
              ("power twice", ["pow", ["pow", ["exp", a], 2], 3])]
    for _ in range(3):
        leaves = [_LEAF_NAMES[int(i)] for i in torch.randperm(len(_LEAF_NAMES), generator=gen)[
            :int(torch.randint(2, 4, (1,), generator=gen))]]
        while True:
            tree, kinds = _random_tree(gen, leaves, 3)
            uses = [len(re.findall(rf"\b{n}\b", text(tree))) for n in leaves]
            if {"sub", "scale"} <= kinds and kinds & {"sin", "exp", "pow"} and max(uses) > 1 \
                    and min(uses) > 0 and _tame(gen, tree, leaves):
                break
        probes.append(("all", tree))
    made = [{"what": what, "tree": tree, "values": _draw(gen, _names(tree)),
             "at": [_draw(gen, _names(tree)) for _ in range(2)]} for what, tree in probes]
    # The subtraction's two leaves hold one value: a name looked up by value is one for both.
    made[0]["values"] = dict.fromkeys(made[0]["values"], made[0]["values"][a])
    return {"probes": made}


def _raised(shown: str):
    """How an error the walk raised on the graph of ``shown`` is told."""
    def told(err: Exception) -> str:
        message = f"on the graph of {shown}: raised {type(err).__name__}: {err}."
        if "'NoneType' object has no attribute 'item'" in message:
            return (f"{message} A saved attribute you read is None: a product keeps only what a "
                    "gradient needs, so a constant first factor is kept as _saved_self (and "
                    "_saved_other is not), a constant second factor as _saved_other.")
        if "'NoneType' object has no attribute" in message:
            return (f"{message} An entry (None, 0) of next_functions is a constant, which has no "
                    "node: the node that used it may have kept its value (look at its _saved_ "
                    "attributes).")
        if "has no attribute 'variable'" in message:
            return f"{message} Only the AccumulateGrad node of a leaf has .variable."
        if "not enough values to unpack" in message or "index out of range" in message:
            return (f"{message} In this graph only the leaves' AccumulateGrad nodes have an "
                    "empty next_functions: did the walk go on past a leaf? Its node is the one "
                    "with .variable; its name() is the full 'torch::autograd::AccumulateGrad'.")
        return f"raised {type(err).__name__}: {err}"
    return told


def _observe(answer: Any, inputs: dict[str, Any]) -> list[Any] | dict:
    """The text the learner's function returns for each graph (or what it returned
    instead of a string)."""
    said = []
    for probe in inputs["probes"]:
        leaves = {n: torch.tensor(v, dtype=torch.float64).requires_grad_()
                  for n, v in probe["values"].items()}
        out = build(probe["tree"], leaves)
        got, failed = run_walk(answer, out, dict(leaves), raised=_raised(text(probe["tree"])))
        if failed is not None:
            return failed
        said.append(got if type(got) is str else {"returned": type(got).__name__})
    return said


def _gives(formula: Any, at: list[dict[str, float]]) -> list[float] | None:
    """The formula's values at each set of leaf values, or None where it cannot be read."""
    try:
        return [_value(formula, values) for values in at]
    except Exception:  # noqa: BLE001 - a learner's formula: any error means unreadable
        return None


def _slip(**style: Any):
    """The observation of the solution's walk written with one slip (none: the right one):
    for each graph, the values its formula gives (None: a text that cannot be read)."""
    def observation(inputs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"at": p["at"], "gives": _gives(text(p["tree"], **style), p["at"])}
                for p in inputs["probes"]]
    return observation


def _by_value(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The slip of finding a leaf's name by its value: right on every graph but the
    subtraction whose two leaves hold one value, where one name written twice gives 0."""
    return [{"at": w["at"], "gives": [0.0] * len(w["at"])} if p["what"] == "order" else w
            for p, w in zip(inputs["probes"], _slip()(inputs), strict=True)]


def _same_values(said: Any, want: dict[str, Any]) -> bool:
    if not isinstance(said, str):
        return False
    gives = _gives(said, want["at"])
    if gives is None or want["gives"] is None:
        return gives is None and want["gives"] is None
    return all(close(g, w, "float32") for g, w in zip(gives, want["gives"], strict=True))


def _agree(got: Any, want: list[dict[str, Any]]) -> bool:
    """Whether the learner's texts give, graph by graph, the values ``want`` lists."""
    return (isinstance(got, list) and len(got) == len(want)
            and all(_same_values(s, w) for s, w in zip(got, want, strict=True)))


def _explain(inputs: dict[str, Any], got: list[Any], want: list[dict[str, Any]]) -> str:
    at = next(i for i, (s, w) in enumerate(zip(got, want, strict=True))
              if not _same_values(s, w))
    said, probe, shown = got[at], inputs["probes"][at], text(inputs["probes"][at]["tree"])
    if not isinstance(said, str):
        return (f"expected a string of Python code such as 'torch.sin(p) * q', got "
                f"{said['returned']}.")
    quoted = repr(said) if len(said) <= 300 else f"{said[:300]!r} (cut at 300 characters)"
    for values, right in zip(probe["at"], want[at]["gives"], strict=True):
        try:
            mine = _value(said, values)
        except Exception as err:  # noqa: BLE001 - the learner's formula, told as it failed
            hint = (" Write a constant as the number it holds (.item() of the saved tensor)."
                    if "'tensor'" in str(err) else "")
            return (f"on the graph of {shown}, your formula {quoted} could not be evaluated "
                    f"({type(err).__name__}: {err}). Use the leaves' names, numbers, + - * ** "
                    f"and torch.sin, torch.exp.{hint}")
        if not close(mine, right, "float32"):
            where = ", ".join(f"{n} = {v:.3g}" for n, v in values.items())
            return (f"on the graph of {shown}, your formula {quoted} gives {mine:.6g} at new "
                    f"values of the leaves ({where}), where {shown} gives {right:.6g}.")
    raise AssertionError("the trial agreed")  # never: `at` is a graph that disagrees


_SHOWS = "on every graph, your formula shows one slip: "

FORMULA = Method(
    name="formula",
    make_inputs=make_inputs,
    observe=_observe,
    reference=_slip(),
    explain=_explain,
    mistakes={
        _SHOWS + "the operands of a subtraction came out swapped. next_functions lists a "
        "node's inputs in the order the operation took them: first minus second.":
            _slip(swap=True),
        _SHOWS + "the formula lost its brackets: (a + b) * c came out as a + b * c. Put each "
        "operation you write inside brackets.": _slip(brackets=False),
        _SHOWS + "the constant factor is missing. Its entry in next_functions is (None, 0), but "
        "the product kept its value, because the other factor's gradient needs it: "
        "_saved_self when the constant is the first factor, _saved_other when it is the "
        "second.": _slip(constants=False),
        _SHOWS + "the exponent is written in: a power keeps its own in _saved_exponent.":
            _slip(square=True),
        _SHOWS + "a power came out without its brackets: (x ** 2) ** 3 written as x ** 2 ** 3, "
        "which Python reads as x ** (2 ** 3). Put each power inside brackets.":
            _slip(powers=False),
        "on the graph of a subtraction whose two leaves hold the same value, your formula gives "
        "0, as if both were one leaf (and it is right on every other graph). Find a leaf's name "
        "by identity (tensor is leaf), not by value (== or torch.equal): two leaves can hold "
        "the same value.": _by_value,
        _SHOWS + "a leaf used twice must appear twice in the formula: each use is an entry of "
        "next_functions of its own (remembering the nodes you have seen is for finding "
        "leaves, not for reading a formula).": _slip(once=True),
    },
    trials=1,  # one trial of ten graphs
    agree=_agree,
    passed="reads back the formula of 10 new graphs",
)
