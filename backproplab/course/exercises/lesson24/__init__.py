"""Lesson 24, the backward in lower precision: its exercises and its prediction.

- ``l24-scale-range`` (by hand, checked here): for a linear layer with a mean-squared-error
  loss, the range of loss scales, as powers of two, that lift the smallest entry of the
  output gradient into float16's normal numbers without letting the weight or bias gradient
  pass float16's largest number. Checked like a gradient by hand (`ByHand`): new shapes
  and new residual sizes on every trial, autograd off, the reference from autograd in
  float64. Its slips are about the chain rule of the mean and about float16's limits.
- ``l24-compensated-step`` (method, in ``compensated``): a weight update that keeps 16-bit
  weights and a 16-bit compensation (Kahan's summation), so that updates smaller than half
  a gap are not lost. The observation replays section 4's 1000 float16 steps and runs
  float16 and bfloat16 trainings side by side, keeping the weights the learner's step
  returns; the verdict compares section 4's with its float32 master weights, and every
  final weight of the trainings with the exact sum of its updates (within two gaps),
  drawing the updates again along the learner's path; anything but 16-bit tensors returned
  is refused. A slip is named only when the learner's step equals the slip's on a probe.

The prediction runs a Linear(3, 4) under float16 autocast and counts the rows of its
weight gradient that come out all zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .._spec import ByHand, Prediction, seeded
from .compensated import COMPENSATED

# --------------------------------------------------------------------------- Exercise 2

FP16_NORMAL = torch.finfo(torch.float16).tiny  # 2**-14, the smallest normal float16
FP16_SUBNORMAL = 2.0**-24  # the smallest positive float16 of all
FP16_MAX = torch.finfo(torch.float16).max  # 65504


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
    over N >= 16 rows, is many times every entry of dL/dy; and one entry of the residual
    is a hundred times smaller than the rest, so the smallest and largest entries of dL/dy
    are far apart. Every column leans negative, so dL/db is negative. The columns of x
    have means 0.3, -0.01, then 0 over the batch (a spread of 0.05 around them), and an
    entry of dL/dW is about its column's mean times an entry of dL/db: dL/dW's first column
    is negative, three times or more below dL/db and above dL/dy (the bias left out, and
    the highest scale taken from dL/dy, land on powers of two of their own), and its second
    column is positive and thirty times smaller, under half of dL/dy: a max taken without
    abs lands there, apart from all of them.
    The last row of x is zeros and one residual there is 0, so t equals y exactly at that
    entry however y is computed: dL/dy has an exact zero, which "every nonzero entry"
    leaves out.

    Every number is a short binary fraction (x and W to 2**-12, b to 2**-20, t to 2**-44),
    so y, dL/dy and dL/db come out exact whatever order an answer adds in. That lets the
    bounds' ratios be set exactly, where the ways of rounding part (see below)."""
    n = 2 ** int(torch.randint(4, 6, (1,), generator=gen))  # N * M a power of two: see below
    k = int(torch.randint(2, 9, (1,), generator=gen))  # 2 or more: see x's column means above
    m = 4 * int(torch.randint(1, 3, (1,), generator=gen))  # 4 or more: no slip mimics another
    x = 0.05 * torch.randn(n, k, generator=gen, dtype=torch.float64)
    x[-1] = 0.0  # y's last row is b exactly, so a zero residual there stays exactly zero
    x[:-1] -= x[:-1].mean(0)  # then each column's mean over the batch is set
    x[:-1, 0] += 0.3
    x[:-1, 1] -= 0.01
    x = _short(x, 12)
    W = _short(0.5 * torch.randn(m, k, generator=gen, dtype=torch.float64), 12)
    b = _short(0.1 * torch.randn(m, generator=gen, dtype=torch.float64), 20)
    b[0] = _short(b[0], 6)  # shorter still: see below
    size = 10.0 ** float(-5 + 4 * torch.rand(1, generator=gen, dtype=torch.float64))
    offset = -(2 + torch.rand(m, generator=gen, dtype=torch.float64))
    residual = offset + 0.3 * torch.randn(n, m, generator=gen, dtype=torch.float64)
    residual[0, 0] *= 0.01
    residual[-1, -1] = 0.0
    # On odd seeds the largest |dL/db| is 65504 over a power of two, where floor and
    # ceil - 1 part: the size is scaled by 0.7 to 1.4 to bring it there (every ratio the
    # other slips need is kept), then one entry of its column takes up what rounding left.
    odd = gen.initial_seed() % 2
    if odd:
        kept = residual.clone()
        kept[-1, 0] = 0.0  # the smallest |dL/dy| goes there (below): next to nothing
        largest = size * kept.sum(0).abs().max().item()
        size *= _at_the_limit(largest, n * m) / largest
    t = _short(x @ W.T + b - size * residual, 44)
    # The smallest nonzero |dL/dy| is set exactly: on even seeds a power of two, where ceil
    # and floor + 1 (or 2 ** frexp's exponent) part; on odd seeds 1.5 times one, where ceil
    # and round part. Trials use consecutive seeds, so both show in every check. It sits in
    # the last row, where y is b exactly; with b[0] a short binary fraction and N * M a power
    # of two, 2 * (y - t) / (N * M) is exact however it is computed, and it is smaller than
    # every other entry (under half of residual[0, 0]), and 2**12 to 2**14 times smaller
    # than the largest: taking the largest never lands where lifting the smallest to
    # 2**-24 instead of 2**-14 would, so the two slips stay apart.
    power = 2.0 ** math.floor(math.log2(0.0005 * size * 2 / (n * m)))
    power *= 1.5 if odd else 1.0
    t[-1, 0] = b[0] + power * n * m / 2
    if odd:  # the largest |dL/db| made 65504 over a power of two exactly, to the last bit
        r = x @ W.T + b - t
        sums = r.sum(0)
        c = int(sums.abs().argmax())
        t[1, c] += sums[c] - _at_the_limit(sums[c].item(), n * m)
    return x, W, b, t


def _at_the_limit(column_sum: float, entries: int) -> float:
    """The residual column sum nearest ``column_sum`` whose dL/db entry, 2 * sum / entries,
    is 65504 times a power of two, with its sign."""
    gb = 2 * abs(column_sum) / entries
    power = 2.0 ** -round(math.log2(FP16_MAX / gb))
    return math.copysign(FP16_MAX * power * entries / 2, column_sum)


def _short(v: torch.Tensor, bits: int) -> torch.Tensor:
    """``v`` rounded to a multiple of 2**-bits."""
    return torch.round(v * 2.0**bits) / 2.0**bits


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
    "the zero entries of dL/dy were kept: the smallest |dL/dy| is then 0, and no scale "
    "lifts 0 (the lowest came out inf). Take the smallest over the nonzero entries":
        lambda x, W, b, t: (torch.tensor(float("inf"), dtype=torch.float64),
                            scale_bounds(*_grads(x, W, b, t))[1]),
    "the largest gradient was taken without abs: a negative entry of dL/dW or dL/db can be "
    "the largest in size, and float16's limit is on the size, |dL/dW| and |dL/db|":
        lambda x, W, b, t: (scale_bounds(*_grads(x, W, b, t))[0], torch.exp2(torch.floor(
            torch.log2(FP16_MAX / torch.maximum(*(g.max() for g in _grads(x, W, b, t)[1:])))))),
    "the scales are not powers of two: round the lowest up and the highest down to a power "
    "of two (2 ** ceil(log2 ...), 2 ** floor(log2 ...))":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(lambda v: v, lambda v: v)),
    "rounded the wrong way: the lowest scale must reach 2**-14 (round its exponent up), the "
    "highest must stay at 65504 or below (round its exponent down)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(torch.floor, torch.ceil)),
    "the lowest scale was rounded up as 2 ** (floor(log2 ...) + 1) (2 ** frexp's exponent "
    "too): where 2**-14 over the smallest |dL/dy| is itself a power of two, that power lifts "
    "it to 2**-14 exactly, and this gives twice it. Round the exponent up, 2 ** ceil(log2 ...)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(lambda v: torch.floor(v) + 1, torch.floor)),
    "the highest scale was rounded down as 2 ** (ceil(log2 ...) - 1): where 65504 over the "
    "largest gradient is itself a power of two, that power brings it to 65504 exactly, which "
    "float16 holds, and this gives half it. Round the exponent down, 2 ** floor(log2 ...)":
        lambda x, W, b, t: scale_bounds(*_grads(x, W, b, t),
                                        rounding=(torch.ceil, lambda v: torch.ceil(v) - 1)),
}

SCALE_ADVICE = (
    "Write out dL/dy for L = mean((y - t)**2) on a 2 x 2 example, then dL/dW and dL/db from "
    "it; the lowest scale comes from the smallest nonzero |dL/dy|, the highest from the "
    "largest |dL/dW| or |dL/db|, each rounded to a power of two."
)


SCALE_RANGE = ByHand(
    name="loss scale range",
    reference=_scale_range_reference,
    make_inputs=_new_layer,
    outputs=("lowest scale", "highest scale"),
    mistakes=SCALE_SLIPS,
    advice=SCALE_ADVICE,
)


EXERCISES = {
    "l24-scale-range": SCALE_RANGE,
    "l24-compensated-step": COMPENSATED,
}

# --------------------------------------------------------------------------- prediction

ROW_FACTORS = (3e-3, 5e-5, 4e-7, 2e-8)


def zero_rows_experiment() -> torch.Tensor:
    """The prediction's experiment: Linear(3, 4) on torch.ones(8, 3) under float16
    autocast, loss (y * c).sum() with c = ROW_FACTORS; the weight gradient."""
    with seeded(17):
        layer = nn.Linear(3, 4)
    with torch.autocast("cpu", dtype=torch.float16):
        y = layer(torch.ones(8, 3))
    (y * torch.tensor(ROW_FACTORS)).sum().backward()
    return layer.weight.grad


PREDICTIONS = {
    "l24-predict-zero-rows": Prediction(
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
