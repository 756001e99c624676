"""Lesson 07, exercise 3: the learner's engine frees what it saved and checks versions.

The learner writes ``Saved`` (a box around a saved tensor: ``unpack()``, ``free()``) and
``backward(root, retain_graph=False)`` for a small tensor engine, ``ENGINE_SOURCE`` (the
notebook's two engine cells, lesson 03's ``topo_order`` among them): boxes freed after each
node's rule unless ``retain_graph``, versions compared on unpack. The check
builds its own copy of the engine around the learner's ``Saved`` (so the graph holds no
torch autograd to lean on) and runs the same cases on it and on torch (``_CASES``): the
engine must run where torch runs and raise where torch raises, with torch's gradients; a
freed box must hold no tensor, and no box may hold a copy. The learner's side runs where
the answer lives and comes back as plain data (each pass's gradients or error text, and
what the boxes hold); torch's side runs in the grader, which compares the two.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from .._spec import Method, call_answer, failure
from .._spec import first_line as _first_line

__all__ = ["ENGINE_FREES", "ENGINE_SOURCE", "close"]


def close(a, b) -> bool:
    """Whether two float64 answers agree (loosely enough for float32 work too)."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-5,
                                                      atol=1e-7))


# The engine of the exercise, exactly as the notebook's two cells give it: the check builds
# its graphs with this copy, around the learner's Saved.
ENGINE_SOURCE = '''class Var:
    """Lesson 03's Value, holding a tensor: its data, its grad, the Vars it was computed
    from, the rule that passes its gradient on, and the boxes of the tensors it saved."""

    def __init__(self, data, parents=(), saved=()):
        self.data = data
        self.grad = torch.zeros_like(data)
        self.parents = parents
        self.saved = saved
        self.rule = lambda: None


def topo_order(root):  # lesson 03's depth-first sort, unchanged
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order


def add(a, b):  # saves nothing: a sum passes its gradient on unchanged
    out = Var(a.data + b.data, (a, b))

    def rule():
        a.grad += out.grad
        b.grad += out.grad

    out.rule = rule
    return out


def mul(a, b):  # saves both factors: each one's derivative is the other
    box_a, box_b = Saved(a.data), Saved(b.data)
    out = Var(a.data * b.data, (a, b), (box_a, box_b))

    def rule():
        a.grad += box_b.unpack() * out.grad
        b.grad += box_a.unpack() * out.grad

    out.rule = rule
    return out


def tanh(a):  # saves its output, which its derivative is written with
    data = torch.tanh(a.data)
    box = Saved(data)
    out = Var(data, (a,), (box,))

    def rule():
        a.grad += (1 - box.unpack() ** 2) * out.grad

    out.rule = rule
    return out
'''


# Compiled once, here: each check runs this code into a namespace of its own, around the
# learner's Saved (nothing is compiled while an answer is checked).
_ENGINE_CODE = compile(ENGINE_SOURCE, "<lesson 07's engine>", "exec")


def _engine(saved_class) -> dict:
    """The exercise's engine around the learner's Saved: Var, topo_order, add, mul, tanh."""
    space = {"torch": torch, "Saved": saved_class}
    exec(_ENGINE_CODE, space)  # noqa: S102 - the lesson's own engine, compiled above
    return space


class _Side:
    """One side of a case: torch's autograd (``engine`` None) or the learner's engine, on
    the same numbers. ``run`` is one backward pass: ("ran", every leaf's grad so far) or
    ("raised", the RuntimeError)."""

    def __init__(self, engine=None, backward=None):
        ops = engine or {"add": torch.add, "mul": torch.mul, "tanh": torch.tanh}
        self.add, self.mul, self.tanh = ops["add"], ops["mul"], ops["tanh"]
        self.engine, self.backward, self.leaves = engine, backward, []

    def leaf(self, value):
        t = torch.tensor(value, dtype=torch.float64)
        self.leaves.append(self.engine["Var"](t) if self.engine else t.requires_grad_())
        return self.leaves[-1]

    def change(self, v) -> None:
        """Change v's tensor in place, as an optimizer step does."""
        with torch.no_grad():
            (v.data if self.engine else v).mul_(0.5)

    def run(self, root, retain=False):
        try:
            if self.engine is None:
                root.backward(retain_graph=retain)
            elif retain:
                self.backward(root, retain_graph=True)
            else:
                self.backward(root)
        except RuntimeError as err:
            return "raised", err
        return "ran", [torch.zeros((), dtype=torch.float64) if v.grad is None
                       else v.grad.detach().clone() for v in self.leaves]


def _graph(s, v, shape):
    """One of three graphs of products, tanh and sums on three leaves."""
    a, b, c = (s.leaf(u) for u in v)
    if shape == 0:
        return s.add(s.tanh(s.mul(a, b)), s.mul(a, c))
    if shape == 1:
        return s.mul(s.tanh(s.add(a, b)), s.mul(c, c))
    return s.add(s.mul(s.mul(a, b), c), s.tanh(a))


def _twice(s, v, shape):
    root = _graph(s, v, shape)
    return [s.run(root), s.run(root)]


def _sums(s, v, shape):
    a, b = s.leaf(v[0]), s.leaf(v[1])
    root = s.add(s.add(a, b), a)
    return [s.run(root), s.run(root)]


def _kept(s, v, shape):
    root = _graph(s, v, shape)
    return [s.run(root, True), s.run(root, True), s.run(root), s.run(root)]


def _changed_between(which):
    def case(s, v, shape):
        w, x, c = (s.leaf(u) for u in v)
        root = s.add(s.tanh(s.mul(w, x)), c)
        first = s.run(root, True)
        s.change((w, x, c)[which])
        return [first, s.run(root)]
    return case


def _output(s, v, shape):
    a, b, c = (s.leaf(u) for u in v)
    y = s.tanh(s.mul(a, b))
    s.change(y)
    return [s.run(s.add(y, c))]


def _early(s, v, shape):
    a, b = s.leaf(v[0]), s.leaf(v[1])
    s.change(a)
    return [s.run(s.mul(a, b))]


def _shared(s, v, shape):
    a, b, c = (s.leaf(u) for u in v)
    y = s.tanh(a) if shape != 1 else s.mul(a, c)
    return [s.run(y), s.run(s.add(y, b))]


def _shared_sum(s, v, shape):
    a, b, c = (s.leaf(u) for u in v)
    y = s.add(a, b)
    return [s.run(y), s.run(s.mul(y, c))]


_FIRST = "A first pass must run: free a node's boxes only after its rule has used them."
# Each case: (its steps, what it does, why torch runs where yours raised, why torch raises
# where yours ran).
_CASES = {
    "twice": (_twice, "two passes without retain_graph through products and tanh", _FIRST,
              "Free every node's boxes once its rule has run, and let unpack() of a freed box "
              "raise RuntimeError."),
    "sums": (_sums, "two passes without retain_graph through sums alone",
             "A sum saved nothing, so nothing of it was freed: raise only when a rule unpacks "
             "a freed box.", ""),
    "kept": (_kept, "two passes with retain_graph=True, then two without",
             "retain_graph=True keeps every box: a pass asked to keep them frees nothing.",
             "The first pass without retain_graph frees the boxes, so the pass after it must "
             "raise."),
    "changed": (_changed_between(0), "a leaf that a product saved, changed in place between "
                "two passes", _FIRST, "The product saved the leaf itself, and its version has "
                "moved on since: note tensor._version when saving and compare it in unpack()."),
    "unsaved": (_changed_between(2), "a leaf that only a sum reads, changed in place between "
                "two passes", "No box holds that leaf (a sum saves nothing), so no version "
                "check concerns it.", ""),
    "output": (_output, "tanh's output changed in place before the first pass", _FIRST,
               "tanh saved its output, and that tensor's version has moved on: unpack() "
               "compares versions, whatever changed the tensor and whenever."),
    "early": (_early, "a leaf changed in place before a product saved it",
              "The box noted the version the tensor had when it was saved, and nothing changed "
              "since: compare with that version, not with 0.", ""),
    "shared": (_shared, "y through backward, then z = y + b through it again", _FIRST,
               "z's pass reaches the node under y, whose boxes y's pass freed."),
    "shared_sum": (_shared_sum, "y = a + b through backward, then y * c",
                   "The product runs for the first time and the sum saved nothing: raise only "
                   "when a rule unpacks a freed box.", ""),
}


def _held(box) -> list:
    """The tensors a box refers to: through its attributes, and lists or dicts in them."""
    found, todo = [], [box]
    for _ in range(3):
        found += [r for obj in todo for r in gc.get_referents(obj) if torch.is_tensor(r)]
        todo = [r for obj in todo for r in gc.get_referents(obj)
                if isinstance(r, (dict, list, tuple, set))]
    return found


def _boxes(engine, backward, v, shape) -> dict[str, Any]:
    """What the learner's boxes do around one pass without retain_graph: whether one keeps
    a tensor that is neither its node's nor a parent's (a copy), how the pass ended, how
    many of the boxes still hold a tensor after it, and whether a freed box unpacks."""
    side = _Side(engine, backward)
    root = _graph(side, v, shape)
    nodes = [n for n in engine["topo_order"](root) if n.saved]
    copy = any(not any(t is o for o in (n.data, *(p.data for p in n.parents)))
               for n in nodes for box in n.saved for t in _held(box))
    first = side.run(root)[0]
    boxes = [box for n in nodes for box in n.saved]
    unpacks = False
    for box in boxes if first == "ran" else ():
        try:
            box.unpack()
            unpacks = True
        except RuntimeError:
            continue
    return {"copy": copy, "first": first, "boxes": len(boxes),
            "held": sum(bool(_held(box)) for box in boxes) if first == "ran" else 0,
            "unpacks": unpacks}


def _results(results) -> list[list[Any]]:
    """A case's passes as plain data: ["ran", the leaves' grads] or ["raised", the text]."""
    return [[kind, got if kind == "ran" else str(got)[:500]] for kind, got in results]


def _engine_inputs(gen: torch.Generator) -> dict[str, Any]:
    """Two new sets of numbers for the three leaves, each with one of the three graphs."""
    rounds = []
    for _ in range(2):
        v = [float(u) for u in torch.rand(3, generator=gen, dtype=torch.float64) * 1.6 - 0.8]
        rounds.append({"v": v, "shape": int(torch.randint(3, (1,), generator=gen))})
    return {"rounds": rounds}


def _caught(step, *args) -> Any:
    """``step(*args)``, or {"raised": what} when the learner's engine raised something other
    than RuntimeError there (a missing piece, NotImplementedError, is not caught)."""
    try:
        return step(*args)
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - the learner's engine: told where it happened
        return {"raised": f"{type(err).__name__}: {_first_line(err)}"}


def _observe_engine(answer, inputs: dict[str, Any]) -> dict[str, Any]:
    """On each set of numbers: what the boxes do, and every case's passes on the
    learner's engine (torch's are the grader's to run); an error other than RuntimeError
    is kept where it happened, so that what came before it is judged first."""
    if not (isinstance(answer, tuple) and len(answer) == 2 and all(map(callable, answer))):
        return failure("fail", "expected the pair (Saved, backward) from the check cell; run it "
                               "as it is")
    saved_class, backward = answer

    def one_round(r: dict[str, Any]) -> dict[str, Any]:
        engine = _engine(saved_class)
        return {"boxes": _caught(_boxes, engine, backward, r["v"], r["shape"]),
                "cases": {key: _caught(lambda case=case: _results(
                    case(_Side(engine, backward), r["v"], r["shape"])))
                    for key, (case, *_) in _CASES.items()}}

    seen, failed = call_answer(lambda: [one_round(r) for r in inputs["rounds"]],
                               what="Saved or backward")
    return failed if failed is not None else {"rounds": seen}


def _torch_cases(inputs: dict[str, Any]) -> dict[str, Any]:
    """torch's passes in every case, on each set of numbers."""
    return {"rounds": [{key: _results(case(_Side(), r["v"], r["shape"]))
                        for key, (case, *_) in _CASES.items()} for r in inputs["rounds"]]}


def _raised(what: str) -> str:
    return (f"raised {what}. Where torch refuses a pass it raises RuntimeError; so must your "
            "engine, and only there.")


def _boxes_problem(boxes: dict[str, Any]) -> str | None:
    """What is wrong with the boxes themselves: a copy saved, or a freed box that still holds
    its tensor or unpacks. None when nothing is (or the first pass raised: a case says so)."""
    if "raised" in boxes:
        return _raised(boxes["raised"])
    if boxes["copy"]:
        return ("your Saved keeps a copy of the tensor. torch keeps the tensor itself, which "
                "costs no memory, and notices a change through its version counter; a copy "
                "would hide the change.")
    if boxes["held"]:
        return (f"after a pass without retain_graph, {boxes['held']} of the {boxes['boxes']} "
                "boxes still hold their tensor: backward must free the boxes of every node "
                "whose rule ran, and free() must let go of the tensor (that memory is what the "
                "pass gives back).")
    if boxes["unpacks"]:
        return ("after a pass without retain_graph, a freed box unpacks without an error: "
                "unpack() of a freed box must raise RuntimeError.")
    return None


def _engine_problem(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """The first case where the learner's engine and torch part ways, said in words."""
    for mine_round, torch_round in zip(got["rounds"], want["rounds"], strict=True):
        problem = _boxes_problem(mine_round["boxes"])
        if problem:
            return problem
        for key, (_, what, why_runs, why_raises) in _CASES.items():
            mine, ref = mine_round["cases"][key], torch_round[key]
            if "raised" in mine:
                return _raised(mine["raised"])
            for k, ((kind, got_k), (want_kind, want_k)) in enumerate(zip(mine, ref,
                                                                         strict=True)):
                if kind == want_kind == "ran" and not all(
                        close(g, w) for g, w in zip(got_k, want_k, strict=True)):
                    return (f"{what}: after pass {k + 1} the leaves' grads are "
                            f"{[round(g.item(), 4) for g in got_k]}, torch's "
                            f"{[round(w.item(), 4) for w in want_k]}. Each pass starts every "
                            "non-leaf's grad from zeros and the root's from ones; leaves add up.")
                if kind != want_kind and kind == "raised":
                    first = got_k.strip().splitlines()[0] if got_k.strip() else "RuntimeError"
                    return (f"{what}: your pass {k + 1} raised RuntimeError ({first}) where "
                            f"torch runs. {why_runs if k or len(ref) == 1 else _FIRST}")
                if kind != want_kind:
                    return f"{what}: your pass {k + 1} ran where torch raises. {why_raises}"
        last = {key: mine_round["cases"][key][-1][1] for key in ("twice", "changed")}
        if last["twice"] == last["changed"]:
            return (f"your two errors read the same ({last['twice'][:80]}): say which protection "
                    "stopped the pass, a freed box or a tensor changed in place since it was "
                    "saved (at which version, saved at which).")
    return None


ENGINE_FREES = Method(
    name="your engine",
    make_inputs=_engine_inputs,
    observe=_observe_engine,
    reference=_torch_cases,
    wrong=_engine_problem,
    trials=1,  # one trial of 2 sets of numbers, drawn as the check always drew them
    passed=f"runs where torch runs and raises where torch raises, in {len(_CASES)} cases on 2 "
           "new sets of numbers, and a freed box lets go of its tensor",
)
