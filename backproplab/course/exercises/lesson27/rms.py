"""Lesson 27's exercise (``l27-rms-norm-op``): the fake, setup_context and backward that
make the numpy RMS norm an op autograd and torch.compile can use.

Where the answer runs, the observation step goes through five stages, in order:

1. the fake, called under ``FakeTensorMode`` on float64 and float32 inputs;
2. setup_context and backward called as plain functions on real tensors;
3. the backward alone on three new inputs, as `check_by_hand` runs an answer (autograd
   refused, nudged inputs watched), recorded for the by-hand judge;
4. ``torch.library.opcheck`` on the op registered with the pieces, in float64 and float32;
5. ``torch.compile`` of a small function using the op (AOTAutograd with compilers that
   run the graphs as they are): its graph breaks and graphs counted, the op's nodes in the
   graph, and the compiled gradients on new inputs.

The first two stages hold the pieces to their contract (a fake that reads no data and
gives the output's shape, dtype and device; a backward that reads only what was saved
and returns one gradient per input, shaped like it): a piece that breaks it ends the
exercise there, in the stage's words, as a function that cannot be called does. What the
other three recorded is judged in the grader: the formula against autograd's (its slips
named by the by-hand judge), opcheck's failing test, and the compiled gradients against
eager autograd's. A stage runs only when the one before it could not have failed for
certain: opcheck's verdict is torch's, and a failed opcheck leaves compiling untried.
"""

from __future__ import annotations

from typing import Any

import torch

from ...slips import fresh
from .._spec import METHOD, Method, failed_words, failure, is_failure, judge_runs, run_by_hand
from .op import (
    PIECES,
    call_directly,
    dtype_cases,
    inverse_rms,
    quiet,
    reference_grads,
    register,
    rms_inputs,
    rms_norm_reference,
    said,
    shape,
)

NAME = "rms_norm op"

# --------------------------------------------------------------------------- 1, 2: contracts


def _pieces(answer: Any) -> dict[str, Any] | dict:
    if not isinstance(answer, dict):
        return failure("fail", f"expected a dict {{'fake': ..., 'setup_context': ..., "
                               f"'backward': ...}} of your three functions, got "
                               f"{type(answer).__name__}")
    missing = [k for k in PIECES if k not in answer]
    if missing:
        return failure("fail", f"the dict has no {', '.join(repr(k) for k in missing)}: it "
                               f"needs the three keys {', '.join(repr(k) for k in PIECES)}")
    for key in PIECES:
        if not callable(answer[key]):
            return failure("fail", f"answer[{key!r}] should be a function, got "
                                   f"{type(answer[key]).__name__}")
    return answer


def _fake_problem(fake: Any, x: torch.Tensor, w: torch.Tensor, eps: float) -> dict | None:
    """The fake on FakeTensors like (x, w): None when it gives the output's metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        try:
            out = fake(fx, fw, eps)
        except NotImplementedError:
            return failure("missing", "fake: not written yet: it still raises "
                                      "NotImplementedError.")
        except Exception as err:  # the learner's bug, told as a failed check
            return failure("fail", f"fake: it raised {said(err)}. A fake gets tensors without "
                                   "data (FakeTensors: a shape, a dtype, a device, no numbers), "
                                   "so it may read x.shape and x.dtype but never the values: "
                                   "make an empty tensor of the output's shape and dtype, "
                                   "without computing anything")
    if not isinstance(out, torch.Tensor):
        return failure("fail", f"fake: it returned {type(out).__name__}; return a tensor like "
                               "the op's output (torch.empty_like(x), say)")
    if out.shape != x.shape:
        return failure("fail", f"fake: wrong shape: for x of shape {shape(x)} and w of shape "
                               f"{shape(w)} it returns {shape(out)}, but the op returns "
                               f"{shape(x)} (y has x's shape). opcheck's test_faketensor "
                               "compares the two, and the compiler would plan every later "
                               "operation with the fake's shape")
    if out.dtype != x.dtype:
        return failure("fail", f"fake: wrong dtype: for {x.dtype} inputs it returns "
                               f"{out.dtype}, but the op returns {x.dtype}. Make the result "
                               "from x (torch.empty_like(x), x.new_empty(...)) so that it "
                               "follows the inputs' dtype, which the check varies")
    if out.device != x.device:
        return failure("fail", f"fake: it returns a tensor on {out.device}; the op's output is "
                               f"on {x.device}, with x")
    return None


_READING_SAVED = ("unpack", "saved_tensors", "index out of range", "has no attribute")


def _form_problem(pieces: dict[str, Any], x, w, eps, g) -> dict | None:
    """What is wrong with the backward's form (what it reads, how many gradients it
    returns, their shapes), or None."""
    try:
        grads, _ = call_directly(pieces, x, w, eps, g)
    except NotImplementedError:
        return failure("missing", "backward: not written yet: setup_context or backward still "
                                  "raises NotImplementedError.")
    except Exception as err:  # the learner's bug, told as a failed check
        if any(s in str(err) for s in _READING_SAVED):
            return failure("fail", f"backward: something the backward reads was not saved: it "
                                   f"raised {said(err)} while reading what setup_context kept. "
                                   "setup_context must save, with ctx.save_for_backward, every "
                                   "tensor the backward reads (here x and w, or what you "
                                   "compute from them), and keep a plain number such as eps as "
                                   "an attribute of ctx")
        return failure("error", f"backward: setup_context or backward raised {said(err)}")
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) < 3 or any(t is not None for t in grads[3:]):
        return failure("fail", f"backward: it returns {len(grads)} value(s); the op has three "
                               "inputs (x, w, eps), so backward returns three gradients, one "
                               "per input in their order: dL/dx, dL/dw, and None for the plain "
                               "number eps")
    if grads[2] is not None:
        return failure("fail", "backward: its third gradient is not None: eps is a plain "
                               "number, not a tensor, so nothing flows back to it; return None "
                               "for eps")
    if [getattr(t, "shape", None) for t in grads[:2]] == [w.shape, x.shape]:
        return failure("fail", "backward: the gradients are in the wrong order: backward "
                               "returns them in the order of the op's inputs, dL/dx first, "
                               "then dL/dw")
    for label, got, like in (("dL/dx", grads[0], x), ("dL/dw", grads[1], w)):
        if not isinstance(got, torch.Tensor):
            return failure("fail", f"backward: {label} is {type(got).__name__}, not a tensor")
        if got.shape != like.shape:
            told = (" w is used by every row of x, so its gradient is a sum over the rows "
                    "(a weight that broadcasts gets the sum of what reaches it)"
                    if like is w and got.shape == x.shape else "")
            return failure("fail", f"backward: {label} has shape {shape(got)}, but the input "
                                   f"has shape {shape(like)}: a gradient is shaped like its "
                                   f"input.{told} (autograd would quietly sum such a gradient "
                                   "down: the backward itself must return the right shape.)")
    return None


# --------------------------------------------------------------------------- 3. the formula


def _slip(dx_of, dw_of=None):
    def wrong(x, w, eps, g):
        r = inverse_rms(x, eps)
        dw = (g * x * r).sum(0) if dw_of is None else dw_of(x, w, eps, g, r)
        return dx_of(x, w, eps, g, r), dw
    return wrong


def _right_dx(x, w, eps, g, r):
    return r * g * w - x * r**3 * (g * w * x).mean(-1, keepdim=True)


RMS_SLIPS = {
    "r treated as a constant: r depends on x too (through the mean of x**2 over the row), "
    "so dL/dx has a second term, - x * r**3 * mean(g * w * x) over the row":
        _slip(lambda x, w, eps, g, r: r * g * w),
    "the term through r sums over the row where it should average: d mean(x**2)/dx = 2x/d, "
    "so that term carries the row's mean (the 1/d), not its sum":
        _slip(lambda x, w, eps, g, r: r * g * w - x * r**3 * (g * w * x).sum(-1, keepdim=True)),
    "w is missing from dL/dx: y = (x * r) * w, so the gradient reaching x * r is g * w, in "
    "both terms":
        _slip(lambda x, w, eps, g, r: r * g - x * r**3 * (g * x).mean(-1, keepdim=True)),
    "eps is missing from r in the backward: r = 1 / sqrt(mean(x**2) + eps), as in the forward":
        lambda x, w, eps, g: _slip(_right_dx)(x, w, 0.0, g),
    "the term through r has the wrong sign: r = (m + eps)**(-1/2) falls as m grows, so its "
    "term is subtracted":
        _slip(lambda x, w, eps, g, r: r * g * w + x * r**3 * (g * w * x).mean(-1, keepdim=True)),
    "the incoming gradient g is missing: the chain rule multiplies every path by the "
    "gradient arriving at the output":
        lambda x, w, eps, g: _slip(_right_dx)(x, w, eps, torch.ones_like(g)),
    "dL/dw misses r: y = x * r * w, so dL/dw sums g * x * r over the rows":
        _slip(_right_dx, lambda x, w, eps, g, r: (g * x).sum(0)),
}

RMS_ADVICE = (
    "With r = (mean(x**2) + eps)**(-1/2) per row: dL/dw sums g * x * r over the rows; "
    "dL/dx = r * (g * w) plus the path through r, where dr/dx = -r**3 * x / d."
)


def _formula(got: dict, reference: Any, cases: list | None = None):
    return judge_runs(got["formula"], reference, cases, name="backward",
                      outputs=("dL/dx", "dL/dw"), mistakes=RMS_SLIPS, advice=RMS_ADVICE,
                      params=("x", "w", "eps", "g"))


# --------------------------------------------------------------------------- 4, 5: the op


OPCHECK_TESTS = {
    "test_schema": "the op did something its schema does not declare: it changed an input "
                   "in place or returned one of its inputs",
    "test_autograd_registration": "the op's autograd is not registered at torch's autograd "
                                  "key",
    "test_faketensor": "the fake's result differs from the real output in shape, dtype, "
                       "strides or device",
    "test_aot_dispatch_dynamic": "AOTAutograd could not trace the op with its backward on "
                                 "FakeTensors of symbolic sizes, or the traced results "
                                 "differ from eager ones",
}


def _opcheck(op: Any, cases: list) -> dict | None:
    """opcheck's first failing test (on the first case where one fails), or None."""
    from torch.library import opcheck

    for x, w, eps in cases:
        args = (x.clone().requires_grad_(), w.clone().requires_grad_(), eps)
        for test, result in opcheck(op, args, raise_exception=False).items():
            if result != "SUCCESS":
                return {"test": test, "dtype": str(x.dtype), "shape": shape(x),
                        "said": said(result), "numpy": "numpy" in str(result)}
    return None


def _compiled(op: Any, x, w, eps, g) -> dict:
    """A small function using the op, compiled: its graph breaks, its graphs, the op's
    nodes in the graph and the gradients it gives; or what compiling raised."""
    import torch._dynamo
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def run_as_is(gm, example_inputs):
        return make_boxed_func(gm.forward)

    graphs = []
    aot = aot_autograd(fw_compiler=run_as_is, bw_compiler=run_as_is)

    def backend(gm, example_inputs):
        graphs.append(gm)
        return aot(gm, example_inputs)

    def use(x, w, g):
        return (op(torch.tanh(x), w, eps) * g).sum()

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    breaks_before = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    try:
        grads = torch.autograd.grad(torch.compile(use, backend=backend)(xc, wc, g), (xc, wc))
    except Exception as err:  # the learner's pieces, under the compiler
        return {"raised": said(err)}
    finally:
        torch._dynamo.reset()
    targets = [n.target for gm in graphs[:1] for n in gm.graph.nodes if n.op == "call_function"]
    return {"breaks": sum(torch._dynamo.utils.counters["graph_break"].values()) - breaks_before,
            "graphs": len(graphs), "op nodes": targets.count(op._opoverload),
            "grads": [t.detach() for t in grads]}


# --------------------------------------------------------------------------- the exercise


def rms_op_inputs(gen: torch.Generator) -> dict[str, Any]:
    """From seed + 24: the two dtype cases, the form's inputs and the compiled function's;
    from seeds seed, seed + 1, seed + 2: the formula's three."""
    seed, again = gen.initial_seed(), torch.Generator().manual_seed(gen.initial_seed() + 24)
    cases, form, compiled = dtype_cases(again), list(rms_inputs(again)), list(rms_inputs(again))
    return {"cases": cases, "form": form, "compile": compiled,
            "formula": [list(rms_inputs(torch.Generator().manual_seed(seed + k)))
                        for k in range(3)]}


def _observe(answer: Any, inputs: dict[str, Any]) -> dict:
    pieces = _pieces(answer)
    if is_failure(pieces):
        return pieces
    with quiet():
        for x, w, eps in inputs["cases"]:
            problem = _fake_problem(pieces["fake"], x, w, eps)
            if problem is not None:
                return problem
        problem = _form_problem(pieces, *inputs["form"])
        if problem is not None:
            return problem
        runs = run_by_hand(lambda x, w, eps, g: call_directly(pieces, x, w, eps, g)[0][:2],
                           inputs["formula"], name="backward")
        if is_failure(runs):
            return failure(runs["failed"], f"backward: {runs['detail']}")
        op = register(pieces)
        checked = _opcheck(op, inputs["cases"])
        compiled = _compiled(op, *inputs["compile"]) if checked is None else None
    return {"formula": runs, "opcheck": checked, "compile": compiled}


def _reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """autograd's gradients for the formula's inputs, and eager autograd's for the
    compiled function's."""
    x, w, eps, g = fresh(inputs["compile"])
    x, w = x.requires_grad_(), w.requires_grad_()
    eager = torch.autograd.grad((rms_norm_reference(torch.tanh(x), w, eps) * g).sum(), (x, w))
    return {"formula": [reference_grads(*fresh(case)) for case in inputs["formula"]],
            "compile": list(eager)}


def _problem(got: dict, want: dict, formula: Any) -> str | None:
    """What the formula's verdict, opcheck and the compiled function show, in words."""
    if not formula.ok:
        return failed_words(formula, NAME)
    checked = got["opcheck"]
    if checked is not None:
        meaning = OPCHECK_TESTS.get(checked["test"], "")
        if checked["test"] == "test_aot_dispatch_dynamic" and checked["numpy"]:
            meaning = ("AOTAutograd traces your backward with FakeTensors, which have no "
                       "numbers to hand to numpy: write the backward in torch operations "
                       "(the forward may be numpy; the backward becomes part of the "
                       "compiled graph)")
        return (f"opcheck: {checked['test']} fails on {checked['dtype']} inputs of shape "
                f"{checked['shape']}: {meaning}. torch says {checked['said']}")
    compiled = got["compile"]
    if "raised" in compiled:
        return f"torch.compile: compiling a function that uses the op raised {compiled['raised']}"
    if compiled["breaks"] or compiled["graphs"] != 1:
        return (f"torch.compile: {compiled['breaks']} graph break(s), {compiled['graphs']} "
                "graph(s): the op should compile into one graph, as fullgraph=True demands")
    if compiled["op nodes"] != 1:
        return "torch.compile: the op is not one node of the compiled graph"
    for label, grad, eager in zip(("dL/dx", "dL/dw"), compiled["grads"], want["compile"],
                                  strict=True):
        if not torch.allclose(grad, eager, rtol=1e-10, atol=1e-12):
            return (f"torch.compile: the compiled {label} differs from eager autograd's on new "
                    "inputs")
    return None


RMS_OP = Method(
    name=NAME,
    make_inputs=rms_op_inputs,
    observe=_observe,
    reference=_reference,
    explain=lambda inputs, got, want: _problem(
        got, want, _formula(got, reference_grads, inputs["formula"])) or "it differs.",
    trials=1,  # one trial holds the formula's three inputs: a slip is named if all show it
    agree=lambda got, want: _problem(got, want, _formula(got, want["formula"])) is None,
    # opcheck and torch.compile, run where the answer runs, import much of torch's compiler
    # on first use (inductor's modules, sympy, jinja2: too many to load beforehand), build
    # code as they go (dataclasses, types evaluated from their names, Dynamo's bytecode)
    # and make inductor's cache folder in the sandbox's private /tmp.
    allows=frozenset({"import", "exec", "open"}),
    vocabulary=METHOD.allowing("torch.library."),
    passed="the fake gives the output's shape and dtype from float64 and float32 inputs "
           "without reading data; dL/dx and dL/dw match autograd on 3 new random inputs; "
           "opcheck: all four tests pass, in float64 and float32; torch.compile: one graph "
           "with the op as one node, no graph break, gradients equal to eager autograd's",
)
