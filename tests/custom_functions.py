"""Custom autograd Functions shared by the tests of graph, plot and check."""

import torch


class Square(torch.autograd.Function):
    """x**2 with a correct backward that saves its input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad
