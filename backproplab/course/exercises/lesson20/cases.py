"""The cases of lesson 20's engine check, each played on torch and on the learner's engine.

A `Side` gives a case the same few operations on either: leaves and constants from one
seeded generator (so both sides get the same numbers), views by a plain description
(``["row", i]``, ``["col", j]``, ``["block", i0, i1, j0, j1]``, ``["T"]``), the in-place
``add_`` and ``copy_`` (or a write torch refuses, its RuntimeError caught: `Side.refused`),
and ``add``, ``mul``, ``tanh``, ``total`` and ``backward``. `Side.play`
runs a case's steps and says what happened as plain data: ``["ran", the leaves' grads, the
value backward started from]``,
``["raised", step, op]`` (a RuntimeError, the way torch refuses) or ``["error", step, op,
what]`` (anything else the engine raised).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CASES", "Case", "Side", "shown", "view_fn"]

F64 = torch.float64


def view_fn(desc: list) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function of a torch tensor that takes the view ``desc`` describes."""
    kind, *at = desc
    if kind == "row":
        return lambda t: t[at[0]]
    if kind == "col":
        return lambda t: t[:, at[0]]
    if kind == "block":
        return lambda t: t[at[0]:at[1], at[2]:at[3]]
    if kind == "T":
        return lambda t: t.T
    raise ValueError(f"desc: expected a row, col, block or T view, got {desc!r}")


def shown(desc: list) -> str:
    """A view as Python indexing: ``y[1]``, ``y[:, 2]``, ``y[0:2, 1:3]``, ``y.T``."""
    kind, *at = desc
    return {"row": lambda: f"[{at[0]}]", "col": lambda: f"[:, {at[0]}]",
            "block": lambda: f"[{at[0]}:{at[1]}, {at[2]}:{at[3]}]", "T": lambda: ".T"}[kind]()


class Side:
    """torch (``engine`` None) or the learner's engine (the namespace it lives in)."""

    def __init__(self, engine: dict | None) -> None:
        self.engine, self.leaves, self.steps = engine, [], []
        self.result = 0.0  # the value backward started from
        self.gen = torch.Generator()
        self.shape: list[int] = []

    def _op(self, name: str) -> Callable:
        self.steps.append(name)
        return self.engine[name]

    def values(self, desc: list | None = None) -> torch.Tensor:
        """New numbers shaped like the matrix, or like the view ``desc`` of it."""
        full = torch.randn(*self.shape, generator=self.gen, dtype=F64)
        return full if desc is None else view_fn(desc)(full).clone()

    def leaf(self, desc: list | None = None) -> Any:
        data = self.values(desc)
        made = self.engine["Var"](data, requires_grad=True) if self.engine \
            else data.requires_grad_()
        self.leaves.append(made)
        return made

    def const(self, zeros: bool = False) -> Any:
        data = torch.zeros(*self.shape, dtype=F64) if zeros else self.values()
        return self.engine["Var"](data) if self.engine else data

    def view(self, a: Any, desc: list) -> Any:
        if self.engine:
            return self._op("view")(a, view_fn(desc))
        self.steps.append("view")
        return view_fn(desc)(a)

    def do(self, name: str, *args: Any) -> Any:
        """One operation by name: add_, copy_, add, mul, tanh, total or backward (which
        notes the value of the scalar it starts from)."""
        if self.engine:
            if name == "backward":
                self.result = float(args[0].data)
            return self._op(name)(*args)
        self.steps.append(name)
        if name == "total":
            return args[0].sum()
        if name == "backward":
            self.result = args[0].item()
            return args[0].backward()
        return getattr(args[0], name)(*args[1:]) if name.endswith("_") \
            else getattr(torch, name)(*args)

    def refused(self, name: str, *args: Any) -> None:
        """A write that torch refuses, its RuntimeError caught: the case goes on after it."""
        try:
            self.do(name, *args)
        except RuntimeError:
            pass

    def play(self, steps: Callable[[Side, dict], None], inputs: dict) -> list:
        self.gen.manual_seed(inputs["seed"])
        self.shape = list(inputs["shape"])
        try:
            steps(self, inputs)
        except (AssertionError, NotImplementedError):  # refused autograd, a blank: not a case's
            raise
        except RuntimeError:
            return ["raised", len(self.steps), self.steps[-1] if self.steps else "start"]
        except Exception as err:  # noqa: BLE001 - the learner's engine: told where it happened
            text = str(err).strip().splitlines()
            return ["error", len(self.steps), self.steps[-1] if self.steps else "start",
                    f"{type(err).__name__}: {text[0] if text else ''}"[:200]]
        return ["ran", [None if t.grad is None else t.grad.detach().clone()
                        for t in self.leaves], self.result]


@dataclass(frozen=True)
class Case:
    """A case's steps, what it does, the views it shows, and why torch does what it does:
    when the gradients differ, when torch raises and yours ran, when torch runs, and when
    the value backward started from differs."""

    steps: Callable[[Side, dict], None]
    what: str
    views: tuple[str, ...]
    leaves: tuple[str, ...]
    why_grads: str = ""
    why_raises: str = ""
    why_runs: str = ""
    why_value: str = ""  # when the value backward started from differs; a default if empty

    def shown(self, inputs: dict) -> str:
        """The views the case took on this trial, as indexing: "[1:3, 0:2] and [:, 2]"."""
        return " and ".join(shown(inputs[v]) for v in self.views)


def _made(s: Side) -> Any:
    """y = x * k: a non-leaf to write into (x a leaf, k a constant)."""
    return s.do("mul", s.leaf(), s.const())


def _read(s, p):
    x = s.leaf()
    v = s.view(x, p["block"])
    s.do("backward", s.do("total", s.do("mul", v, v)))


def _write(op: str, constant: bool = False) -> Callable[[Side, dict], None]:
    def steps(s, p):
        y = _made(s)
        v = s.view(y, p["block"])
        s.do(op, v, s.view(s.const(), p["block"]) if constant else s.leaf(p["block"]))
        s.do("backward", s.do("total", s.do("mul", y, y)))
    return steps


def _sibling(s, p):
    y = _made(s)
    u, v = s.view(y, p["row"]), s.view(y, p["col"])
    z = s.do("add", u, u)  # u read before the write, and again after it
    s.do("add_", v, s.leaf(p["col"]))
    s.do("backward", s.do("total", s.do("add", z, s.do("mul", u, u))))


def _view_of_view(s, p):
    y = _made(s)
    column = s.view(s.view(y, ["T"]), ["row", p["col"][1]])
    s.do("copy_", column, s.leaf(p["col"]))
    s.do("backward", s.do("total", s.do("mul", y, y)))


def _saved_view(s, p):
    y = _made(s)
    z = s.do("mul", s.view(y, p["block"]), s.leaf(p["block"]))
    s.do("add_", y, s.const())
    s.do("backward", s.do("total", z))


def _saved_written(s, p):
    y = _made(s)
    v = s.view(y, p["block"])
    z = s.do("mul", v, s.leaf(p["block"]))
    s.do("add_", v, s.leaf(p["block"]))
    s.do("backward", s.do("total", z))


def _tanh_output(s, p):
    h = s.do("tanh", s.leaf())
    s.do("add_", s.view(h, p["row"]), s.leaf(p["row"]))
    s.do("backward", s.do("total", h))


def _read_before(s, p):
    y = _made(s)
    z = s.do("add", y, y)
    s.do("add_", s.view(y, p["block"]), s.leaf(p["block"]))
    s.do("backward", s.do("total", s.do("add", z, y)))


def _leaf_view(s, p):
    x = s.leaf()
    s.do("add_", s.view(x, p["col"]), s.leaf(p["col"]))
    s.do("backward", s.do("total", x))


def _leaf(s, p):
    x = s.leaf()
    s.do("add_", x, s.leaf())
    s.do("backward", s.do("total", x))


def _leaf_kept(s, p):
    x = s.leaf()
    z = s.do("mul", x, x)  # saves x: a moved counter shows at backward
    s.refused("add_", s.view(x, p["col"]), s.leaf(p["col"]))
    s.refused("add_", x, s.const())
    s.do("backward", s.do("total", s.do("add", z, x)))


def _buffer(s, p):
    buffer = s.const(zeros=True)
    s.do("copy_", s.view(buffer, p["block"]), s.do("tanh", s.leaf(p["block"])))
    s.do("backward", s.do("total", s.do("mul", buffer, buffer)))


def _two_writes(s, p):
    y = _made(s)
    s.do("add_", s.view(y, p["row"]), s.leaf(p["row"]))
    s.do("copy_", s.view(y, p["col"]), s.leaf(p["col"]))
    s.do("backward", s.do("total", s.do("mul", y, y)))


def _copy_whole(s, p):
    y = _made(s)
    s.do("copy_", y, s.leaf())
    s.do("backward", s.do("total", s.do("mul", y, y)))


def _same_base(s, p):
    y = _made(s)
    s.do("add_", s.view(y, p["row"]), s.view(y, p["other_row"]))
    s.do("backward", s.do("total", s.do("mul", y, y)))


def _constants(s, p):
    buffer = s.const(zeros=True)  # neither side of the write needs a gradient
    s.do("copy_", s.view(buffer, p["block"]), s.view(s.const(), p["block"]))
    s.do("backward", s.do("total", s.do("mul", buffer, s.leaf())))


_HISTORY = ("A write through a view changes the base: the base needs a new node (torch's "
            "CopySlices) whose inputs are its old node and b's node, and whose rule passes g "
            "on to the old node and g's part under the view to b.")
_REBUILT = ("A view whose memory was written since its node was made must get a new node "
            "from the base's current one: compare the version its node was made at with the "
            "counter's value now.")
_SHARED = ("A view and its base are one piece of memory with one version counter: a write "
           "through either moves the counter that the other's boxes check.")
_KEPT = ("torch refuses the write before it touches anything: the leaf's data and its "
         "version stay as they were, so the product that saved it still runs and x is read "
         "unchanged. Raise before the write, not after it.")
_LEAF = ("torch refuses this with a RuntimeError at the write: the leaf would get a history "
         "and stop being a leaf. Raise RuntimeError in add_ and copy_ when the memory "
         "belongs to a leaf that requires grad.")

CASES = {
    "read": Case(_read, "a view of a leaf x, read by a product", ("block",), ("x",),
                 why_grads="A view's node sends g back to its base, placed where the view "
                           "sits, zeros elsewhere."),
    "add_": Case(_write("add_"), "add_(w) into a view of y = x * k, then y read",
                 ("block",), ("x", "w"), why_grads=_HISTORY),
    "copy_": Case(_write("copy_"), "copy_(w) into a view of y = x * k, then y read",
                  ("block",), ("x", "w"), why_grads=_HISTORY + " An overwrite sends "
                  "nothing to the old values under the view: zero that part for the old node."),
    "read_before": Case(_read_before, "z = y + y recorded, then add_ into a view of y, then "
                        "z + y read", ("block",), ("x", "w"), why_grads="A node recorded before "
                        "the write keeps its edge to the base's old node: give the base a new "
                        "node, never change the old one."),
    "sibling": Case(_sibling, "a row u of y read (z = u + u), add_ into a column of y, then "
                    "u read again", ("row", "col"), ("x", "w"), why_grads=_REBUILT),
    "view_of_view": Case(_view_of_view, "copy_ into a column of y taken as a row of y.T",
                         ("col",), ("x", "w"), why_grads="A view of a view shares the first "
                         "base's memory: keep the whole way from that base to the view (one "
                         "function after the other) for its node and for CopySlices."),
    "saved_view": Case(_saved_view, "a view of y saved by a product, then y changed in place",
                       ("block",), ("x", "w"), why_raises=_SHARED,
                       why_runs="Nothing the product saved was written after it saved it."),
    "saved_written": Case(_saved_written, "a view of y saved by a product, then changed in "
                          "place itself", ("block",), ("x", "w", "w2"), why_raises=_SHARED,
                          why_runs="Nothing the product saved was written after it saved it."),
    "tanh_output": Case(_tanh_output, "tanh's output h (saved by tanh) changed through a view",
                        ("row",), ("x", "w"), why_raises=_SHARED, why_runs=_SHARED),
    "leaf_view": Case(_leaf_view, "add_ into a view of a leaf that requires grad", ("col",),
                      ("x", "w"), why_raises=_LEAF),
    "leaf": Case(_leaf, "add_ into a leaf that requires grad", (), ("x", "w"),
                 why_raises=_LEAF),
    "buffer": Case(_buffer, "copy_ of tanh(w) into a view of a constant buffer of zeros, then "
                   "the buffer read", ("block",), ("w",), why_grads="A base that needed no "
                   "gradient needs one once a value that does is written into it: CopySlices "
                   "with no node for the old values (None), and b's node.",
                   why_runs="Writing into a constant is allowed: only a leaf that requires "
                            "grad is refused."),
    "two_writes": Case(_two_writes, "add_ into a row of y, then copy_ into a column crossing "
                       "it", ("row", "col"), ("x", "w", "w2"), why_grads="Each write puts a "
                       "new node on top of the base's last one; the second write's old node "
                       "is the first write's."),
    "same_base": Case(_same_base, "add_ of one row of y into another", ("row", "other_row"),
                      ("x",), why_grads="b's node is taken before the write: here it is a view "
                      "of the base's old history."),
    "copy_whole": Case(_copy_whole, "copy_(w) into the whole of y = x * k, then y read", (),
                       ("x", "w"), why_grads=_HISTORY + " An overwrite sends nothing to the "
                       "old values it covers, here all of them: x.grad is zeros."),
    "constants": Case(_constants, "copy_ of a constant into a view of a constant buffer of "
                      "zeros, then the buffer times a leaf x read", ("block",), ("x",),
                      why_grads="A write where nothing needs a gradient makes no node, but "
                      "it still writes: x.grad is the buffer's new values."),
    # A constant b written into a base with history: the write is recorded all the same.
    "copy_constant": Case(_write("copy_", constant=True), "copy_ of a constant into a view of "
                          "y = x * k, then y read", ("block",), ("x",), why_grads=_HISTORY +
                          " The base has a history, so the write is recorded though b needs no "
                          "gradient: the old values under the view get zeros."),
    # The refusals caught and the leaf used after them: torch left it as it was.
    "leaf_kept": Case(_leaf_kept, "x saved by x * x, refused add_ into a column of x and into "
                      "x caught, then x * x + x read", ("col",), ("x", "w"),
                      why_grads=_KEPT, why_runs=_KEPT, why_value=_KEPT),
}
