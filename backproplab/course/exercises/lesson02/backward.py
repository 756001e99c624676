"""``l02-backward``: a backward pass, built by walking a real graph.

The learner runs the whole backward pass over torch graphs made new from a seed: it
walks from the output, applies each node's local rule to the tensors the node saved,
adds up what meets at a node, runs a node only once all of its gradient has arrived,
and collects the leaves' gradients. Backward passes, calls of a node and
``bl.describe`` are refused while it runs.

One trial is seven graphs of one node each (so that a wrong local rule is named by its
node), then three graphs where gradients meet, each given as plain data (module ``graphs``)
and built anew wherever it is needed. The observation is the gradients the learner's
walk returned on each graph; the reference is the check's own walk. A slip's
observation may leave graphs out (``ANY``) or allow one of several results
(``{"one of": [...]}``): it says what the slip shows, and nothing more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .._spec import Method, close, failure
from .._walk import run_walk
from .graphs import PROBES, build, edge_grads, make_inputs, walk

__all__ = ["ANY", "BACKWARD"]

ANY = "any result"  # a slip's observation of a graph the slip says nothing about


@contextlib.contextmanager
def _node_calls(called: list[str]) -> Iterator[None]:
    """Note every backward node that is *called* inside the block (``node(grad)``).

    torch's profiler records each node's function when it runs, whoever calls it;
    a learner who calls the node lets it do the very computation asked for.
    (Where this profiler is missing, nothing is noted.)
    """
    try:
        from torch.autograd.profiler_legacy import profile
    except ImportError:  # a future torch without it
        yield
        return
    with profile() as seen:
        yield
    called.extend(e.name for e in seen.function_events if e.name.endswith(("Backward0",
                                                                          "Backward1")))


# ----------------------------------------------------------------- what the walk did


def _raised(error: str) -> str:
    """An error the walk raised, told with what most likely caused it."""
    message = f"raised {error}"
    if "NoneType" in message:
        return (f"{message}. An input that needs no gradient (a constant) has no node, (None, 0) "
                "in next_functions, and a product then does not save the factor only that "
                "input's gradient would need (its _saved_ attribute is None): skip the inputs "
                "whose node is None.")
    if "has no attribute '_saved_" in message:
        return (f"{message}. Each kind of node saves its own tensors: bl.describe lists them "
                "(`saved: ...`), and node.name() tells you which kind you hold.")
    return message


def _entry(g: Any) -> Any:
    """One returned gradient as plain data: a tensor's values, None, or its type."""
    if g is None:
        return None
    if type(g) in (torch.Tensor, torch.nn.Parameter):
        return g.detach().clone()
    return {"type": type(g).__name__}


def _observe(answer: Any, inputs: dict[str, Any]) -> list[Any] | dict:
    """On each graph, what the learner's walk returned (or the error it raised there), and
    whether a tensor it returned on a one-node graph is one it had returned before (a
    ``.grad`` filled once). Refused methods end the observation."""
    reason = "this exercise asks you to run backward yourself, node by node"
    seen: list[torch.Tensor] = []  # kept alive, so that `is` compares them (ids are reused)
    said = []
    for spec in inputs["graphs"]:
        out, leaves = build(spec)
        called: list[str] = []
        errors: list[str] = []

        def note(err: Exception, errors: list[str] = errors) -> str:
            errors.append(f"{type(err).__name__}: {err}")
            return "raised"

        with torch.no_grad(), _node_calls(called):
            got, failed = run_walk(answer, out, leaves, reason=reason, raised=note)
        if called:
            return failure("fail", f"your code called a node itself ({called[0]}(...)), which "
                                   "runs backward's own formula for you. Read what the node "
                                   "saved (_saved_self, _saved_other, _saved_result, ...) and "
                                   "apply its local rule yourself.")
        if errors:  # the learner's bug on this graph: the other graphs may still name it
            said.append({"raised": errors[0]})
        elif failed is not None:
            return failed
        elif not isinstance(got, (list, tuple)):
            said.append({"returned": type(got).__name__})
        else:
            again = spec["probe"] is not None and any(g is r for g in got for r in seen)
            if spec["probe"] is not None:
                seen.extend(g for g in got if isinstance(g, torch.Tensor))
            said.append({"grads": [_entry(g) for g in got], "again": again})
    return said


# ----------------------------------------------------------------- the judge's side


def _right(spec: dict[str, Any], **slip: Any) -> dict[str, Any]:
    """What the check's walk gives on a graph (with ``slip``: what that slip gives)."""
    out, leaves = build(spec)
    return {"grads": walk(out, leaves, **slip), "again": False}


def _reference(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [_right(spec) for spec in inputs["graphs"]]


def _probe_slip(op: str, shows):
    """A slip of one local rule: what it shows on the one-node graph of ``op`` (from the
    graph's x, c and exponent n), the other graphs left out."""
    def observation(inputs: dict[str, Any]) -> list[Any]:
        specs = inputs["graphs"]
        spec = specs[PROBES.index(op)]
        x, c, n = spec["x"], spec["c"], spec["n"]
        grads = shows(x, spec["y"]) if op == "x * y" else shows(x, c, n)
        return [{"grads": grads, "again": False} if s is spec else ANY for s in specs]
    return observation


def _whole_graphs(*slips: dict[str, Any]):
    """A slip of the walk itself: every one-node graph right, and on the graphs where
    gradients meet, what the walk gives with one of ``slips`` (the same on all three)."""
    def observation(inputs: dict[str, Any]) -> dict[str, Any]:
        probes = [_right(s) for s in inputs["graphs"] if s["probe"] is not None]
        return {"one of": [probes + [_right(s, **slip) for s in inputs["graphs"]
                                     if s["probe"] is None] for slip in slips]}
    return observation


def _one_part_only(inputs: dict[str, Any]) -> list[Any]:
    """The slip of ``=`` for ``+=`` at a leaf: a leaf the gradient reaches along several
    edges holds one edge's part (whichever arrived last); every other gradient is right."""
    shown = []
    for spec in inputs["graphs"]:
        right = _right(spec)
        if spec["probe"] is None:
            out, leaves = build(spec)
            parts = [edge_grads(out, leaf) for leaf in leaves]
            right["grads"] = [{"one of": p} if len(p) > 1 else g
                              for g, p in zip(right["grads"], parts, strict=True)]
        shown.append(right)
    return shown


def _where(op: str) -> str:
    if op in ("x * y", "x * c"):
        return (f"on the graph {op} (one MulBackward0 node"
                + (", c a constant with no node)" if op == "x * c" else ")"))
    return f"on a graph with one {op} node (times a constant)"


_MISSING = ("the incoming gradient is missing: a node multiplies its local derivative by the "
            "gradient that arrives at it (here the constant factor above it)")
# The typical wrong local rules, by the node they belong to: words -> what they show.
_RULE_SLIPS = {
    "x * y": {"each factor of a product gets the incoming gradient times the *other* factor "
              "(x gets y, y gets x), not its own": lambda x, y: [x, y]},
    "SubBackward0": {"the second input of a subtraction gets minus the incoming gradient":
                     lambda x, c, n: [c, c]},
    "SinBackward0": {
        _MISSING: lambda x, c, n: [torch.cos(x)],
        "the sign is off: the derivative of sin x is +cos x": lambda x, c, n: [-c * torch.cos(x)],
        "that is sin of the saved input, the forward again: the derivative of sin x is cos x":
            lambda x, c, n: [c * torch.sin(x)]},
    "ExpBackward0": {
        _MISSING: lambda x, c, n: [torch.exp(x)],
        "ExpBackward0 saved its output, exp(x) (_saved_result), not its input: exp of it "
        "applies exp twice. The saved output is already the derivative":
            lambda x, c, n: [c * torch.exp(torch.exp(x))]},
    "PowBackward0": {
        _MISSING: lambda x, c, n: [n * x ** (n - 1)],
        "the power rule lowers the exponent: d/dx x**n is n x**(n - 1), not n x**n":
            lambda x, c, n: [c * n * x ** n],
        "the factor n of the power rule is missing: d/dx x**n is n x**(n - 1)":
            lambda x, c, n: [c * x ** (n - 1)]},
}


def _agree(got: Any, want: Any) -> bool:
    """Whether an observation shows what ``want`` says: ``ANY`` is anything, ``{"one of":
    [...]}`` any one of those, and gradients agree to float64 round-off."""
    if isinstance(want, str):
        return want == ANY or got == want
    if isinstance(want, dict) and "one of" in want:
        return any(_agree(got, w) for w in want["one of"])
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and close(got, want)
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(_agree(g, w) for g, w in zip(got, want, strict=True)))
    if isinstance(want, dict):
        return (isinstance(got, dict) and got.keys() == want.keys()
                and all(_agree(got[k], want[k]) for k in want))
    return got == want


def _differ(got: list[Any], want: list[torch.Tensor]) -> str:
    """Where the first wrong gradient is furthest from autograd's, in a few words."""
    k = next(k for k, (g, w) in enumerate(zip(got, want, strict=True)) if not close(g, w))
    diff = (got[k].double() - want[k]).abs().flatten()
    i = int(diff.argmax())
    return (f"leaf {k}, entry {i}: yours {float(got[k].flatten()[i]):.4g}, autograd's "
            f"{float(want[k].flatten()[i]):.4g}")


def _malformed(got: list[Any], want: list[torch.Tensor], where: str) -> str | None:
    """What is wrong with the list itself: one tensor per leaf, of the leaf's shape."""
    if len(got) != len(want):
        return (f"{where}: it returned {len(got)} gradient(s) for {len(want)} leaves: return "
                "one per leaf, in the order of `leaves`.")
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g is None:
            return (f"{where}: the gradient of leaf {k} is None, yet every leaf here reaches "
                    "the output. Did a rule send None to an input that has a node, or did the "
                    "walk miss that leaf's AccumulateGrad node? (Match a node to its leaf with "
                    "`node.variable is leaf`.)")
        if not isinstance(g, torch.Tensor):
            return f"{where}: the gradient of leaf {k} is a {g['type']}, not a tensor."
        if g.shape != w.shape:
            return (f"{where}: the gradient of leaf {k} has shape {tuple(g.shape)}, its leaf "
                    f"{tuple(w.shape)}: a gradient has the shape of its tensor. (A tensor from "
                    "the notebook, not from the graph the function was given?)")
    return None


def _explain(inputs: dict[str, Any], got: list[Any], want: list[dict[str, Any]]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not _agree(g, w))
    spec, said, right = inputs["graphs"][at], got[at], want[at]["grads"]
    if "raised" in said:
        return _raised(said["raised"])
    if "returned" in said:
        return f"expected a list with one gradient per leaf, got {said['returned']}."
    if said["again"]:
        return ("it returns the same tensors whatever graph it is given (a .grad filled by a "
                "backward() run outside the function?), so it looks hard-coded: compute the "
                "gradients from the graph of the out it gets.")
    op = spec["probe"]
    where = _where(op) if op else f"on a new graph with {len(right)} leaves"
    bad = _malformed(said["grads"], right, where)
    if bad is not None:
        return bad
    if op is not None:
        node = "MulBackward0" if op.startswith("x *") else op
        return (f"{where}: the gradients are wrong ({_differ(said['grads'], right)}). Work out "
                f"the local rule of {node} again from what it saved.")
    wrong = [k for k, (g, w) in enumerate(zip(said["grads"], right, strict=True))
             if not close(g, w)]
    return (f"{where}: every node you ran alone is right, but the leaves {wrong} (counted from "
            f"0) get wrong gradients ({_differ(said['grads'], right)}). Where gradients meet, "
            "they add up, and a node runs only once all of its gradient has arrived.")


BACKWARD = Method(
    name="backward by walking",
    make_inputs=make_inputs,
    observe=_observe,
    reference=_reference,
    explain=_explain,
    mistakes={
        **{f"{_where(op)}: {words}.": _probe_slip(op, shows)
           for op, slips in _RULE_SLIPS.items() for words, shows in slips.items()},
        "every node you ran alone is right, but on the new graphs some node passed its "
        "gradient on before all of it had arrived: the result used several times ran before "
        "all of its users had sent their parts. A node may run only once every edge into it "
        "has delivered: count the edges into each node first, and run a node when its count "
        "drops to 0.": _whole_graphs({"order": "stack"}, {"order": "queue"}),
        "every node you ran alone is right, but where the gradient reaches a node along "
        "several edges, your walk kept only the last part that arrived: the parts add up. "
        "Keep a running sum per node (+=), do not overwrite it (=).":
            _whole_graphs({"add": False}, {"order": "ready-queue", "add": False}),
        "every node you ran alone is right, but on each new graph a leaf that the gradient "
        "reaches along two edges got only one edge's part. What arrives at a node along "
        "several edges adds up: keep a running sum per node (+=), do not overwrite it (=).":
            _one_part_only,
    },
    trials=1,  # one trial of ten graphs, as the check always had
    agree=_agree,
    passed=f"matches autograd on {len(PROBES)} one-node graphs and on 3 new graphs where "
           "gradients meet",
)
