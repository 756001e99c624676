"""Lesson 25, the backward torch.compile builds ahead of time: its exercises and predictions.

- ``l25-min-cut-backward`` (by hand): the backward graph the min-cut partitioner makes
  for ``loss(x, w) = cos(x @ w).pow(2).mean()``, written as a function of only what its
  forward saved (``x @ w``, ``x.T``, ``w.T``) and the incoming gradient. cos and sin are
  not saved: the answer has to compute them again, as the compiled backward does. Checked
  by `check_by_hand` on fresh float64 inputs with autograd off.
- ``l25-flop-compiler`` (method): a compiler for ``aot_function`` that reads the FLOPs of
  the matrix products (mm, addmm, bmm) off the FX graph it is handed, before any data
  flows. The observation compiles three new functions with it (a Linear with a bias, a
  batched product, a weight used twice; an input that needs no gradient in one of them)
  and keeps what it appended and the compiled gradients; the verdict compares them with
  ``FlopCounterMode``'s measure of each pass in eager mode (the FLOPs of the graphs
  AOTAutograd makes) and with eager gradients, and refuses a compiler that runs the graph
  to measure it.
- ``l25-sac-policy`` (method): ``policy_for(ratio)``, a selective-checkpointing policy that
  keeps a product's result only where recomputing it costs more than ``ratio`` FLOPs a byte
  kept. The observation runs new blocks under ``checkpoint`` with it (each operation's
  decision and bytes, the backward's FLOPs, the gradients); the grader compares them with
  the right policy's and names a slip only when both blocks show it.

The two method exercises are modules here (``flops``, ``policy``); the short by-hand one
is in this module, beside the ids. The predictions
compile small functions with a counting backend and count graphs, or read what the min-cut
partitioner saves (measured with `bl.describe(...).saved_memory()`).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ....graph import describe
from .._spec import ByHand, Prediction, seeded
from .flops import FLOP_COMPILER
from .policy import SAC_POLICY

# What the grade's sandbox loads before an answer runs: what AOTAutograd imports the first
# time it compiles a function.
PRELOAD = ("functorch.compile", "torch._functorch._aot_autograd.subclass_codegen",
           "torch._inductor.compiler_bisector", "torch._inductor.fx_passes.dedupe_symint_uses",
           "torch._subclasses.schema_check_mode")

# --------------------------------------------------------------------------- shared


def _nop(gm, example_inputs):
    """A compiler that runs the graph it gets as it is (AOTAutograd's boxed convention)."""
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def _graph_counter() -> tuple[Any, dict[str, int]]:
    """A torch.compile backend that counts the forward and backward graphs AOTAutograd
    makes (one of each per Dynamo graph that needs a gradient), and runs each as it is."""
    from torch._dynamo.backends.common import aot_autograd

    counts = {"forward": 0, "backward": 0}

    def counted(kind):
        def compiler(gm, example_inputs):
            counts[kind] += 1
            return _nop(gm, example_inputs)
        return compiler

    return aot_autograd(fw_compiler=counted("forward"), bw_compiler=counted("backward")), counts


def _reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


# --------------------------------------------------------------------------- Exercise 1


def mean_cos_squared(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The exercise's loss: cos(x @ w) ** 2, averaged over every entry."""
    return torch.cos(x @ w).pow(2).mean()


def _saved_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """What min-cut's forward hands its backward for mean_cos_squared, on new sizes: x @ w,
    x.T, w.T, and the incoming gradient (any number: the loss may be scaled further on).
    The three sizes differ, so no count of entries stands in for another (x.numel() for
    y.numel() is right only when k equals m)."""
    n, k, m = (int(s) + 2 for s in torch.randperm(7, generator=gen)[:3])
    x = torch.randn(n, k, generator=gen, dtype=torch.float64)
    w = torch.randn(k, m, generator=gen, dtype=torch.float64)
    g = torch.randn((), generator=gen, dtype=torch.float64)
    return x @ w, x.T, w.T, g


def _min_cut_reference(y, x_t, w_t, g):
    """Autograd's dL/dx and dL/dw, from x and w rebuilt out of their transposes."""
    x = x_t.T.clone().requires_grad_()
    w = w_t.T.clone().requires_grad_()
    return torch.autograd.grad(mean_cos_squared(x, w), (x, w), grad_outputs=g)


def _slip(dy_of):
    """A wrong answer whose only error is its gradient with respect to y = x @ w."""
    def wrong(y, x_t, w_t, g):
        dy = dy_of(y, g)
        return dy @ w_t, x_t @ dy
    return wrong


MIN_CUT_SLIPS = {
    "the mean's 1/N is missing: the loss averages y.numel() entries, so each gets 1/N of "
    "the incoming gradient":
        _slip(lambda y, g: -2 * g * torch.cos(y) * torch.sin(y)),
    "the mean is over every entry of y, y.numel() of them, not over its rows (y.shape[0]): "
    "lesson 24's mean squared error had the same 1/N":
        _slip(lambda y, g: -2 * g * torch.cos(y) * torch.sin(y) / y.shape[0]),
    "the incoming gradient g is missing: the backward graph gets dL/d(loss) as its last "
    "input (tangents_1), and everything it returns is scaled by it":
        _slip(lambda y, g: -2 * torch.cos(y) * torch.sin(y) / y.numel()),
    "the sign is flipped: the derivative of cos is -sin":
        _slip(lambda y, g: 2 * g * torch.cos(y) * torch.sin(y) / y.numel()),
    "the square's derivative is missing: d(c**2)/dc = 2c, then times cos' derivative -sin(y)":
        _slip(lambda y, g: -g * torch.sin(y) / y.numel()),
    "cos' derivative is missing: with c = cos(y), d(c**2)/dy = 2c * (-sin(y))":
        _slip(lambda y, g: 2 * g * torch.cos(y) / y.numel()),
    "the two gradients are in the wrong order: return (dL/dx, dL/dw), as the backward "
    "graph returns its inputs' gradients in the order of the forward's inputs":
        lambda y, x_t, w_t, g: tuple(reversed(_min_cut_reference(y, x_t, w_t, g))),
}

MIN_CUT_ADVICE = (
    "Go from the loss back to y = x @ w first (dL/dy has y's shape: the mean, the square, "
    "then cos), then through the matmul: dL/dx = dL/dy @ w.T and dL/dw = x.T @ dL/dy, "
    "with the transposes you were given."
)

MIN_CUT = ByHand(
    name="min-cut backward",
    reference=_min_cut_reference,
    make_inputs=_saved_inputs,
    outputs=("dL/dx", "dL/dw"),
    mistakes=MIN_CUT_SLIPS,
    advice=MIN_CUT_ADVICE,
)


EXERCISES = {
    "l25-min-cut-backward": MIN_CUT,
    "l25-flop-compiler": FLOP_COMPILER,
    "l25-sac-policy": SAC_POLICY,
}


# --------------------------------------------------------------------------- predictions


def _sin_cos(x, w):
    return (x @ w).sin().cos().sum()


def _min_cut_bytes_answer() -> int:
    """Bytes beyond x and w that the min-cut forward keeps for section 2's function."""
    from functorch.compile import aot_function, min_cut_rematerialization_partition

    with seeded(2):
        x = torch.randn(64, 32, requires_grad=True)
        w = torch.randn(32, 16, requires_grad=True)
    compiled = aot_function(_sin_cos, fw_compiler=_nop, bw_compiler=_nop,
                            partition_fn=min_cut_rematerialization_partition)
    memory = describe(compiled(x, w)).saved_memory()
    return memory.total - memory.leaf_bytes


def _branchy(x, w):
    h = torch.tanh(x @ w)
    if h.sum() > 0:  # a branch on the values: Dynamo cannot know which way it goes
        h = h * 2
    else:
        h = -h
    return (h * h).sum()


@functools.cache
def _branch_answer() -> int:
    """Backward graphs compiled for _branchy, called once with x and once with -x."""
    _reset_dynamo()
    backend, counts = _graph_counter()
    compiled = torch.compile(_branchy, backend=backend)
    with seeded(3):
        x, w = torch.randn(6, 4), torch.randn(4, 3, requires_grad=True)
    for sign in (1, -1):
        compiled(sign * x, w).backward()
    _reset_dynamo()
    return counts["backward"]


# One line of a function, four ways: which of them ends Dynamo's graph?
CHANGES = {
    "a": lambda h, x: h * x.shape[0],
    "b": lambda h, x: h / h.norm(),
    "c": lambda h, x: h * float(h.max()),
    "d": lambda h, x: h if x.dim() == 2 else -h,
}


@functools.cache
def _break_answer() -> str | tuple[str, ...]:
    """The change (or changes) after which the function compiles into more than one graph."""
    with seeded(4):
        x, w = torch.randn(6, 4), torch.randn(4, 3, requires_grad=True)
    breaking = []
    for key, change in CHANGES.items():
        _reset_dynamo()
        backend, counts = _graph_counter()

        def changed(x, w, change=change):
            h = torch.tanh(x @ w)
            h = change(h, x)
            return (h * h).sum()

        torch.compile(changed, backend=backend)(x, w).backward()
        if counts["forward"] > 1:
            breaking.append(key)
    _reset_dynamo()
    return breaking[0] if len(breaking) == 1 else tuple(breaking)


PREDICTIONS = {
    "l25-predict-min-cut": Prediction(
        question="bytes beyond x and w that the min-cut forward keeps for (x @ w).sin().cos()"
                 ".sum()",
        answer=_min_cut_bytes_answer,
        hint="cos' backward needs its input, sin(x @ w), and sin's backward needs x @ w: "
             "which of the two can the backward compute again from the other, and how big "
             "is what is left?",
        why="min-cut keeps only x @ w (64 x 16 float32 numbers) and computes sin(x @ w) "
            "again in the backward, where cos' derivative needs it; the transposes of x and "
            "w it keeps are views of the leaves, no new memory: {answer} bytes",
    ),
    "l25-predict-branch": Prediction(
        question="backward graphs compiled after one call with x and one with -x",
        answer=_branch_answer,
        hint="the branch cuts the function in two at the if; the part after it depends on "
             "the way the branch went, and -x takes the other way. Count the pieces each "
             "call needs, and which of them the second call can reuse.",
        why="the graph before the if (one), the rest with the first branch (two), and on the "
            "call with -x the other branch's rest, compiled anew (three): {answer} forward "
            "graphs and {answer} backward graphs",
    ),
    "l25-predict-break": Prediction(
        question="which change makes the function compile into more than one graph",
        answer=_break_answer,
        hint="while Dynamo traces, it knows every tensor's shape and number of dimensions, "
             "but not the numbers inside: look for the line that needs one of those numbers "
             "as a plain Python value.",
        why="float(h.max()) turns a value inside a tensor into a Python number, which Dynamo "
            "cannot know while tracing, so the graph ends there (as .item() would end it); "
            "x.shape[0] and x.dim() are known when tracing, and h / h.norm() stays a tensor",
        choices=tuple(CHANGES),
    ),
}
