"""Lesson 02, the chain rule: its exercises and its predictions.

Each exercise asks for a gradient by hand, as a function: `check_by_hand` calls
it on new random inputs with autograd switched off and compares it with
autograd. The ``mistakes`` are the slips the lesson teaches against (a lost
factor, swapped inputs at a multiply, paths multiplied instead of added); each
is named only when the answer matches it on every input.
"""

from __future__ import annotations

import torch

from ._spec import ByHand, Prediction

# --------------------------------------------------------------------------
# l02-cubic: d/dx (x**3 - 4x**2 + 5)
# --------------------------------------------------------------------------


def _cubic_reference(x):
    x = x.requires_grad_()
    (x**3 - 4 * x**2 + 5).sum().backward()
    return x.grad


def _new_points(gen):
    n = int(torch.randint(1, 6, (1,), generator=gen))
    return (torch.randn(n, generator=gen) * 3,)


# --------------------------------------------------------------------------
# l02-chain: z = tanh(w x + b)
# --------------------------------------------------------------------------


def _tanh_reference(x, w, b):
    leaves = [t.requires_grad_() for t in (x, w, b)]
    return torch.autograd.grad(torch.tanh(w * x + b).sum(), leaves)


def _new_triples(gen):
    n = int(torch.randint(1, 5, (1,), generator=gen))
    return tuple(torch.randn(n, generator=gen) for _ in range(3))


def _tanh_slope(x, w, b):
    return 1 - torch.tanh(w * x + b) ** 2


def _inner_forgotten(x, w, b):
    outer = _tanh_slope(x, w, b)
    return outer, outer, outer


def _inputs_swapped(x, w, b):
    outer = _tanh_slope(x, w, b)
    return outer * x, outer * w, outer


def _square_forgotten(x, w, b):
    outer = 1 - torch.tanh(w * x + b)
    return outer * w, outer * x, outer


# --------------------------------------------------------------------------
# l02-paths: h = a b + sin(a)
# --------------------------------------------------------------------------


def _paths_reference(a, b):
    leaves = [a.requires_grad_(), b.requires_grad_()]
    return torch.autograd.grad((a * b + torch.sin(a)).sum(), leaves)


def _new_pairs(gen):
    n = int(torch.randint(1, 5, (1,), generator=gen))
    return torch.randn(n, generator=gen), torch.randn(n, generator=gen)


EXERCISES = {
    "l02-cubic": ByHand(
        name="d/dx (x**3 - 4x**2 + 5)",
        reference=_cubic_reference,
        make_inputs=_new_points,
        mistakes={
            "the derivative of 4x**2 is 8x, not 4x": lambda x: 3 * x**2 - 4 * x,
            "the sign of the 4x**2 term is lost: its derivative is -8x, not +8x":
                lambda x: 3 * x**2 + 8 * x,
            "the derivative of x**3 is 3x**2, not x**2": lambda x: x**2 - 8 * x,
        },
    ),
    "l02-chain": ByHand(
        name="tanh(wx + b)",
        reference=_tanh_reference,
        make_inputs=_new_triples,
        outputs=["dz/dx", "dz/dw", "dz/db"],
        mistakes={
            "the inner derivative of w*x + b (w for x, x for w) is missing": _inner_forgotten,
            "dz/dx and dz/dw are swapped: a multiply sends each input the *other* factor, so "
            "dz/dx carries w and dz/dw carries x": _inputs_swapped,
            "tanh'(u) is 1 - tanh(u)**2: the square is missing": _square_forgotten,
        },
    ),
    "l02-paths": ByHand(
        name="h = a*b + sin(a)",
        reference=_paths_reference,
        make_inputs=_new_pairs,
        outputs=["dh/da", "dh/db"],
        mistakes={
            "the two paths from a are multiplied, b * cos(a); the contributions of paths add "
            "up: dh/da = b + cos(a)": lambda a, b: (b * torch.cos(a), a),
            "only the product's path counted for a (the sin path adds cos(a))":
                lambda a, b: (b, a),
            "only the sin path counted for a (the product adds b)":
                lambda a, b: (torch.cos(a), a),
            "dh/da and dh/db are swapped": lambda a, b: (a, b + torch.cos(a)),
        },
    ),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _exact_answer():
    x = torch.tensor(1.0, requires_grad=True)
    w = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    ((w * x + b) ** 2).backward()
    dz_dy = 2 * (w * x + b).item()
    by_hand = (dz_dy * w.item(), dz_dy * x.item(), dz_dy * 1.0)
    same = all(g.item() == h for g, h in zip((x.grad, w.grad, b.grad), by_hand, strict=True))
    return "exact" if same else "close"


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a + a).backward()
    return a.grad.item()


PREDICTIONS = {
    "l02-predict-match": Prediction(
        question="autograd's gradients vs the hand results",
        answer=_exact_answer,
        hint="ask what autograd computes with at each node: values measured by nudging the "
             "inputs, or the same local derivative formulas you used?",
        why="autograd nudges nothing: it multiplies the same local derivatives you did (2y, w, "
            "x, 1), and with these small whole numbers every product is exact in float32",
        choices=("exact", "close"),
    ),
    "l02-predict-paths": Prediction(
        question="a.grad for c = a + a",
        answer=_paths_answer,
        hint="count the arrows from c back to a, and ask what backward does when more than "
             "one arrow ends at the same leaf.",
        why="a reaches c along two paths, each with local derivative 1, and the contributions "
            "of the paths add up inside one backward pass: 1 + 1 = {answer}",
    ),
}
