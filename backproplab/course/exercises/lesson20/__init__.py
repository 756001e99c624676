"""Lesson 20, views and in-place operations under autograd: its exercises and predictions.

- ``l20-two-writes``: by hand, the gradients through two writes into overlapping windows
  of a cloned vector (a window scaled in place by ``a``, then another window overwritten
  by ``b`` times the first), given the gradient ``g`` arriving at the result: a chain of
  two CopySlices. The windows overlap on every trial, in either order, so that the order
  of the backward steps (zero what was overwritten, then add what the read sends back)
  shows. The slips: the steps in the other order, the overwrite that still passes g on,
  ``b``'s gradient taken with the values before the scaling, the read's path forgotten,
  the scaling left out of ``dx``.
- ``l20-engine-views``: a method check (:mod:`.engine`): views, a shared version counter,
  a rewritten history and torch's refusals, added to a small engine and held against
  torch case by case.
- Two predictions: which of eight expressions return a view, and what ``v.grad`` holds
  when two entries of ``v`` are written to one place.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Prediction
from .engine import ENGINE_VIEWS

F64 = torch.float64

# --------------------------------------------------------------------------- Exercise 1


def two_writes(x, a, b, i, j):
    """The lesson's forward: two writes into windows of length len(a) of a copy of x."""
    k = len(a)
    y = x.clone()
    y[i:i + k].mul_(a)  # the first window, scaled in place
    y[j:j + k] = b * y[i:i + k].clone()  # another window overwritten (the clone: see section 2)
    return y


def _windows_inputs(gen: torch.Generator) -> tuple:
    """x (n,), a and b (k,), the windows' starts i != j with |i - j| < k (they overlap,
    either one first), and g (n,)."""
    n = int(torch.randint(8, 14, (1,), generator=gen))
    k = int(torch.randint(2, 6, (1,), generator=gen))
    i = int(torch.randint(0, n - k + 1, (1,), generator=gen))
    shifts = [d for d in range(1 - k, k) if d and 0 <= i + d <= n - k]
    j = i + shifts[int(torch.randint(len(shifts), (1,), generator=gen))]
    x, g = (torch.randn(n, generator=gen, dtype=F64) for _ in range(2))
    a, b = (torch.randn(k, generator=gen, dtype=F64) for _ in range(2))
    return x, a, b, i, j, g


def _windows_reference(x, a, b, i, j, g):
    leaves = [t.detach().clone().requires_grad_() for t in (x, a, b)]
    return torch.autograd.grad(two_writes(*leaves, i, j), leaves, g)


def _windows(x, a, b, i, j, g, *, order=True, zero=True, scaled=True, read=True, scale=True):
    """The gradients by hand, with one of the steps made otherwise (defaults: right)."""
    k = len(a)
    first, second = slice(i, i + k), slice(j, j + k)
    g1 = g.clone()  # the gradient at y after the first write
    if order and zero:
        g1[second] = 0
    if read:
        g1[first] += b * g[second]
    if not order and zero:
        g1[second] = 0
    db = g[second] * (x[first] * a if scaled else x[first])
    dx = g1.clone()
    if scale:
        dx[first] = g1[first] * a
    return dx, g1[first] * x[first], db


WINDOWS = ByHand(
    name="window_grads",
    reference=_windows_reference,
    make_inputs=_windows_inputs,
    outputs=["dx", "da", "db"],
    mistakes={
        "the two steps for the second write are in the other order: you added what the read "
        "y[i:i + k] sends back, then zeroed the overwritten window, which wiped that out where "
        "the windows overlap. Backward undoes the writes last first: zero the overwritten "
        "window of g, then add b * g[j:j + k] to the read window":
            lambda *t: _windows(*t, order=False),
        "the overwrite still passes g on: the old values in y[j:j + k] were replaced, so they "
        "reach the result no more and get 0 (CopySlices of a copy_)":
            lambda *t: _windows(*t, zero=False),
        "db was taken with x's values: the second write reads y[i:i + k] after the first "
        "scaled it, so db = g[j:j + k] * x[i:i + k] * a":
            lambda *t: _windows(*t, scaled=False),
        "the read's path is missing: y[i:i + k] also feeds the second write, so it gets "
        "b * g[j:j + k] on top of what reaches it directly":
            lambda *t: _windows(*t, read=False),
        "dx leaves out the scaling: the first window of x was multiplied by a, so its "
        "gradient is a times what arrives there":
            lambda *t: _windows(*t, scale=False),
    },
    advice="Undo the writes last first, as the chain of CopySlices does: start from g at "
           "the result, zero the window the second write overwrote, add to the window it "
           "read what the read sends back, then go through the scaling.",
)

EXERCISES = {
    "l20-two-writes": WINDOWS,
    "l20-engine-views": ENGINE_VIEWS,
}

# --------------------------------------------------------------------------- Predictions

VIEW_CANDIDATES = ("x.t()", "x[[0, 2]]", "x[:, 1]", "x.expand(2, 3, 4)", "x.flip(0)",
                   "x.t().reshape(12)", "x.reshape(2, 6)", "x[x > 5]")


def _candidates(x: torch.Tensor) -> list[torch.Tensor]:
    """The eight expressions of the question, in its order."""
    return [x.t(), x[[0, 2]], x[:, 1], x.expand(2, 3, 4), x.flip(0), x.t().reshape(12),
            x.reshape(2, 6), x[x > 5]]


def _views_answer() -> list[int]:
    x = torch.arange(12.0).reshape(3, 4).clone()  # a tensor of its own, not a view
    return [n for n, t in enumerate(_candidates(x), 1) if t._base is x]


def _duplicates_answer() -> list[float]:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    v = torch.tensor([10.0, 20.0], requires_grad=True)
    y = x * 1
    y[torch.tensor([1, 1])] = v
    y.backward(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    return v.grad.tolist()


PREDICTIONS = {
    "l20-predict-views": Prediction(
        question="which of the eight expressions return a view of x (by their numbers)",
        answer=_views_answer,
        hint="a view reads the same memory with its own offset, sizes and strides, and "
             "nothing else: a fixed step through memory per dimension. For each expression, "
             "list the positions in x's memory of its entries, in order, and ask whether "
             "such steps reach them.",
        why="x.t() swaps the two strides, x[:, 1] starts at 1 and steps by 4, x.expand(2, 3, "
            "4) adds a dimension of stride 0 (every entry read twice) and x.reshape(2, 6) "
            "only regroups the rows. An index list or a mask picks entries at no fixed "
            "step, flip would need a negative stride (torch's strides are never negative), "
            "and the transpose's entries in row order sit at 0, 4, 8, 1, 5, ...: no single "
            "stride for a shape (12,), so reshape copies. The views: {answer}",
        unordered=True,
    ),
    "l20-predict-duplicates": Prediction(
        question="v.grad after y[torch.tensor([1, 1])] = v and y.backward(g), with "
                 "v = [10.0, 20.0], y = x * 1 and g = [1.0, 2.0, 3.0, 4.0, 5.0]",
        answer=_duplicates_answer,
        hint="index_put_'s backward runs later, from what the write recorded, and torch "
             "does not promise which of two writes to one place lands. What could that "
             "backward hand each entry of v?",
        why="index_put_'s backward hands each entry of v the gradient at the position it was "
            "written to, g[idx] = g[[1, 1]], so both get g[1] = 2, {answer}, although only "
            "one of the two values is left in y[1]: with duplicate indices and "
            "accumulate=False, the gradient of the one that lost is not 0",
    ),
}
