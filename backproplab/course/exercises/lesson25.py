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

The predictions compile small functions with a counting backend and count graphs, or read
what the min-cut partitioner saves (measured with `bl.describe(...).saved_memory()`).
"""

from __future__ import annotations

import functools
import numbers
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from ...graph import describe
from ._spec import METHOD, ByHand, Method, Prediction, failure, is_failure
from ._spec import first_line as _first_line

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


# --------------------------------------------------------------------------- exercise 1


def mean_cos_squared(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The exercise's loss: cos(x @ w) ** 2, averaged over every entry."""
    return torch.cos(x @ w).pow(2).mean()


def _saved_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """What min-cut's forward hands its backward for mean_cos_squared, on new sizes: x @ w,
    x.T, w.T, and the incoming gradient (any number: the loss may be scaled further on)."""
    n, k, m = (int(s) for s in torch.randint(2, 9, (3,), generator=gen))
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


# --------------------------------------------------------------------------- exercise 2

_PRODUCTS = ("mm", "addmm", "bmm")


def _new_function(kind: str, gen: torch.Generator, data_input: bool):
    """A small function of new sizes using one kind of matrix product, and its inputs."""
    def size():
        return int(torch.randint(2, 9, (1,), generator=gen))

    def randn(*shape, grad=True):
        return torch.randn(*shape, generator=gen).requires_grad_(grad)

    n, k, h, m = size(), size(), size(), size()
    if kind == "addmm":  # a Linear with a bias, then a plain product
        def fn(x, w1, b1, w2):
            return (torch.tanh(F.linear(x, w1, b1)) @ w2).sum()
        args = (randn(n, k, grad=not data_input), randn(h, k), randn(h), randn(h, m))
    elif kind == "bmm":  # a batch of products
        def fn(x, w):
            return torch.bmm(x, w).sin().pow(2).sum()
        b = size()
        args = (randn(b, n, k, grad=not data_input), randn(b, k, m))
    else:  # one weight used twice
        def fn(x, w):
            return ((x @ w).relu() @ w.T).pow(2).sum()
        args = (randn(n, k, grad=not data_input), randn(k, h))
    return fn, args


def _functions(seed: int) -> list[tuple[str, Any, tuple]]:
    """The check's three new functions, one per kind of product in a drawn order, with
    their inputs: (kind, fn, args). One of them has an input that needs no gradient."""
    gen = torch.Generator().manual_seed(seed + 18)
    kinds = [_PRODUCTS[i] for i in torch.randperm(3, generator=gen).tolist()]
    data_trial = int(torch.randint(0, 3, (1,), generator=gen))
    return [(kind, *_new_function(kind, gen, data_input=trial == data_trial))
            for trial, kind in enumerate(kinds)]


def _compiled_grads(fn, args, fw_compiler, bw_compiler) -> list[Any]:
    """Compile fn (the first forward and backward do it), then run forward and backward
    again: the gradients of that second run."""
    from functorch.compile import aot_function

    compiled = aot_function(fn, fw_compiler=fw_compiler, bw_compiler=bw_compiler)
    compiled(*args).backward()
    for a in args:
        a.grad = None
    compiled(*args).backward()
    return [a.grad for a in args if a.requires_grad]


def _eager(fn, args) -> dict[str, Any]:
    """What a right compiler is judged against: the FLOPs of each pass, product by product,
    as FlopCounterMode measures them in eager mode (they are those of the graphs
    AOTAutograd compiles), and the gradients."""
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    counted = []
    with FlopCounterMode(display=False) as forward:
        out = fn(*args)
    counted.append(forward.get_flop_counts().get("Global", {}))
    with FlopCounterMode(display=False) as backward:
        out.backward()
    counted.append(backward.get_flop_counts().get("Global", {}))
    return {"flops": [{str(op).removeprefix("aten."): n for op, n in c.items()}
                      for c in counted],
            "grads": [a.grad for a in args if a.requires_grad]}


def _watching(compiler: Any, ran_early: list[int]) -> Any:
    """The learner's compiler, handed each graph with its forward watched: a call of it
    before the compiler returns is noted in ``ran_early``."""
    def watched(gm, example_inputs):
        original = gm.forward
        compiling = [True]

        def forward(*args, **kwargs):
            if compiling[0]:
                ran_early.append(1)
            return original(*args, **kwargs)

        gm.forward = forward
        try:
            return compiler(gm, example_inputs)
        finally:
            compiling[0] = False
    return watched


def _made_compiler(answer: Any) -> Any:
    """(compiler, counts) from the learner's make_flop_compiler, or a `failure`."""
    if not callable(answer):
        return failure("missing", f"expected a function returning (compiler, counts), got "
                                  f"{type(answer).__name__}")
    try:
        made = answer()
    except NotImplementedError:
        return failure("missing", "not written yet: it still raises NotImplementedError.")
    except Exception as err:
        return failure("error", f"raised {type(err).__name__}: {_first_line(err)}")
    if not (isinstance(made, tuple) and len(made) == 2 and callable(made[0])
            and isinstance(made[1], list)):
        return failure("fail", "expected two things back: a compiler function and the list it "
                               "appends its counts to")
    return made


def _flop_run(fn: Any, args: tuple, compiler: Any, counts: list) -> Any:
    """One new function compiled with the learner's compiler: whether the compiler ran a
    graph while compiling it, the gradients, and what it appended (a `failure` when
    compiling or running raised)."""
    before, ran_early = len(counts), []
    watched = _watching(compiler, ran_early)
    try:
        with warnings.catch_warnings():  # torch's warnings about the graphs: not the point
            warnings.simplefilter("ignore")
            grads = _compiled_grads(fn, args, watched, watched)
    except NotImplementedError:
        return failure("missing", "not written yet: it still raises NotImplementedError.")
    except Exception as err:
        return failure("error", f"compiling or running with your compiler raised "
                                f"{type(err).__name__}: {_first_line(err)}. The compiler must "
                                "return something AOTAutograd can call, such as "
                                "make_boxed_func(gm.forward)")
    return {"ran_early": bool(ran_early),
            "grads": [g.detach().clone() if isinstance(g, torch.Tensor) else None for g in grads],
            "counts": [_appended(c) for c in counts[before:]]}


def _appended(value: Any) -> list[Any]:
    """One appended count as plain data: [the number (a 1-element tensor's too), or None
    if it is none; the name of its type; how it prints]."""
    number = None
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        number = value.item()
    elif isinstance(value, bool):
        number = value
    elif isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real):
        number = float(value)
    return [number, type(value).__name__, str(value)[:60]]


def _observe_flops(answer: Any, inputs: dict[str, Any]) -> Any:
    """The learner's compiler on each new function in turn: a `failure` if the first cannot
    be compiled with it; where one after the first fails, that failure is kept in its place."""
    made = _made_compiler(answer)
    if is_failure(made):
        return made
    compiler, counts = made
    trials = []
    for _, fn, args in _functions(inputs["seed"]):
        trial = _flop_run(fn, args, compiler, counts)
        if is_failure(trial) and not trials:
            return trial
        trials.append(trial)
    return {"trials": trials}


def _trial_slip(kind: str, got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """What is wrong with one function's counts and gradients, or None."""
    where = f"on a new function with {kind}"
    if is_failure(got):
        return got["detail"]
    if got["ran_early"]:
        return (f"{where}: your compiler ran the graph while compiling it. A compiler is handed "
                "the graph before any data flows: read the sizes from each node's meta['val'] "
                "instead of measuring")
    if len(got["grads"]) != len(want["grads"]) or any(
            not (isinstance(g, torch.Tensor) and g.shape == e.shape
                 and torch.allclose(g, e, rtol=1e-5, atol=1e-6))
            for g, e in zip(got["grads"], want["grads"], strict=False)):
        return (f"{where}: the gradients changed: the compiler must return a callable that runs "
                "the graph as it is")
    if len(got["counts"]) != 2:
        return (f"{where}: {len(got['counts'])} numbers were appended for its 2 graphs "
                "(forward, then backward): append one number each time the compiler is called")
    for label, (mine, kind_of, shown), parts in zip(("forward", "backward"), got["counts"],
                                                     want["flops"], strict=True):
        total = sum(parts.values())
        if mine != total:
            return (f"{where}, the {label} graph: yours {shown if mine is None else mine}, "
                    f"FlopCounterMode measured {total:,}. "
                    + _flop_slip(mine, kind_of, total, parts))
    return None


def _flops_slip(got: dict[str, Any], wants: list[dict[str, Any]]) -> str | None:
    kinds = [want["kind"] for want in wants]
    return next(filter(None, (_trial_slip(kind, trial, want) for kind, trial, want
                              in zip(kinds, got["trials"], wants, strict=True))), None)


FLOP_COMPILER = Method(
    name="make_flop_compiler",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_flops,
    reference=lambda inputs: [{"kind": kind, **_eager(fn, args)}
                              for kind, fn, args in _functions(inputs["seed"])],
    agree=lambda got, want: _flops_slip(got, want) is None,
    explain=lambda inputs, got, want: _flops_slip(got, want),
    trials=1,
    passed="matches FlopCounterMode on 3 new functions (mm, addmm and bmm; forward and "
           "backward graphs; one with an input that needs no gradient), read from the graphs "
           "before they ran, and the gradients are unchanged",
    # AOTAutograd compiles the Python code of each graph it makes (FX's recompile).
    allows=frozenset({"exec"}),
    vocabulary=METHOD.allowing("functorch.compile.", "torch.compile", "torch.fx.",
                               "torch.ops.aten.", "torch.utils.flop_counter."),
)


def _flop_slip(mine: Any, kind_of: str, want: int, parts: dict[str, int]) -> str:
    """The slip a wrong count shows, named only when the numbers show it."""
    if not isinstance(mine, (int, float)) or isinstance(mine, bool):
        return f"Append a number (an int), not {kind_of}."
    if mine * 2 == want:
        return ("Half of it: that is the multiply-adds. FlopCounterMode counts 2 FLOPs per "
                "multiply-add, 2 * m * k * n for an (m, k) @ (k, n) product.")
    where_from = {"mm": "x @ w becomes aten.mm",
                  "addmm": "a Linear with a bias becomes addmm(bias, x, weight.T)",
                  "bmm": "torch.bmm becomes aten.bmm"}
    for op in _PRODUCTS:
        if op in parts and mine == want - parts[op]:
            return (f"Exactly the FLOPs of its {op} nodes are missing: {where_from[op]}, a "
                    "matrix product too.")
    return ("Look for the mm, addmm and bmm nodes (node.target is torch.ops.aten.mm.default "
            "and so on) and read their sizes from node.meta['val'] and their inputs'.")


EXERCISES = {
    "l25-min-cut-backward": MIN_CUT,
    "l25-flop-compiler": FLOP_COMPILER,
}


# --------------------------------------------------------------------------- predictions


def _sin_cos(x, w):
    return (x @ w).sin().cos().sum()


def _min_cut_bytes_answer() -> int:
    """Bytes beyond x and w that the min-cut forward keeps for section 2's function."""
    from functorch.compile import aot_function, min_cut_rematerialization_partition

    with torch.random.fork_rng():
        torch.manual_seed(2)
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
    with torch.random.fork_rng():
        torch.manual_seed(3)
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
    with torch.random.fork_rng():
        torch.manual_seed(4)
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
