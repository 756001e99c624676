"""Lesson 16, what backward keeps: its exercises and its predictions.

- ``l16-bytes-formula`` (Exercise 2): the bytes an MLP keeps for backward, from a
  formula. It is checked like a gradient by hand (`ByHand`): new batch sizes,
  widths and activations on every trial, the reference measured with
  `describe(...).saved_memory()`, byte counts compared exactly. Its slips are
  about counting, not about derivatives.
- ``l16-checkpoint-by-hooks`` (Exercise 3, module ``hooked``): checkpointing built
  from saved-tensor hooks, its runs, what it keeps and its dropout mask checked.
- ``l16-checkpoint`` (Exercise 4, module ``budget``): which blocks of a stack to
  checkpoint, on stacks where the rule of thumb (most bytes per multiply-add first)
  is not the cheapest choice within the budget.
- ``l16-tbptt`` (Exercise 5): the error of the truncated-BPTT gradient against full
  BPTT.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from ....graph import describe
from .._spec import (
    ByHand,
    Method,
    Prediction,
    Task,
    as_plain,
    call_answer,
    every_case,
    kind_of,
    relative,
    seeded,
)
from .budget import CHECKPOINT, run_stack
from .hooked import HOOKED_CHECKPOINT, first_error

# --------------------------------------------------------------------------- Exercise 2

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}


def make_mlp(widths, activation):
    """Linear(w0, w1) -> activation -> Linear(w1, w2) -> ... -> Linear(w[-2], w[-1])."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        if i:
            layers.append(ACTIVATIONS[activation]())
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


def _bytes_reference(batch, widths, activation):
    with seeded(0):
        model = make_mlp(widths, activation)
        inputs = torch.randn(batch, widths[0])
    memory = describe(model(inputs).sum()).saved_memory()
    return memory.total - memory.leaf_bytes


def _new_mlp_shape(gen):
    """A batch size, 2 to 5 widths and an activation, all new. A check's five trials have
    seeds that follow each other, so it meets every kind of ``seed % 5``: each activation
    with a hidden layer (a slip about one of them shows on every check), and a network of
    any depth, its activation not GELU. Kinds 2 to 4 of one run of five share a batch size:
    the GELU network then has a network of another activation with its batch next to it in
    every check, and an answer right for one activation only cannot look as if it followed
    the batch size."""
    seed = gen.initial_seed()
    kind = seed % 5
    shared = torch.Generator().manual_seed(seed // 5) if kind >= 2 else gen
    batch = int(torch.randint(2, 65, (1,), generator=shared))  # 1 would hide "per example"
    depth = int(torch.randint(2 if kind == 4 else 3, 6, (1,), generator=gen))
    widths = tuple(int(w) for w in torch.randint(1, 33, (depth,), generator=gen))
    names = [a for a in ACTIVATIONS if a != "gelu"] if kind == 4 else [list(ACTIVATIONS)[kind]]
    activation = names[int(torch.randint(0, len(names), (1,), generator=gen))]
    return batch, widths, activation


def _per_hidden(activation):
    """Tensors kept per hidden layer: the activation's output, which the next Linear keeps
    too (one block), or for GELU also its input."""
    return 2 if activation == "gelu" else 1


BYTES_SLIPS = {
    "you counted elements, not bytes: multiply by the element size (4 bytes for float32, "
    "t.element_size())":
        lambda n, w, a: n * (w[0] + _per_hidden(a) * sum(w[1:-1])),
    "the input batch is missing: it needs no gradient, but the first layer keeps it, "
    "because its weight's gradient is built from it":
        lambda n, w, a: 4 * n * _per_hidden(a) * sum(w[1:-1]),
    "each hidden layer is counted twice: the activation's output and the next layer's input "
    "(mat1) are one tensor, kept once (GELU is different: it keeps its input as well)":
        lambda n, w, a: 4 * n * (w[0] + 2 * sum(w[1:-1])),
    "GELU's input is missing: ReLU, tanh and sigmoid keep their output, which the next "
    "layer keeps anyway, but GELU keeps its input, a tensor of its own":
        lambda n, w, a: 4 * n * (w[0] + sum(w[1:-1])),
    "ReLU's output was counted as a 1-byte mask: ReLU keeps its output, float32 like every "
    "other activation (4 bytes a number), and the next Linear keeps that same tensor":
        lambda n, w, a: n * (4 * w[0] + (1 if a == "relu" else 4 * _per_hidden(a))
                             * sum(w[1:-1])),
    "GELU's factor 2 is applied to the input batch too: GELU keeps its input besides its "
    "output in every hidden layer, but the input batch is kept once, by the first Linear":
        lambda n, w, a: 4 * n * _per_hidden(a) * sum(w[:-1]),
    "the network's output is counted: nothing keeps it (the sum after it saves no tensor)":
        lambda n, w, a: 4 * n * (w[0] + _per_hidden(a) * sum(w[1:-1]) + w[-1]),
    "the bytes are for one example: multiply by the batch size":
        lambda n, w, a: 4 * (w[0] + _per_hidden(a) * sum(w[1:-1])),
    "the weights are counted: they are leaves, in memory anyway, and saved_memory() keeps "
    "them apart (leaf_bytes)":
        lambda n, w, a: 4 * (n * (w[0] + _per_hidden(a) * sum(w[1:-1]))
                             + sum(p * q for p, q in zip(w[1:-1], w[2:], strict=True))),
}

BYTES_ADVICE = (
    "A byte count, not a derivative: list the tensors the graph keeps for a two-layer "
    "network (bl.describe(model(x).sum()) shows each node's saved tensors), note their "
    "shapes, and count each block of memory once, 4 bytes per float32 number."
)

# --------------------------------------------------------------------------- Exercise 5


def loop_gradient(W, xs, k=None, detach_after=False):
    """dL/dW for h_t = tanh(W h_{t-1} + x_t) from h = 0, L = sum over t of (h_t ** 2).sum(),
    the state detached every k steps (k None: full BPTT)."""
    W = W.detach().clone().requires_grad_()
    h = torch.zeros(W.shape[0], dtype=W.dtype)
    loss = 0
    for t in range(len(xs)):
        if k and not detach_after and t % k == 0:
            h = h.detach()
        h = torch.tanh(W @ h + xs[t])
        if k and detach_after and t % k == 0:
            h = h.detach()
        loss = loss + (h**2).sum()
    (grad,) = torch.autograd.grad(loss, W)
    return grad


def new_loop(gen, units=None, steps=None):
    """A recurrent weight with spectral radius 0.8 and an input sequence."""
    units = units or int(torch.randint(3, 9, (1,), generator=gen))
    steps = steps or int(torch.randint(30, 81, (1,), generator=gen))
    W = torch.randn(units, units, generator=gen, dtype=torch.float64)
    W = 0.8 * W / torch.linalg.eigvals(W).abs().max()
    xs = 0.5 * torch.randn(steps, units, generator=gen, dtype=torch.float64)
    return W, xs


def _tbptt_inputs(gen):
    """Three new loops, each with a k of its own; then the loop of 8 units and 400 steps the
    pass message speaks of, with k = 10 and with k = 100."""
    loops = []
    for _ in range(3):
        W, xs = new_loop(gen)
        k = int(torch.randint(2, len(xs) // 2, (1,), generator=gen))
        loops.append({"W": W, "xs": xs, "k": k, "new": True})
    W, xs = new_loop(torch.Generator().manual_seed(15), units=8, steps=400)
    loops += [{"W": W, "xs": xs, "k": k, "new": False} for k in (10, 100)]
    return {"loops": loops}


# What a right answer measures on that loop (tests/lessons/test_facts_lesson12.py runs it).
MEASURED = {10: "0.0880", 100: "0.0292"}


def _observe_tbptt(answer, inputs):
    """The number the answer returned for each loop."""
    said = []
    for loop in inputs["loops"]:
        got, failed = call_answer(answer, loop["W"].clone(), loop["xs"].clone(), loop["k"],
                                  what="it", raised=first_error,
                                  not_callable=f"expected a function (W, xs, k) -> a number, "
                                               f"got {type(answer).__name__}")
        if failed is not None:
            return failed
        said.append(as_plain(got))
    return said


# The numbers of the loops met lately, by the loops' values: the reference and each slip
# ask for the same few gradients, each a loop of up to 400 steps.
_NUMBERS: dict = {}


def _loop_numbers(loop):
    """The right number for one loop, and the number of each slip of `TBPTT_SLIPS`."""
    key = (loop["W"].numpy().tobytes(), loop["xs"].numpy().tobytes(), loop["k"])
    if key not in _NUMBERS:
        W, xs, k = loop["W"], loop["xs"], loop["k"]
        full, cut = loop_gradient(W, xs), loop_gradient(W, xs, k)
        if len(_NUMBERS) > 64:
            _NUMBERS.clear()
        _NUMBERS[key] = {
            "right": relative(cut, full, ord=2),
            "never": 0.0,
            "every step": relative(loop_gradient(W, xs, 1), full, ord=2),
            "after": relative(loop_gradient(W, xs, k, True), full, ord=2),
            "absolute": (cut - full).norm().item(),
            "truncated": ((cut - full).norm() / cut.norm()).item(),
        }
    return _NUMBERS[key]


def _per_loop(inputs, which):
    """The number ``which`` names (the right one, or a slip's) for every loop."""
    return [_loop_numbers(loop)[which] for loop in inputs["loops"]]


def _number(value):
    """An answer's number as a float: a Python number, or a tensor of one element."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return value.item()
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _tbptt_agree(got, want):
    number = _number(got)
    return number is not None and math.isclose(number, want, rel_tol=1e-9, abs_tol=1e-15)


def _explain_tbptt(inputs, got, want):
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not _tbptt_agree(g, w))
    loop, number = inputs["loops"][at], _number(got[at])
    if number is None:
        return f"expected one number, the relative error, got {kind_of(got[at])}"
    return (f"on {'a new' if loop['new'] else 'a'} loop ({loop['W'].shape[0]} units, "
            f"{len(loop['xs'])} steps, k = {loop['k']}): yours {number:.6g}, expected "
            f"{want[at]:.6g}. Run the loop twice from h = 0, once as it is and once with "
            "h = h.detach() before the update whenever t % k == 0, take dL/dW from each, and "
            "return ‖g_k - g‖ / ‖g‖")


TBPTT_SLIPS = {
    "0: the truncated gradient came out equal to the full one, so the state was never "
    "detached (the loss is the same either way: only the gradient changes)": "never",
    "the error of detaching at every step (k = 1): detach only when t % k == 0": "every step",
    "the error of a loop that detaches after the update instead of before it: the "
    "chunks start one step late": "after",
    "the absolute error ‖g_k - g‖: divide by the full gradient's norm ‖g‖": "absolute",
    "divided by the truncated gradient's norm: the error is relative to the full "
    "gradient, ‖g_k - g‖ / ‖g‖": "truncated",
}

TBPTT = Method(
    name="truncation_error",
    make_inputs=_tbptt_inputs,
    observe=_observe_tbptt,
    reference=functools.partial(_per_loop, which="right"),
    explain=_explain_tbptt,
    mistakes={f"your number is {words}": functools.partial(_per_loop, which=which)
              for words, which in TBPTT_SLIPS.items()},
    trials=1,
    agree=every_case(_tbptt_agree),
    passed=f"matches on 3 new loops. On a loop of 8 units and 400 steps it measures "
           f"{MEASURED[10]} for k = 10 and {MEASURED[100]} for k = 100",
)


# Checked like a gradient by hand, in the words of a byte count: the formula is compared
# with what saved_memory() measures, not with autograd.
BYTES = ByHand(
    name="bytes kept for backward",
    reference=_bytes_reference,
    make_inputs=_new_mlp_shape,
    mistakes=BYTES_SLIPS,
    advice=BYTES_ADVICE,
    trials=5,  # one per kind of `_new_mlp_shape`
    task=Task(asks_for="a formula", result="the count",
              how="Work out what each node keeps and count it with plain arithmetic.",
              reference="what saved_memory() measures",
              inputs="new networks (batch sizes, widths, activations)"),
)


EXERCISES = {
    "l16-bytes-formula": BYTES,
    "l16-checkpoint-by-hooks": HOOKED_CHECKPOINT,
    "l16-checkpoint": CHECKPOINT,
    "l16-tbptt": TBPTT,
}

# --------------------------------------------------------------------------- predictions


def _recompute_answer():
    """How often the first of eight checkpointed blocks runs in one forward and backward."""
    with seeded(3):
        blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
            for _ in range(8))
        data = torch.randn(64, 256)
    calls = []
    hook = blocks[0].register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        run_stack(blocks, data, set(range(8))).sum().backward()
    finally:
        hook.remove()
    return len(calls)


def _sigmoid_answer():
    gen = torch.Generator().manual_seed(0)
    x_big = torch.randn(10_000, generator=gen).requires_grad_()
    kept = {}
    for name, fn in (("sigmoid", torch.sigmoid), ("formula", lambda t: 1 / (1 + torch.exp(-t)))):
        memory = describe(fn(x_big).sum()).saved_memory()
        kept[name] = memory.total - memory.leaf_bytes
    return max(kept, key=kept.get)


PREDICTIONS = {
    "l16-predict-recompute": Prediction(
        question="how many times the first checkpointed block runs in one forward and backward",
        answer=_recompute_answer,
        hint="a checkpointed block keeps nothing inside it during the forward pass; what must "
             "backward do when it reaches that block and needs the tensors it did not keep?",
        why="once in the forward pass, and once more in backward to rebuild the tensors it "
            "did not keep: {answer}",
    ),
    "l16-predict-sigmoid": Prediction(
        question="which keeps more for backward",
        answer=_sigmoid_answer,
        hint="one node per operation, and each keeps what its own derivative needs: how many "
             "nodes does each version make, and what does each of them keep?",
        why="sigmoid is one node and keeps only its output (40,000 bytes for 10,000 float32 "
            "numbers); the formula's exp and its reciprocal each keep a result of their own "
            "(80,008 bytes): the {answer} keeps more",
        choices=("sigmoid", "formula"),
    ),
}
