"""Lesson 03, build your own autograd: its exercises and its predictions.

The exercises are about the learner's own engine, so their check cells hand
over the engine's pieces along with the answer:

- Exercise 1 (``l03-ops``) passes ``(exp, log, power, Value, backward, tanh)``.
  For each new operation f the check builds ``f(u) * u + f(u)``, ``u = x * w + b``,
  from new random numbers (a new exponent for the power each time), runs the
  lesson's ``backward`` and compares the three leaf gradients with torch's. u
  reaches the output along two paths, so a rule that sets ``a.grad`` with ``=``
  loses one. The power also runs at u = -1.5 (k = 3) and u = 0 (k = 2), where a**k
  is defined and log(a) is not, nor, at 0, a division by a. The rules run with
  autograd switched off, as a gradient by hand runs, and the grader judges them as
  it judges one (`judge_by_hand`): each slip (module ``slips``) is named only when
  the learner's gradients equal it on every trial. Last, tanh is built from the
  learner's exp and power, ``(e - 1) * (e + 1)**-1`` with ``e = exp(2u)``, and must
  give the gradients of the engine's own tanh node.
- Exercise 2 (``l03-softmax-ce``) passes ``(cross_entropy, Value, backward)``:
  a softmax cross-entropy of 3 logits built from those operations. The check
  compares the loss with ``F.cross_entropy`` and the logits' gradients, from
  the engine's backward (autograd refused), with torch's, on new logits and
  targets; the graph behind the loss must hold the learner's exp and log nodes,
  so a rule written for the whole loss is not the engine's backward.
- Exercise 3 (``l03-paths``) passes the learner's ``count_paths(root, leaf)``: the
  number of paths from the output down to a leaf. With every local derivative 1 (a graph
  of additions), that is the leaf's gradient: lesson 02's paths that add up. The answer
  counts them the way backward computes a gradient, node by node in reverse topological
  order, each node handing its count to its parents, one share per edge (``x * x`` is two
  edges to ``x``). Counting from the leaf up is as good.

Exercises 1 and 2 live in module ``engine``, Exercise 3 here: each observes what the
learner's code did as plain data, and the grader judges it.

The check of Exercise 3 runs the count where the answer lives, watched (`CallWatch`, a
watch on the calls a learner's function makes: a function seen inside itself is
recursion, which section 3 showed stops at Python's limit, and counting frames does not
depend on that limit), with backward passes refused, on
graphs given as plain data: new random graphs, a chain of squares (each node takes its
parent twice), c = a * a + a (for a, and for a leaf b it does not use: 0 paths), a ladder
whose paths double at each rung (2**LADDER of them: every read of ``.parents`` is counted,
and a walk that reads more than a few per node is stopped), that ladder under one more sum
that also takes the leaf (2**LADDER + 1 paths, past the whole numbers a float holds
exactly), and a chain 10,000 operations deep. The observation is the counts, graph by
graph; the reference is the check's own count over the parent lists.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ....watch import forbid_autograd
from .._spec import METHOD, Method, Prediction, call_answer, failure
from .engine import CROSS_ENTROPY, OPS_AND_TANH

__all__ = ["EXERCISES", "PATHS", "PREDICTIONS", "CallWatch"]

# ----------------------------------------------------------------- the watch on the calls


class CallWatch:
    """Watches the Python calls a function makes, with ``sys.setprofile``.

    Only functions of the learner's notebook are followed (those whose globals are
    the answer's). ``recursive`` is the code of the first one found running inside
    itself, directly or through other functions. Counting frames does not depend on
    the recursion limit.
    """

    def __init__(self, namespace):
        self.namespace = namespace
        self.running = {}
        self.recursive = None

    def __call__(self, frame, event, arg):
        if frame.f_globals is not self.namespace:
            return
        code = frame.f_code
        if event == "call":
            self.running[code] = self.running.get(code, 0) + 1
            if self.running[code] > 1 and self.recursive is None:
                self.recursive = code
        elif event == "return":
            self.running[code] = self.running.get(code, 1) - 1

    def run(self, fn, *args):
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(before)


# ----------------------------------------------------------------- the count's nodes

LADDER = 120  # rungs: 2**120 paths, far too many to walk
CHAIN = 10_000
_READS = 8  # reads of .parents a node may take before the walk is stopped


class _TooManyReads(BaseException):
    """Raised inside the learner's walk when it reads ``.parents`` too often: a
    BaseException, so that an ``except Exception`` in the answer does not swallow it."""


class _Node:
    """A stand-in for the lesson's Value whose ``parents`` counts its readers."""

    def __init__(self, parents: tuple, reads: list[int]):
        self._parents = parents
        self._reads = reads  # [reads so far, the limit], shared by the graph's nodes
        self.data, self.grad = 0.0, 0.0

    @property
    def parents(self) -> tuple:
        self._reads[0] += 1
        if self._reads[0] > self._reads[1]:
            raise _TooManyReads
        return self._parents

    def __repr__(self) -> str:
        return "Value(0)"


def _build(parents: list[list[int]]) -> list[_Node]:
    reads = [0, _READS * len(parents) + 100]
    nodes: list[_Node] = []
    for mine in parents:
        nodes.append(_Node(tuple(nodes[j] for j in mine), reads))
    return nodes


# ----------------------------------------------------------------- the graphs, as data


def _random_graph(gen: torch.Generator, size: int) -> list[list[int]]:
    """An output that depends on about ``size`` nodes, many of them used several times, as
    each node's parents (by index; the output is the last node)."""
    parents: list[list[int]] = [[] for _ in range(4)]
    for _ in range(size):
        parents.append([int(k) for k in torch.randint(0, len(parents), (2,), generator=gen)])
    made = len(parents)
    for k in torch.randint(0, made, (5,), generator=gen).tolist():
        parents.append([len(parents) - 1, k])  # tie more nodes to the output
    return parents


def _squares(gen: torch.Generator) -> list[list[int]]:
    """A leaf and a chain of squares, y = x * x: each node takes its parent twice."""
    n = int(torch.randint(4, 8, (1,), generator=gen))
    return [[]] + [[k, k] for k in range(n)]


def _ladder(rungs: int) -> list[list[int]]:
    """Each rung: two nodes made from the one below, then their sum: the paths double."""
    parents: list[list[int]] = [[]]
    for _ in range(rungs):
        below = len(parents) - 1
        parents += [[below], [below], [below + 1, below + 2]]
    return parents


def _make_inputs(gen: torch.Generator) -> dict[str, Any]:
    graphs = []
    for size in (60, 40):
        parents = _random_graph(gen, size)
        graphs.append({"what": f"a new random graph of {len(parents)} nodes",
                       "parents": parents, "leaf": int(torch.randint(0, 4, (1,), generator=gen))})
    squares = _squares(gen)
    graphs.append({"what": f"a chain of {len(squares) - 1} squares, y = x * x",
                   "parents": squares, "leaf": 0})
    # c = a * a + a has 3 paths to a, but a walk that hands counts on parents first gives 1
    # and one whose output starts at 0 gives 0: the two slips differ here. No path reaches
    # b, which c does not use: the count must be 0 there, not an error.
    small = [[], [], [0, 0], [2, 0]]
    graphs.append({"what": "c = a * a + a, counting the paths to a", "parents": small,
                   "leaf": 0})
    graphs.append({"what": "c = a * a + a, counting the paths to a leaf b that c does not "
                           "use", "parents": small, "leaf": 1})
    graphs.append({"what": f"a ladder of {LADDER} rungs, each two nodes and their sum",
                   "parents": _ladder(LADDER), "leaf": 0})
    # One more sum, of the ladder's top and the leaf: 2**LADDER + 1 paths, which a float
    # (a count seeded 1.0, or kept in .grad) rounds to 2**LADDER.
    ladder = _ladder(LADDER)
    graphs.append({"what": f"the ladder of {LADDER} rungs, its top added to the leaf",
                   "parents": ladder + [[len(ladder) - 1, 0]], "leaf": 0})
    graphs.append({"what": f"a chain {CHAIN:,} operations deep",
                   "parents": [[]] + [[k] for k in range(CHAIN)], "leaf": 0})
    return {"graphs": graphs}


# ----------------------------------------------------------------- what the count did


_RECURSIVE = ("your count is recursive ({name} calls itself): it needs one nested call per "
              "level, and a chain 10,000 deep is far past Python's recursion limit of about "
              "1,000 (section 3); raising the limit only moves that wall. Walk the nodes in "
              "an order of your own instead, such as reversed(topo_order(root)).")


def _raised(spec: dict[str, Any]):
    """How an error on ``spec`` is told: where it happened, and, for a KeyError on a leaf
    no path reaches, that the count is 0 there."""
    def told(err: Exception) -> str:
        message = f"on {spec['what']}: count_paths raised {type(err).__name__}: {err}."
        if isinstance(err, KeyError) and not _reachable(spec):
            message += (" No path from the output reaches this leaf, so no count was ever "
                        "handed to it: return 0 then (a dict's .get takes a default).")
        return message
    return told


def _observe(answer: Any, inputs: dict[str, Any]) -> list[Any] | dict:
    """The count on each graph, or what stopped it there: too many reads of ``.parents``
    (``{"walked": reads}``) or an error. Recursion, refused passes and a count that is not
    a function end the observation."""
    if not callable(answer):
        return failure("fail", f"expected the function count_paths(root, leaf), got "
                               f"{type(answer).__name__}")
    namespace = getattr(answer, "__globals__", {})
    said: list[Any] = []
    for spec in inputs["graphs"]:
        nodes = _build(spec["parents"])
        # The small graphs are enough to see recursion; the ladder and the chain run
        # unwatched (a profiler on every call would cost 20x there).
        watch = CallWatch(namespace) if len(nodes) < 1000 else None
        run = watch.run if watch is not None else (lambda f, *a: f(*a))
        try:
            with torch.no_grad(), forbid_autograd(
                    "this exercise asks you to count the paths yourself",
                    how="Count them from each node's parents, as a backward pass would add "
                        "up gradients of 1."):
                got, failed = call_answer(run, answer, nodes[-1], nodes[spec["leaf"]],
                                          what="count_paths", raised=_raised(spec))
        except _TooManyReads:
            said.append({"walked": nodes[0]._reads[0]})
            continue
        if watch is not None and watch.recursive is not None:
            return failure("fail", _RECURSIVE.format(name=watch.recursive.co_name))
        if failed is not None:
            return failed
        said.append(got if isinstance(got, int) and not isinstance(got, bool)
                    else {"returned": type(got).__name__, "value": repr(got)[:40]})
    return said


# ----------------------------------------------------------------- the judge's side


def _order(parents: list[list[int]]) -> list[int]:
    """The lesson's depth-first order (section 3) of the nodes behind the last one."""
    root = len(parents) - 1
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((p, False) for p in parents[node] if p not in seen)
    return order


def _count(spec: dict[str, Any], *, reverse: bool = True, unique: bool = False) -> int:
    """Paths from the last node down to the leaf, handed from users to parents. The
    slips: ``reverse=False`` walks the order parents first, ``unique`` counts a parent
    taken twice once."""
    parents = spec["parents"]
    order = _order(parents)
    paths = {len(parents) - 1: 1}
    for node in (reversed(order) if reverse else order):
        here = paths.get(node, 0)
        for p in (dict.fromkeys(parents[node]) if unique else parents[node]):
            paths[p] = paths.get(p, 0) + here
    return paths.get(spec["leaf"], 0)


def _reference(inputs: dict[str, Any]) -> list[int]:
    return [_count(spec) for spec in inputs["graphs"]]


def _reachable(spec: dict[str, Any]) -> int:
    return int(spec["leaf"] in _order(spec["parents"]))


def _slip(**how: bool):
    return lambda inputs: [_count(spec, **how) for spec in inputs["graphs"]]


def _explain(inputs: dict[str, Any], got: list[Any], want: list[int]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
    spec, said, right = inputs["graphs"][at], got[at], want[at]
    where = f"on {spec['what']}"
    if isinstance(said, dict) and "walked" in said:
        return (f"{where}, your count read .parents {said['walked']:,} times and was stopped: "
                f"it walks the paths one by one, and there are {right:,} of them. Give each "
                "node one count and hand it on to its parents, as backward hands on a "
                "gradient.")
    if isinstance(said, dict):
        return (f"{where}, count_paths returned {said['value']} (a {said['returned']}); "
                "expected a whole number, an int.")
    return (f"{where}, your count is {said:,}; there are {right:,} paths from the output "
            "to the leaf.")


PATHS = Method(
    name="count_paths",
    make_inputs=_make_inputs,
    observe=_observe,
    reference=_reference,
    explain=_explain,
    mistakes={
        # The root's count started at 0 and a lookup under the wrong key both give this;
        # c = a * a + a tells it from handing the counts on parents first (which gives 1).
        "every count came out 0, even where paths reach the leaf (c = a * a + a has 3 to a): "
        "no count ever reached the leaf's entry. Did the output's own count start at 1 (one "
        "path, from the output to itself)? Are counts stored and read under the same key?":
            lambda inputs: [0 for _ in inputs["graphs"]],
        "your count says only whether the leaf can be reached (1, or 0): a node's count was "
        "set, not added to. Either each share overwrote the one before (section 5's bug, "
        "`=` where the shares must add up, `+=`), or a set of visited nodes let every node "
        "be counted once. A shared node lies on several paths: it gets the sum of what its "
        "users hand it.": lambda inputs: [_reachable(spec) for spec in inputs["graphs"]],
        "a parent taken twice by one user counts once: y = x * x has two edges to x, one per "
        "input of the product, and so two paths (the product rule's two terms). Hand a share "
        "along every edge of node.parents, repeats included.": _slip(unique=True),
        "the counts were handed on in topological order, parents first, so a node passed its "
        "count on before its users had handed it theirs. Walk the order backwards, the "
        "output first, as backward does.": _slip(reverse=False),
        "the counts were kept in floats (as when the output's count is seeded 1.0, or the "
        f"counts are kept in .grad): a float holds every whole number only up to 2**53, so "
        f"2**{LADDER} + 1 rounds to 2**{LADDER}. Keep them in ints (the output's count "
        "starts at 1): Python's ints are exact at any size.":
            lambda inputs: [int(float(_count(spec))) for spec in inputs["graphs"]],
    },
    trials=2,
    passed=f"the number of paths on new random graphs, squares, a ladder of 2**{LADDER} "
           f"paths and a chain {CHAIN:,} deep, without recursion",
    # Raising the recursion limit is a fair try; the check says why it cannot be enough.
    vocabulary=METHOD.allowing("sys.setrecursionlimit", "sys.getrecursionlimit"),
)


EXERCISES = {
    "l03-ops": OPS_AND_TANH,
    "l03-softmax-ce": CROSS_ENTROPY,
    "l03-paths": PATHS,
}

# --------------------------------------------------------------------------- predictions


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a * a + a).backward()
    return a.grad.item()


PREDICTIONS = {
    "l03-predict-paths": Prediction(
        question="a.grad for c = a*a + a at a = 3",
        answer=_paths_answer,
        hint="count every path from c back to a: the product uses a twice, and each of those "
             "uses carries the other factor; the sum adds one more path.",
        why="three paths reach a: two through the product, each carrying the other factor "
            "(3 each), and one straight through the sum (1): 3 + 3 + 1 = {answer}",
    ),
}
