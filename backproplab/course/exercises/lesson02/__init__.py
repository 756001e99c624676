"""Lesson 02, the chain rule: its exercises and its predictions.

The first three exercises ask for a gradient by hand, as a function:
`check_by_hand` calls it on new random inputs with autograd switched off and
compares it with autograd. The ``mistakes`` are the slips the lesson teaches
against (a lost factor, swapped inputs at a multiply, paths multiplied instead
of added); each is named only when the answer matches it on every input. The
third is an intermediate result used twice, whose two paths run through
different gates and meet at a product.

The last one is checked by method (module ``rule``): the learner writes one node's
local rule, what a backward node sends along each edge of ``next_functions`` for the
gradient at its output, read from the tensors the node saved. The check tries it on a
one-node graph of each kind, made new from a seed, with calling the node, backward passes
and ``bl.describe`` refused while it runs.
"""

from __future__ import annotations

import torch

from .._spec import ByHand, Prediction
from .rule import RULE

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
# l02-shared: f = (u - z) sin u with u = x y, a result used twice
# --------------------------------------------------------------------------


def _shared_reference(x, y, z):
    leaves = [t.requires_grad_() for t in (x, y, z)]
    u = x * y
    return torch.autograd.grad(((u - z) * torch.sin(u)).sum(), leaves)


def _shared_slip(df_du, *, swap=False, z_sign=-1.0):
    """The answer built from a (possibly wrong) df/du, with the rest done right."""
    def answer(x, y, z):
        du = df_du(x * y, z)
        dx, dy = (du * x, du * y) if swap else (du * y, du * x)
        return dx, dy, z_sign * torch.sin(x * y)
    return answer


def _both_paths(u, z):
    return torch.sin(u) + (u - z) * torch.cos(u)


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
    "l02-shared": ByHand(
        name="f = (u - z) sin u, u = x*y",
        reference=_shared_reference,
        make_inputs=_new_triples,
        outputs=["df/dx", "df/dy", "df/dz"],
        mistakes={
            "only the sine's path counted for u: the subtraction u - z sends sin u back to u "
            "as well, and the two contributions add up":
                _shared_slip(lambda u, z: (u - z) * torch.cos(u)),
            "only the subtraction's path counted for u: the sine sends (u - z) cos u back to u "
            "as well, and the two contributions add up":
                _shared_slip(lambda u, z: torch.sin(u)),
            "the two paths to u are multiplied; the contributions of paths add up: "
            "df/du = sin u + (u - z) cos u":
                _shared_slip(lambda u, z: torch.sin(u) * (u - z) * torch.cos(u)),
            "the product rule is missed: d/du of (u - z) sin u is not 1 * cos u (the product "
            "of the factors' derivatives); each factor's path keeps the other factor":
                _shared_slip(lambda u, z: torch.cos(u)),
            "the sign of df/dz is lost: z enters with a minus, so df/dz = -sin u":
                _shared_slip(_both_paths, z_sign=1.0),
            "df/dx and df/dy are swapped: u = x*y sends x the *other* factor, y, and y gets x":
                _shared_slip(_both_paths, swap=True),
            "the inner derivative of u = x*y is missing: df/dx is df/du times y, df/dy is "
            "df/du times x": lambda x, y, z: (_both_paths(x * y, z), _both_paths(x * y, z),
                                               -torch.sin(x * y)),
        },
    ),
    "l02-rule": RULE,
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
