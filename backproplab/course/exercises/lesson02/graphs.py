"""The one-node graphs of ``l02-rule`` and the check's own rule for each node.

A graph is plain data (`make_inputs`: which operation, its operands, the gradient that
arrives at its node) and is built anew wherever it is needed (`build`): in the learner's
process, where the learner's rule is called on its node, and in the grader, where `rule`
(the reference) and the slips read the same numbers.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OPS", "PROBES", "build", "make_inputs", "rule"]

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
