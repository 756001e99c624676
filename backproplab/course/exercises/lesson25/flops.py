"""Lesson 25, Exercise 2 (``l25-flop-compiler``): a compiler for ``aot_function`` that
reads the FLOPs of the matrix products off the FX graph it is handed, before any data
flows, judged against ``FlopCounterMode``'s measure of each pass in eager mode."""

from __future__ import annotations

import itertools
import numbers
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from .._spec import METHOD, Method, failure, is_failure
from .._spec import first_line as _first_line

_PRODUCTS = ("mm", "addmm", "bmm")
# Every nonempty set of the kinds of product: what a wrong count may have left out.
_LEFT_OUT = [ops for k in range(1, len(_PRODUCTS) + 1)
             for ops in itertools.combinations(_PRODUCTS, k)]


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


def _trial_slip(kind: str, got: dict[str, Any], want: dict[str, Any],
                counted: list[tuple[Any, dict[str, int]]]) -> str | None:
    """What is wrong with one function's counts and gradients, or None; ``counted`` is
    every graph's (count, FLOPs by product) of the check, to name a wrong count's slip."""
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
                    + _flop_slip(mine, kind_of, parts, counted))
    return None


def _flops_slip(got: dict[str, Any], wants: list[dict[str, Any]]) -> str | None:
    kinds = [want["kind"] for want in wants]
    counted = [(count[0], parts) for trial, want in zip(got["trials"], wants, strict=True)
               if not is_failure(trial) and len(trial["counts"]) == 2
               for count, parts in zip(trial["counts"], want["flops"], strict=True)]
    return next(filter(None, (_trial_slip(kind, trial, want, counted) for kind, trial, want
                              in zip(kinds, got["trials"], wants, strict=True))), None)


FLOP_COMPILER = Method(
    name="make_flop_compiler",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_flops,
    reference=lambda inputs: [{"kind": kind, **_eager(fn, args)}
                              for kind, fn, args in _functions(inputs["seed"])],
    wrong=_flops_slip,
    trials=1,
    passed="matches FlopCounterMode on 3 new functions (mm, addmm and bmm; forward and "
           "backward graphs; one with an input that needs no gradient), read from the graphs "
           "before they ran, and the gradients are unchanged",
    # AOTAutograd compiles the Python code of each graph it makes (FX's recompile).
    allows=frozenset({"exec"}),
    vocabulary=METHOD.allowing("functorch.compile.", "torch.compile", "torch.fx.",
                               "torch.ops.aten.", "torch.utils.flop_counter."),
)


def _flop_slip(mine: Any, kind_of: str, parts: dict[str, int],
               counted: list[tuple[Any, dict[str, int]]]) -> str:
    """The slip a wrong count shows, named only when every graph's count shows it: half of
    the FLOPs, or all but those of some kinds of product (on one graph alone the two can
    be the same number, when one product makes half of the graph's FLOPs)."""
    if not isinstance(mine, (int, float)) or isinstance(mine, bool):
        return f"Append a number (an int), not {kind_of}."
    if all(n == sum(p.values()) / 2 for n, p in counted):
        return ("Half of it: that is the multiply-adds. FlopCounterMode counts 2 FLOPs per "
                "multiply-add, 2 * m * k * n for an (m, k) @ (k, n) product.")
    left_out = [ops for ops in _LEFT_OUT
                if all(n == sum(v for op, v in p.items() if op not in ops) for n, p in counted)]
    here = [op for op in (left_out[0] if len(left_out) == 1 else ()) if op in parts]
    if here:
        where_from = {"mm": "x @ w becomes aten.mm",
                      "addmm": "a Linear with a bias becomes addmm(bias, x, weight.T)",
                      "bmm": "torch.bmm becomes aten.bmm"}
        return (f"Exactly the FLOPs of its {' and '.join(here)} nodes are missing: "
                + "; ".join(where_from[op] for op in here) + ", a matrix product too.")
    return ("Look for the mm, addmm and bmm nodes (node.target is torch.ops.aten.mm.default "
            "and so on) and read their sizes from node.meta['val'] and their inputs'.")
