"""Lesson 10, training an MLP: its exercises and its predictions.

Exercises 1 and 2 ask for dL/dz, the gradient at the logits of a sigmoid
output: Exercise 1 with binary cross-entropy, Exercise 2 with a squared error,
where the sigmoid's own derivative no longer cancels. Exercise 3 asks for the
whole backward of Part 2's two-layer tanh network (the lesson shows only its
forward pass and loss), checked on networks and batches of other sizes. The
predictions run the lesson's deep networks again, built by the same recipe as
the notebook's cells.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ... import data
from ._spec import ByHand, Prediction, seeded

# --------------------------------------------------------------------------- Exercise 1


def _bce_reference(z, y):
    z = z.requires_grad_()
    F.binary_cross_entropy_with_logits(z, y).backward()
    return z.grad


def _with_depth(gen, shape):
    """``shape`` with a leading size of 2 or 3 on every other seed: consecutive trials meet
    2-D and 3-D inputs, so an answer that divides by rows times columns ("any shape" asks for
    the number of entries) fails on the 3-D one."""
    if gen.initial_seed() % 2:
        shape = [int(torch.randint(2, 4, (1,), generator=gen)), *shape]
    return shape


def _new_logits_and_labels(gen):
    """Logits of a new shape (2 to 6 rows, 2 to 5 columns, 3-D on odd seeds), 0/1 targets."""
    rows = int(torch.randint(2, 7, (1,), generator=gen))
    cols = int(torch.randint(2, 6, (1,), generator=gen))
    shape = _with_depth(gen, [rows, cols])
    z = torch.randn(*shape, generator=gen) * 2
    y = (torch.rand(*shape, generator=gen) < 0.5).float()
    return z, y


BCE_SLIPS = {
    "the 1/N of the mean is missing: the loss averages over every entry of z, so each "
    "entry's gradient carries 1/z.numel()":
        lambda z, y: torch.sigmoid(z) - y,
    "divided by the number of rows only: the mean runs over every entry of z, so divide by "
    "z.numel(), not len(z)":
        lambda z, y: (torch.sigmoid(z) - y) / len(z),
    "divided by the first two sizes only: the mean runs over every entry of z, whatever its "
    "shape, so divide by z.numel()":
        lambda z, y: (torch.sigmoid(z) - y) / (z.shape[0] * z.shape[1]),
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
    """Logits of a new shape (2 to 5 rows and columns, 3-D on odd seeds) and targets anywhere
    in [0, 1]."""
    shape = _with_depth(gen, [int(k) for k in torch.randint(2, 6, (2,), generator=gen)])
    return torch.randn(*shape, generator=gen) * 2, torch.rand(*shape, generator=gen)


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
    "divided by the first two sizes only: the mean runs over every entry of z, whatever its "
    "shape, so divide by z.numel()":
        lambda z, y: 2 * (_p(z) - y) * _p(z) * (1 - _p(z)) / (z.shape[0] * z.shape[1]),
}

# --------------------------------------------------------------------------- Exercise 3


def _mlp_loss(xs, ys, W1, b1, W2, b2):
    return F.binary_cross_entropy_with_logits(torch.tanh(xs @ W1 + b1) @ W2 + b2, ys)


def _mlp_reference(xs, ys, W1, b1, W2, b2):
    params = [t.requires_grad_() for t in (W1, b1, W2, b2)]
    return torch.autograd.grad(_mlp_loss(xs, ys, *params), params)


def _new_network(gen):
    """A batch of N points with D features and 0/1 targets for K outputs, and a tanh layer of
    H units with fresh weights. N, D, H and K all differ, so a transposed weight gradient or a
    bias gradient left unsummed has the wrong shape, and dividing by N alone differs from
    dividing by N·K."""
    while True:
        n, d, h, k = (int(torch.randint(lo, hi, (1,), generator=gen))
                      for lo, hi in ((5, 11), (2, 5), (3, 8), (2, 4)))
        if len({n, d, h, k}) == 4:
            break
    return (torch.randn(n, d, generator=gen),
            (torch.rand(n, k, generator=gen) < 0.5).double(),
            torch.randn(d, h, generator=gen) * 0.8, torch.randn(h, generator=gen) * 0.3,
            torch.randn(h, k, generator=gen), torch.randn(k, generator=gen) * 0.3)


def _mlp_slip(xs, ys, W1, b1, W2, b2, *, divide_by=None, tanh_slope=None, bias="sum",
              transpose=False):
    """The backward with one slip: ``divide_by`` (a function of z) instead of z.numel(),
    ``tanh_slope`` (a function of a and h) instead of 1 − h², a bias gradient that is
    averaged (``"mean"``) or left per row (``"rows"``), or weight gradients transposed."""
    a = xs @ W1 + b1
    h = torch.tanh(a)
    z = h @ W2 + b2
    dz = (torch.sigmoid(z) - ys) / (z.numel() if divide_by is None else divide_by(z))
    da = (dz @ W2.T) * ((1 - h**2) if tanh_slope is None else tanh_slope(a, h))
    reduce = {"sum": lambda g: g.sum(0), "mean": lambda g: g.mean(0), "rows": lambda g: g}[bias]
    if transpose:
        return da.T @ xs, reduce(da), dz.T @ h, reduce(dz)
    return xs.T @ da, reduce(da), h.T @ dz, reduce(dz)


MLP_SLIPS = {
    "tanh's derivative is missing: h = tanh(a), so the gradient at a is the gradient at h "
    "times 1 − h² (lesson 02)":
        lambda *t: _mlp_slip(*t, tanh_slope=lambda a, h: 1),
    "tanh's derivative was taken at the pre-activation, 1 − a²: it is 1 − tanh(a)² = 1 − h², "
    "written with the output h":
        lambda *t: _mlp_slip(*t, tanh_slope=lambda a, h: 1 - a**2),
    "the weight gradients are transposed: a gradient has the shape of its weight, (in, out), "
    "so dW = inputᵀ @ d(out) (lesson 09)":
        lambda *t: _mlp_slip(*t, transpose=True),
    "the bias gradients are not summed over the rows: a bias is added to every row, and what "
    "the forward pass broadcast, the backward pass sums (lesson 09)":
        lambda *t: _mlp_slip(*t, bias="rows"),
    "the bias gradients are averaged over the rows instead of summed: the 1/(N·K) of the mean "
    "is already in dL/dz, so the bias needs a plain sum":
        lambda *t: _mlp_slip(*t, bias="mean"),
    "the 1/(N·K) of the mean is missing (a sum where the loss takes a mean): every gradient is "
    "N·K times too large; dL/dz = (sigmoid(z) − y) / z.numel()":
        lambda *t: _mlp_slip(*t, divide_by=lambda z: 1),
    "dL/dz was divided by the number of rows only: the mean runs over all N·K entries of z, so "
    "divide by z.numel()":
        lambda *t: _mlp_slip(*t, divide_by=len),
}

EXERCISES = {
    "l10-bce": ByHand(
        name="dL/dz (cross-entropy on logits)",
        reference=_bce_reference,
        make_inputs=_new_logits_and_labels,
        mistakes=BCE_SLIPS,
        advice="Take one entry: differentiate −[y log p + (1 − y) log(1 − p)] with respect to "
               "p, multiply by dp/dz = p(1 − p), simplify, then divide by the number of "
               "entries the mean runs over.",
    ),
    "l10-dlogits": ByHand(
        name="dL/dz (squared error on a sigmoid)",
        reference=_sigmoid_mse_reference,
        make_inputs=_new_logits_and_targets,
        mistakes=SIGMOID_MSE_SLIPS,
        advice="Chain the two steps for one entry: d(p − y)²/dp, then dp/dz = p(1 − p); the "
               "mean divides by the number of entries.",
    ),
    "l10-mlp": ByHand(
        name="the tanh network's backward",
        reference=_mlp_reference,
        make_inputs=_new_network,
        outputs=["dL/dW1", "dL/db1", "dL/dW2", "dL/db2"],
        mistakes=MLP_SLIPS,
        advice="Walk back one step at a time and check each gradient's shape against its "
               "tensor's: dL/dz from Exercise 1, the output layer's weight, bias and input, "
               "tanh's derivative with h, then the hidden layer the same way.",
    ),
}

# --------------------------------------------------------------------------- predictions

INITS = {
    "std 0.01": lambda w: nn.init.normal_(w, std=0.01),
    "Xavier": nn.init.xavier_normal_,
    "Kaiming": lambda w: nn.init.kaiming_normal_(w, nonlinearity="relu"),
}


def deep_net(activation, init="Kaiming", depth=8, width=16):
    """The lesson's deep net: ``depth`` hidden layers of ``width`` units, 10 inputs, 1 output,
    its weights drawn as the lesson draws them (from seed 0)."""
    with seeded(0):
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
    "l10-predict-layer": Prediction(
        question="which sigmoid layer gets the larger weight gradient, the first or the last?",
        answer=_larger_layer_answer,
        hint="backward runs from the loss towards the input, and every sigmoid layer on the "
             "way multiplies the gradient by the sigmoid's derivative, at most 0.25.",
        why="backward multiplies by the sigmoid's derivative (at most 0.25) once per layer on "
            "the way down, so the gradient shrinks towards the input and the {answer} hidden "
            "layer gets the larger one",
        choices=("first", "last"),
    ),
    "l10-predict-std": Prediction(
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
