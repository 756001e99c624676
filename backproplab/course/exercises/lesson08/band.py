"""Lesson 08's banded Jacobian (``l08-band-jacobian``): the Jacobian of a function whose
output i reads x[i-1], x[i] and x[i+1] only, from three backward calls, rows that share no
column sharing a pass. The check watches the autograd calls the answer makes (backward
calls only, three of them) and compares its Jacobian with autograd's, on two new functions
of new lengths; it names the slips of the three passes by computing them: .grad
accumulated across the passes, one .grad emptied and refilled, each row given its whole
pass, the Jacobian transposed.
"""

from __future__ import annotations

import torch

from .._spec import Method, as_plain, call_answer, close, compared, count_autograd

_BAND = "band_jacobian"
_BACKWARD_CALLS = {"Tensor.backward()", "torch.autograd.backward"}


def _stencil_inputs(gen):
    """A new function whose output i reads x[i-1], x[i] and x[i+1] only (zero beyond the
    ends), as its four coefficients, and a point x of a new length, 7 to 12."""
    n = int(torch.randperm(6, generator=gen)[0]) + 7
    coefficients = [float(t) for t in torch.rand(4, generator=gen) + 0.5]
    return {"coefficients": coefficients, "x": torch.randn(n, generator=gen)}


def _stencil(coefficients):
    a, b, c, d = coefficients

    def g(t):
        zero = t.new_zeros(1)
        left, right = torch.cat([zero, t[:-1]]), torch.cat([t[1:], zero])
        return a * t * left + b * torch.sin(right) - c * t**2 + d * left * torch.tanh(right)

    return g


def _from_passes(passes, n):
    """The Jacobian read back from three passes: entry (i, j) of the band from pass i % 3."""
    J = torch.zeros(n, n)
    for i in range(n):
        for j in range(max(i - 1, 0), min(i + 2, n)):
            J[i, j] = passes[i % 3][j]
    return J


def _band_slips(J):
    """What the typical slips return, from the right Jacobian J: name -> tensor."""
    n = J.shape[0]
    passes = [J[c::3].sum(0) for c in range(3)]  # each pass: the rows i % 3 == c, added
    return {
        "accumulated": _from_passes([sum(passes[:c + 1]) for c in range(3)], n),
        "emptied": _from_passes([passes[2]] * 3, n),
        "whole rows": torch.stack([passes[i % 3] for i in range(n)]),
        "transposed": J.T,
    }


_BAND_TOLD = {
    "accumulated": "row i holds the passes up to its own added together: x.grad accumulated "
                   "across your backward calls. Start each pass from an empty .grad "
                   "(x.grad = None, or a fresh leaf).",
    "emptied": "every row was read from the last pass: the passes share one tensor, x.grad, "
               "which zero_() empties in place and the next call fills again. Keep a copy "
               "(x.grad.clone()) or give each pass a fresh leaf.",
    "whole rows": "row i holds the whole result of its pass, but that result also carries the "
                  "other rows of the pass, each in its own columns. Row i owns only columns "
                  "i - 1 to i + 1 of it; the rest of row i is 0.",
    "transposed": "it is transposed: row i is output i, column j is input j.",
}


def _band_count(calls: int, n: int) -> str:
    """What a wrong number of backward calls says about the answer."""
    if calls == n:
        return (f"{n} backward calls, one per output: that is section 2's row by row. A pass "
                "may carry several rows, as long as no two of them share a column.")
    if calls == 2:
        return ("2 backward calls: a pass that carries rows i and i + 2 adds their numbers in "
                "column i + 1, which both of them read, and cannot tell them apart.")
    if calls == 1:
        return ("1 backward call: it adds every row, and in column j up to three of them "
                "(j - 1, j and j + 1) land on the same entry.")
    return f"{calls} backward calls; the exercise asks for three, whatever the length."


def _observe_band(answer, inputs):
    """The autograd calls the answer made (each named by the torch function behind it) and
    the Jacobian it returned."""
    with count_autograd() as seen:
        got, failed = call_answer(answer, _stencil(inputs["coefficients"]),
                                  inputs["x"].clone(), what="it",
                                  not_callable=f"expected a function band_jacobian(g, x), got "
                                               f"{type(answer).__name__}.")
    if failed is not None:
        return failed
    return {"calls": list(seen.calls), "J": as_plain(got)}


def _three_passes(J):
    """The observation of three backward calls that return J."""
    return {"calls": ["Tensor.backward()"] * 3, "J": J}


def _band_reference(inputs):
    return _three_passes(torch.autograd.functional.jacobian(_stencil(inputs["coefficients"]),
                                                            inputs["x"]))


def _passes(calls):
    """The calls, a backward call by either of its names counted as the same."""
    return ["backward" if call in _BACKWARD_CALLS else call for call in calls]


def _band_agree(got, want):
    return _passes(got["calls"]) == _passes(want["calls"]) and close(got["J"], want["J"], "float32")


def _explain_band(inputs, got, want):
    n = inputs["x"].numel()
    where = f"for a function of length {n}"
    other = [call for call in got["calls"] if call not in _BACKWARD_CALLS]
    if other:
        return (f"your code called {other[0]}; the exercise asks for backward calls only, "
                "three of them, each with a gradient argument of your choosing.")
    if len(got["calls"]) != 3:
        return f"{where}, {_band_count(len(got['calls']), n)}"
    return compared(f"the Jacobian {where}", got["J"], want["J"], f"the ({n}, {n}) Jacobian",
                    "float32")


BAND = Method(
    name=_BAND,
    make_inputs=_stencil_inputs,
    observe=_observe_band,
    reference=_band_reference,
    explain=_explain_band,
    mistakes={told: (lambda inputs, slip=slip: _three_passes(_band_slips(
        _band_reference(inputs)["J"])[slip])) for slip, told in _BAND_TOLD.items()},
    agree=_band_agree,
    passed="three backward calls, and the right Jacobian for 2 new functions of new lengths",
)
