"""Lesson 28, where torch's backward formulas live and how autograd sits in the dispatcher:
its exercises and its prediction.

Exercise 1 (``l28-ops-by-node``) is checked by method (module ``recording``): the learner
builds a dispatch mode that reports, node by node, the aten operations a backward pass
runs, checked on graphs the lesson never showed against the check's own recorder.

Exercises 2 and 3 are by hand, here: two backward formulas for ops no earlier lesson
derives.

- ``l28-cumprod``: the gradient of ``torch.cumprod(x, dim)``, given ``g`` arriving at its
  output, on inputs that hold exact zeros (as a ReLU's outputs do). The slips: the
  division by ``x`` that every textbook derivation ends with (NaN at a zero), the same with
  the NaN replaced by 0 (wrong at a slice's first zero, whose gradient is not 0), the
  cumulative sum taken the wrong way, the division left out, one output's term only.
- ``l28-atan2``: the gradients of ``torch.atan2(y, x)`` for both inputs, ``x`` broadcast
  along ``y``'s rows, away from the origin. The slips: the two numerators
  swapped, the sign of one, the square left out of the denominator.

The prediction: what a dispatch mode finds in ``grad_fn`` of the result it gets back from
the kernel, for a product whose input requires grad.
"""

from __future__ import annotations

import torch

from ....watch import QuietDispatchMode
from .._spec import ByHand, Prediction, randint
from .._spec import vjp as _vjp
from .recording import OPS_BY_NODE

# What the grade's sandbox loads before an answer runs: the module a dispatch mode comes from.
PRELOAD = ("torch.utils._python_dispatch",)

F64 = torch.float64


# --------------------------------------------------------------------------- cumprod


def _cumprod_inputs(gen: torch.Generator) -> tuple:
    """x (1 to 3 dimensions, float64) with exact zeros: one slice along ``dim`` with two of
    them and one that starts with one, more at random; ``dim`` (either sign); g. Every
    third seed (one trial of each check) has a 3-D x and dim 0 or -3: there, moving dim to
    the end is a rotation, so moving it back takes movedim(-1, dim), not movedim(dim, -1)."""
    if gen.initial_seed() % 3 == 0:
        shape, dim = [randint(3, 7, gen) for _ in range(3)], (0, -3)[randint(0, 2, gen)]
    else:
        shape = [randint(3, 7, gen) for _ in range(randint(1, 4, gen))]
        dim = randint(-len(shape), len(shape), gen)
    x = torch.randn(*shape, generator=gen, dtype=F64)
    x = x.masked_fill(torch.rand(*shape, generator=gen) < 0.15, 0.0)
    rows = x.movedim(dim, -1).reshape(-1, shape[dim])  # a copy: the slices along dim
    n = shape[dim]
    first, second = torch.randperm(n, generator=gen)[:2].tolist()
    rows[0, first] = rows[0, second] = 0.0  # two zeros in one slice
    rows[-1, 0] = 0.0  # a slice whose first entry is 0
    moved = list(x.movedim(dim, -1).shape)
    x = rows.reshape(moved).movedim(-1, dim).contiguous()
    return x, dim, torch.randn(*shape, generator=gen, dtype=F64)


def _cumprod_reference(x, dim, g):
    return _vjp(lambda t: torch.cumprod(t, dim), [x], g)


def _reversed_cumsum(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t.flip(dim).cumsum(dim).flip(dim)


def _divided(x, dim, g):
    return _reversed_cumsum(g * torch.cumprod(x, dim), dim) / x


CUMPROD = ByHand(
    name="cumprod_backward",
    reference=_cumprod_reference,
    make_inputs=_cumprod_inputs,
    mistakes={
        "the sum of g * y over the outputs from k on, divided by x: right wherever x is not "
        "0, NaN where it is. The check's inputs hold exact zeros: the derivative of y_i with "
        "respect to x_k is the product of the other factors of y_i, which needs no division":
            _divided,
        "where x is 0 the gradient is not always 0: at the first zero of a slice, the outputs "
        "from there on are 0, but each one's derivative with respect to that zero is the "
        "product of its other factors. Only after the first zero is every term 0":
            lambda x, dim, g: torch.where(x == 0, 0.0, _divided(x, dim, g)),
        "the cumulative sum runs the wrong way: x_k is a factor of the outputs y_i with i >= k, "
        "so the sum runs from k to the end of the slice":
            lambda x, dim, g: (g * torch.cumprod(x, dim)).cumsum(dim) / x,
        "x_k itself was left in each term: the derivative of y_i with respect to x_k drops "
        "that one factor":
            lambda x, dim, g: _reversed_cumsum(g * torch.cumprod(x, dim), dim),
        "only y_k's own term: x_k is a factor of every later output of its slice too, so their "
        "gradients add up": lambda x, dim, g: g * torch.cumprod(x, dim) / x,
        "dim was moved back with movedim(dim, -1), the same move again: movedim(-1, dim) "
        "undoes it (for a 3-D x and dim 0, moving a dimension to the end is a rotation, not "
        "a swap)":
            lambda x, dim, g: _cumprod_reference(x, dim, g).movedim(dim, -1).movedim(dim, -1),
    },
    advice="Write one output y_i = x_0 x_1 ... x_i and ask which outputs contain x_k, and what "
           "is left of each when x_k is taken out (lesson 09: one entry first). Then "
           "make sure nothing divides by an entry that may be 0.",
)

# --------------------------------------------------------------------------- atan2


def _atan2_inputs(gen: torch.Generator) -> tuple:
    """y (m, n), x (n,) broadcast along y's rows, g (m, n); m != n, so that a dx not summed
    over the rows is told by its shape."""
    m, n = (torch.randperm(5, generator=gen)[:2] + 2).tolist()
    y = torch.randn(m, n, generator=gen, dtype=F64)
    x = torch.randn(n, generator=gen, dtype=F64)
    return y, x, torch.randn(m, n, generator=gen, dtype=F64)


def _atan2_reference(y, x, g):
    return _vjp(torch.atan2, [y, x], g)


def _atan2_slip(dy, dx):
    """The two gradients from per-entry formulas of (y, x, r2), dx summed to x's shape."""
    def wrong(y, x, g):
        r2 = x * x + y * y
        return g * dy(y, x, r2), (g * dx(y, x, r2)).sum_to_size(x.shape)
    return wrong


ATAN2 = ByHand(
    name="atan2_backward",
    reference=_atan2_reference,
    make_inputs=_atan2_inputs,
    outputs=("dy", "dx"),
    mistakes={
        "the two numerators are swapped: atan2(y, x) is the angle of the point (x, y), so "
        "moving y turns it by x / (x² + y²), and moving x by -y / (x² + y²)":
            _atan2_slip(lambda y, x, r2: -y / r2, lambda y, x, r2: x / r2),
        "dx has the wrong sign: moving the point along x (with y > 0) turns it back toward "
        "the x axis, -y / (x² + y²)":
            _atan2_slip(lambda y, x, r2: x / r2, lambda y, x, r2: y / r2),
        "the denominator is the distance, not its square: the derivative of arctan u is "
        "1 / (1 + u²), and with u = y / x that gives x² / (x² + y²) times d(y/x)":
            _atan2_slip(lambda y, x, r2: x / r2.sqrt(), lambda y, x, r2: -y / r2.sqrt()),
    },
    advice="Write atan2(y, x) as arctan(y / x) (the same derivative wherever x is not 0), take "
           "the two partial derivatives, and where x is broadcast along y's rows, add up what "
           "each row sends back to it (lesson 09).",
)


EXERCISES = {
    "l28-ops-by-node": OPS_BY_NODE,
    "l28-cumprod": CUMPROD,
    "l28-atan2": ATAN2,
}


def _grad_fn_answer() -> str | None:
    """Run x * w in a mode that looks at the kernel's result before handing it back."""
    seen: list[str | None] = []

    class Peek(QuietDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.append(None if out.grad_fn is None else out.grad_fn.name())
            return out

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with Peek():
        x * torch.tensor([3.0, 4.0])
    return seen[0]


PREDICTIONS = {
    "l28-predict-grad-fn": Prediction(
        question="the grad_fn a dispatch mode finds on the kernel's result for x * w "
                 "(x requires grad)",
        answer=_grad_fn_answer,
        hint="the mode runs at the Python key. Find that key on the path of the call, and the "
             "key whose kernel makes the node: which of the two runs first, and which one "
             "finishes its work first?",
        why="the mode sits at the Python key, below the Autograd key. The autograd kernel "
            "runs first: it saves what the formula needs and calls down, through the mode, "
            "to the CPU kernel. The result comes back up through the mode before the "
            "autograd kernel attaches MulBackward0 to it, so the mode sees {answer}",
        choices=("MulBackward0", None),
    ),
}
