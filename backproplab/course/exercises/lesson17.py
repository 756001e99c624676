"""Lesson 17, the backward in lower precision: its exercises and its prediction.

- ``l17-scale-range`` (by hand): for a linear layer with a mean-squared-error loss, the
  range of loss scales, as powers of two, that lift the smallest entry of the output
  gradient into float16's normal numbers without letting the weight or bias gradient
  pass float16's largest number. Checked like a gradient by hand (`ByHand`): new shapes
  and new residual sizes on every trial, autograd off, the reference from autograd in
  float64. Its slips are about the chain rule of the mean and about float16's limits.
- ``l17-scaled-step`` (method): one step of a dynamic loss scaler with gradient clipping,
  written by the learner. The check runs fresh float16-autocast trainings with
  overflows injected on chosen steps, counts the backward passes, refuses
  ``GradScaler`` inside the answer, and compares the scale history, the steps taken and
  the parameters with ``torch.amp.GradScaler`` doing the same training. A slip is named
  only when the learner's whole run equals a run with that slip.

The prediction runs a Linear(3, 4) under float16 autocast and counts the rows of its
weight gradient that come out all zero.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._spec import AutogradForbidden, ByHand, Check, Method, Prediction, Report, count_autograd
from ._spec import failed as _fail

FP16_NORMAL = torch.finfo(torch.float16).tiny  # 2**-14, the smallest normal float16
FP16_SUBNORMAL = 2.0**-24  # the smallest positive float16 of all
FP16_MAX = torch.finfo(torch.float16).max  # 65504


# --------------------------------------------------------------------------- Exercise 2


def scale_bounds(gy: torch.Tensor, gW: torch.Tensor, gb: torch.Tensor,
                 smallest: float = FP16_NORMAL, largest: float = FP16_MAX,
                 rounding: tuple[Callable, Callable] = (torch.ceil, torch.floor),
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The lowest power of two that lifts every nonzero |gy| to ``smallest`` or more, and
    the highest that keeps every |gW| and |gb| at ``largest`` or less."""
    low = gy.abs()[gy != 0].min()
    high = torch.maximum(gW.abs().max(), gb.abs().max())
    return (torch.exp2(rounding[0](torch.log2(smallest / low))),
            torch.exp2(rounding[1](torch.log2(largest / high))))


def _scale_range_reference(x, W, b, t):
    W = W.detach().clone().requires_grad_()
    b = b.detach().clone().requires_grad_()
    y = x @ W.T + b
    gy, gW, gb = torch.autograd.grad(F.mse_loss(y, t), (y, W, b))
    return scale_bounds(gy, gW, gb)


def _new_layer(gen):
    """A batch x (N x K), a layer W (M x K), b (M), and targets t a residual away from the
    layer's output; the residual's size changes over four orders of magnitude.

    Every slip must show on every trial, so the numbers are arranged for it: each column's
    residual leans one way (an offset of 2 to 3, in units of its size), so dL/db, a sum
    over N >= 6 rows, is several times every entry of dL/dy; x is small (sd 0.05), so dL/dW
    stays several times below dL/db; and one entry of the residual is a hundred times
    smaller than the rest, so the smallest and largest entries of dL/dy are far apart."""
    n = int(torch.randint(6, 41, (1,), generator=gen))
    k = int(torch.randint(1, 9, (1,), generator=gen))
    m = int(torch.randint(4, 9, (1,), generator=gen))  # 4 or more: no slip mimics another
    x = 0.05 * torch.randn(n, k, generator=gen, dtype=torch.float64)
    W = 0.5 * torch.randn(m, k, generator=gen, dtype=torch.float64)
    b = 0.1 * torch.randn(m, generator=gen, dtype=torch.float64)
    size = 10.0 ** float(-5 + 4 * torch.rand(1, generator=gen, dtype=torch.float64))
    sign = torch.randint(0, 2, (m,), generator=gen).to(torch.float64) * 2 - 1
    offset = sign * (2 + torch.rand(m, generator=gen, dtype=torch.float64))
    residual = offset + 0.3 * torch.randn(n, m, generator=gen, dtype=torch.float64)
    residual[0, 0] *= 0.01
    t = x @ W.T + b - size * residual
    return x, W, b, t


def _grads(x, W, b, t, divide=None, factor=2.0):
    """The layer's gradients by the chain rule, with a chosen divisor and factor (slips)."""
    r = x @ W.T + b - t
    gy = factor * r / (r.numel() if divide is None else divide)
    return gy, gy.T @ x, gy.sum(0)


SCALE_SLIPS = {
    "the mean is over every entry of the output, N·M of them, not over the N rows of the "
    "batch: dL/dy = 2 (y - t) / (N·M)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t, divide=x.shape[0])),
    "the factor 2 from the square is missing: dL/dy = 2 (y - t) / (N·M)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t, factor=1.0)),
    "you lifted the smallest entry to float16's smallest subnormal, 2**-24; the task asks "
    "for its smallest normal number, 2**-14 (torch.finfo(torch.float16).tiny), below which "
    "float16 keeps fewer digits":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t), smallest=FP16_SUBNORMAL),
    "the lowest scale was taken from the largest entry of dL/dy: it must lift the smallest "
    "nonzero one":
        lambda x, W, b, t: (torch.exp2(torch.ceil(torch.log2(
            FP16_NORMAL / _grads(x, W, b, t)[0].abs().max()))),
            scale_bounds(*_grads(x, W, b, t))[1]),
    "the highest scale was taken from dL/dy: the largest float16 numbers of this backward "
    "are in the weight and bias gradients, sums over the batch (dL/dW = dL/dy^T x, "
    "dL/db = the column sums of dL/dy)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t)[:1] * 3),
    "the bias gradient was left out of the highest scale: dL/db, the column sums of dL/dy, "
    "is a float16 number of this backward too, and a sum over the batch can be the largest":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t)[:2], torch.zeros(1)),
    "the scales are not powers of two: round the lowest up and the highest down to a power "
    "of two (2 ** ceil(log2 ...), 2 ** floor(log2 ...))":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(lambda v: v, lambda v: v)),
    "rounded the wrong way: the lowest scale must reach 2**-14 (round its exponent up), the "
    "highest must stay at 65504 or below (round its exponent down)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(torch.floor, torch.ceil)),
}

SCALE_ADVICE = (
    "Write out dL/dy for L = mean((y - t)**2) on a 2 x 2 example, then dL/dW and dL/db from "
    "it; the lowest scale comes from the smallest nonzero |dL/dy|, the highest from the "
    "largest |dL/dW| or |dL/db|, each rounded to a power of two."
)

# --------------------------------------------------------------------------- Exercise 3

STEPS = 10


def _tiny_model(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))


class OverflowingLoss:
    """loss_fn(model, batch): a float16-autocast forward and a float32 MSE loss. On the steps
    in ``overflow_at`` (set ``step`` before each call) the gradient that reaches the model's
    float16 output is replaced by inf, as a float16 overflow would make it."""

    def __init__(self, overflow_at: set[int]):
        self.overflow_at = set(overflow_at)
        self.step = 0

    def __call__(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> Any:
        x, y = batch
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
        if self.step in self.overflow_at:
            out.register_hook(lambda g: torch.full_like(g, float("inf")))
        return F.mse_loss(out.float(), y)


def scaler_setup(seed: int) -> dict[str, Any]:
    """A fresh training: scaler settings, data, and the steps on which an overflow is
    injected (two of them, never the first step)."""
    gen = torch.Generator().manual_seed(seed)

    def pick(options):
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]

    state = {
        "scale": 2.0 ** int(torch.randint(8, 14, (1,), generator=gen)),
        "growth_factor": pick((2.0, 4.0)),
        "backoff_factor": pick((0.5, 0.25)),
        "growth_interval": int(torch.randint(2, 4, (1,), generator=gen)),
        "clean_steps": 0,
        "max_norm": pick((0.25, 0.5)),
    }
    overflow_at = {int(i) + 1 for i in torch.randperm(STEPS - 1, generator=gen)[:2]}
    batches = [(torch.randn(32, 6, generator=gen), torch.randn(32, 1, generator=gen))
               for _ in range(STEPS)]
    return {"state": state, "overflow_at": overflow_at, "batches": batches,
            "model_seed": int(torch.randint(0, 2**20, (1,), generator=gen))}


def run_training(step: Callable, setup: dict[str, Any]) -> dict[str, Any]:
    """Run ``step(model, loss_fn, batch, optimizer, state)`` over a fresh training; what
    each step returned, the scale after each step, and the final parameters."""
    model = _tiny_model(setup["model_seed"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = OverflowingLoss(setup["overflow_at"])
    state = dict(setup["state"])
    taken, scales = [], []
    for k, batch in enumerate(setup["batches"]):
        loss_fn.step = k
        taken.append(step(model, loss_fn, (batch[0].clone(), batch[1].clone()), optimizer,
                          state))
        scale = state.get("scale")
        scales.append(float(scale) if isinstance(scale, (int, float, torch.Tensor)) else scale)
    return {"taken": taken, "scales": scales,
            "params": [p.detach().clone() for p in model.parameters()]}


def gradscaler_step_fn(settings: dict[str, Any]) -> Callable:
    """A step function that does the work with torch.amp.GradScaler (the reference)."""
    scaler = torch.amp.GradScaler(
        "cpu", init_scale=settings["scale"], growth_factor=settings["growth_factor"],
        backoff_factor=settings["backoff_factor"], growth_interval=settings["growth_interval"])

    def step(model, loss_fn, batch, optimizer, state):
        optimizer.zero_grad()
        before = scaler.get_scale()
        scaler.scale(loss_fn(model, batch)).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), state["max_norm"])
        scaler.step(optimizer)
        scaler.update()
        state["scale"] = scaler.get_scale()
        return state["scale"] >= before  # an overflow always shrinks the scale

    return step


def hand_step(model, loss_fn, batch, optimizer, state, slip=None):
    """The scaler's step written out, or with one ``slip`` (a name of STEP_SLIPS)."""
    if slip not in ("no zero", "zero after step"):
        optimizer.zero_grad()
    (loss_fn(model, batch) * state["scale"]).backward()
    if slip == "zero after backward":
        optimizer.zero_grad()
    params = [p for p in model.parameters() if p.grad is not None]
    if slip == "clip scaled":
        nn.utils.clip_grad_norm_(params, state["max_norm"])
    for _ in range(2 if slip == "unscale twice" else 1):
        for p in params:
            p.grad.div_(state["scale"])
    finite = all(bool(torch.isfinite(p.grad).all()) for p in params)
    if finite or slip == "no skip":
        if slip != "clip scaled":
            nn.utils.clip_grad_norm_(params, state["max_norm"])
        optimizer.step()
        if slip == "zero after step":
            optimizer.zero_grad()
    if finite:
        state["clean_steps"] += 1
        if slip == "grow every step" or state["clean_steps"] == state["growth_interval"]:
            state["scale"] *= state["growth_factor"]
            state["clean_steps"] = 0
    else:
        if slip != "no backoff":
            state["scale"] *= state["backoff_factor"]
        if slip != "no reset":
            state["clean_steps"] = 0
    return finite


STEP_SLIPS = {
    "clip scaled":
        "you clipped the scaled gradients: their norm is the scale times too large, so "
        "clipping cut them far too much. Unscale first, then clip",
    "unscale twice":
        "the gradients were divided by the scale twice: unscale once per step",
    "no skip":
        "a step with inf/NaN gradients was taken, and the parameters are now NaN: when a "
        "gradient is not finite, skip optimizer.step() and only shrink the scale",
    "grow every step":
        "the scale grew after every clean step: grow it only after growth_interval clean "
        "steps in a row, then start counting again",
    "no reset":
        "after an overflow the count of clean steps went on from where it was: an overflow "
        "starts the count again at 0",
    "no backoff":
        "the step was skipped but the scale stayed the same: multiply it by backoff_factor "
        "on every overflow",
    "zero after backward":
        "the gradients were zeroed after backward, so every step had nothing to apply: zero "
        "them at the start of the step, before backward",
    "zero after step":
        "the gradients were zeroed only after a step that was taken, so the inf of a skipped "
        "step stayed in .grad and spoiled every later step: zero them at the start of every "
        "step",
    "no zero":
        "the gradients were never zeroed, so each backward added to the last: zero them at "
        "the start of every step",
}


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["taken"] != b["taken"] or a["scales"] != b["scales"]:
        return False
    return all(p.shape == q.shape and torch.allclose(p, q, rtol=1e-5, atol=1e-6, equal_nan=True)
               for p, q in zip(a["params"], b["params"], strict=True))


@contextlib.contextmanager
def _no_gradscaler() -> Iterator[None]:
    """Refuse GradScaler's methods and its two kernels while the answer runs."""
    cls = torch.amp.grad_scaler.GradScaler

    def refuse(*args, **kwargs):
        raise AutogradForbidden(
            "this exercise asks you to write what GradScaler does, but your code used "
            "torch.amp.GradScaler (or its kernels): scale, unscale, check and update by hand")

    methods = {name: cls.__dict__[name] for name in ("scale", "unscale_", "step", "update")}
    kernels = {name: getattr(torch, name) for name in
               ("_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_")}
    try:
        for name in methods:
            setattr(cls, name, refuse)
        for name in kernels:
            setattr(torch, name, refuse)
        yield
    finally:
        for name, fn in methods.items():
            setattr(cls, name, fn)
        for name, fn in kernels.items():
            setattr(torch, name, fn)


def _describe(setup: dict[str, Any]) -> str:
    s = setup["state"]
    at = " and ".join(str(k) for k in sorted(setup["overflow_at"]))
    return (f"a new run of {STEPS} steps (scale {s['scale']:g}, growth x{s['growth_factor']:g} "
            f"every {s['growth_interval']} clean steps, backoff x{s['backoff_factor']:g}, "
            f"max_norm {s['max_norm']:g}, overflows at steps {at}, counted from 0)")


def _first_difference(got: dict[str, Any], want: dict[str, Any]) -> str:
    for k, (a, b, s, r) in enumerate(zip(got["taken"], want["taken"], got["scales"],
                                         want["scales"], strict=True)):
        if a != b or s != r:
            did = {True: "taken", False: "skipped"}
            return (f"at step {k} your step was {did.get(a, repr(a))} and the scale became "
                    f"{s}; expected {did[b]} and {r:g}")
    return ("the steps taken and the scales are right, but the parameters at the end differ: "
            "look at what reaches optimizer.step() (unscaled once, then clipped)")


def _check_scaled_step(answer: Any, seed: int) -> Any:
    name = "scaled_step"
    if not callable(answer):
        return _fail(name, f"expected a function (model, loss_fn, batch, optimizer, state) "
                           f"-> True or False, got {type(answer).__name__}")
    for trial in range(2):
        setup = scaler_setup(seed * 10 + trial + 170)
        try:
            with count_autograd() as seen, _no_gradscaler():
                got = run_training(answer, setup)
        except AutogradForbidden as err:
            return _fail(name, str(err), "autograd")
        except NotImplementedError:
            return _fail(name, "not written yet: it still raises NotImplementedError.",
                         "missing")
        except Exception as err:
            line = (str(err).strip().splitlines() or [type(err).__name__])[0]
            return _fail(name, f"raised {type(err).__name__}: {line}", "error")
        where = _describe(setup)
        if not all(isinstance(t, bool) for t in got["taken"]):
            return _fail(name, f"on {where}: return True when the step was taken and False "
                               f"when it was skipped; yours returned {got['taken'][0]!r}")
        if seen.reverse != STEPS:
            return _fail(name, f"on {where}: {seen.reverse} backward passes in {STEPS} steps. "
                               "One backward per step: scale the loss, call backward once, "
                               "and decide from the gradients it gives")
        if not all(isinstance(s, float) for s in got["scales"]):
            return _fail(name, "state['scale'] must stay a number: multiply it in place")
        want = run_training(gradscaler_step_fn(setup["state"]), setup)
        if _same_run(got, want):
            continue
        for slip, words in STEP_SLIPS.items():
            if _same_run(got, run_training(
                    lambda *a, slip=slip: hand_step(*a, slip=slip), setup)):
                return _fail(name, f"on {where}: {words}")
        if not all(bool(torch.isfinite(p).all()) for p in got["params"]):
            return _fail(name, f"on {where}: the parameters are not finite at the end: a "
                               "step whose gradients hold inf or NaN must be skipped")
        return _fail(name, f"on {where}: {_first_difference(got, want)}")
    return Report((Check(
        name, True, "pass",
        f"on 2 new runs of {STEPS} steps with overflows injected: one backward per step, "
        "the overflowing steps skipped, the scale history and the parameters equal to "
        "torch.amp.GradScaler's"),))


SCALE_RANGE = ByHand(
    name="loss scale range",
    reference=_scale_range_reference,
    make_inputs=_new_layer,
    outputs=("lowest scale", "highest scale"),
    mistakes=SCALE_SLIPS,
    advice=SCALE_ADVICE,
)

EXERCISES = {
    "l17-scale-range": SCALE_RANGE,
    "l17-scaled-step": Method(check=_check_scaled_step),
}

# --------------------------------------------------------------------------- prediction

ROW_FACTORS = (3e-3, 5e-5, 4e-7, 2e-8)


def zero_rows_experiment() -> torch.Tensor:
    """The prediction's experiment: Linear(3, 4) on torch.ones(8, 3) under float16
    autocast, loss (y * c).sum() with c = ROW_FACTORS; the weight gradient."""
    with torch.random.fork_rng():
        torch.manual_seed(17)
        layer = nn.Linear(3, 4)
    with torch.autocast("cpu", dtype=torch.float16):
        y = layer(torch.ones(8, 3))
    (y * torch.tensor(ROW_FACTORS)).sum().backward()
    return layer.weight.grad


PREDICTIONS = {
    "l17-predict-zero-rows": Prediction(
        question="how many rows of the weight gradient are all zero",
        answer=lambda: int((zero_rows_experiment() == 0).all(dim=1).sum()),
        hint="follow the gradient backwards: which tensor does autograd round to float16 "
             "first, before any sum over the batch, and which of the four numbers does "
             "float16 still hold, counting its subnormal numbers?",
        why="dL/dy = c in every row of the batch, and it is rounded to float16 where "
            "autocast's cast of y sits, before the sum over the batch: 2e-8 is below half "
            "of float16's smallest subnormal (2**-24 = 5.96e-8 / 2) and becomes 0, so that "
            "row is 0 even though 8 x 2e-8 = 1.6e-7 would fit; 4e-7 and 5e-5 are below the "
            "smallest normal 6.1e-5 but survive as subnormals, with fewer digits: {answer}",
        choices=(0, 1, 2, 3, 4),
    ),
}
