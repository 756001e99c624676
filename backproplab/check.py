"""Chain-rule checkers that say *what* is wrong with a hand-derived gradient.

Every checker returns a :class:`Report`: one :class:`Check` per thing checked,
printed one line each (``✓``/``✗``), rendered as HTML in Jupyter, truthy when
everything passed, and ``report.assert_ok()`` raises ``AssertionError`` with
the full text for graded cells.

>>> import torch, backproplab as bl
>>> x = torch.tensor([1.0, 2.0], requires_grad=True)
>>> (x ** 2).sum().backward()
>>> print(bl.compare("dz/dx", torch.tensor([2.0, 4.0]), x.grad))
✓ dz/dx: exact match
>>> print(bl.compare("dz/dx", torch.tensor([-2.0, -4.0]), x.grad))  # doctest: +ELLIPSIS
✗ dz/dx: mismatch. Likely mistake: the sign is flipped...

Documented choices
------------------
* Accepted values: ``torch.Tensor``, Python ``int``/``float``, NumPy arrays and
  NumPy scalars, and (nested) lists/tuples of numbers. ``bool`` values and
  boolean tensors are rejected: a gradient is never a truth value, and a bool
  here usually means ``a == b`` was passed by mistake.
* A Python number matches a reference holding exactly one element of any
  shape (``3.0`` vs ``tensor([3.])``); tensors and arrays must match shapes.
* dtypes never fail a comparison. Values are compared in float64 with the
  tolerance of the *less precise* of the two dtypes (table ``TOLERANCES``);
  integers count as exact (tolerance 0) unless the other side is floating.
  A float32/float64 difference between two tensors is mentioned, not failed.
* Closeness is ``|a - b| <= atol + rtol * max(|a|, |b|)`` element-wise, which
  (unlike ``torch.allclose``) is symmetric in its two arguments, so swapping
  ``manual`` and ``reference`` never changes a verdict. Only ``rel_error`` is
  relative to the reference and so changes on a swap.
* NaN equals NaN and ``inf`` equals ``inf`` when both sides have it in the
  same place; a NaN or ``inf`` only on the learner's side is diagnosed.

Where the rest lives
--------------------
This module is the public face: the checkers, their documentation, and the
comparison that ``compare`` and ``check_grad`` share. The machinery behind the
others is in private modules, one job each: ``_report`` (``Check`` and
``Report``), ``_diagnose`` (value conversion, closeness, naming the mistake),
``_numerical`` (finite differences), ``_function_check`` (custom
``autograd.Function`` checks) and ``_graph_quiz`` (``check_graph``'s diff).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._diagnose import (
    TOLERANCES,
    _abs_diff,
    _as_value,
    _close,
    _close_mask,
    _default_tolerance,
    _diagnose,
    _dtype_name,
    _exact_nan_equal,
    _finite_abs,
    _fmt,
    _index,
    _likely,
    _shape,
    _tol_text,
    _type_name,
    _Value,
)
from ._function_check import check_custom_function
from ._graph_quiz import diff_node_names
from ._numerical import central_differences
from ._report import Check, Report

# Learners meet these classes as backproplab.check.*; help() should say so.
Check.__module__ = Report.__module__ = __name__

__all__ = [
    "Check",
    "Report",
    "TOLERANCES",
    "check_function",
    "check_grad",
    "check_graph",
    "compare",
    "diagnose",
    "numerical_grad",
]

# What to try when no mistake can be named.
NEXT_STEPS = (
    "Work out the local derivative of each step again and multiply them along every path; "
    "bl.numerical_grad shows which input is off."
)

# Tolerance for a finite-difference reference: central differences in float64
# with eps=1e-6 are good to roughly 1e-8 relative, far from float64 round-off.
FD_TOLERANCE = (1e-5, 1e-6)


# --------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------


def compare(
    name: str,
    manual: Any,
    reference: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> Report:
    """Compare a hand-derived value with a reference: shape first, then values.

    The verdict is ``exact`` (bit-for-bit equal), ``close`` (within the stated
    tolerance), ``mismatch`` (with max abs diff, relative error, worst entry and,
    when one fits, a plain-words diagnosis) or ``shape``.

    Default tolerances come from the less precise dtype (``TOLERANCES``); pass
    ``rtol``/``atol`` to override (an unset one keeps its default).

    >>> import torch
    >>> print(compare("dW", torch.ones(3, 5), torch.ones(5, 3)))  # doctest: +ELLIPSIS
    ✗ dW: dW has shape (3, 5); expected (5, 3)...
    >>> compare("dz/dx", 20, torch.tensor(20.0)).ok
    True
    """
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {_type_name(name)}")
    r = _as_value(reference, "reference")
    if manual is None:
        # In a graded cell this is an unanswered exercise or a .grad that was
        # never filled: a failed check the learner can read, not a TypeError.
        return Report((Check(
            name, False, "missing",
            f"{name} is None: no value yet (a .grad stays None until backward() "
            "reaches the tensor, and zero_grad() resets it to None)",
        ),))
    m = _as_value(manual, "manual")
    return Report((_compare_values(name, m, r, rtol, atol),))


def _resolve_tol(
    m: _Value, r: _Value, rtol: float | None, atol: float | None
) -> tuple[float, float, str]:
    """Tolerance to use and the dtype note explaining where it came from."""
    d_rtol, d_atol = _default_tolerance(m.dtype, r.dtype)
    for arg, val in (("rtol", rtol), ("atol", atol)):
        if val is not None and (
            isinstance(val, bool) or not isinstance(val, (int, float))
            or not math.isfinite(val) or val < 0
        ):
            raise ValueError(f"{arg}: expected a finite number >= 0, got {val!r}")
    if rtol is not None or atol is not None:
        note = ""
    else:
        floats = [d for d in (m.dtype, r.dtype) if d in TOLERANCES]
        loosest = max(floats, key=lambda d: TOLERANCES[d][0]) if floats else None
        note = _dtype_name(loosest) if loosest is not None else "integers"
    return (
        d_rtol if rtol is None else float(rtol),
        d_atol if atol is None else float(atol),
        note,
    )


def _aligned(m, r) -> tuple[torch.Tensor, torch.Tensor]:
    """The two tensors to compare; a bare number stands for any one-element tensor."""
    a, b = m.tensor, r.tensor
    if m.is_number and b.numel() == 1:
        a = a.reshape(b.shape)
    if r.is_number and a.numel() == 1:
        b = b.reshape(a.shape)
    return a, b


def _compare_values(
    name: str,
    m: _Value,
    r: _Value,
    rtol: float | None,
    atol: float | None,
    *,
    accumulation: bool = True,
) -> Check:
    rtol_, atol_, note = _resolve_tol(m, r, rtol, atol)
    a, b = _aligned(m, r)

    if a.shape != b.shape:
        msg = f"{name} has shape {_shape(a.shape)}; expected {_shape(b.shape)}"
        diag = _diagnose(a, b, rtol_, atol_, accumulation=accumulation)
        if diag is None and a.ndim >= 2 and tuple(reversed(a.shape)) == tuple(b.shape):
            diag = "it looks transposed (the shape is reversed), though the values differ too"
        if diag:
            msg += f". {_likely(diag)}"
        return Check(name, False, "shape", msg, diagnosis=diag)

    extra = ""
    if not (m.is_number or r.is_number) and m.dtype != r.dtype:
        extra = f" (note: dtype {_dtype_name(m.dtype)} vs {_dtype_name(r.dtype)})"

    if torch.equal(a, b) or bool((a.isnan() == b.isnan()).all() and _exact_nan_equal(a, b)):
        return Check(name, True, "exact", "exact match" + extra, max_abs_diff=0.0, rel_error=0.0)

    diff = _abs_diff(a, b)
    max_diff = float(diff.max()) if diff.numel() else 0.0
    ref_scale = float(_finite_abs(b).max()) if b.numel() else 0.0
    rel = max_diff / ref_scale if ref_scale > 0 else None
    tol = _tol_text(rtol_, atol_, note)

    if _close(a, b, rtol_, atol_):
        return Check(
            name, True, "close",
            f"close (max abs diff {max_diff:.2g}, within {tol}){extra}",
            max_abs_diff=max_diff, rel_error=rel,
        )  # fmt: skip

    if rel is not None:
        rel_text = f"relative error {_fmt(rel, 3)}"
    elif bool((b == 0).all()):
        rel_text = "the reference is all zeros"
    else:
        rel_text = "no relative error (the reference has no finite non-zero entry)"
    worst = int(diff.flatten().argmax()) if diff.numel() else 0
    at = _index(worst, a.shape)
    bad = int((~_close_mask(a, b, rtol_, atol_)).sum())
    count = f"{bad} of {a.numel()} entries differ, " if a.numel() > 1 else ""
    numbers = (
        f"worst entry{' ' + at if at else ''}: {_pair(a.flatten()[worst], b.flatten()[worst])}; "
        f"{count}max abs diff {_fmt(max_diff, 3)}, {rel_text} ({tol}){extra}"
    )
    diag = _diagnose(a, b, rtol_, atol_, accumulation=accumulation)
    if diag:
        msg = f"mismatch. {_likely(diag)}\n  {numbers}"
    else:
        msg = f"mismatch, and no common single mistake explains it. {NEXT_STEPS}\n  {numbers}"
    return Check(name, False, "mismatch", msg, diagnosis=diag, max_abs_diff=max_diff, rel_error=rel)


def _pair(mine: torch.Tensor, ref: torch.Tensor) -> str:
    """'yours A, expected B' with just enough digits that A and B look different."""
    x, y = mine.item(), ref.item()
    for digits in (4, 6, 8, 10, 17):
        if _fmt(x, digits) != _fmt(y, digits) or x == y:
            break
    return f"yours {_fmt(x, digits)}, expected {_fmt(y, digits)}"


# --------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------


def diagnose(
    manual: Any,
    reference: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> str | None:
    """Name the most likely mistake that turns ``reference`` into ``manual``.

    Candidates (transposed, dimensions permuted, missing sum over a broadcast
    dimension, right values in the wrong shape, sign flipped, constant factor
    such as 2, 1/2, N or 1/N, doubled/tripled by ``.grad`` accumulation, all
    zeros, NaN/inf, float32 round-off) are each *verified* with the same
    closeness test as :func:`compare`; a diagnosis is only returned when it
    holds. When no single mistake fits, one mistake of arrangement
    (transpose, permutation, missing sum, shape) together with one of value
    (sign, factor) is tried, and the text then begins ``"two mistakes: "``.
    Last, a mismatch confined to a minority of rows (of entries, for 1-D) is
    located: which rows differ, and whether their sign is flipped.
    Returns ``None`` when the values already match or nothing fits.

    >>> import torch
    >>> ref = torch.tensor([1.0, 2.0, 3.0])
    >>> print(diagnose(-ref, ref))  # doctest: +ELLIPSIS
    the sign is flipped: your answer is the negative of the reference...
    >>> diagnose(torch.ones(4, 3), torch.full((3,), 4.0))  # doctest: +ELLIPSIS
    'you forgot to sum over dimension 0 (the broadcast batch dimension): ...'
    >>> print(diagnose(-2 * ref.reshape(3, 1), ref))  # doctest: +ELLIPSIS
    two mistakes: the shape is wrong (.reshape(3,) lines up); with that undone, ...exactly -2 × ...
    """
    m = _as_value(manual, "manual")
    r = _as_value(reference, "reference")
    rtol_, atol_, _ = _resolve_tol(m, r, rtol, atol)
    return _diagnose(*_aligned(m, r), rtol_, atol_)


# --------------------------------------------------------------------------
# finite differences
# --------------------------------------------------------------------------


def numerical_grad(
    f: Callable[..., Any],
    *inputs: Any,
    v: Any = None,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, ...]:
    """Central finite differences of ``f`` at ``inputs``, in float64.

    Each input is copied to float64 (the originals are untouched) and nudged
    by ``±eps`` one element at a time: ``(f(x + eps) - f(x - eps)) / (2 eps)``.
    For a scalar ``f`` this is the gradient; for a non-scalar ``f`` pass ``v``
    (shaped like the output) and get the vector-Jacobian product ``vᵀJ``, the
    same thing ``output.backward(v)`` puts in ``.grad``. Returns one float64
    tensor per input. The nudges are evaluated in batches with
    ``torch.func.vmap`` when ``f`` allows it, else in a loop.

    >>> import torch
    >>> numerical_grad(lambda x: (x ** 2).sum(), torch.tensor([1.0, 3.0]))[0]
    tensor([2.0000, 6.0000], dtype=torch.float64)
    """
    return central_differences(f, inputs, v, eps)


# --------------------------------------------------------------------------
# check_grad
# --------------------------------------------------------------------------


def _as_tensor_list(obj: Any) -> list[Any]:
    if isinstance(obj, torch.Tensor) or not isinstance(obj, (list, tuple)):
        return [obj]
    return list(obj)


def check_grad(
    f: Callable[..., Any],
    inputs: torch.Tensor | Sequence[torch.Tensor],
    manual_grads: Any,
    names: Sequence[str] | None = None,
) -> Report:
    """Check hand-derived gradients of a scalar ``f`` against two references.

    Each manual gradient is compared with autograd (run on detached copies of
    ``inputs`` in their own dtype, with the usual tolerance) and with central
    finite differences in float64 (rtol=1e-05, atol=1e-06 or the input
    dtype's, whichever is looser). A check passes when it matches autograd;
    a finite-difference disagreement on top is reported in the same line (it
    usually means ``f`` is not smooth at that point).

    >>> import torch
    >>> x, w = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    >>> print(check_grad(lambda x, w: (x * w).sum(), [x, w], [w, x], names=["dx", "dw"]))
    ✓ dx: matches autograd (exact match) and finite differences (close)
    ✓ dw: matches autograd (exact match) and finite differences (close)
    """
    if not callable(f):
        raise TypeError(f"f: expected a callable, got {_type_name(f)}")
    xs = _as_tensor_list(inputs)
    if not xs:
        raise ValueError("inputs: expected at least one floating-point tensor, got none")
    grads = _as_tensor_list(manual_grads)
    for i, x in enumerate(xs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            what = f"a {x.dtype} tensor" if isinstance(x, torch.Tensor) else _type_name(x)
            raise TypeError(f"inputs[{i}]: expected a floating-point tensor, got {what}")
    if len(grads) != len(xs):
        raise ValueError(
            f"manual_grads: expected {len(xs)} gradient(s), one per input, got {len(grads)}"
        )
    if names is None:
        names = [f"d(input {i})" for i in range(len(xs))] if len(xs) > 1 else ["grad"]
    elif (
        isinstance(names, str) or not isinstance(names, Sequence) or len(names) != len(xs)
        or not all(isinstance(n, str) for n in names)
    ):
        raise ValueError(f"names: expected a sequence of {len(xs)} str, got {names!r}")
    values = [_as_value(g, f"manual_grads[{i}]") for i, g in enumerate(grads)]

    leaves = [x.detach().clone().requires_grad_(True) for x in xs]
    out = f(*leaves)
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        shape = _shape(out.shape) if isinstance(out, torch.Tensor) else _type_name(out)
        raise ValueError(
            f"f: expected a scalar (one-element) tensor output, got {shape}; "
            "reduce it first, e.g. with .sum()"
        )
    if not out.requires_grad:
        raise ValueError("f: its output does not depend on the inputs through autograd")
    auto = torch.autograd.grad(out.reshape(()), leaves, allow_unused=True)
    auto = [torch.zeros_like(x) if g is None else g for g, x in zip(auto, leaves, strict=False)]
    fd = numerical_grad(f, *xs)

    checks = []
    for name, m, x, ga, gn in zip(names, values, xs, auto, fd, strict=False):
        ref = _Value(ga.detach().to(torch.float64), ga.dtype, False)
        c_auto = _compare_values(name, m, ref, None, None)
        fd_rtol, fd_atol = FD_TOLERANCE
        own_rtol, own_atol = _default_tolerance(m.dtype, x.dtype)
        fd_tol = (max(fd_rtol, own_rtol), max(fd_atol, own_atol))
        c_fd = _compare_values(name, m, _Value(gn, torch.float64, False), *fd_tol)
        fd_text = _verdict_word(c_fd, fd_tol)
        if not c_auto.ok:
            msg = c_auto.message + f" [finite differences: {fd_text}]"
            checks.append(
                Check(name, False, c_auto.verdict, msg, c_auto.diagnosis,
                      c_auto.max_abs_diff, c_auto.rel_error)
            )  # fmt: skip
            continue
        msg = f"matches autograd ({_verdict_word(c_auto, None)})"
        if c_fd.ok:
            msg += f" and finite differences ({fd_text})"
        else:
            msg += (
                f" but not finite differences ({fd_text}): f may not be differentiable "
                "at this point"
            )
        checks.append(
            Check(name, True, c_auto.verdict, msg, None, c_auto.max_abs_diff, c_auto.rel_error)
        )
    return Report(tuple(checks))


def _verdict_word(c: Check, tol: tuple[float, float] | None) -> str:
    if c.verdict == "exact":
        return "exact match"
    if c.verdict == "close":
        return "close"
    if c.verdict == "shape":
        return "shape differs"
    return f"mismatch, max abs diff {_fmt(c.max_abs_diff or 0.0, 3)}"


# --------------------------------------------------------------------------
# check_function
# --------------------------------------------------------------------------


def check_function(fn_class: type, *inputs: Any) -> Report:
    """Check a custom ``torch.autograd.Function``'s backward, readably.

    Floating-point tensor inputs are cast to float64 copies (the report says
    so). For every (input, output) pair the Jacobian from ``backward`` is
    compared with central finite differences, and a mismatch names the first
    wrong entry with both values and, when one fits, the likely mistake. Then
    ``torch.autograd.gradcheck`` and ``gradgradcheck`` run; a backward that is
    right but not itself differentiable is reported as a warning, not as
    wrong. Tensors stored as ``ctx`` attributes instead of through
    ``ctx.save_for_backward`` are warned about.

    >>> import torch
    >>> class Square(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 2
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * grad
    >>> print(check_function(Square, torch.tensor([1.0, 2.0])))
    check_function(Square): input 0 cast from float32 to float64 for the check
    ✓ d out/d input0: Jacobian from backward matches finite differences (2 × 2 entries)
    ✓ gradcheck: passed in float64
    ✓ gradgradcheck: passed (backward is itself differentiable and correct)
    """
    return check_custom_function(fn_class, inputs)


# --------------------------------------------------------------------------
# check_graph
# --------------------------------------------------------------------------


def check_graph(prediction: str | Sequence[str], output: Any) -> Report:
    """Diff a learner's list of graph node names against the real graph.

    ``prediction`` lists node names in the order ``Graph.names()`` gives
    (topological, from the root), as a list or one string separated by
    newlines, commas or ``->``. ``output`` is the tensor whose graph is meant,
    a ``Graph``, or a plain list of names. The report says which nodes are
    missing, which are extra (with a "did you mean" for near-misses) and
    which are out of order.

    >>> print(check_graph("MulBackward0 -> AccumulateGrad -> AddBackward0",
    ...                   ["MulBackward0", "AddBackward0", "AccumulateGrad"]))
    ✓ nodes: all 3 nodes named
    ✗ order: AccumulateGrad is out of order: it comes after AddBackward0
    """
    return diff_node_names(prediction, output)


# Checked by `_integrity.verify` before a grade is given (imported here, at the end, so
# the originals are taken as soon as this module exists).
from . import _integrity  # noqa: E402

_integrity.protect(__name__, "compare", "_compare_values", "diagnose", "numerical_grad",
                   "check_grad", "check_function", "check_graph")
