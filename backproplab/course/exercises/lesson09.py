"""Lesson 09, training an MLP: its exercises and its predictions.

Both exercises ask for dL/dz, the gradient at the logits of a sigmoid output:
Exercise 1 with binary cross-entropy (the step Part 2 of the lesson takes
from autograd), Exercise 2 with a squared error, where the sigmoid's own
derivative no longer cancels. The predictions run the lesson's deep networks
again, built by the same recipe as the notebook's cells.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ... import data
from ._spec import ByHand, Prediction

# --------------------------------------------------------------------------- Exercise 1


def _bce_reference(z, y):
    z = z.requires_grad_()
    F.binary_cross_entropy_with_logits(z, y).backward()
    return z.grad


def _new_logits_and_labels(gen):
    """Logits of a new shape (2 to 6 rows, 2 to 5 columns) and 0/1 targets."""
    rows = int(torch.randint(2, 7, (1,), generator=gen))
    cols = int(torch.randint(2, 6, (1,), generator=gen))
    z = torch.randn(rows, cols, generator=gen) * 2
    y = (torch.rand(rows, cols, generator=gen) < 0.5).float()
    return z, y


BCE_SLIPS = {
    "the 1/N of the mean is missing: the loss averages over every entry of z, so each "
    "entry's gradient carries 1/z.numel()":
        lambda z, y: torch.sigmoid(z) - y,
    "divided by the number of rows only: the mean runs over every entry of z, so divide by "
    "z.numel(), not len(z)":
        lambda z, y: (torch.sigmoid(z) - y) / len(z),
    "z stands where sigmoid(z) belongs: the loss compares the probability p = sigmoid(z) "
    "with y, so the gradient is (p − y)/N":
        lambda z, y: (z - y) / z.numel(),
    "the sign is flipped: raising z raises p, which increases the loss where p is already "
    "above y, so the gradient is (p − y)/N, not (y − p)/N":
        lambda z, y: (y - torch.sigmoid(z)) / z.numel(),
    "the sigmoid's derivative p(1 − p) was multiplied in once too often: dL/dp brings "
    "1/(p(1 − p)), which cancels it":
        lambda z, y: ((torch.sigmoid(z) - y) * torch.sigmoid(z) * (1 - torch.sigmoid(z))
                      / z.numel()),
}

# --------------------------------------------------------------------------- Exercise 2


def _sigmoid_mse_reference(z, y):
    z = z.requires_grad_()
    ((torch.sigmoid(z) - y) ** 2).mean().backward()
    return z.grad


def _new_logits_and_targets(gen):
    """Logits of a new shape (2 to 5 rows and columns) and targets anywhere in [0, 1]."""
    rows, cols = (int(k) for k in torch.randint(2, 6, (2,), generator=gen))
    return torch.randn(rows, cols, generator=gen) * 2, torch.rand(rows, cols, generator=gen)


def _p(z):
    return torch.sigmoid(z)


SIGMOID_MSE_SLIPS = {
    "(sigmoid(z) − y)/N is Exercise 1's answer, for cross-entropy; with a squared error the "
    "sigmoid's derivative does not cancel":
        lambda z, y: (_p(z) - y) / z.numel(),
    "the sigmoid's own derivative p(1 − p) is missing":
        lambda z, y: 2 * (_p(z) - y) / z.numel(),
    "the 1/N of the mean is missing: every entry's share of the loss carries 1/z.numel()":
        lambda z, y: 2 * (_p(z) - y) * _p(z) * (1 - _p(z)),
    "the factor 2 from the derivative of the square is missing":
        lambda z, y: (_p(z) - y) * _p(z) * (1 - _p(z)) / z.numel(),
}

EXERCISES = {
    "l09-bce": ByHand(
        name="dL/dz (cross-entropy on logits)",
        reference=_bce_reference,
        make_inputs=_new_logits_and_labels,
        mistakes=BCE_SLIPS,
        advice="Take one entry: differentiate −[y log p + (1 − y) log(1 − p)] with respect to "
               "p, multiply by dp/dz = p(1 − p), simplify, then divide by the number of "
               "entries the mean runs over.",
    ),
    "l09-dlogits": ByHand(
        name="dL/dz (squared error on a sigmoid)",
        reference=_sigmoid_mse_reference,
        make_inputs=_new_logits_and_targets,
        mistakes=SIGMOID_MSE_SLIPS,
        advice="Chain the two steps for one entry: d(p − y)²/dp, then dp/dz = p(1 − p); the "
               "mean divides by the number of entries.",
    ),
}

# --------------------------------------------------------------------------- predictions

INITS = {
    "std 0.01": lambda w: nn.init.normal_(w, std=0.01),
    "Xavier": nn.init.xavier_normal_,
    "Kaiming": lambda w: nn.init.kaiming_normal_(w, nonlinearity="relu"),
}


def deep_net(activation, init="Kaiming", depth=8, width=16):
    """The lesson's deep net: ``depth`` hidden layers of ``width`` units, 10 inputs, 1 output."""
    torch.manual_seed(0)
    layers, n_in = [], 10
    for _ in range(depth):
        linear = nn.Linear(n_in, width)
        INITS[init](linear.weight)
        nn.init.zeros_(linear.bias)
        layers += [linear, activation()]
        n_in = width
    return nn.Sequential(*layers, nn.Linear(width, 1))


def _hidden_weight_grads(activation, init):
    """Mean |grad| of each hidden layer's weight, first to last, after one backward."""
    x, y = data.regression_data()
    net = deep_net(activation, init)
    F.mse_loss(net(x), y).backward()
    return [layer.weight.grad.abs().mean().item()
            for layer in net[:-1] if isinstance(layer, nn.Linear)]


def _larger_layer_answer():
    grads = _hidden_weight_grads(nn.Sigmoid, "Kaiming")
    return "last" if grads[-1] > grads[0] else "first"


def _std_answer():
    """Whether std 0.01 makes the sigmoid net's last hidden weight gradient 10x smaller."""
    small = _hidden_weight_grads(nn.Sigmoid, "std 0.01")[-1]
    xavier = _hidden_weight_grads(nn.Sigmoid, "Xavier")[-1]
    return small < xavier / 10


PREDICTIONS = {
    "l09-predict-layer": Prediction(
        question="which sigmoid layer gets the larger weight gradient, the first or the last?",
        answer=_larger_layer_answer,
        hint="backward runs from the loss towards the input, and every sigmoid layer on the "
             "way multiplies the gradient by the sigmoid's derivative, at most 0.25.",
        why="backward multiplies by the sigmoid's derivative (at most 0.25) once per layer on "
            "the way down, so the gradient shrinks towards the input and the {answer} hidden "
            "layer gets the larger one",
        choices=("first", "last"),
    ),
    "l09-predict-std": Prediction(
        question="does std 0.01 make the sigmoid net's last hidden weight gradient more than "
                 "10 times smaller than with Xavier?",
        answer=_std_answer,
        hint="a weight's gradient is the signal arriving from above times the input the weight "
             "multiplies. What does a sigmoid output when its input is close to 0, and how "
             "many small weights lie between the last hidden layer and the loss?",
        why="the last hidden layer's input is sigmoid of almost 0, about 0.5, which is not "
            "small at all, and the signal from the loss passes only the output layer (not "
            "drawn with std 0.01) and one sigmoid. Small weights shrink the signal only on "
            "its way further down",
        choices=(True, False),
    ),
}
