"""Lesson 02, the chain rule: its exercises and its predictions.

The first three exercises ask for a gradient by hand, as a function:
`check_by_hand` calls it on new random inputs with autograd switched off and
compares it with autograd. The ``mistakes`` are the slips the lesson teaches
against (a lost factor, swapped inputs at a multiply, paths multiplied instead
of added); each is named only when the answer matches it on every input. The
third is an intermediate result used twice, whose two paths run through
different gates and meet at a product.

The last one is checked by method: the learner runs the whole backward pass
over a real torch graph, made new from a seed. The function walks the graph
from the output, applies each node's local rule to the tensors the node saved,
adds up what meets at a node, runs a node only once all of its gradient has
arrived, and collects the leaves' gradients. Backward passes, calls of a node
and ``bl.describe`` are refused while it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ._spec import ByHand, Method, Prediction, Report, compare, passed
from ._spec import failed as _fail
from ._walk import run_walk

# --------------------------------------------------------------------------
# l02-cubic: d/dx (x**3 - 4x**2 + 5)
# --------------------------------------------------------------------------


def _cubic_reference(x):
    x = x.requires_grad_()
    (x**3 - 4 * x**2 + 5).sum().backward()
    return x.grad


def _new_points(gen):
    n = int(torch.randint(1, 6, (1,), generator=gen))
    return (torch.randn(n, generator=gen) * 3,)


# --------------------------------------------------------------------------
# l02-chain: z = tanh(w x + b)
# --------------------------------------------------------------------------


def _tanh_reference(x, w, b):
    leaves = [t.requires_grad_() for t in (x, w, b)]
    return torch.autograd.grad(torch.tanh(w * x + b).sum(), leaves)


def _new_triples(gen):
    n = int(torch.randint(1, 5, (1,), generator=gen))
    return tuple(torch.randn(n, generator=gen) for _ in range(3))


def _tanh_slope(x, w, b):
    return 1 - torch.tanh(w * x + b) ** 2


def _inner_forgotten(x, w, b):
    outer = _tanh_slope(x, w, b)
    return outer, outer, outer


def _inputs_swapped(x, w, b):
    outer = _tanh_slope(x, w, b)
    return outer * x, outer * w, outer


def _square_forgotten(x, w, b):
    outer = 1 - torch.tanh(w * x + b)
    return outer * w, outer * x, outer


# --------------------------------------------------------------------------
# l02-shared: f = (u - z) sin u with u = x y, a result used twice
# --------------------------------------------------------------------------


def _shared_reference(x, y, z):
    leaves = [t.requires_grad_() for t in (x, y, z)]
    u = x * y
    return torch.autograd.grad(((u - z) * torch.sin(u)).sum(), leaves)


def _shared_slip(df_du, *, swap=False, z_sign=-1.0):
    """The answer built from a (possibly wrong) df/du, with the rest done right."""
    def answer(x, y, z):
        du = df_du(x * y, z)
        dx, dy = (du * x, du * y) if swap else (du * y, du * x)
        return dx, dy, z_sign * torch.sin(x * y)
    return answer


def _both_paths(u, z):
    return torch.sin(u) + (u - z) * torch.cos(u)


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


# --------------------------------------------------------------------------
# l02-backward: a backward pass, built by walking a real graph
# --------------------------------------------------------------------------

# The operations the graphs of this exercise are made of, by node name.
OPS = ("MulBackward0", "AddBackward0", "SubBackward0", "SinBackward0", "ExpBackward0",
       "PowBackward0")
# The graphs that try one node at a time, in this order: each after x * c (a product
# with a constant) relies only on rules tried before it.
PROBES = ("x * y", "x * c") + OPS[1:]


def _local(node: Any, g: torch.Tensor) -> list[torch.Tensor | None]:
    """The gradients ``node`` sends to its inputs for the gradient ``g`` at its output
    (None for an input that needs none): the check's own walk, read from saved tensors."""
    name = node.name()
    needs = [fn is not None for fn, _ in node.next_functions]
    if name == "AddBackward0":
        sent = [g, g]
    elif name == "SubBackward0":
        sent = [g, -g]
    elif name == "MulBackward0":
        sent = [g * node._saved_other if needs[0] else None,
                g * node._saved_self if needs[1] else None]
    elif name == "SinBackward0":
        sent = [g * torch.cos(node._saved_self)]
    elif name == "ExpBackward0":
        sent = [g * node._saved_result]
    elif name == "PowBackward0":
        n = node._saved_exponent
        sent = [g * n * node._saved_self ** (n - 1)]
    else:  # the check builds its graphs from OPS only
        raise ValueError(f"no rule for {name}")
    return [s if need else None for s, need in zip(sent, needs, strict=True)]


def _users(out: torch.Tensor) -> dict[Any, int]:
    """Every node behind ``out`` -> the number of edges that come into it."""
    users: dict[Any, int] = {out.grad_fn: 0}
    todo, seen = [out.grad_fn], set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for fn, _ in node.next_functions:
            if fn is not None:
                users[fn] = users.get(fn, 0) + 1
                todo.append(fn)
    return users


@torch.no_grad()
def _walk(out: torch.Tensor, leaves: list[torch.Tensor], order: str = "ready",
          add: bool = True) -> list[torch.Tensor]:
    """The gradients of ``out`` (with ones arriving at it) for each leaf, by walking.

    ``order="ready"`` is the right walk: a node runs once every edge into it has
    delivered. ``"stack"`` and ``"queue"`` are the slip of running a node as soon as the
    walk first meets it, with whatever has arrived by then (depth first, breadth first).
    ``"ready-queue"`` is the right order taken first in, first out. ``add=False`` is the
    slip of keeping only the last part that arrives at a node (``=`` for ``+=``).
    """
    users = _users(out)
    grads = {out.grad_fn: torch.ones_like(out)}
    done: set[Any] = set()
    todo = [out.grad_fn]
    found: dict[int, torch.Tensor] = {}
    while todo:
        node = todo.pop(0) if order in ("queue", "ready-queue") else todo.pop()
        if node in done:
            continue
        done.add(node)
        g = grads[node]
        if hasattr(node, "variable"):
            found[id(node.variable)] = g
            continue
        for (fn, _), sent in zip(node.next_functions, _local(node, g), strict=True):
            if fn is None:
                continue
            grads[fn] = grads[fn] + sent if add and fn in grads else sent
            users[fn] -= 1
            if not order.startswith("ready") or users[fn] == 0:
                todo.append(fn)
    return [found[id(leaf)] for leaf in leaves]


@torch.no_grad()
def _edge_grads(out: torch.Tensor, leaf: torch.Tensor) -> list[torch.Tensor]:
    """What the right walk sends along each edge that ends at ``leaf``'s node."""
    users = _users(out)
    grads = {out.grad_fn: torch.ones_like(out)}
    ready, sent_to_leaf = [out.grad_fn], []
    while ready:
        node = ready.pop()
        if hasattr(node, "variable"):
            continue
        for (fn, _), sent in zip(node.next_functions, _local(node, grads[node]), strict=True):
            if fn is None:
                continue
            if hasattr(fn, "variable") and fn.variable is leaf:
                sent_to_leaf.append(sent)
            grads[fn] = grads[fn] + sent if fn in grads else sent
            users[fn] -= 1
            if users[fn] == 0:
                ready.append(fn)
    return sent_to_leaf


def _pick(gen: torch.Generator, items: Any) -> Any:
    return items[int(torch.randint(0, len(items), (1,), generator=gen))]


def _unary(gen: torch.Generator, t: torch.Tensor) -> torch.Tensor:
    op = _pick(gen, ("sin", "exp", "pow"))
    if op == "sin":
        return torch.sin(t)
    if op == "exp":
        return torch.exp(t)
    return t ** _pick(gen, (2, 3))


def _backward_graph(gen: torch.Generator) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A new graph of OPS: (its output, its leaves), in float64.

    Every graph has a constant factor (an input with no node), a leaf used twice, and
    an intermediate result used in both branches of the final sum, so the gradient
    reaches some nodes along several edges, and a walk that runs a node as soon as it
    first meets it runs that result too early (depth first or breadth first).
    """
    n = int(torch.randint(2, 5, (1,), generator=gen))
    size = int(torch.randint(1, 4, (1,), generator=gen))
    leaves = [(torch.rand(size, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()
              for _ in range(n)]
    constant = torch.rand(size, generator=gen, dtype=torch.float64) + 0.5
    value = leaves[0] * constant
    for leaf in leaves[1:]:
        term = _unary(gen, leaf)
        op = _pick(gen, ("add", "sub", "mul"))
        value = value + term if op == "add" else value - term if op == "sub" else value * term
    shared = value  # used three times below, in both branches of the final sum
    again = _pick(gen, leaves)  # and a leaf used a second time
    return shared * _unary(gen, shared) + _unary(gen, shared) * again, leaves


def _probe(gen: torch.Generator, op: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A graph with one node of ``op`` under a constant factor (so the gradient that
    arrives at the node is not all ones)."""
    size = int(torch.randint(1, 4, (1,), generator=gen))
    x, y = ((torch.rand(size, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()
            for _ in range(2))
    if op == "x * y":
        return x * y, [x, y]
    c = torch.rand(size, generator=gen, dtype=torch.float64) + 0.5
    if op == "x * c":
        return x * c, [x]
    made = {"AddBackward0": lambda: x + y, "SubBackward0": lambda: x - y,
            "SinBackward0": lambda: torch.sin(x), "ExpBackward0": lambda: torch.exp(x),
            "PowBackward0": lambda: x ** _pick(gen, (2, 3))}[op]()
    return made * c, [x, y] if op in ("AddBackward0", "SubBackward0") else [x]


def _probe_slips(op: str, out: torch.Tensor, leaves: list[torch.Tensor]
                 ) -> dict[str, list[torch.Tensor]]:
    """The typical wrong answers for a probe graph of ``op``, by name."""
    x = leaves[0].detach()
    slips: dict[str, list[torch.Tensor]] = {}
    if op == "x * c":
        return slips
    if op == "x * y":
        y = leaves[1].detach()
        slips["each factor of a product gets the incoming gradient times the *other* factor "
              "(x gets y, y gets x), not its own"] = [x, y]
        return slips
    c = out.grad_fn._saved_other
    inner = out.grad_fn.next_functions[0][0]
    if op == "SubBackward0":
        slips["the second input of a subtraction gets minus the incoming gradient"] = [c, c]
        return slips
    if op == "AddBackward0":
        return slips
    if op == "SinBackward0":
        local = torch.cos(x)
    elif op == "ExpBackward0":
        local = torch.exp(x)
    else:
        local = inner._saved_exponent * x ** (inner._saved_exponent - 1)
    slips["the incoming gradient is missing: a node multiplies its local derivative by the "
          "gradient that arrives at it (here the constant factor above it)"] = [local]
    if op == "SinBackward0":
        slips["the sign is off: the derivative of sin x is +cos x"] = [-c * torch.cos(x)]
        slips["that is sin of the saved input, the forward again: the derivative of sin x "
              "is cos x"] = [c * torch.sin(x)]
    elif op == "ExpBackward0":
        slips["ExpBackward0 saved its output, exp(x) (_saved_result), not its input: exp of it "
              "applies exp twice. The saved output is already the derivative"] = [
                  c * torch.exp(torch.exp(x))]
    else:
        n = inner._saved_exponent
        rule = f"d/dx x**{n} is {n} x" + ("" if n == 2 else f"**{n - 1}")
        slips[f"the power rule lowers the exponent: {rule}, not {n} x**{n}"] = [c * n * x ** n]
        slips[f"the factor {n} of the power rule is missing: {rule}"] = [c * x ** (n - 1)]
    return slips


def _as_grads(name: str, got: Any, leaves: list[torch.Tensor], where: str) -> Report | None:
    """None when ``got`` is one tensor per leaf with the leaf's shape, else the failure."""
    if not isinstance(got, (list, tuple)):
        return _fail(name, f"expected a list with one gradient per leaf, got "
                           f"{type(got).__name__}.")
    if len(got) != len(leaves):
        return _fail(name, f"{where}: it returned {len(got)} gradient(s) for {len(leaves)} "
                           "leaves: return one per leaf, in the order of `leaves`.")
    for k, (g, leaf) in enumerate(zip(got, leaves, strict=True)):
        if g is None:
            return _fail(name, f"{where}: the gradient of leaf {k} is None, yet every leaf "
                               "here reaches the output. Did a rule send None to an input "
                               "that has a node, or did the walk miss that leaf's "
                               "AccumulateGrad node? (Match a node to its leaf with "
                               "`node.variable is leaf`.)")
        if not isinstance(g, torch.Tensor):
            return _fail(name, f"{where}: the gradient of leaf {k} is a "
                               f"{type(g).__name__}, not a tensor.")
        if g.shape != leaf.shape:
            return _fail(name, f"{where}: the gradient of leaf {k} has shape "
                               f"{tuple(g.shape)}, its leaf {tuple(leaf.shape)}: a gradient has "
                               "the shape of its tensor. (A tensor from the notebook, not from "
                               "the graph the function was given?)")
    return None


def _close(got: Any, want: torch.Tensor) -> bool:
    return compare("", got, want, rtol=1e-10, atol=1e-12).ok


def _run_walk(name: str, answer: Any, out: torch.Tensor, leaves: list[torch.Tensor]
              ) -> tuple[Any, Report | None]:
    """The learner's answer on one graph, with backward passes and node calls refused."""
    reason = "this exercise asks you to run backward yourself, node by node"
    called: list[str] = []
    with torch.no_grad(), _node_calls(called):
        got, failure = run_walk(name, answer, out, leaves, reason=reason)
    if called:
        return None, _fail(name, f"your code called a node itself ({called[0]}(...)), which "
                                 "runs backward's own formula for you. Read what the node "
                                 "saved (_saved_self, _saved_other, _saved_result, ...) and "
                                 "apply its local rule yourself.")
    if failure is not None and "NoneType" in failure[0].message:
        return None, _fail(name, f"{failure[0].message}. An input that needs no gradient (a "
                                 "constant) has no node, (None, 0) in next_functions, and a "
                                 "product then does not save the factor only that input's "
                                 "gradient would need (its _saved_ attribute is None): skip "
                                 "the inputs whose node is None.")
    if failure is not None and "has no attribute '_saved_" in failure[0].message:
        return None, _fail(name, f"{failure[0].message}. Each kind of node saves its own "
                                 "tensors: bl.describe lists them (`saved: ...`), and "
                                 "node.name() tells you which kind you hold.")
    return got, failure


def _check_backward(answer: Any, seed: int) -> Report:
    name = "backward by walking"
    # One node at a time first, so that a wrong local rule is named by its node.
    returned: list[Any] = []  # kept alive, so that `is` compares them (ids are reused)
    for k, op in enumerate(PROBES):
        out, leaves = _probe(torch.Generator().manual_seed(seed * 31 + k), op)
        got, failure = _run_walk(name, answer, out, leaves)
        if failure is not None:
            return failure
        if isinstance(got, (list, tuple)) and any(g is r for g in got for r in returned):
            return _fail(name, "it returns the same tensors whatever graph it is given (a "
                               ".grad filled by a backward() run outside the function?), so "
                               "it looks hard-coded: compute the gradients from the graph of "
                               "the out it gets.", "hard-coded")
        if isinstance(got, (list, tuple)):
            returned.extend(g for g in got if isinstance(g, torch.Tensor))
        where = f"on a graph with one {op} node (times a constant)"
        if op in ("x * y", "x * c"):
            where = (f"on the graph {op} (one MulBackward0 node"
                     + (", c a constant with no node)" if op == "x * c" else ")"))
        bad = _as_grads(name, got, leaves, where)
        if bad is not None:
            return bad
        want = _walk(out, leaves)
        if all(_close(g, w) for g, w in zip(got, want, strict=True)):
            continue
        for slip, wrong in _probe_slips(op, out, leaves).items():
            if all(_close(g, w) for g, w in zip(got, wrong, strict=True)):
                return _fail(name, f"{where}: {slip}.")
        node = "MulBackward0" if op.startswith("x *") else op
        return _fail(name, f"{where}: the gradients are wrong ({_differ(got, want)}). Work "
                           f"out the local rule of {node} again from what it saved.")
    # Then whole graphs, where gradients meet.
    results = []
    for k in range(3):
        out, leaves = _backward_graph(torch.Generator().manual_seed(seed + k))
        got, failure = _run_walk(name, answer, out, leaves)
        if failure is not None:
            return failure
        where = f"on a new graph with {len(leaves)} leaves"
        bad = _as_grads(name, got, leaves, where)
        if bad is not None:
            return bad
        results.append((out, leaves, got))
    for order in ("stack", "queue"):
        if all(not _all_close(got, _walk(out, leaves))
               and _all_close(got, _walk(out, leaves, order)) for out, leaves, got in results):
            return _fail(name, "every node you ran alone is right, but on the new graphs some "
                               "node passed its gradient on before all of it had arrived: the "
                               "result used several times ran before all of its users had "
                               "sent their parts. A node may run only once every edge into it has "
                               "delivered: count the edges into each node first, and run a "
                               "node when its count drops to 0.")
    for order in ("ready", "ready-queue"):
        if all(not _all_close(got, _walk(out, leaves))
               and _all_close(got, _walk(out, leaves, order, add=False))
               for out, leaves, got in results):
            return _fail(name, "every node you ran alone is right, but where the gradient "
                               "reaches a node along several edges, your walk kept only the "
                               "last part that arrived: the parts add up. Keep a running sum "
                               "per node (+=), do not overwrite it (=).")
    if all(_one_part_only(out, leaves, got) for out, leaves, got in results):
        return _fail(name, "every node you ran alone is right, but on each new graph a leaf "
                           "that the gradient reaches along two edges got only one edge's "
                           "part. What arrives at a node along several edges adds up: keep "
                           "a running sum per node (+=), do not overwrite it (=).")
    for out, leaves, got in results:
        want = _walk(out, leaves)
        if _all_close(got, want):
            continue
        wrong = [k for k, (g, w) in enumerate(zip(got, want, strict=True)) if not _close(g, w)]
        return _fail(name, f"on a new graph with {len(leaves)} leaves: every node you ran alone "
                           f"is right, but the leaves {wrong} (counted from 0) get wrong "
                           f"gradients ({_differ(got, want)}). Where gradients meet, they add "
                           "up, and a node runs only once all of its gradient has arrived.")
    return passed(name, f"matches autograd on {len(PROBES)} one-node graphs and on 3 new "
                        "graphs where gradients meet")


def _one_part_only(out: torch.Tensor, leaves: list[torch.Tensor], got: list[Any]) -> bool:
    """True when exactly the leaves reached along several edges are wrong, each holding
    the part of one of those edges: the slip of ``=`` for ``+=`` at a leaf."""
    want = _walk(out, leaves)
    wrong = [k for k, (g, w) in enumerate(zip(got, want, strict=True)) if not _close(g, w)]
    parts = {k: _edge_grads(out, leaves[k]) for k in range(len(leaves))}
    shared = [k for k in range(len(leaves)) if len(parts[k]) > 1]
    return bool(wrong) and wrong == shared and all(
        any(_close(got[k], part) for part in parts[k]) for k in wrong)


def _all_close(got: list[Any], want: list[torch.Tensor]) -> bool:
    return all(_close(g, w) for g, w in zip(got, want, strict=True))


def _differ(got: list[Any], want: list[torch.Tensor]) -> str:
    """Where the first wrong gradient is furthest from autograd's, in a few words."""
    k = next(k for k, (g, w) in enumerate(zip(got, want, strict=True)) if not _close(g, w))
    diff = (got[k].double() - want[k]).abs().flatten()
    i = int(diff.argmax())
    return (f"leaf {k}, entry {i}: yours {float(got[k].flatten()[i]):.4g}, autograd's "
            f"{float(want[k].flatten()[i]):.4g}")


EXERCISES = {
    "l02-cubic": ByHand(
        name="d/dx (x**3 - 4x**2 + 5)",
        reference=_cubic_reference,
        make_inputs=_new_points,
        mistakes={
            "the derivative of 4x**2 is 8x, not 4x": lambda x: 3 * x**2 - 4 * x,
            "the sign of the 4x**2 term is lost: its derivative is -8x, not +8x":
                lambda x: 3 * x**2 + 8 * x,
            "the derivative of x**3 is 3x**2, not x**2": lambda x: x**2 - 8 * x,
        },
    ),
    "l02-chain": ByHand(
        name="tanh(wx + b)",
        reference=_tanh_reference,
        make_inputs=_new_triples,
        outputs=["dz/dx", "dz/dw", "dz/db"],
        mistakes={
            "the inner derivative of w*x + b (w for x, x for w) is missing": _inner_forgotten,
            "dz/dx and dz/dw are swapped: a multiply sends each input the *other* factor, so "
            "dz/dx carries w and dz/dw carries x": _inputs_swapped,
            "tanh'(u) is 1 - tanh(u)**2: the square is missing": _square_forgotten,
        },
    ),
    "l02-shared": ByHand(
        name="f = (u - z) sin u, u = x*y",
        reference=_shared_reference,
        make_inputs=_new_triples,
        outputs=["df/dx", "df/dy", "df/dz"],
        mistakes={
            "only the sine's path counted for u: the subtraction u - z sends sin u back to u "
            "as well, and the two contributions add up":
                _shared_slip(lambda u, z: (u - z) * torch.cos(u)),
            "only the subtraction's path counted for u: the sine sends (u - z) cos u back to u "
            "as well, and the two contributions add up":
                _shared_slip(lambda u, z: torch.sin(u)),
            "the two paths to u are multiplied; the contributions of paths add up: "
            "df/du = sin u + (u - z) cos u":
                _shared_slip(lambda u, z: torch.sin(u) * (u - z) * torch.cos(u)),
            "the product rule is missed: d/du of (u - z) sin u is not 1 * cos u (the product "
            "of the factors' derivatives); each factor's path keeps the other factor":
                _shared_slip(lambda u, z: torch.cos(u)),
            "the sign of df/dz is lost: z enters with a minus, so df/dz = -sin u":
                _shared_slip(_both_paths, z_sign=1.0),
            "df/dx and df/dy are swapped: u = x*y sends x the *other* factor, y, and y gets x":
                _shared_slip(_both_paths, swap=True),
            "the inner derivative of u = x*y is missing: df/dx is df/du times y, df/dy is "
            "df/du times x": lambda x, y, z: (_both_paths(x * y, z), _both_paths(x * y, z),
                                               -torch.sin(x * y)),
        },
    ),
    "l02-backward": Method(check=_check_backward),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _exact_answer():
    x = torch.tensor(1.0, requires_grad=True)
    w = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    ((w * x + b) ** 2).backward()
    dz_dy = 2 * (w * x + b).item()
    by_hand = (dz_dy * w.item(), dz_dy * x.item(), dz_dy * 1.0)
    same = all(g.item() == h for g, h in zip((x.grad, w.grad, b.grad), by_hand, strict=True))
    return "exact" if same else "close"


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a + a).backward()
    return a.grad.item()


PREDICTIONS = {
    "l02-predict-match": Prediction(
        question="autograd's gradients vs the hand results",
        answer=_exact_answer,
        hint="ask what autograd computes with at each node: values measured by nudging the "
             "inputs, or the same local derivative formulas you used?",
        why="autograd nudges nothing: it multiplies the same local derivatives you did (2y, w, "
            "x, 1), and with these small whole numbers every product is exact in float32",
        choices=("exact", "close"),
    ),
    "l02-predict-paths": Prediction(
        question="a.grad for c = a + a",
        answer=_paths_answer,
        hint="count the arrows from c back to a, and ask what backward does when more than "
             "one arrow ends at the same leaf.",
        why="a reaches c along two paths, each with local derivative 1, and the contributions "
            "of the paths add up inside one backward pass: 1 + 1 = {answer}",
    ),
}
