"""Lesson 21, inside torch's engine: its exercises and its predictions.

Exercise 1 (``l21-executor``) is checked by method. The learner's
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
slot, a broadcast), then two random graphs mix them. Slips are named when they
hold on every graph: a first-in-first-out or a last-in-first-out queue instead
of the priority queue, ties broken by arrival, no pruning, a node run before all
of its gradient arrived, ``=`` for ``+=`` in the input buffer.

Exercise 2 (``l21-layers``) is checked by method too. The learner's
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

The parts: ``graphs`` (the graphs Exercise 1 is checked on), ``engine`` (torch's
order, and the check's own executor that names the slips), and one module per
exercise, ``executor`` and ``layers``. This module holds the exercises and predictions.
"""

from __future__ import annotations

import torch

from .._spec import Prediction
from .executor import EXECUTOR_EXERCISE
from .layers import LAYERS_EXERCISE

EXERCISES = {
    # VOCABULARY: the executor keeps its ready nodes in a binary heap (heapq, an import)
    # and puts a small class of its own on it, compared by the key alone (__lt__): both
    # are what reproducing torch's order, ties included, needs. A Method, not ByHand.
    "l21-executor": EXECUTOR_EXERCISE,
    "l21-layers": LAYERS_EXERCISE,
}


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
