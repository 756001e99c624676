"""Lesson 22, Exercise 1 (``l22-executor``): the learner's ``run_backward`` against
torch's engine, in order and in gradients, with each slip named when it holds on every
graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .._spec import Report, attempt, compare, count_autograd, passed
from .._spec import failed as _fail
from .engine import ACC, BORROWED, execute, graph_nodes, torch_order
from .graphs import GRAPHS, Graph, build

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
    """One graph as the check saw it: torch's copy, the learner's copy, both orders
    (as positions in `graph_nodes`)."""

    what: str
    maker: Callable[[torch.Generator], Graph]
    seed: int
    theirs: Graph
    mine: Graph
    want: list[int]
    got: list[int]


def _positions(nodes: list[Any], graph: Graph, what: str) -> tuple[list[int], Report | None]:
    index = {node: i for i, node in enumerate(graph_nodes(graph.roots))}
    if not isinstance(nodes, (list, tuple)):
        return [], _fail(EXECUTOR, f"on a graph with {what}: it returned "
                                   f"{type(nodes).__name__}; return a list of the nodes in the "
                                   "order you ran them.")
    for item in nodes:
        if isinstance(item, str):
            return [], _fail(EXECUTOR, f"on a graph with {what}: the list holds names such as "
                                       f"{item!r}; return the nodes themselves, the objects you "
                                       "called.")
        if item not in index:
            return [], _fail(EXECUTOR, f"on a graph with {what}: the list holds "
                                       f"{type(item).__name__}, which is not a node of the graph "
                                       "your function was given (return the nodes you called, "
                                       "from next_functions).")
    return [index[item] for item in nodes], None


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


def _learner_runs(answer: Any, seed: int) -> tuple[list[_Run], Report | None]:
    runs = []
    for k, (what, maker) in enumerate(GRAPHS):
        graph_seed = seed * 131 + k
        theirs, mine = build(maker, graph_seed), build(maker, graph_seed)
        index = {node: i for i, node in enumerate(graph_nodes(theirs.roots))}
        want = [index[node] for node in torch_order(theirs)]
        BORROWED.update(watching=True, called=False)
        try:
            with torch.no_grad(), count_autograd() as seen:
                got, failure = attempt(EXECUTOR, answer, mine.roots, mine.grads, mine.inputs,
                                       raised=lambda err, what=what: f"on a graph with {what}: "
                                                                     f"{_raised(err)}")
        finally:
            BORROWED["watching"] = False
        if BORROWED["called"]:
            return runs, _fail(EXECUTOR, "your code called the check's own executor "
                                         "(execute in the lesson's exercise module). Write "
                                         "your own: count, prune, buffer and queue yourself.")
        if seen.reverse:
            return runs, _fail(EXECUTOR, f"your code ran a backward pass of torch's engine "
                                         f"({seen.calls[0]}). This exercise asks you to be the "
                                         "engine: call each node yourself, node(*grads).",
                               "autograd")
        if failure is not None:
            return runs, failure
        got, failure = _positions(got, mine, what)
        if failure is not None:
            return runs, failure
        runs.append(_Run(what, maker, graph_seed, theirs, mine, want, got))
    return runs, None


def _names(run: _Run, positions: list[int]) -> str:
    nodes = graph_nodes(run.mine.roots)
    return ", ".join(nodes[i].name().replace("torch::autograd::", "") for i in positions)


def _name(run: _Run, position: int) -> str:
    node = graph_nodes(run.mine.roots)[position]
    return node.name().replace("torch::autograd::", "")


def _structure(run: _Run) -> str | None:
    """What is wrong with the set of nodes run, or with when each ran, or None."""
    nodes = graph_nodes(run.mine.roots)
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
    nodes = graph_nodes(run.mine.roots)

    def told(i: int) -> str:
        seq = nodes[i]._sequence_nr()
        return f"{_name(run, i)} (sequence number {'2**64 - 1' if seq == ACC else seq})"
    return (f"on a graph with {run.what}: torch ran {_names(run, run.want)}; you ran "
            f"{_names(run, run.got)}. At step {step} (from 0) torch ran {told(run.want[step])}, "
            f"you {told(run.got[step])}: of the ready nodes, torch runs the one with the "
            "largest sequence number, and ties go as the binary heap gives them.")


def _grads_message(runs: list[_Run]) -> str | None:
    wrong = []
    for run in runs:
        for k, (want, got) in enumerate(zip(run.theirs.leaves, run.mine.leaves, strict=True)):
            if (want.grad is None) != (got.grad is None) or (want.grad is not None and not compare(
                    "", got.grad, want.grad, rtol=1e-10, atol=1e-12).ok):
                wrong.append((run, k))
                break
    if not wrong:
        return None
    run, k = wrong[0]
    want, got = run.theirs.leaves[k].grad, run.mine.leaves[k].grad
    where = f"on a graph with {run.what}, leaf {k} (counted from 0)"
    if got is None or want is None:
        return (f"{where}: its .grad is {'None' if got is None else 'filled'}, torch's "
                f"{'None' if want is None else 'filled'}. Only the inputs asked for get a .grad, "
                "from their AccumulateGrad node.")
    if all(_add_slip(r) for r in runs):
        return (f"{where}: where several gradients arrive in one input slot you kept the last "
                "one: the input buffer adds them up (+=, not =).")
    if all(_same_grads(r, _seeded_with_ones(r)) for r in runs):
        return (f"{where}: your gradients are those of outputs seeded with ones. Backward "
                "starts from the gradients it is given: grads[k] arrives at roots[k].")
    return (f"{where}: your .grad differs from torch's (largest difference "
            f"{float((got - want).abs().max()):.3g}), though the order is right. What arrives "
            "in one input slot adds up, and a node is called with its whole buffer.")


def _same_grads(run: _Run, copy: Graph) -> bool:
    """Whether the learner's leaves hold the gradients of ``copy``'s leaves."""
    return all((a.grad is None and b.grad is None) or (
        a.grad is not None and b.grad is not None and compare(
            "", b.grad, a.grad, rtol=1e-10, atol=1e-12).ok)
        for a, b in zip(copy.leaves, run.mine.leaves, strict=True))


def _add_slip(run: _Run) -> bool:
    copy = build(run.maker, run.seed)
    execute(copy, add=False)
    return _same_grads(run, copy)


def _seeded_with_ones(run: _Run) -> Graph:
    copy = build(run.maker, run.seed)
    ones = copy._replace(grads=[torch.ones_like(r) for r in copy.roots])
    execute(ones)
    return copy


def check_executor(answer: Any, seed: int) -> Report:
    runs, failure = _learner_runs(answer, seed)
    if failure is not None:
        return failure
    for run in runs:
        problem = _structure(run)
        if problem is not None:
            return _fail(EXECUTOR, problem)
    if any(run.got != run.want for run in runs):
        return _fail(EXECUTOR, _order_message(runs))
    problem = _grads_message(runs)
    if problem is not None:
        return _fail(EXECUTOR, problem)
    return passed(EXECUTOR, f"torch's order and gradients on {len(runs)} new graphs (branches, "
                            "shared results, several outputs, ties, pruning, an empty slot, a "
                            "broadcast, and two at random)")
