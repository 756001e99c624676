"""Lesson 04, linear regression: its exercises and its predictions.

Exercise 1 asks for the gradients of the mean squared error of a straight
line, Exercise 2 for the gradients inside ``nn.Linear`` (the lesson's only
linear-layer backward; lesson 09 builds on it). Each reference uses autograd;
each slip below is a wrong answer a learner is likely to write, and the check
names it when the learner's result equals it on every trial.
"""

from __future__ import annotations

import torch
from torch import nn

from ... import data
from ...widgets import train_linear
from ._spec import ByHand, Prediction

# --------------------------------------------------------------------------- Exercise 1


def _mse_reference(x, y, w, b):
    w, b = w.requires_grad_(), b.requires_grad_()
    return torch.autograd.grad(((w * x + b - y) ** 2).mean(), (w, b))


def _new_data(gen):
    """A new line with its own slope, intercept, length and noise; w and b anywhere."""
    n = int(torch.randint(5, 30, (1,), generator=gen))
    slope, intercept = (torch.randn(2, generator=gen) * 3).tolist()
    xs = torch.rand(n, generator=gen) * 10
    ys = slope * xs + intercept + torch.randn(n, generator=gen)
    return xs, ys, torch.randn((), generator=gen), torch.randn((), generator=gen)


def _residual(x, y, w, b):
    return w * x + b - y


MSE_SLIPS = {
    "the mean was taken as a sum (a factor of N too large): the loss averages over the "
    "points, so each point's share carries 1/N":
        lambda x, y, w, b: ((2 * _residual(x, y, w, b) * x).sum(),
                            (2 * _residual(x, y, w, b)).sum()),
    "the factor 2 from the derivative of the square is missing: d(r²)/dr = 2r":
        lambda x, y, w, b: ((_residual(x, y, w, b) * x).mean(), _residual(x, y, w, b).mean()),
    "the sign is flipped: the residual inside the square is w·x + b − y, and its derivative "
    "with respect to w is +x":
        lambda x, y, w, b: ((-2 * _residual(x, y, w, b) * x).mean(),
                            (-2 * _residual(x, y, w, b)).mean()),
    "dL/dw lacks the factor x (or the two gradients are swapped): w multiplies x, so the "
    "gradient with x in it belongs to w":
        lambda x, y, w, b: ((2 * _residual(x, y, w, b)).mean(), (2 * _residual(x, y, w, b)).mean()),
}

# --------------------------------------------------------------------------- Exercise 2


def _linear_reference(inputs, weight, bias, targets):
    weight, bias = weight.requires_grad_(), bias.requires_grad_()
    loss = nn.functional.mse_loss(inputs @ weight.T + bias, targets)
    return torch.autograd.grad(loss, (weight, bias))


def _new_layer(gen):
    """A batch and a layer of new sizes: n rows, fan_in inputs, fan_out outputs (2 to 6 each,
    so batch size and output count differ on some trials and agree on others)."""
    n, fan_in, fan_out = (int(k) for k in torch.randint(2, 7, (3,), generator=gen))
    while fan_out == n:  # a batch as long as the layer is wide would hide which one to divide by
        fan_out = int(torch.randint(2, 7, (1,), generator=gen))
    return (torch.randn(n, fan_in, generator=gen), torch.randn(fan_out, fan_in, generator=gen),
            torch.randn(fan_out, generator=gen), torch.randn(n, fan_out, generator=gen))


def _grad_out(inputs, weight, bias, targets, divide_by):
    return 2 * (inputs @ weight.T + bias - targets) / divide_by


LINEAR_SLIPS = {
    "the 1/N of the mean is missing: mse_loss averages over every number of out, so dL/dout "
    "is 2(out − targets) / out.numel()":
        lambda i, w, b, t: (_grad_out(i, w, b, t, 1).T @ i, _grad_out(i, w, b, t, 1).sum(0)),
    "divided by the batch size only: mse_loss averages over all n × outputs numbers of out, "
    "so divide by out.numel(), not len(out)":
        lambda i, w, b, t: (_grad_out(i, w, b, t, len(i)).T @ i,
                            _grad_out(i, w, b, t, len(i)).sum(0)),
    "the factor 2 from the derivative of the square is missing":
        lambda i, w, b, t: (_grad_out(i, w, b, t, 2 * t.numel()).T @ i,
                            _grad_out(i, w, b, t, 2 * t.numel()).sum(0)),
    "the bias gradient was averaged over the batch instead of summed: the bias is broadcast "
    "to every row, and broadcasting becomes a sum (lesson 08)":
        lambda i, w, b, t: (_grad_out(i, w, b, t, t.numel()).T @ i,
                            _grad_out(i, w, b, t, t.numel()).mean(0)),
}

EXERCISES = {
    "l04-grads": ByHand(
        name="MSE gradients",
        reference=_mse_reference,
        make_inputs=_new_data,
        outputs=["dL/dw", "dL/db"],
        mistakes=MSE_SLIPS,
        advice="Write the loss for two points on paper, differentiate each squared residual "
               "with respect to w and to b, and average.",
    ),
    "l04-linear": ByHand(
        name="nn.Linear",
        reference=_linear_reference,
        make_inputs=_new_layer,
        outputs=["dL/dweight", "dL/dbias"],
        mistakes=LINEAR_SLIPS,
        advice="Start from dL/dout (the mean over every number of out), then use lesson 08's "
               "rules (part 2): the matrix product's backward for the weight (the result has "
               "the weight's shape, (outputs, inputs)), and broadcasting becomes a sum for the "
               "bias.",
    ),
}

# --------------------------------------------------------------------------- predictions


def _lesson_data():
    return data.linear_data(n=100, slope=2.0, intercept=1.0, noise=1.5, low=0.0, high=10.0,
                            seed=42)


def _one_step_answer():
    """w and b after one step of gradient descent from zero with lr = 0.01, rounded."""
    x, y = _lesson_data()
    w = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    ((w * x + b - y) ** 2).mean().backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        b -= 0.01 * b.grad
    return round(w.item(), 2), round(b.item(), 2)


def _lr_answer():
    """Whether 50 steps at lr = 0.03 end with a loss above the starting loss."""
    x, y = _lesson_data()
    losses, _, _ = train_linear(x, y, lr=0.03, epochs=50)
    return losses[-1] > losses[0]


PREDICTIONS = {
    "l04-predict-step": Prediction(
        question="(w, b) after one step with lr = 0.01, to two decimals",
        answer=_one_step_answer,
        hint="the update subtracts lr times the gradient, and both gradients printed above are "
             "negative: what does subtracting a negative number do? Start from w = b = 0.",
        why="w − lr·dL/dw = 0 − 0.01 · (−149.80) = 1.498 and b = 0 − 0.01 · (−22.61) = 0.226, "
            "so {answer} to two decimals: one step moves both up, w far more than b",
    ),
    "l04-predict-lr": Prediction(
        question="does lr = 0.03 make the loss end above where it started?",
        answer=_lr_answer,
        hint="a step is stable only while it does not jump past the minimum by more than it "
             "started from; the steepest direction here is the slope's, and x runs up to 10. "
             "The section below computes the largest stable rate.",
        why="0.03 is past the largest stable rate for this data (about 0.028, computed below): "
            "along the steep direction every step lands farther from the minimum than it "
            "started, so the error grows by a constant factor per step",
        choices=(True, False),
    ),
}
