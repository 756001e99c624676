"""Lesson 22's method exercise: ``soft_relu`` rewritten so that the branch ``torch.where``
leaves unused cannot make its gradient NaN."""

from __future__ import annotations

import torch

from .._spec import Method, call_answer, failure, plain, randint

F64 = torch.float64

# --------------------------------------------------------------------------- Exercise 4

SOFT = "safe_soft_relu"
THRESHOLD = 20.0
OVERFLOW = 709.0  # exp overflows float64 above about 709.78


def soft_relu(x, beta):
    """The lesson's function, as written: x where beta * x > 20, else log(1 + e^(beta x))
    / beta (torch.nn.Softplus with a threshold, a beta per entry). Its gradient is NaN
    where beta * x is above about 709."""
    bx = beta * x
    return torch.where(bx > THRESHOLD, x, torch.log1p(torch.exp(bx)) / beta)


_REFERENCE_RUNS = [0]  # how often the reference ran: an answer must not call it


def soft_relu_reference(x, beta):
    """The same values; a gradient without NaN (the unused branch never sees bx > 20)."""
    _REFERENCE_RUNS[0] += 1
    bx = beta * x
    big = bx > THRESHOLD
    return torch.where(big, x, torch.log1p(torch.exp(torch.where(big, 0.0, bx))) / beta)


_REGIONS = ("beta * x <= 20", "20 < beta * x <= 709", "beta * x > 709 (exp overflows there)")


def soft_inputs(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """x and beta (float64) with beta * x in every region: far below 0 (exp underflows),
    ordinary values up to 20, within 0.01 of 20 on both sides (a threshold moved further
    off 20 shows there on every trial), above 20 and above 709 (exp overflows). None is
    exactly 20: there the two branches differ by 2e-9, and clamp's gradient at its bound
    depends on torch's version."""
    n = randint(8, 13, gen)
    ranges = [(-900.0, -750.0), (-20.0, 19.99), (19.99, 19.999), (20.001, 20.01), (20.01, 22.0),
              (720.0, 900.0)]
    kinds = torch.cat([torch.arange(len(ranges)),
                       torch.randint(0, len(ranges), (n - len(ranges),), generator=gen)])
    kinds = kinds[torch.randperm(n, generator=gen)]
    low = torch.tensor([ranges[k][0] for k in kinds], dtype=F64)
    high = torch.tensor([ranges[k][1] for k in kinds], dtype=F64)
    bx = low + (high - low) * torch.rand(n, generator=gen, dtype=F64)
    beta = 0.5 + 1.5 * torch.rand(n, generator=gen, dtype=F64)
    return bx / beta, beta


def _region(bx: torch.Tensor) -> torch.Tensor:
    return (bx > THRESHOLD).long() + (bx > OVERFLOW).long()


def _soft_trial(gen: torch.Generator) -> dict[str, torch.Tensor]:
    """One trial: x and beta in every region, and the gradient arriving at the output."""
    x, beta = soft_inputs(gen)
    return {"x": x, "beta": beta, "upstream": torch.randn(x.shape, generator=gen, dtype=F64)}


def _observe_soft(answer, inputs) -> dict:
    """What the learner's function returns for x and beta (each needing its gradient), and
    what autograd sends back to them through it from the upstream gradient."""
    x, beta = (inputs[k].clone().requires_grad_() for k in ("x", "beta"))
    runs = _REFERENCE_RUNS[0]
    out, failed = call_answer(answer, x, beta, what="safe_soft_relu",
                              not_callable=f"expected the function safe_soft_relu(x, beta), "
                                           f"got {type(answer).__name__}.")
    if failed is not None:
        return failed
    if _REFERENCE_RUNS[0] != runs:
        return failure("fail", "it calls the check's own reference (soft_relu_reference of "
                               "backproplab's lesson module): the rewrite is yours to write.")
    if not isinstance(out, torch.Tensor):
        return {"returned": type(out).__name__}
    seen = {"values": plain(out.detach()), "connected": out.requires_grad, "grads": None,
            "raised": None}
    if out.requires_grad:
        try:
            grads = torch.autograd.grad(out, (x, beta), inputs["upstream"], allow_unused=True)
        except Exception as err:  # the learner's own backward (a Function, a hook) raised
            seen["raised"] = f"{type(err).__name__}: {err}"
        else:
            seen["grads"] = [plain(g) for g in grads]
    return seen


def _soft_reference(inputs) -> dict:
    """The safe rewrite's values and gradients; with, for comparing, each entry's region
    and the round-off a right formula's gradients may show (see `_slack`)."""
    x, beta = (inputs[k].clone().requires_grad_() for k in ("x", "beta"))
    values = soft_relu_reference(x, beta)
    grads = torch.autograd.grad(values, (x, beta), inputs["upstream"])
    return {"values": values.detach(), "grads": list(grads), "regions": _region(beta * x).detach(),
            "slack": _slack(inputs, values.detach(), grads[0])}


def _slack(inputs, values: torch.Tensor, dx: torch.Tensor) -> list[torch.Tensor]:
    """How far a right formula's gradients may stray, entry by entry. The gradient with
    respect to x has no cancellation: round-off relative to its size (`_close`). The one
    with respect to beta of f = g(beta x) / beta is (x df/dx - f) / beta, two terms that
    nearly cancel where beta * x is just under 20 (and cancel exactly above it): any right
    formula's round-off there is a few ulps of the terms, not of the small result, so a
    correct rewrite in another form (F.softplus(bx) / beta, say) is not refused for it."""
    x, beta, upstream = inputs["x"], inputs["beta"], inputs["upstream"]
    terms = ((x * dx).abs() + (upstream * values).abs()) / beta.abs()
    return [torch.zeros_like(dx), 16 * torch.finfo(F64).eps * terms]


def _close(got: torch.Tensor, want: torch.Tensor, slack: float | torch.Tensor = 0.0):
    """Entry by entry, equal to float64 round-off (a formula, not an approximation)."""
    scale = want.abs().max().clamp(min=1.0)
    return (got.to(F64) - want).abs() <= 1e-12 * (want.abs() + 1e-3 * scale) + slack


def _where(bad: torch.Tensor, regions: torch.Tensor) -> str:
    return " and ".join(_REGIONS[r] for r in sorted(set(regions[bad].tolist())))


def _first(bad: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> str:
    """The first entry that differs, with just enough digits to show how."""
    k = int(bad.nonzero()[0])
    a, b = got[k].item(), want[k].item()
    digits = next((d for d in (6, 10, 14) if f"{a:.{d}g}" != f"{b:.{d}g}"), 17)
    return f"yours {a:.{digits}g}, expected {b:.{digits}g}"


def _values_problem(got: dict, want: dict) -> str | None:
    """What is wrong with the values, in words, or None."""
    if "returned" in got:
        return (f"safe_soft_relu(x, beta) returned {got['returned']}; it should return a tensor "
                "shaped like x.")
    out, ref = got["values"], want["values"]
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else out
        return (f"safe_soft_relu(x, beta) returned shape {shape}; expected {tuple(ref.shape)}, "
                "the shape of x.")
    bad = ~_close(out, ref)
    if bad.any():
        return (f"the values differ from soft_relu's at the entries with "
                f"{_where(bad, want['regions'])} ({_first(bad, out, ref)}). The rewrite must "
                "compute the same function: x itself where beta * x > 20, log(1 + e^(beta x)) "
                "/ beta elsewhere; only the NaN in its gradient should go.")
    if not got["connected"]:
        return ("the result is not connected to x and beta: autograd has nothing to "
                "differentiate (was it computed under no_grad, detached, or looked up?).")
    return None


def _grads_problem(got: dict, want: dict) -> str | None:
    """What is wrong with the gradients through the learner's function, or None."""
    if got["raised"] is not None:
        return f"backward through your function raised {got['raised']}"
    regions = want["regions"]
    for name, grad, ref, slack in zip(("x", "beta"), got["grads"], want["grads"],
                                      want["slack"], strict=True):
        if not isinstance(grad, torch.Tensor):
            return (f"no gradient reaches {name}: the result must depend on it as soft_relu "
                    "does.")
        broken = ~torch.isfinite(grad)
        if broken.any():
            return (f"the gradient with respect to {name} has NaN or inf at {int(broken.sum())} "
                    f"of {grad.numel()} entries, those with {_where(broken, regions)}: the "
                    "unused branch still sees that input, and 0 times its inf is NaN. Keep the "
                    "bad input away from it (a second torch.where), rather than cleaning up "
                    "after it.")
        bad = ~_close(grad, ref, slack)
        if bad.any():
            lost = bad & (grad == 0) & (ref != 0)
            why = (" Where the branch that is used has a gradient, 0 is wrong: the NaN was "
                   "replaced (nan_to_num, a hook) rather than prevented, and the good part of "
                   "the gradient went with it." if (lost & (regions == 2)).any() else
                   " No gradient came through where that branch is used: is it detached, or "
                   "computed under no_grad?" if lost.any() else "")
            return (f"the gradient with respect to {name} differs from the function's at the "
                    f"entries with {_where(bad, regions)} ({_first(bad, grad, ref)})." + why)
    return None


def _soft_problem(got: dict, want: dict) -> str | None:
    return _values_problem(got, want) or _grads_problem(got, want)


SAFE_SOFTPLUS = Method(
    name=SOFT,
    make_inputs=_soft_trial,
    observe=_observe_soft,
    reference=_soft_reference,
    wrong=_soft_problem,
    trials=3,
    passed="the same values as soft_relu and finite gradients with respect to x and beta "
           "equal to the safe rewrite's, on 3 new inputs in every region (exp overflowing "
           "included)",
)
