"""Lesson 19's exercise 3: (a - b)**2 as a Function whose inputs broadcast. The
observation calls backward itself, to see the shapes it returns: the engine would sum a
gradient of the output's shape down to the input's and hide the slip."""

from __future__ import annotations

from typing import Any

import torch

from .._spec import Method, call_answer, compare, failure, forbid_autograd, is_failure, relative
from .calling import kept_when_applied, plain, randn, shape_of, stash_caution, torch_check, words

_FUNCTION = "(a - b)**2 as a Function"
# Every check starts on the shapes of the exercise's text, then runs every pair below:
# each pattern of broadcasting catches slips of its own, and a check that drew a few of
# them let those slips through on the seeds that missed them.
_FIRST_PAIR = ((3, 1), (1, 4))
_PAIRS = (
    ((2, 3, 1), (4,)),  # b gains two leading dimensions: summing only one is not enough
    ((5,), (2, 1)),  # a gains a leading dimension, b is stretched along its last
    ((1, 4), (3, 4)),  # b is not broadcast at all: its gradient has the output's shape
    ((2, 1, 3), (4, 1)),  # a stretched in the middle, neither at the start nor at the end
    ((3, 1, 2), (1, 5, 1)),  # b stretched along two dimensions, not only its first 1
    ((4, 3), (3,)),  # b gains a leading dimension
)


def _shape_pairs():
    """The pairs of input shapes every check runs: (3, 1) x (1, 4) first, then `_PAIRS`."""
    return [_FIRST_PAIR, *_PAIRS]


def _broadcast_dims(shape, out_shape):
    """The dimensions of out_shape along which a tensor of ``shape`` was broadcast."""
    lead = len(out_shape) - len(shape)
    return [d for d in range(len(out_shape))
            if d < lead or (shape[d - lead] == 1 and out_shape[d] != 1)]


def _dims_text(dims):
    """'dimension 1' or 'dimensions 0 and 2'."""
    if len(dims) == 1:
        return f"dimension {dims[0]}"
    return "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}"


def _shape_message(label, got, want, out_shape):
    broadcast = _broadcast_dims(want, out_shape)
    if not broadcast:
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}. "
                f"{label} has the output's shape {tuple(out_shape)} (it was not broadcast), "
                "so its gradient has that shape too: no sum is needed.")
    dims, them = _dims_text(broadcast), "it" if len(broadcast) == 1 else "them"
    if got == tuple(out_shape):
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
                f"it still has the output's shape. {label} was broadcast along {dims} of the "
                f"output, so sum the gradient over {them} (keepdim=True where "
                f"{label} has a 1) to get back to {want}. The engine happens to do this sum "
                "for you when the shapes allow, which is why gradcheck alone cannot see it; "
                "a backward still returns one gradient per input, shaped like it.")
    if torch.Size(got).numel() == torch.Size(want).numel():
        return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
                "the right number of entries, but a summed dimension was dropped. Keep it with "
                "keepdim=True (or reshape to the input's shape).")
    return (f"backward returned a gradient of shape {got} for {label} of shape {want}: "
            f"summed over the wrong dimensions. {label} was broadcast along {dims} of the "
            f"output {tuple(out_shape)}; sum over exactly those.")


def _estimate_like(got, want):
    """Close to the answer the way a numerical estimate is, not to round-off."""
    return got.is_floating_point() and relative(got.double(), want) < 1e-5


def _backward_itself(function, out, g):
    """What ``function.backward`` returns for ``out``, called directly with the output's
    grad_fn as its ctx: the engine would sum a gradient of the broadcast shape down to the
    input's shape by itself, and hide the shape backward really returns."""
    with torch.no_grad(), forbid_autograd():
        return function.backward(out.grad_fn, g)


def _broadcast_inputs(gen: torch.Generator) -> dict[str, Any]:
    """Every pair of inputs and a grad_output shaped like their broadcast (a, b, then
    grad_output, pair after pair), drawn from a generator of its own (seeded 1000 after the
    check's seed)."""
    draw = torch.Generator().manual_seed(1000 + gen.initial_seed())
    pairs = []
    for a_shape, b_shape in _shape_pairs():
        a, b = randn(draw, *a_shape), randn(draw, *b_shape)
        pairs.append([a, b, randn(draw, *torch.broadcast_shapes(a_shape, b_shape))])
    return {"pairs": pairs}


def _backward_record(answer: Any, out: torch.Tensor, g: torch.Tensor,
                     raised: Any = None) -> Any:
    """backward called itself on ``out``'s node: how many values it returned, the first two
    as plain data and their kinds (a `failure` when it raised)."""
    grads, failed = call_answer(_backward_itself, answer, out, g.clone(), what="it",
                                raised=raised)
    if failed is not None:
        return failed
    returned = list(grads) if isinstance(grads, (tuple, list)) else [grads]
    return {"count": len(returned), "grads": [plain(t) for t in returned[:2]],
            "types": [type(t).__name__ for t in returned[:2]]}


def _observe_pair(answer: Any, a: torch.Tensor, b: torch.Tensor, g: torch.Tensor,
                  gradcheck: bool) -> Any:
    """Forward through .apply, then backward called itself: what each gave (a `failure`
    when one raised, naming the shapes it raised on), and with ``gradcheck``, its verdict."""
    def raised(err: Exception) -> str:
        return (f"raised {type(err).__name__}: {err} (inputs of shapes {shape_of(a)} and "
                f"{shape_of(b)})")

    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    out, failed = call_answer(answer.apply, a, b, what="it", raised=raised)
    if failed is not None:
        return failed
    if not isinstance(out, torch.Tensor):
        return {"out": type(out).__name__}
    record: dict[str, Any] = {"out": out.detach().clone(), "graph": out.grad_fn is not None}
    if out.grad_fn is None or out.shape != g.shape:
        return record
    returned = _backward_record(answer, out, g, raised=raised)
    if is_failure(returned):
        return returned
    record.update(returned, gradcheck=not gradcheck or torch_check(
        torch.autograd.gradcheck, answer.apply, (a, b))[0])
    return record


def _with_constant(answer: Any, a: torch.Tensor, b: torch.Tensor, g: torch.Tensor,
                   constant: str) -> Any:
    """backward called itself when the input labelled ``constant`` does not require grad
    (``ctx.needs_input_grad`` False in its place): what it returned (a `failure` when
    forward or backward raised)."""
    when = f"with {constant} not requiring grad"
    a = a.clone().requires_grad_(constant != "a")
    b = b.clone().requires_grad_(constant != "b")
    out, failed = call_answer(answer.apply, a, b, what="it",
                              raised=lambda err: f"{when}, forward raised "
                                                 f"{type(err).__name__}: {err}")
    if failed is not None:
        return failed
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        other = "a" if constant == "b" else "b"
        return failure("fail", f"{when}, forward's output has no grad_fn, though {other} "
                               "requires grad: return a tensor computed from a and b.")
    return _backward_record(answer, out, g, raised=lambda err: f"{when}, backward raised "
                                                              f"{type(err).__name__}: {err}")


def _observe_broadcast(answer: Any, inputs: dict[str, Any]) -> Any:
    """Each pair in turn, up to the first that could not go on to backward; when every
    pair went through, the first pair again with b, then a, not requiring grad."""
    if not (isinstance(answer, type) and issubclass(answer, torch.autograd.Function)):
        return failure("fail", f"expected a class derived from torch.autograd.Function, got "
                               f"{type(answer).__name__}.")
    records = []
    # gradcheck on the text's shapes only: on the others, backward meets autograd's gradient
    # for a random grad_output, and gradcheck on each of 7 pairs would double the check's time.
    for i, (a, b, g) in enumerate(inputs["pairs"]):
        record = _observe_pair(answer, a, b, g, gradcheck=i == 0)
        if is_failure(record):
            return record
        records.append(record)
        if "count" not in record:
            return {"pairs": records}
    constants = {}
    for constant in "ba":
        record = _with_constant(answer, *inputs["pairs"][0], constant)
        if is_failure(record):
            return record
        constants[constant] = record
    a, b, _ = inputs["pairs"][0]
    return {"pairs": records, "constants": constants, "kept": kept_when_applied(answer, (a, b))}


def _broadcast_want(inputs: dict[str, Any]) -> dict[str, Any]:
    grads = []
    for a, b, g in inputs["pairs"]:
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        grads.append(torch.autograd.grad((a - b) ** 2, (a, b), g))
    return {"pairs": inputs["pairs"], "grads": grads}


def _forward_slip(record: dict[str, Any], a: torch.Tensor, b: torch.Tensor) -> str | None:
    a_shape, b_shape = shape_of(a), shape_of(b)
    want_out = (a - b) ** 2
    out = record["out"]
    if not isinstance(out, torch.Tensor) or shape_of(out) != shape_of(want_out):
        got = shape_of(out) if isinstance(out, torch.Tensor) else out
        return (f"forward returned {got} for inputs of shapes {a_shape} and {b_shape}; "
                f"expected (a - b)**2, shape {shape_of(want_out)}.")
    if not compare("forward", out, want_out).ok:
        return f"forward does not compute (a - b)**2 (inputs of shapes {a_shape} and {b_shape})."
    if not record["graph"]:
        return ("forward's output has no grad_fn: call the Function through .apply and "
                "return a tensor computed from a, b.")
    return None


def _gradient_slip(label: str, got: Any, kind: str, want: torch.Tensor, shapes: str,
                   out_shape: tuple[int, ...]) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"backward returned {kind} for {label}; expected a tensor shaped like it."
    if shape_of(got) != shape_of(want):
        return _shape_message(label, shape_of(got), shape_of(want), out_shape)
    # The check computes the reference itself: no .grad of it can have accumulated.
    report = compare(f"grad_{label} ({shapes})", got, want, rtol=1e-12,
                     atol=1e-12 * float(want.abs().max()), accumulation=False)
    if not report.ok and _estimate_like(got, want):
        return (f"grad_{label} agrees with autograd only to about {relative(got, want):.0e} "
                "of its size. A formula derived by hand agrees to round-off (about 1e-16); a "
                "numerical estimate such as finite differences only to about 1e-9, which is "
                "what this looks like.")
    return words(report, _FUNCTION)


def _constant_slip(constants: dict[str, Any], a: torch.Tensor, b: torch.Tensor,
                   grads: tuple[torch.Tensor, torch.Tensor]) -> str | None:
    """What backward gets wrong when one input needs no gradient (the first pair), or None.
    The gradient it returns for that input is dropped by autograd: any value is fine."""
    shapes = f"shapes {shape_of(a)} and {shape_of(b)}"
    out_shape = torch.broadcast_shapes(a.shape, b.shape)
    for constant, label in (("b", "a"), ("a", "b")):
        record, k = constants[constant], "ab".index(label)
        when = (f"with {constant} not requiring grad "
                f"(ctx.needs_input_grad[{'ab'.index(constant)}] False)")
        if record["count"] != 2:
            return (f"{when}, backward returned {record['count']} value(s); it still returns one "
                    f"per input of forward: (grad_a, grad_b), None allowed in {constant}'s "
                    "place.")
        if record["types"][k] == "NoneType":
            return (f"{when}, backward returned None for {label}, which requires grad. "
                    "ctx.needs_input_grad has one entry per input of forward, in its order "
                    f"(a, b): {label}'s is ctx.needs_input_grad[{k}].")
        slip = _gradient_slip(label, record["grads"][k], record["types"][k], grads[k], shapes,
                              tuple(out_shape))
        if slip is not None:
            return f"{when}: {slip}"
    return None


def _broadcast_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """The first thing wrong, pair by pair, in the order the check always looked; then
    with one input not requiring grad."""
    for record, (a, b, _), (da, db) in zip(got["pairs"], want["pairs"], want["grads"],
                                           strict=False):
        shapes = f"shapes {shape_of(a)} and {shape_of(b)}"
        slip = _forward_slip(record, a, b)
        if slip is None and record["count"] != 2:
            slip = (f"backward returned {record['count']} value(s); it returns one gradient "
                    "per input of forward: (grad_a, grad_b).")
        for label, t, kind, want_t in zip("ab", record.get("grads", []),
                                          record.get("types", []), (da, db), strict=False):
            slip = slip or _gradient_slip(label, t, kind, want_t, shapes, shape_of(record["out"]))
        if slip is None and not record["gradcheck"]:
            slip = f"gradcheck failed in float64 on inputs of {shapes}."
        if slip is not None:
            return slip
    if len(got["pairs"]) != len(want["pairs"]):  # never from a run that went through
        return f"only {len(got['pairs'])} of the {len(want['pairs'])} pairs of inputs were run."
    a, b, _ = want["pairs"][0]
    return _constant_slip(got["constants"], a, b, want["grads"][0])


BROADCAST = Method(
    name=_FUNCTION,
    make_inputs=_broadcast_inputs,
    observe=_observe_broadcast,
    reference=_broadcast_want,
    wrong=_broadcast_slip,
    caution=stash_caution,
    trials=1,
    passed="backward returns gradients shaped like a and b, equal to autograd's, for inputs "
           f"of {len(_shape_pairs())} pairs of shapes that broadcast, and for (3, 1) and (1, 4) "
           "when only a or only b requires grad; gradcheck on (3, 1) and (1, 4): passed in "
           "float64",
)
