"""``l02-rule``: one node's local rule, read from the tensors the node saved.

The learner's ``node_rule(node, grad)`` returns what a backward node sends along each
edge of its ``next_functions`` when ``grad`` arrives at its output: the chain rule at one
node. The check tries it on one-node graphs, one per kind of node, with calling the node,
backward passes and ``bl.describe`` refused while it runs.

A graph is plain data (`make_inputs`: which operation, its operands, the gradient that
arrives at its node, new from a seed) and is built anew wherever it is needed (`build`):
in the learner's process, where the learner's rule is called on its node, and in the
grader, where `rule` (the check's own rule, the reference) and the slips read the same
numbers. The observation is what the learner's rule returned on each graph. An edge that
leads to no node (a constant) is free: torch throws away whatever is sent there. A slip is
one wrong rule: it names its node and says nothing of the other graphs (``ANY``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .._spec import Method, close, failure
from .._walk import run_walk

__all__ = ["ANY", "OPS", "PROBES", "RULE", "build", "make_inputs", "rule"]

ANY = "any result"  # a slip's observation of a graph the slip says nothing about

# ----------------------------------------------------------------- the check's own rule

# The kinds of node the check tries, by node name.
OPS = ("AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0", "SinBackward0",
       "ExpBackward0", "PowBackward0", "SqrtBackward0", "TanhBackward0")
# One graph per entry, in this order. A product and a quotient are tried three times: with
# two leaves, and with a constant on either side (an input with no node, whose factor may
# not be saved: a rule must guard each edge, not only the one a constant usually takes).
PROBES = ("x * y", "x * c", "c * x", "x + y", "x - y", "x / y", "x / c", "c / y",
          "SinBackward0", "ExpBackward0", "PowBackward0", "SqrtBackward0", "TanhBackward0")


@torch.no_grad()
def rule(node: Any, g: torch.Tensor) -> list[torch.Tensor | None]:
    """What ``node`` sends along each edge of ``next_functions`` for the gradient ``g`` at
    its output, read from the tensors it saved (None along an edge to no node)."""
    name = node.name()
    needs = [fn is not None for fn, _ in node.next_functions]
    if name == "AddBackward0":
        sent = [g, g]
    elif name == "SubBackward0":
        sent = [g, -g]
    elif name == "MulBackward0":
        sent = [g * node._saved_other if needs[0] else None,
                g * node._saved_self if needs[1] else None]
    elif name == "DivBackward0":
        other = node._saved_other
        sent = [g / other if needs[0] else None,
                -g * node._saved_self / other**2 if needs[1] else None]
    elif name == "SinBackward0":
        sent = [g * torch.cos(node._saved_self)]
    elif name == "ExpBackward0":
        sent = [g * node._saved_result]
    elif name == "PowBackward0":
        n = node._saved_exponent
        sent = [g * n * node._saved_self ** (n - 1)]
    elif name == "SqrtBackward0":
        sent = [g / (2 * node._saved_result)]
    elif name == "TanhBackward0":
        sent = [g * (1 - node._saved_result**2)]
    else:  # the check builds its graphs from OPS only
        raise ValueError(f"no rule for {name}")
    return [s if need else None for s, need in zip(sent, needs, strict=True)]


# ----------------------------------------------------------------- the graphs, as data


def _pick(gen: torch.Generator, items: Any) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _uniform(gen: torch.Generator, size: int) -> torch.Tensor:
    return torch.rand(size, generator=gen, dtype=torch.float64) * 2 - 1


def _away_from_zero(gen: torch.Generator, size: int) -> torch.Tensor:
    """Values in ±[0.5, 1.5]: a divisor, or a constant factor that leaves every slip visible."""
    sign = torch.randint(0, 2, (size,), generator=gen, dtype=torch.float64) * 2 - 1
    return sign * (torch.rand(size, generator=gen, dtype=torch.float64) + 0.5)


def _probe(gen: torch.Generator, op: str) -> dict[str, Any]:
    """One graph: its operands, and the gradient ``g`` that arrives at its node (never all
    ones, so that a rule that forgets it is seen)."""
    size = int(torch.randint(1, 4, (1,), generator=gen))
    x = torch.rand(size, generator=gen, dtype=torch.float64) + 0.25 \
        if op == "SqrtBackward0" else _uniform(gen, size)
    y = _away_from_zero(gen, size)
    c = _away_from_zero(gen, size)
    g = _away_from_zero(gen, size)
    n = _pick(gen, (2, 3)) if op == "PowBackward0" else None
    return {"probe": op, "x": x, "y": y, "c": c, "g": g, "n": n}


def make_inputs(gen: torch.Generator) -> dict[str, Any]:
    """One graph per entry of PROBES, each from a generator of its own seeded from this one."""
    seed = gen.initial_seed()
    return {"graphs": [_probe(torch.Generator().manual_seed(seed * 31 + k), op)
                       for k, op in enumerate(PROBES)]}


def build(spec: dict[str, Any]) -> Any:
    """The graph made new from its data; returns its one node."""
    x, y = spec["x"].clone().requires_grad_(), spec["y"].clone().requires_grad_()
    made = {"x * y": lambda: x * y, "x * c": lambda: x * spec["c"],
            "c * x": lambda: spec["c"] * x, "x + y": lambda: x + y, "x - y": lambda: x - y,
            "x / y": lambda: x / y, "x / c": lambda: x / spec["c"],
            "c / y": lambda: spec["c"] / y,
            "SinBackward0": lambda: torch.sin(x), "ExpBackward0": lambda: torch.exp(x),
            "PowBackward0": lambda: x ** spec["n"], "SqrtBackward0": lambda: torch.sqrt(x),
            "TanhBackward0": lambda: torch.tanh(x)}[spec["probe"]]()
    return made.grad_fn


# ----------------------------------------------------------------- what the rule did


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


def _raised(error: str) -> str:
    """An error the rule raised, told with what most likely caused it."""
    message = f"raised {error}"
    if "NoneType" in message:
        return (f"{message}. An input that needs no gradient (a constant) has no node, (None, 0) "
                "in next_functions, and a product or a quotient then may not save what only "
                "that input's gradient would need (its _saved_ attribute is None): send None "
                "along an edge whose node is None.")
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
    """On each graph, what the learner's rule returned for its node (or the error it raised
    there). Refused methods end the observation."""
    reason = "this exercise asks you to apply the node's rule yourself"
    said = []
    for spec in inputs["graphs"]:
        node = build(spec)
        called: list[str] = []
        errors: list[str] = []

        def note(err: Exception, errors: list[str] = errors) -> str:
            errors.append(f"{type(err).__name__}: {err}")
            return "raised"

        with torch.no_grad(), _node_calls(called):
            got, failed = run_walk(answer, node, spec["g"].clone(), reason=reason, raised=note)
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
            said.append([_entry(g) for g in got])
    return said


# ----------------------------------------------------------------- the judge's side


def _reference(inputs: dict[str, Any]) -> list[list[Any]]:
    return [rule(build(spec), spec["g"]) for spec in inputs["graphs"]]


def _where(op: str) -> str:
    if op in ("x * y", "x * c", "c * x", "x / y", "x / c", "c / y"):
        kind = "MulBackward0" if "*" in op else "DivBackward0"
        return f"on the graph {op} (one {kind} node" + (
            ", c a constant with no node)" if "c" in op else ")")
    if op in ("x + y", "x - y"):
        return f"on the graph {op} (one {'AddBackward0' if '+' in op else 'SubBackward0'} node)"
    return f"on a graph with one {op} node"


def _slip(op: str, shows: Callable[..., list[Any]]):
    """A wrong rule for ``op``'s node: what it sends on that node's graph (from the graph's
    x, y, c, n and g), the other graphs left out."""
    def observation(inputs: dict[str, Any]) -> list[Any]:
        specs = inputs["graphs"]
        spec = specs[PROBES.index(op)]
        sent = shows(**{k: spec[k] for k in ("x", "y", "c", "n", "g")})
        return [sent if s is spec else ANY for s in specs]
    return observation


_MISSING = ("the incoming gradient is missing: a node multiplies its local derivative by the "
            "gradient that arrives at its output (grad)")
# The typical wrong rules, by graph: words -> what they send.
_RULE_SLIPS: dict[str, dict[str, Callable[..., list[Any]]]] = {
    "x * y": {
        "each factor of a product gets the incoming gradient times the *other* factor "
        "(x gets y, y gets x), not its own": lambda x, y, c, n, g: [g * x, g * y],
        _MISSING: lambda x, y, c, n, g: [y, x]},
    "x - y": {"the second input of a subtraction gets minus the incoming gradient":
              lambda x, y, c, n, g: [g, g]},
    "x / y": {
        "the divisor's gradient has the wrong sign: y sits in the denominator, so d(x/y)/dy "
        "is -x / y**2": lambda x, y, c, n, g: [g / y, g * x / y**2],
        "x's gradient multiplies by the divisor: d(x/y)/dx is 1 / y":
            lambda x, y, c, n, g: [g * y, -g * x / y**2],
        "the divisor's gradient lost the numerator: d(x/y)/dy is -x / y**2, not -1 / y**2":
            lambda x, y, c, n, g: [g / y, -g / y**2],
        "the divisor's gradient divides by y once: d(x/y)/dy is -x / y**2 (y**-1 becomes "
        "-y**-2)": lambda x, y, c, n, g: [g / y, -g * x / y]},
    "SinBackward0": {
        _MISSING: lambda x, y, c, n, g: [torch.cos(x)],
        "the sign is off: the derivative of sin x is +cos x":
            lambda x, y, c, n, g: [-g * torch.cos(x)],
        "that is sin of the saved input, the forward again: the derivative of sin x is cos x":
            lambda x, y, c, n, g: [g * torch.sin(x)]},
    "ExpBackward0": {
        _MISSING: lambda x, y, c, n, g: [torch.exp(x)],
        "ExpBackward0 saved its output, exp(x) (_saved_result), not its input: exp of it "
        "applies exp twice. The saved output is already the derivative":
            lambda x, y, c, n, g: [g * torch.exp(torch.exp(x))]},
    "PowBackward0": {
        _MISSING: lambda x, y, c, n, g: [n * x ** (n - 1)],
        "the power rule lowers the exponent: d/dx x**n is n x**(n - 1), not n x**n":
            lambda x, y, c, n, g: [g * n * x**n],
        "the factor n of the power rule is missing: d/dx x**n is n x**(n - 1)":
            lambda x, y, c, n, g: [g * x ** (n - 1)]},
    "SqrtBackward0": {
        _MISSING: lambda x, y, c, n, g: [1 / (2 * torch.sqrt(x))],
        "the factor 1/2 is missing: sqrt x is x**(1/2), whose derivative is "
        "1 / (2 sqrt x)": lambda x, y, c, n, g: [g / torch.sqrt(x)],
        "SqrtBackward0 saved its output, sqrt(x) (_saved_result), not its input: the square "
        "root of it takes the root twice. Divide by twice the saved output":
            lambda x, y, c, n, g: [g / (2 * torch.sqrt(torch.sqrt(x)))]},
    "TanhBackward0": {
        _MISSING: lambda x, y, c, n, g: [1 - torch.tanh(x) ** 2],
        "TanhBackward0 saved its output, tanh(x) (_saved_result), not its input: tanh of it "
        "applies tanh twice. The rule is 1 - t**2 with t the saved output":
            lambda x, y, c, n, g: [g * (1 - torch.tanh(torch.tanh(x)) ** 2)],
        "the square is missing: the derivative of tanh is 1 - tanh**2, not 1 - tanh":
            lambda x, y, c, n, g: [g * (1 - torch.tanh(x))]},
}


def _agree(got: Any, want: Any) -> bool:
    """Whether an observation shows what ``want`` says: ``ANY`` is anything, so is anything
    sent along an edge to no node (``None`` wanted); gradients agree to float64 round-off."""
    if isinstance(want, str):
        return want == ANY or got == want
    if want is None:
        return True
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.shape == want.shape and close(got, want)
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(_agree(g, w) for g, w in zip(got, want, strict=True)))
    return got == want


def _explain(inputs: dict[str, Any], got: list[Any], want: list[Any]) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not _agree(g, w))
    spec, said, right = inputs["graphs"][at], got[at], want[at]
    where = _where(spec["probe"])
    if isinstance(said, dict) and "raised" in said:
        return f"{where}, your rule {_raised(said['raised'])}"
    if isinstance(said, dict):
        return f"{where}: expected a list with one gradient per edge, got {said['returned']}."
    if len(said) != len(right):
        return (f"{where}: your rule returned {len(said)} gradient(s) for a node with "
                f"{len(right)} edge(s) in next_functions: return one per edge, in that order.")
    k = next(k for k, (g, w) in enumerate(zip(said, right, strict=True)) if not _agree(g, w))
    g, w = said[k], right[k]
    if g is None:
        return (f"{where}: edge {k} leads to a node, yet your rule sent None along it: "
                "only an edge whose node is None needs nothing.")
    if isinstance(g, dict):
        return f"{where}: along edge {k} your rule sent a {g['type']}, not a tensor."
    if g.shape != w.shape:
        return (f"{where}: along edge {k} your rule sent a tensor of shape {tuple(g.shape)}; "
                f"its input has shape {tuple(w.shape)}. A gradient has the shape of its tensor.")
    diff = (g.double() - w).abs().flatten()
    i = int(diff.argmax())
    return (f"{where}: along edge {k}, entry {i}, yours {float(g.flatten()[i]):.4g}, "
            f"autograd's {float(w.flatten()[i]):.4g}. Work out the node's local rule again "
            "from what it saved.")


RULE = Method(
    name="a node's rule",
    make_inputs=make_inputs,
    observe=_observe,
    reference=_reference,
    explain=_explain,
    mistakes={f"{_where(op)}: {words}.": _slip(op, shows)
              for op, slips in _RULE_SLIPS.items() for words, shows in slips.items()},
    agree=_agree,
    passed=f"matches autograd's own rule on {len(PROBES)} new one-node graphs, "
           "every kind of node the check tries",
)
