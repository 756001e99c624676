"""Lesson 25, Exercise 1 (``l25-min-cut-backward``): the backward graph the min-cut
partitioner makes for ``cos(x @ w).pow(2).mean()``, by hand, from what its forward kept."""

from __future__ import annotations

import torch

from .._spec import ByHand


def mean_cos_squared(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The exercise's loss: cos(x @ w) ** 2, averaged over every entry."""
    return torch.cos(x @ w).pow(2).mean()


def _saved_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """What min-cut's forward hands its backward for mean_cos_squared, on new sizes: x @ w,
    x.T, w.T, and the incoming gradient (any number: the loss may be scaled further on).
    The three sizes differ, so no count of entries stands in for another (x.numel() for
    y.numel() is right only when k equals m)."""
    n, k, m = (int(s) + 2 for s in torch.randperm(7, generator=gen)[:3])
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
