"""Lesson 22's complex exercises: the vector-Jacobian products of ``z * w``, ``|z|**2``
and ``exp(z)`` in torch's convention, then a complex linear layer."""

from __future__ import annotations

import torch

from .._spec import BY_HAND, ByHand, randint
from .._spec import vjp as _vjp

F64 = torch.float64


def crandn(*shape: int, gen: torch.Generator) -> torch.Tensor:
    """Complex128 numbers with standard normal real and imaginary parts."""
    return torch.complex(torch.randn(*shape, generator=gen, dtype=F64),
                         torch.randn(*shape, generator=gen, dtype=F64))


# The answers to exercises 1 and 2 use z.conj(), .mH and complex arithmetic, which the
# by-hand vocabulary refuses elsewhere (the complex-step trick): here they are the task.
COMPLEX = BY_HAND.allowing(complex_numbers=True)

# --------------------------------------------------------------------------- Exercise 1


def _vjps_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """z, w and g complex, r real: g arrives at z * w and at exp(z), r at |z|**2."""
    n = randint(3, 8, gen)
    z, w, g = (crandn(n, gen=gen) for _ in range(3))
    return z, w, g, torch.randn(n, generator=gen, dtype=F64)


def _vjps_reference(z, w, g, r):
    dz, dw = _vjp(lambda z, w: z * w, [z, w], g)
    return dz, dw, _vjp(lambda z: z.abs() ** 2, [z], r), _vjp(torch.exp, [z], g)


def _vjps(z, w, g, r, *, mul=None, abs2=None, exp=None):
    """The right answers, with the slip's parts put in their place."""
    mul = mul or (g * w.conj(), g * z.conj())
    return (*mul, 2 * r * z if abs2 is None else abs2, g * z.exp().conj() if exp is None else exp)


COMPLEX_VJPS = ByHand(
    name="complex_vjps",
    reference=_vjps_reference,
    make_inputs=_vjps_inputs,
    outputs=["dz of z * w", "dw of z * w", "dz of |z|**2", "dz of exp(z)"],
    mistakes={
        "z * w: no conjugate. In section 6's formula the derivative ∂s/∂z is conjugated "
        "before it meets g; look again at which factor carries the bar":
            lambda z, w, g, r: _vjps(z, w, g, r, mul=(g * w, g * z)),
        "z * w: this is the conjugate of torch's answer (conj(g) * w), the other convention "
        "(∂L/∂z, what JAX returns); torch's .grad is ∂L/∂x + i ∂L/∂y, its conjugate":
            lambda z, w, g, r: _vjps(z, w, g, r, mul=(g.conj() * w, g.conj() * z)),
        "|z|**2: the factor 2 is missing. r * z is r times the conjugate Wirtinger derivative "
        "∂s/∂z* = z; torch's .grad, ∂L/∂x + i ∂L/∂y, is twice that":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=r * z),
        "|z|**2: conjugated. 2 * r * z.conj() is 2r ∂s/∂z, the mirror image of the uphill "
        "direction; section 6's formula takes the other Wirtinger derivative for a real s":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=2 * r * z.conj()),
        "|z|**2: conjugated, and the factor 2 is missing: r * z.conj() is r ∂s/∂z, the "
        "derivative section 6's formula does not take for a real s, and only one of its two "
        "terms":
            lambda z, w, g, r: _vjps(z, w, g, r, abs2=r * z.conj()),
        "exp(z): no conjugate. exp is holomorphic, so one term of section 6's formula is "
        "left, and in it the derivative is conjugated":
            lambda z, w, g, r: _vjps(z, w, g, r, exp=g * z.exp()),
        "exp(z): this is the conjugate of torch's answer (conj(g) * exp(z)), the other "
        "convention (∂L/∂z)":
            lambda z, w, g, r: _vjps(z, w, g, r, exp=g.conj() * z.exp()),
    },
    advice="For each operation s = f(z) write ∂s/∂z and ∂s/∂z* (z and z* as independent "
           "variables), then put them in section 6's formula. Check one entry against section "
           "5's numbers.",
    vocabulary=COMPLEX,
)

# --------------------------------------------------------------------------- Exercise 2


def _linear_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """x (N, I), W (I, O), b (O,) and G (N, O), complex, with N, I and O all different."""
    n, i, o = (torch.randperm(6, generator=gen)[:3] + 2).tolist()
    return (crandn(n, i, gen=gen), crandn(i, o, gen=gen), crandn(o, gen=gen),
            crandn(n, o, gen=gen))


def _linear_reference(x, W, b, G):
    return _vjp(lambda x, W, b: x @ W + b, [x, W, b], G)


def _linear(x, W, b, G, *, dx=None, dW=None, db=None):
    """The right answers, with the slip's parts put in their place."""
    return (G @ W.mH if dx is None else dx, x.mH @ G if dW is None else dW,
            G.sum(0) if db is None else db)


COMPLEX_LINEAR = ByHand(
    name="complex_linear_backward",
    reference=_linear_reference,
    make_inputs=_linear_inputs,
    outputs=["dx", "dW", "db"],
    mistakes={
        "no conjugate in either product: G @ W.T and x.T @ G are lesson 09's real rule; with "
        "complex numbers the transposes are conjugate transposes, G @ W.mH and x.mH @ G":
            lambda x, W, b, G: _linear(x, W, b, G, dx=G @ W.T, dW=x.T @ G),
        "dx is missing the conjugate: G @ W.T; the conjugate transpose belongs there, "
        "G @ W.mH": lambda x, W, b, G: _linear(x, W, b, G, dx=G @ W.T),
        "dW is missing the conjugate: x.T @ G; the conjugate transpose belongs there, "
        "x.mH @ G": lambda x, W, b, G: _linear(x, W, b, G, dW=x.T @ G),
        "the conjugates sit on G instead of on x and W: that is the conjugate of torch's "
        "answer (∂L/∂z, the other convention)":
            lambda x, W, b, G: _linear(x, W, b, G, dx=(G @ W.mH).conj(), dW=(x.mH @ G).conj(),
                                       db=G.sum(0).conj()),
        "dx is the conjugate of torch's: G.conj() @ W.T is conj(G @ W.mH); the conjugate "
        "belongs on W, not on G": lambda x, W, b, G: _linear(x, W, b, G, dx=(G @ W.mH).conj()),
        "dW is the conjugate of torch's: x.T @ G.conj() is conj(x.mH @ G); the conjugate "
        "belongs on x, not on G": lambda x, W, b, G: _linear(x, W, b, G, dW=(x.mH @ G).conj()),
        "db is conjugated: b is added, and an addition passes G on unchanged (summed over the "
        "rows), with no conjugate": lambda x, W, b, G: _linear(x, W, b, G, db=G.sum(0).conj()),
        "db is a mean over the rows: every row's contribution adds up, G.sum(0)":
            lambda x, W, b, G: _linear(x, W, b, G, db=G.mean(0)),
    },
    advice="Lesson 09's rule for Y = x @ W + b, with each transpose made a conjugate "
           "transpose (.mH) as the VJP of a holomorphic product asks.",
    vocabulary=COMPLEX,
)
