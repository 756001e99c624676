"""Lesson 03's two engine exercises: new operations (``l03-ops``) and a softmax
cross-entropy built from them (``l03-softmax-ce``).

The learner's engine runs where the answer lives (`observe`): each operation's forward
value, then its leaf gradients through the engine's backward, each pass run as a
gradient by hand is (`run_answer`: autograd off and refused, nudged inputs watched).
What comes back is plain data: numbers, the gradients, and how each run ended. The
grader judges them with `judge_by_hand`, the judge of every gradient by hand, so each
slip is named only when it holds on all of an operation's trials.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ...byhand import Ran, run_answer
from .._spec import ENGINE, Method, call_answer, close, failure, judge_runs
from .slips import CE_ADVICE, CE_SLIPS, OP_ADVICE, OPS, ce_reference, forward, op_reference, slips

__all__ = ["CROSS_ENTROPY", "OPS_AND_TANH", "ce_inputs", "op_inputs", "tanh_problem"]

F64 = torch.float64
_EXPONENTS = (-2.0, -1.0, -0.5, 0.5, 1.5, 2.0, 3.0)
_OPS_PIECES = ("exp", "log", "power", "Value", "backward", "tanh")
# power's own trials (x, w, b, k), after the 4 random ones: u = -1.5 (k = 3) and u = 0
# (k = 2), where a**k is defined but log(a) is not (a power built as exp(k * log(a))), and
# where a rule written k * out.data / a.data divides by 0.
_POWER_AT = ((1.5, -2.0, 1.5, 3.0), (2.0, -0.75, 1.5, 2.0))
_CE_PIECES = ("cross_entropy", "Value", "backward")


def op_inputs(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """x, w, b with u = x * w + b between 0.25 and 2.75 (log and powers need u > 0),
    and a new exponent for the power."""
    x = torch.rand((), generator=gen, dtype=F64) + 0.5
    w = torch.rand((), generator=gen, dtype=F64) + 0.5
    b = torch.rand((), generator=gen, dtype=F64) * 0.5
    k = _EXPONENTS[int(torch.randint(len(_EXPONENTS), (), generator=gen))]
    return x, w, b, k


def ce_inputs(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """3 new logits and a target class."""
    logits = torch.randn(3, generator=gen, dtype=F64) * 2
    return logits, torch.randint(0, 3, (), generator=gen)


def _unpacked(answer: Any, names: tuple[str, ...]) -> dict | None:
    """None when the check cell handed over its tuple, else the failure."""
    if isinstance(answer, tuple) and len(answer) == len(names):
        return None
    return failure("fail", f"expected the tuple ({', '.join(names)}) from the check cell; run "
                           "the check cell as it is")


def _ran(ran: Ran) -> list[Any]:
    """How one engine pass ended, as plain data (`Ran`'s fields)."""
    got = ran.got.detach().clone() if type(ran.got) is torch.Tensor else None
    return [got, ran.failure, ran.detail, ran.nudged, list(ran.warnings), ran.largest]


def _passes(engine_grads: Any, trials: list[list[Any]]) -> list[list[Any]] | dict:
    """The engine's passes on each by-hand input, until one fails; a refused call of
    autograd ends the observation, as it ends a by-hand check."""
    runs = []
    for args in trials:
        ran = run_answer(engine_grads, [a.clone() if isinstance(a, torch.Tensor) else a
                                        for a in args])
        if ran.failure == "autograd":
            return failure("autograd", ran.detail)
        runs.append(_ran(ran))
        if ran.failure is not None:
            break
    return runs


def _value_of(out: Any, value_class: Any) -> dict[str, Any]:
    if not isinstance(out, value_class):
        return {"returned": type(out).__name__}
    try:
        return {"data": float(out.data)}
    except (TypeError, ValueError):
        return {"returned": f"a Value holding {type(out.data).__name__}"}


def _judged(label: str, runs: list[list[Any]], trials: list[list[Any]], reference: Any,
            mistakes: dict, advice: str, entries: tuple[str, ...],
            params: tuple[str, ...]) -> str | None:
    """What `judge_by_hand` says of the engine's recorded passes, as the check of
    ``label`` on ``trials`` (None: they pass), led by ``label``. ``params`` name the
    inputs."""
    report = judge_runs(runs, reference, trials, name=label, mistakes=mistakes, advice=advice,
                        entries=entries, params=params)
    bad = next((c for c in report.checks if not c.ok), None)
    return None if bad is None else f"{bad.name}: {bad.message}"


# --------------------------------------------------------------------------- Exercise 1


def _ops_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The check's inputs, from generators seeded as it always seeded them: 3 forward
    values per operation, 4 by-hand trials, 3 inputs for tanh from the pieces."""
    seed = gen.initial_seed()
    ahead = torch.Generator().manual_seed(seed)
    at = []
    for _ in range(3):
        x, w, b, k = op_inputs(ahead)
        at.append([float(x * w + b), k])
    tanh = torch.Generator().manual_seed(seed + 99)
    return {"forward": at,
            "by_hand": [list(op_inputs(torch.Generator().manual_seed(seed + k)))
                        for k in range(4)],
            "power_at": [[*(torch.tensor(v, dtype=F64) for v in xwb), k]
                         for *xwb, k in _POWER_AT],
            "tanh": [[float(t) for t in torch.randn(3, generator=tanh, dtype=F64)]
                     for _ in range(3)]}


def _engine_grads(op: str, fn: Any, value_class: Any, backward: Any):
    """The leaf gradients the learner's engine gives for f(u) * u + f(u)."""
    def grads(x, w, b, k):
        vx, vw, vb = value_class(x.item()), value_class(w.item()), value_class(b.item())
        u = vx * vw + vb
        fu = fn(u, k) if op == "power" else fn(u)
        backward(fu * u + fu)
        return torch.tensor([vx.grad, vw.grad, vb.grad], dtype=F64)
    return grads


def _shown(op: str, a: float, k: float) -> str:
    return f"{op}(Value({a:.4f}), {k:g})" if op == "power" else f"{op}(Value({a:.4f}))"


def _tanh_both(exp: Any, power: Any, value_class: Any, backward: Any, tanh: Any,
               x: float, w: float, b: float) -> dict[str, list[float]]:
    """tanh(u) built from the learner's exp and power, and the engine's own tanh node:
    each one's value and the leaf gradients of t * u + t."""
    found = {}
    for make in ("pieces", "node"):
        vx, vw, vb = value_class(x), value_class(w), value_class(b)
        u = vx * vw + vb
        if make == "pieces":
            e = exp(2 * u)
            t = (e - 1) * power(e + 1, -1)
        else:
            t = tanh(u)
        backward(t * u + t)
        found[make] = [float(v) for v in (t.data, vx.grad, vw.grad, vb.grad)]
    return found


def _forward_values(op: str, fn: Any, value_class: Any, at: list[list[float]]
                    ) -> list[dict[str, Any]] | dict:
    """``fn``'s output at each (a, k) of ``at``: its ``.data``, or what it returned
    instead of a Value; or the failure when it raised."""
    values = []
    for a, k in at:
        shown = _shown(op, a, k)
        out, failed = call_answer(fn, value_class(a), *([k] if op == "power" else []), what=op,
                                  raised=lambda err, shown=shown:
                                  f"{shown} raised {type(err).__name__}: {err}")
        if failed is not None:
            return failed
        values.append(_value_of(out, value_class))
    return values


def _observe_ops(answer: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """For each operation: its forward values (or what it returned instead of a Value),
    and the engine's passes on the by-hand inputs; then tanh from the pieces."""
    wrong = _unpacked(answer, _OPS_PIECES)
    if wrong is not None:
        return wrong
    *ops, value_class, backward, tanh = answer
    seen: dict[str, Any] = {}
    for op, fn in zip(OPS, ops, strict=True):
        if not callable(fn):
            return failure("fail", f"{op} is {type(fn).__name__}, not a function of a Value")
        values = _forward_values(op, fn, value_class, inputs["forward"])
        if isinstance(values, dict):
            return values
        runs = _passes(_engine_grads(op, fn, value_class, backward), _trials(inputs, op))
        if isinstance(runs, dict):
            return runs
        seen[op] = {"forward": values, "passes": runs}
    both = []
    for xwb in inputs["tanh"]:  # an error here is told after what the operations show
        said, failed = call_answer(_tanh_both, ops[0], ops[2], value_class, backward, tanh,
                                   *xwb, what="exp or power")
        if failed is not None and failed["failed"] != "error":
            return failed
        both.append(said if failed is None else {"raised": failed["detail"]})
    return {**seen, "tanh": both}


def _trials(inputs: dict[str, Any], op: str) -> list[list[Any]]:
    """``op``'s by-hand trials: the 4 random ones, and for power its own (`_POWER_AT`)."""
    return inputs["by_hand"] + (inputs["power_at"] if op == "power" else [])


def _tanh_reference(x: float, w: float, b: float) -> list[float]:
    leaves = [torch.tensor(v, dtype=F64, requires_grad=True) for v in (x, w, b)]
    u = leaves[0] * leaves[1] + leaves[2]
    t = torch.tanh(u)
    return [t.item(), *(g.item() for g in torch.autograd.grad(t * u + t, leaves))]


def _ops_expected(inputs: dict[str, Any]) -> dict[str, Any]:
    """What the judging needs: the right forward values, the by-hand inputs (their
    gradients are `judge_by_hand`'s to compute) and tanh's value and gradients."""
    return {**{op: {"forward": [forward(op, a, k) for a, k in inputs["forward"]],
                    "at": inputs["forward"], "by_hand": _trials(inputs, op)} for op in OPS},
            "tanh": [_tanh_reference(*xwb) for xwb in inputs["tanh"]], "at": inputs["tanh"]}


def _ops_problem(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """The first thing wrong, in the order the check always looked (None: nothing is):
    each operation's forward values and gradients, then tanh from the pieces."""
    for op in OPS:
        for (a, k), said, right in zip(want[op]["at"], got[op]["forward"], want[op]["forward"],
                                       strict=True):
            if "returned" in said:
                return (f"{_shown(op, a, k)} returned {said['returned']}; it must return a new "
                        "Value, so that backward can reach a through it")
            if not close(said["data"], right):
                return (f"{_shown(op, a, k)}.data is {said['data']:.6g}, but it should be "
                        f"{right:.6g}: the forward value is wrong")
        runs, trials = got[op]["passes"], want[op]["by_hand"]
        judged = (op == "power" and _power_at(runs, trials)) or _judged(
            f"{op} in f(u)*u + f(u)", runs, trials, op_reference(op), slips(op),
            OP_ADVICE[op], ("x.grad", "w.grad", "b.grad"), ("x", "w", "b", "k"))
        if judged is not None:
            return judged
    return tanh_problem(got, want)


def _power_at(runs: list[list[Any]], trials: list[list[Any]]) -> str | None:
    """A `_POWER_AT` trial that raised, told with its base (the by-hand words leave u out)."""
    for (x, w, b, k), (_, failed, detail, *_) in zip(trials[4:], runs[4:], strict=False):
        if failed == "error":
            u = float(x * w + b)
            return (f"power in f(u)*u + f(u): power(Value({u:g}), {k:g}) raised {detail}, but "
                    "a**k is defined there (only log needs a > 0); log(a.data) is not"
                    + (", nor is a division by a.data. " if u == 0 else ". ")
                    + OP_ADVICE["power"])
    return None


def tanh_problem(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """What is wrong with tanh built from the learner's exp and power (None: nothing):
    its value and gradients against the engine's tanh node's, which are torch's."""
    for (x, w, b), said, right in zip(want["at"], got["tanh"], want["tanh"], strict=True):
        if "raised" in said:
            return f"tanh from your exp and power: {said['raised']}"
        if not all(close(p, q) for p, q in zip(said["pieces"], right, strict=True)):
            (t_p, *g_p), (t_n, *g_n) = said["pieces"], said["node"]
            return (f"tanh from your exp and power: at u = {x * w + b:.4f}, (e - 1) * "
                    f"power(e + 1, -1) with e = exp(2u) gives tanh {t_p:.6g} and gradients "
                    f"{[round(g, 6) for g in g_p]}, but the engine's tanh node gives "
                    f"{t_n:.6g} and {[round(g, 6) for g in g_n]}")
    return None


OPS_AND_TANH = Method(
    name="exp, log and power",
    make_inputs=_ops_inputs,
    observe=_observe_ops,
    reference=_ops_expected,
    wrong=_ops_problem,
    trials=1,  # one trial holds the check's 3 + 4 + 3 cases, seeded as they always were
    passed="each matches autograd in f(u)*u + f(u) on 4 new random inputs, and tanh from "
           "your exp and power gives the engine's tanh node's value and gradients on 3 new "
           "inputs",
    vocabulary=ENGINE,  # the engine is the exercise: its classes may overload arithmetic
)


# --------------------------------------------------------------------------- Exercise 2


def _ce_inputs(gen: torch.Generator) -> dict[str, Any]:
    """3 forward cases (from the seed plus 7, their targets the 3 classes in turn) and 4
    by-hand trials, seeded as the check always seeded them."""
    seed = gen.initial_seed()
    ahead = torch.Generator().manual_seed(seed + 7)
    forward = [list(ce_inputs(ahead)) for _ in range(3)]
    for k, case in enumerate(forward):  # the 3 classes in turn: no logit is always the target
        case[1] = (forward[0][1] + k) % 3
    return {"forward": forward,
            "by_hand": [list(ce_inputs(torch.Generator().manual_seed(seed + k)))
                        for k in range(4)]}


def _exp_log_nodes(root: Any) -> list[int]:
    """How many nodes behind ``root`` hold e^x, and how many log x, of their one parent's
    value x: told by the values, so that any way of writing the operations counts (a
    function per op, a shared helper, a class)."""
    seen, todo, exps, logs = {id(root)}, [root], 0, 0
    while todo:
        node = todo.pop()
        parents = list(getattr(node, "parents", ()))
        if len(parents) == 1:
            x, y = _number(parents[0]), _number(node)
            if x is not None and y is not None:
                exps += x < 700 and math.isclose(y, math.exp(x), rel_tol=1e-12)
                logs += x > 0 and math.isclose(y, math.log(x), rel_tol=1e-12, abs_tol=1e-300)
        for p in parents:
            if id(p) not in seen:
                seen.add(id(p))
                todo.append(p)
    return [exps, logs]


def _number(node: Any) -> float | None:
    """A node's value as a float, or None when it holds something else."""
    data = getattr(node, "data", None)
    return float(data) if isinstance(data, (int, float)) and not isinstance(data, bool) else None


def _ce_shown(logits: torch.Tensor, target: torch.Tensor) -> str:
    return f"cross_entropy({[round(z, 3) for z in logits.tolist()]}, {int(target)})"


def _observe_ce(answer: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The loss on the forward cases (its value, and how many exp and log nodes its graph
    holds), then the engine's passes on the by-hand inputs."""
    wrong = _unpacked(answer, _CE_PIECES)
    if wrong is not None:
        return wrong
    cross_entropy, value_class, backward = answer
    if not callable(cross_entropy):
        return failure("fail", f"cross_entropy is {type(cross_entropy).__name__}, not a "
                               "function of 3 logits and a target")
    values = []
    for logits, target in inputs["forward"]:
        shown = _ce_shown(logits, target)
        out, failed = call_answer(
            cross_entropy, [value_class(z) for z in logits.tolist()], int(target),
            what="cross_entropy (or an operation it calls)",
            raised=lambda err, shown=shown: f"{shown} raised {type(err).__name__}: {err}")
        if failed is not None:
            return failed
        said = _value_of(out, value_class)
        values.append({**said, "nodes": _exp_log_nodes(out)} if "data" in said else said)

    def engine_grads(logits, target):
        leaves = [value_class(z) for z in logits.tolist()]
        backward(cross_entropy(leaves, int(target)))
        return torch.tensor([v.grad for v in leaves], dtype=F64)

    runs = _passes(engine_grads, inputs["by_hand"])
    return runs if isinstance(runs, dict) else {"forward": values, "passes": runs}


def _ce_expected(inputs: dict[str, Any]) -> dict[str, Any]:
    """What the judging needs: torch's loss on the forward cases, and the by-hand inputs."""
    return {"loss": [F.cross_entropy(z.unsqueeze(0), t.view(1)).item()
                     for z, t in inputs["forward"]],
            "at": inputs["forward"], "by_hand": inputs["by_hand"]}


def _ce_problem(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    for (logits, target), said, right in zip(want["at"], got["forward"], want["loss"],
                                              strict=True):
        shown = _ce_shown(logits, target)
        if "returned" in said:
            return (f"{shown} returned {said['returned']}; it must return the loss as a Value, "
                    "so that backward can start from it")
        if close(said["data"], right):
            exps, logs = said["nodes"]
            if not (exps and logs):
                return ("the loss must be built from your operations: its graph holds "
                        f"{exps} exp node(s) and {logs} log node(s), where e^z of the logits "
                        "and a log are needed. A rule written for the whole loss is not the "
                        "engine's backward through your ops")
            continue
        told = {-right: "the sign is flipped: cross-entropy is MINUS the log-probability of "
                        "the target",
                -float(logits[int(target)]): "the softmax's normalising sum is missing: "
                "log(e^z_t) is just z_t; divide by the sum of e^z over the 3 logits first",
                math.exp(-right): "the log is missing: that is the target's probability",
                -math.exp(-right): "the log is missing: that is minus the target's probability"}
        why = next((text for v, text in told.items() if close(said["data"], v)), "")
        return (f"{shown}.data is {said['data']:.6g}, but torch's F.cross_entropy gives "
                f"{right:.6g}: the loss value is wrong" + (f"; {why}" if why else ""))
    judged = _judged(CE_NAME, got["passes"], want["by_hand"], ce_reference, CE_SLIPS,
                     CE_ADVICE, ("z_1.grad", "z_2.grad", "z_3.grad"), ("logits", "target"))
    return judged and judged.removeprefix(f"{CE_NAME}: ")  # the exercise's own name


CE_NAME = "dloss/dlogits through your engine"
CROSS_ENTROPY = Method(
    name=CE_NAME,
    make_inputs=_ce_inputs,
    observe=_observe_ce,
    reference=_ce_expected,
    wrong=_ce_problem,
    trials=1,  # one trial holds the check's 3 + 4 cases, seeded as they always were
    passed="matches autograd on 4 new random inputs",
    vocabulary=ENGINE,
)
