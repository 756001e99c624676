"""Lesson 21, inside torch's engine: its exercises and its predictions, and the check of
Exercise 1.

Exercise 1 (``l21-executor``) is checked by method, in this module. The learner's
``run_backward(roots, grads, inputs)`` runs backward over torch's own graph by
calling each node itself (``node(*grads)``, allowed here), and returns the nodes
in the order it ran them. The check builds graphs the lesson never showed, each
twice from one seed: on one copy torch runs ``torch.autograd.backward`` while
node pre-hooks record the order its engine runs the nodes in; on the other the
learner's function runs, with every backward pass of the engine counted and
refused. Order and gradients must agree. The graphs each put one part of the
engine's bookkeeping to the test (branches whose creation order is not their edge
order, a shared result, several outputs, leaves tied in the ready queue while
other nodes wait, pruning to the inputs asked for, a node with an empty input
slot, a broadcast, an output that is a later piece of a split), then two random
graphs mix them. Slips are named when they hold on every graph: a
first-in-first-out or a last-in-first-out queue instead of the priority queue,
ties broken by arrival, no pruning, a node run before all of its gradient
arrived, ``=`` for ``+=`` in the input buffer, a root's gradient given to slot 0
of its node instead of slot ``root.output_nr``.

Exercise 2 (``l21-layers``) is checked by method too, in ``layers``. The learner's
``watch_layers(model, report)`` arranges hooks so that ``report(name, grads)``
is called once per backward pass for every module with parameters of its own,
as soon as the gradients that pass computes for them exist. The check's own
tensor hooks (registered first) log each parameter's gradient as the engine
produces it; the learner's reports must fall right after a module's last one,
once per pass, with this pass's gradients (None for a parameter the pass does
not reach), and stop once the returned handles are removed.

Both are judged in the grader from what the answer did, recorded where it runs (the
order it ran the nodes in and the leaves' gradients; each pass's gradients and reports
in the order they came); the graphs and the network are made again there from the seed.
The graphs, torch's order on them and the check's own executor, which names the slips,
are in ``engine``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .._spec import (
    Method,
    Prediction,
    call_answer,
    close,
    count_autograd,
    failure,
    is_failure,
    plain,
)
from .engine import ACC, BORROWED, GRAPHS, Graph, build, execute, graph_nodes, torch_order
from .layers import LAYERS_EXERCISE

# --------------------------------------------------------------------------- Exercise 1

EXECUTOR = "run_backward"
QUEUE_SLIPS = {
    "fifo": "your ready nodes leave in the order they became ready (first in, first out). "
            "torch's ready queue is a priority queue: it always takes the ready node with the "
            "largest sequence number (node._sequence_nr()), the one made last in the forward "
            "pass",
    "lifo": "your ready nodes leave last in, first out (a stack: depth first). torch's ready "
            "queue is a priority queue: it always takes the ready node with the largest "
            "sequence number (node._sequence_nr()), the one made last in the forward pass",
    "oldest": "your queue takes the smallest sequence number first. torch takes the largest: "
              "the node made last in the forward pass runs first",
    "arrival": "every node is right but for tied AccumulateGrad nodes, which you hand out in "
               "the order they arrived. They all have the same sequence number, 2**64 - 1, "
               "and torch's ready queue is a binary heap that promises nothing about ties: "
               "they leave in the order the heap's sifting gives, which depends on what else "
               "waits in it. Compare by the key alone, in a heap (heapq, as in section 3), "
               "never by a counter",
}


class _Run(NamedTuple):
    """One graph as the grader sees it: a copy of it (built again from its seed), the
    sequence numbers the learner's copy had, both orders (as positions in `graph_nodes`)
    and both sets of leaf gradients."""

    what: str
    maker: Callable[[torch.Generator], Graph]
    seed: int
    copy: Graph
    numbers: list[int]
    want: list[int]
    got: list[int]
    want_grads: list[Any]
    got_grads: list[Any]


def _positions(nodes: Any, graph: Graph, what: str) -> list[int] | dict:
    """Where each node the learner returned sits in `graph_nodes`, or a failure."""
    index = {node: i for i, node in enumerate(graph_nodes(graph.roots))}
    if not isinstance(nodes, (list, tuple)):
        return failure("fail", f"on a graph with {what}: it returned {type(nodes).__name__}; "
                               "return a list of the nodes in the order you ran them.")
    for item in nodes:
        if isinstance(item, str):
            return failure("fail", f"on a graph with {what}: the list holds names such as "
                                   f"{item!r}; return the nodes themselves, the objects you "
                                   "called.")
        if item not in index:
            return failure("fail", f"on a graph with {what}: the list holds "
                                   f"{type(item).__name__}, which is not a node of the graph "
                                   "your function was given (return the nodes you called, "
                                   "from next_functions).")
    return [index[item] for item in nodes]


def _raised(err: Exception) -> str:
    text = f"raised {type(err).__name__}: {err}"
    if "arguments, got" in str(err):
        return (f"{text}. A node takes one gradient per output of its forward operation "
                "(len(node._input_metadata) of them), None in a slot nothing arrived at: keep "
                "one buffer slot per input, filled by the input_nr of the edge that delivers.")
    if "broadcast shape" in str(err) or "doesn't match" in str(err):
        return (f"{text}. A node sends a broadcast input a gradient of the broadcast shape; the "
                "engine sums it down to the shape the receiving input had "
                "(fn._input_metadata[input_nr].shape) before it adds it to the buffer.")
    if "'<' not supported" in str(err):
        return (f"{text}. heapq compared two nodes: with equal keys (AccumulateGrad nodes all "
                "share one) a tuple goes on to its next item. Put a small object on the heap "
                "that compares by the key alone (__lt__).")
    return text


def executor_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The seed the ten graphs are built from (graph k from seed * 131 + k): where the
    answer runs, and again in the grader."""
    return {"seed": gen.initial_seed()}


def _seeds(inputs: dict[str, Any]) -> list[int]:
    return [inputs["seed"] * 131 + k for k in range(len(GRAPHS))]


def _observe_executor(answer: Any, inputs: dict[str, Any]) -> list[dict] | dict:
    """On each graph, the order the learner's executor ran the nodes in (positions in
    `graph_nodes`), the nodes' sequence numbers and the leaves' .grad; or the failure of
    the first run that could not be read (it raised, ran torch's engine or the check's own
    executor, or returned something other than the graph's nodes)."""
    seen = []
    for (what, maker), graph_seed in zip(GRAPHS, _seeds(inputs), strict=True):
        mine = build(maker, graph_seed)
        BORROWED.update(watching=True, called=False)
        try:
            with torch.no_grad(), count_autograd() as engine:
                got, failed = call_answer(answer, mine.roots, mine.grads, mine.inputs,
                                          raised=lambda err, what=what: f"on a graph with "
                                                                        f"{what}: {_raised(err)}")
        finally:
            BORROWED["watching"] = False
        if BORROWED["called"]:
            return failure("fail", "your code called the check's own executor (execute in the "
                                   "lesson's exercise module). Write your own: count, prune, "
                                   "buffer and queue yourself.")
        if engine.reverse:
            return failure("autograd", f"your code ran a backward pass of torch's engine "
                                       f"({engine.calls[0]}). This exercise asks you to be the "
                                       "engine: call each node yourself, node(*grads).")
        order = failed if failed is not None else _positions(got, mine, what)
        if is_failure(order):
            return order
        seen.append({"order": order, "grads": [plain(leaf.grad) for leaf in mine.leaves],
                     "numbers": [n._sequence_nr() for n in graph_nodes(mine.roots)]})
    return seen


def _reference(inputs: dict[str, Any]) -> list[dict]:
    """torch's order (its engine watched by node pre-hooks) and gradients, graph by graph."""
    found = []
    for (_, maker), graph_seed in zip(GRAPHS, _seeds(inputs), strict=True):
        theirs = build(maker, graph_seed)
        index = {node: i for i, node in enumerate(graph_nodes(theirs.roots))}
        order = [index[node] for node in torch_order(theirs)]
        found.append({"order": order, "grads": [leaf.grad for leaf in theirs.leaves]})
    return found


def _close(got: Any, want: Any) -> bool:
    """Both None (no gradient), or equal to float64 round-off."""
    return (got is None and want is None) or close(got, want)


def _agrees(got: list[dict], want: list[dict]) -> bool:
    return len(got) == len(want) and all(
        g["order"] == w["order"] and len(g["grads"]) == len(w["grads"])
        and all(_close(a, b) for a, b in zip(g["grads"], w["grads"], strict=True))
        for g, w in zip(got, want, strict=True))


def _runs(inputs: dict[str, Any], got: list[dict], want: list[dict]) -> list[_Run]:
    return [_Run(what, maker, graph_seed, build(maker, graph_seed), g["numbers"], w["order"],
                 g["order"], w["grads"], g["grads"])
            for (what, maker), graph_seed, g, w in zip(GRAPHS, _seeds(inputs), got, want,
                                                        strict=True)]


def _names(run: _Run, positions: list[int]) -> str:
    nodes = graph_nodes(run.copy.roots)
    return ", ".join(nodes[i].name().replace("torch::autograd::", "") for i in positions)


def _name(run: _Run, position: int) -> str:
    node = graph_nodes(run.copy.roots)[position]
    return node.name().replace("torch::autograd::", "")


def _structure(run: _Run) -> str | None:
    """What is wrong with the set of nodes run, or with when each ran, or None."""
    nodes = graph_nodes(run.copy.roots)
    where = f"on a graph with {run.what}"
    seen: set[int] = set()
    for i in run.got:
        if i in seen:
            return (f"{where}: you ran {_name(run, i)} twice. A node runs once, with everything "
                    "that arrived for it added up: count the edges into each node first, and "
                    "push a node only when its count drops to 0.")
        seen.add(i)
    for step, i in enumerate(run.got):
        users = [j for j, node in enumerate(nodes)
                 if j in run.want and any(fn is nodes[i] for fn, _ in node.next_functions)]
        late = [j for j in users if j not in run.got[:step]]
        if late:
            return (f"{where}: you ran {_name(run, i)} before {_name(run, late[0])}, which "
                    f"sends it part of its gradient: a node ran before all of its gradient had "
                    "arrived. Count the edges into each node first and push a node only when "
                    "its count drops to 0.")
    extra = [i for i in run.got if i not in run.want]
    if extra:
        return (f"{where}: you ran {_name(run, extra[0])}, from which no path leads to the "
                "inputs asked for: no pruning. torch runs only the nodes that lead to an "
                "input's AccumulateGrad node, and fills only the inputs' .grad.")
    missing = [i for i in run.want if i not in run.got]
    if missing and all(nodes[i]._sequence_nr() == ACC for i in missing):
        return (f"{where}: you never ran {_name(run, missing[0])}. It is the node that adds "
                "the gradient into the leaf's .grad: run it like any other node, "
                "node(grad), when its count drops to 0.")
    if missing:
        return (f"{where}: you never ran {_name(run, missing[0])}, which leads to an input "
                "asked for. Every node from which a path leads to an input runs.")
    return None


def _slip_order(runs: list[_Run], **slip: Any) -> bool:
    """Whether the learner's order is the slip's on every graph (and wrong on one)."""
    if all(run.got == run.want for run in runs):
        return False
    for run in runs:
        copy = build(run.maker, run.seed)
        index = {node: i for i, node in enumerate(graph_nodes(copy.roots))}
        if [index[node] for node in execute(copy, **slip)] != run.got:
            return False
    return True


def _order_message(runs: list[_Run]) -> str:
    for queue, message in QUEUE_SLIPS.items():
        if _slip_order(runs, queue=queue):
            return message + "."
    run = next(r for r in runs if r.got != r.want)
    step = next(k for k, (a, b) in enumerate(zip(run.got, run.want, strict=True)) if a != b)

    def told(i: int) -> str:
        seq = run.numbers[i]
        return f"{_name(run, i)} (sequence number {'2**64 - 1' if seq == ACC else seq})"
    return (f"on a graph with {run.what}: torch ran {_names(run, run.want)}; you ran "
            f"{_names(run, run.got)}. At step {step} (from 0) torch ran {told(run.want[step])}, "
            f"you {told(run.got[step])}: of the ready nodes, torch runs the one with the "
            "largest sequence number, and ties go as the binary heap gives them.")


def _grads_message(runs: list[_Run]) -> str | None:
    wrong = next(((run, k) for run in runs for k, (want, got) in enumerate(zip(
        run.want_grads, run.got_grads, strict=True)) if not _close(got, want)), None)
    if wrong is None:
        return None
    run, k = wrong
    want, got = run.want_grads[k], run.got_grads[k]
    where = f"on a graph with {run.what}, leaf {k} (counted from 0)"
    if got is None or want is None:
        return (f"{where}: its .grad is {'None' if got is None else 'filled'}, torch's "
                f"{'None' if want is None else 'filled'}. Only the inputs asked for get a .grad, "
                "from their AccumulateGrad node.")
    if all(_add_slip(r) for r in runs):
        return (f"{where}: where several gradients arrive in one input slot you kept the last "
                "one: the input buffer adds them up (+=, not =).")
    if all(_same_grads(r, _slot_zero(r)) for r in runs):
        return (f"{where}: you gave a root's gradient to slot 0 of root.grad_fn. A root can "
                "be a later output of its node (a piece of a split is output k of the split): "
                "its gradient goes into slot root.output_nr.")
    if all(_same_grads(r, _seeded_with_ones(r)) for r in runs):
        return (f"{where}: your gradients are those of outputs seeded with ones. Backward "
                "starts from the gradients it is given: grads[k] arrives at roots[k].")
    return (f"{where}: your .grad differs from torch's (largest difference "
            f"{float((got - want).abs().max()):.3g}), though the order is right. What arrives "
            "in one input slot adds up, and a node is called with its whole buffer.")


def _same_grads(run: _Run, copy: Graph) -> bool:
    """Whether the learner's leaves hold the gradients of ``copy``'s leaves."""
    return all(_close(got, leaf.grad) for leaf, got in zip(copy.leaves, run.got_grads,
                                                            strict=True))


def _add_slip(run: _Run) -> bool:
    copy = build(run.maker, run.seed)
    execute(copy, add=False)
    return _same_grads(run, copy)


def _slot_zero(run: _Run) -> Graph:
    copy = build(run.maker, run.seed)
    execute(copy, output_nr=False)
    return copy


def _seeded_with_ones(run: _Run) -> Graph:
    copy = build(run.maker, run.seed)
    ones = copy._replace(grads=[torch.ones_like(r) for r in copy.roots])
    execute(ones)
    return copy


def _explain(inputs: dict[str, Any], got: list[dict], want: list[dict]) -> str:
    runs = _runs(inputs, got, want)
    for run in runs:
        problem = _structure(run)
        if problem is not None:
            return problem
    if any(run.got != run.want for run in runs):
        return _order_message(runs)
    return _grads_message(runs) or "your run differs from torch's."


EXECUTOR_EXERCISE = Method(
    name=EXECUTOR,
    make_inputs=executor_inputs,
    observe=_observe_executor,
    reference=_reference,
    explain=_explain,
    trials=1,  # ten graphs in one trial: a queue slip is named when every graph shows it
    agree=_agrees,
    passed=f"torch's order and gradients on {len(GRAPHS)} new graphs (branches, shared "
           "results, several outputs, ties, pruning, an empty slot, a broadcast, an output "
           "that is a later piece of a split, and two at random)",
)


EXERCISES = {
    # VOCABULARY: the executor keeps its ready nodes in a binary heap (heapq, an import)
    # and puts a small class of its own on it, compared by the key alone (__lt__): both
    # are what reproducing torch's order, ties included, needs. A Method, not ByHand.
    "l21-executor": EXECUTOR_EXERCISE,
    "l21-layers": LAYERS_EXERCISE,
}


# --------------------------------------------------------------------------- predictions

def _first_answer() -> str:
    a = torch.tensor(0.5, requires_grad=True)
    b = torch.tensor(1.5, requires_grad=True)
    e = torch.exp(b)  # made first
    s = torch.sin(a)  # made second
    ran: list[str] = []
    for node in (e.grad_fn, s.grad_fn):
        node.register_prehook(lambda grads, node=node: ran.append(node.name()))
    (e + s).backward()
    return ran[0]


def _ties_answer() -> list[int]:
    leaves = [torch.tensor(float(k), requires_grad=True) for k in range(4)]
    out = torch.stack(leaves).sum()
    ran: list[int] = []
    for k, (node, _) in enumerate(out.grad_fn.next_functions[0][0].next_functions):
        node.register_prehook(lambda grads, k=k: ran.append(k))
    out.backward()
    return ran


PREDICTIONS = {
    "l21-predict-first": Prediction(
        question="the node that runs first of ExpBackward0 and SinBackward0",
        answer=_first_answer,
        hint="the engine does not look at the order of next_functions. Ask what it compares "
             "when two nodes are ready at once, and which of the two nodes was made later.",
        why="both are ready once AddBackward0 has run, and the engine's ready queue takes the "
            "node with the largest sequence number: sin(a) was made after exp(b), so {answer} "
            "runs first, though it sits on the second edge",
        choices=("ExpBackward0", "SinBackward0"),
    ),
    "l21-predict-ties": Prediction(
        question="the order in which the four leaves' AccumulateGrad nodes run (by position)",
        answer=_ties_answer,
        hint="the sequence number cannot order them, so the queue's own structure does: the "
             "ready queue is a binary heap (C++'s std::priority_queue). Push the four in edge "
             "order with equal keys, then pop them one by one, and follow where each pop "
             "moves the last entry.",
        why="the ready queue is a binary heap (C++'s std::priority_queue) keyed on the sequence "
            "number alone; the four tie, and the heap's sifting hands them out as {answer}, "
            "neither first in, first out nor last in, first out",
        order=True,
    ),
}
