"""Reading a learner's formula (``l01-formula``) without running it as Python.

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

import torch

__all__ = ["value"]

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
