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
"""

from __future__ import annotations

import difflib
import html
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    _shape,
    _tol_text,
    _type_name,
    _Value,
)

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

# Tolerance for a finite-difference reference: central differences in float64
# with eps=1e-6 are good to roughly 1e-8 relative, far from float64 round-off.
FD_TOLERANCE = (1e-5, 1e-6)

_SYMBOL = {True: "✓", False: "✗"}


# --------------------------------------------------------------------------
# Result objects
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One checked item: a name, a verdict and a sentence explaining it.

    ``verdict`` is one of ``"exact"``, ``"close"``, ``"mismatch"``,
    ``"shape"``, ``"missing"`` (no answer: None), ``"error"``, ``"pass"``,
    ``"fail"``, ``"warning"``.
    A ``"warning"`` is ``ok`` but printed with ``⚠`` so it is not missed.

    >>> str(Check("dx", True, "exact", "exact match"))
    '✓ dx: exact match'
    """

    name: str
    ok: bool
    verdict: str
    message: str
    diagnosis: str | None = None
    max_abs_diff: float | None = None
    rel_error: float | None = None

    @property
    def symbol(self) -> str:
        return "⚠" if self.verdict == "warning" else _SYMBOL[self.ok]

    def __str__(self) -> str:
        return f"{self.symbol} {self.name}: {self.message}"


@dataclass(frozen=True)
class Report:
    """A list of checks, printed one line per check.

    >>> r = Report((Check("dx", True, "exact", "exact match"),))
    >>> bool(r), str(r)
    (True, '✓ dx: exact match')
    >>> r.assert_ok() is r
    True
    """

    checks: tuple[Check, ...]
    title: str = ""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [self.title] if self.title else []
        lines += [str(c) for c in self.checks]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def __getitem__(self, key: int | str) -> Check:
        """A check by position or by name."""
        if isinstance(key, str):
            for c in self.checks:
                if c.name == key:
                    return c
            raise KeyError(key)
        return self.checks[key]

    def __len__(self) -> int:
        return len(self.checks)

    def assert_ok(self) -> Report:
        """Raise ``AssertionError`` carrying the report text unless all passed."""
        if not self.ok:
            raise AssertionError(str(self))
        return self

    def _repr_html_(self) -> str:
        colours = {"✓": "#1a7f37", "✗": "#cf222e", "⚠": "#9a6700"}
        rows = []
        if self.title:
            rows.append(f"<div><b>{html.escape(self.title)}</b></div>")
        for c in self.checks:
            colour = colours[c.symbol]
            rows.append(
                f'<div style="color:{colour};font-family:monospace;white-space:pre-wrap">'
                f"{c.symbol} <b>{html.escape(c.name)}</b>: {html.escape(c.message)}</div>"
            )
        return "<div>" + "".join(rows) + "</div>"


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
        if val is not None and (not isinstance(val, (int, float)) or val < 0):
            raise ValueError(f"{arg}: expected a non-negative number, got {val!r}")
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
            msg += f". Likely mistake: {_sentence(diag)}"
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

    rel_text = f"relative error {_fmt(rel, 3)}" if rel is not None else "the reference is all zeros"
    worst = int(diff.flatten().argmax()) if diff.numel() else 0
    at = _index(worst, a.shape)
    bad = int((~_close_mask(a, b, rtol_, atol_)).sum())
    count = f"{bad} of {a.numel()} entries differ, " if a.numel() > 1 else ""
    numbers = (
        f"{count}max abs diff {_fmt(max_diff, 3)}, {rel_text}; "
        f"worst entry{' ' + at if at else ''}: {_pair(a.flatten()[worst], b.flatten()[worst])}"
        f" ({tol}){extra}"
    )
    diag = _diagnose(a, b, rtol_, atol_, accumulation=accumulation)
    if diag:
        msg = f"mismatch. Likely mistake: {_sentence(diag)} Numbers: {numbers}"
    else:
        msg = f"mismatch: {numbers}"
    return Check(name, False, "mismatch", msg, diagnosis=diag, max_abs_diff=max_diff, rel_error=rel)


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
    holds. Returns ``None`` when the values already match or nothing fits.

    >>> import torch
    >>> ref = torch.tensor([1.0, 2.0, 3.0])
    >>> print(diagnose(-ref, ref))  # doctest: +ELLIPSIS
    the sign is flipped: your answer is the negative of the reference...
    >>> diagnose(torch.ones(4, 3), torch.full((3,), 4.0))  # doctest: +ELLIPSIS
    'you forgot to sum over dimension 0 (the broadcast batch dimension): ...'
    """
    m = _as_value(manual, "manual")
    r = _as_value(reference, "reference")
    rtol_, atol_, _ = _resolve_tol(m, r, rtol, atol)
    return _diagnose(*_aligned(m, r), rtol_, atol_)


# --------------------------------------------------------------------------
# finite differences
# --------------------------------------------------------------------------

# Largest number of float64 elements one batched (vmap) evaluation may hold.
_BATCH_ELEMENTS = 1 << 22


def _as_output(y: Any, arg: str = "f") -> torch.Tensor:
    if isinstance(y, torch.Tensor):
        return y.detach().to(torch.float64)
    if isinstance(y, (int, float)) and not isinstance(y, bool):
        return torch.tensor(float(y), dtype=torch.float64)
    raise TypeError(f"{arg}: expected f to return a tensor or a number, got {_type_name(y)}")


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
    if not callable(f):
        raise TypeError(f"f: expected a callable, got {_type_name(f)}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"eps: expected a positive number, got {eps!r}")
    if not inputs:
        raise ValueError("inputs: expected at least one input tensor, got none")
    xs = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            xs.append(x.detach().to(torch.float64).clone())
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            xs.append(torch.tensor(float(x), dtype=torch.float64))
        else:
            what = f"a {x.dtype} tensor" if isinstance(x, torch.Tensor) else _type_name(x)
            raise TypeError(f"inputs[{i}]: expected a floating-point tensor or number, got {what}")
    with torch.no_grad():
        y0 = _as_output(f(*xs))
    if v is None:
        if y0.numel() != 1:
            raise ValueError(
                f"v: f returns a tensor of shape {_shape(y0.shape)}, not a scalar, so v "
                "(the vector in vᵀJ, shaped like the output) is required"
            )
        w = torch.ones(1, dtype=torch.float64)
    else:
        w = _as_value(v, "v").tensor.to(torch.float64)
        if w.numel() != y0.numel():
            raise ValueError(
                f"v: expected shape {_shape(y0.shape)} (the output's), got {_shape(w.shape)}"
            )
        w = w.reshape(-1)
    return tuple(_fd_one(f, xs, i, w, float(eps)) for i in range(len(xs)))


def _fd_one(
    f: Callable[..., Any], xs: list[torch.Tensor], i: int, w: torch.Tensor, eps: float
) -> torch.Tensor:
    """vᵀJ for input ``i``: rows of the Jacobian by central differences."""
    x = xs[i]
    n = x.numel()
    if n == 0:
        return torch.zeros_like(x)
    rows = _fd_rows_vmap(f, xs, i, eps)
    if rows is None:
        rows = _fd_rows_loop(f, xs, i, eps)
    # rows[k] = d output / d x.flat[k], flattened; contract with v.
    return (rows @ w).reshape(x.shape)


def _fd_rows_vmap(
    f: Callable[..., Any], xs: list[torch.Tensor], i: int, eps: float
) -> torch.Tensor | None:
    """All nudges of input ``i`` through ``torch.func.vmap``; None if f can't be vmapped."""
    x = xs[i]
    n = x.numel()
    chunk = max(1, _BATCH_ELEMENTS // (2 * n))

    def g(xi: torch.Tensor) -> torch.Tensor:
        args = list(xs)
        args[i] = xi
        out = f(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError("f returned a non-tensor")
        return out.to(torch.float64).reshape(-1)

    try:
        batched = torch.func.vmap(g)
        parts = []
        with torch.no_grad():
            for start in range(0, n, chunk):
                k = torch.arange(start, min(n, start + chunk))
                bump = torch.zeros(len(k), n, dtype=torch.float64)
                bump[torch.arange(len(k)), k] = eps
                bump = bump.reshape(len(k), *x.shape)
                plus = batched(x + bump)
                minus = batched(x - bump)
                parts.append((plus - minus) / (2 * eps))
        rows = torch.cat(parts)
    except Exception:  # vmap rejects .item(), data-dependent control flow, etc.
        return None
    # Guard against f that silently mixes batch entries: spot-check one row.
    probe = _fd_rows_loop(f, xs, i, eps, only=int(n // 2))
    if not torch.allclose(rows[n // 2], probe[0], rtol=1e-6, atol=1e-9):
        return None
    return rows


def _fd_rows_loop(
    f: Callable[..., Any], xs: list[torch.Tensor], i: int, eps: float, only: int | None = None
) -> torch.Tensor:
    x = xs[i]
    flat = x.view(-1)
    rows = []
    args = list(xs)
    with torch.no_grad():
        for k in range(flat.numel()) if only is None else [only]:
            old = flat[k].item()
            xp = x.clone()
            xp.view(-1)[k] = old + eps
            xm = x.clone()
            xm.view(-1)[k] = old - eps
            args[i] = xp
            plus = _as_output(f(*args)).reshape(-1)
            args[i] = xm
            minus = _as_output(f(*args)).reshape(-1)
            rows.append((plus - minus) / (2 * eps))
    return torch.stack(rows)


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
    ✓ dx: matches autograd (exact match) and finite differences (close, rtol=1e-05, atol=1e-05)
    ✓ dw: matches autograd (exact match) and finite differences (close, rtol=1e-05, atol=1e-05)
    """
    if not callable(f):
        raise TypeError(f"f: expected a callable, got {_type_name(f)}")
    xs = _as_tensor_list(inputs)
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
    elif isinstance(names, str) or len(names) != len(xs):
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
        if tol is not None:
            return f"close, rtol={tol[0]:.2g}, atol={tol[1]:.2g}"
        return "close, " + c.message.split("within ")[-1].rstrip(")")
    if c.verdict == "shape":
        return "shape differs"
    return f"mismatch, max abs diff {_fmt(c.max_abs_diff or 0.0, 3)}"


# --------------------------------------------------------------------------
# check_function
# --------------------------------------------------------------------------

# gradcheck's own defaults: finite differences limit how tight this can be.
_JAC_RTOL, _JAC_ATOL, _JAC_EPS = 1e-3, 1e-5, 1e-6


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
    if not (isinstance(fn_class, type) and issubclass(fn_class, torch.autograd.Function)):
        raise TypeError(
            "fn_class: expected a subclass of torch.autograd.Function, got "
            f"{fn_class.__name__ if isinstance(fn_class, type) else _type_name(fn_class)}"
        )
    if not inputs:
        raise ValueError("inputs: expected at least one input, got none")
    xs: list[Any] = []
    notes = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            if x.dtype not in (torch.float64, torch.complex128):
                notes.append(f"input {i} cast from {_dtype_name(x.dtype)} to float64")
                x = x.to(torch.complex128 if x.is_complex() else torch.float64)
            xs.append(x.detach().clone().requires_grad_(True))
        else:
            xs.append(x)
    title = f"check_function({fn_class.__name__}): " + (
        "; ".join(notes) + " for the check" if notes else "inputs already float64"
    )
    apply = fn_class.apply
    checks: list[Check] = []

    try:
        out = apply(*xs)
    except Exception as exc:  # the learner's forward: report, don't crash
        return Report((Check("forward", False, "error", _exc_text("forward", exc)),), title)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    stash = _ctx_stash_warning(outs)
    if stash is not None:
        checks.append(stash)

    in_idx = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.requires_grad]
    out_idx = [j for j, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    in_name = {i: f"input{i}" for i in in_idx}
    out_name = {j: "out" if len(outs) == 1 else f"out{j}" for j in out_idx}
    try:
        analytical = _analytical_jacobians(outs, xs, in_idx, out_idx)
    except Exception as exc:
        checks.append(Check("backward", False, "error", _exc_text("backward", exc)))
        return Report(tuple(checks), title)
    numerical = _numerical_jacobians(apply, xs, in_idx, out_idx)
    ignored = _ignores_grad_output(apply, xs, in_idx, out_idx, numerical)

    jac_checks = []
    in_ok = dict.fromkeys(in_idx, True)
    for j in out_idx:
        for i in in_idx:
            jac_checks.append(
                _jacobian_check(
                    f"d {out_name[j]}/d {in_name[i]}", analytical[j, i], numerical[j, i],
                    outs[j].shape, xs[i].shape, out_name[j], in_name[i],
                    ignored.get(i),
                )
            )  # fmt: skip
            in_ok[i] = in_ok[i] and jac_checks[-1].ok
    checks.extend(jac_checks)
    # The Jacobian is built from one-hot grad_outputs, so with a scalar output
    # (grad_output always 1) a backward ignoring grad_output still matches it.
    missed = [i for i in ignored if in_ok[i]]
    for i in missed:
        checks.append(
            Check(
                f"grad_output → {in_name[i]}", False, "mismatch",
                "the Jacobian matches, but it only sends grad_outputs made of a single 1; "
                f"for other grad_outputs the gradient for {in_name[i]} does not change. "
                f"Likely mistake: {_sentence(ignored[i])}",
                diagnosis=ignored[i],
            )
        )  # fmt: skip

    first_order_ok = all(c.ok for c in jac_checks)
    gc_ok, gc_err = _run_check(torch.autograd.gradcheck, apply, xs)
    if gc_ok:
        checks.append(Check("gradcheck", True, "pass", "passed in float64"))
    elif not first_order_ok:
        msg = "failed: backward does not match finite differences (details above)"
        checks.append(Check("gradcheck", False, "fail", msg))
    else:
        checks.append(Check("gradcheck", False, "fail", f"failed: {gc_err}"))
    if gc_ok and first_order_ok and not missed:
        checks.append(_gradgrad_check(apply, xs, in_idx))
    return Report(tuple(checks), title)


def _sentence(text: str) -> str:
    """End a diagnosis with exactly one full stop (or its own question mark)."""
    return text if text.endswith((".", "?", "!")) else text + "."


def _pair(mine: torch.Tensor, ref: torch.Tensor) -> str:
    """'yours A, expected B' with just enough digits that A and B look different."""
    x, y = mine.item(), ref.item()
    for digits in (4, 6, 8, 10, 17):
        if _fmt(x, digits) != _fmt(y, digits) or x == y:
            break
    return f"yours {_fmt(x, digits)}, expected {_fmt(y, digits)}"


def _exc_text(where: str, exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0].rstrip(",:; ") if str(exc).strip() else ""
    return f"{where} raised {type(exc).__name__}: {first}"


def _ctx_stash_warning(outs: list[Any]) -> Check | None:
    """Tensors hung on ctx as attributes: they dodge save_for_backward's checks."""
    for o in outs:
        node = getattr(o, "grad_fn", None)
        if node is None:
            continue
        found = []
        for key, val in vars(node).items() if hasattr(node, "__dict__") else []:
            items = val if isinstance(val, (list, tuple)) else [val]
            if any(isinstance(t, torch.Tensor) for t in items):
                found.append(f"ctx.{key}")
        if found:
            return Check(
                "ctx", True, "warning",
                f"forward stores tensors as ctx attributes ({', '.join(found)}); use "
                "ctx.save_for_backward(...) and ctx.saved_tensors instead, so autograd can "
                "detect in-place changes to them and free them after backward",
            )  # fmt: skip
        return None
    return None


def _analytical_jacobians(
    outs: list[Any], xs: list[Any], in_idx: list[int], out_idx: list[int]
) -> dict[tuple[int, int], torch.Tensor]:
    """Jacobians (n_out, n_in) built row by row from one-hot backward calls."""
    jac: dict[tuple[int, int], torch.Tensor] = {}
    wrt = [xs[i] for i in in_idx]
    for j in out_idx:
        o = outs[j]
        rows: dict[int, list[torch.Tensor]] = {i: [] for i in in_idx}
        for k in range(o.numel()):
            onehot = torch.zeros_like(o).reshape(-1)
            onehot[k] = 1
            grads = torch.autograd.grad(
                o, wrt, grad_outputs=onehot.reshape(o.shape), retain_graph=True,
                allow_unused=True,
            )  # fmt: skip
            for i, g in zip(in_idx, grads, strict=False):
                g = torch.zeros_like(xs[i]) if g is None else g
                rows[i].append(g.detach().reshape(-1).to(torch.float64))
        for i in in_idx:
            n_in = xs[i].numel()
            jac[j, i] = (
                torch.stack(rows[i]) if rows[i] else torch.zeros(0, n_in, dtype=torch.float64)
            )
    return jac


def _numerical_jacobians(
    apply: Callable[..., Any], xs: list[Any], in_idx: list[int], out_idx: list[int]
) -> dict[tuple[int, int], torch.Tensor]:
    plain = [x.detach() if isinstance(x, torch.Tensor) else x for x in xs]
    jac: dict[tuple[int, int], torch.Tensor] = {}
    for j in out_idx:

        def f(*args: Any, _j: int = j) -> torch.Tensor:
            out = apply(*args)
            return out[_j] if isinstance(out, (tuple, list)) else out

        for i in in_idx:
            # The loop, not vmap: a custom Function need not support vmap.
            rows = _fd_rows_loop(f, plain, i, _JAC_EPS)  # (n_in, n_out)
            jac[j, i] = rows.T.contiguous()
    return jac


def _jacobian_check(
    name: str,
    ana: torch.Tensor,
    num: torch.Tensor,
    out_shape: Sequence[int],
    in_shape: Sequence[int],
    out_name: str,
    in_name: str,
    ignored: str | None = None,
) -> Check:
    size = f"{ana.shape[0]} × {ana.shape[1]} entries"
    bad = ~_close_mask(ana, num, _JAC_RTOL, _JAC_ATOL)
    if not bad.any():
        msg = f"Jacobian from backward matches finite differences ({size})"
        return Check(name, True, "pass", msg)
    r, c = (int(v) for v in bad.nonzero()[0])
    where = f"d {out_name}{_index(r, out_shape)} / d {in_name}{_index(c, in_shape)}"
    msg = (
        f"Jacobian mismatch at entry [{r}, {c}] ({where}): "
        f"backward gives {_fmt(ana[r, c].item())}, "
        f"finite differences give {_fmt(num[r, c].item())}; {int(bad.sum())} of {bad.numel()} "
        f"entries differ (rtol={_JAC_RTOL:g}, atol={_JAC_ATOL:g})"
    )
    if ignored is not None:
        # Verified by probing backward directly; it explains the whole pattern of
        # wrong entries, so it wins over any fit of the Jacobian's numbers.
        diag: str | None = ignored
    else:
        diag = _diagnose(ana, num, _JAC_RTOL, _JAC_ATOL, accumulation=False)
        if diag:
            diag = diag.replace("your answer", "backward's Jacobian").replace(
                "yours", "backward's"
            )
    if diag:
        msg += f". Likely mistake: {_sentence(diag)}"
    return Check(
        name, False, "mismatch", msg, diagnosis=diag, max_abs_diff=float((ana - num).abs().max())
    )


_IGNORED_LOCAL = (
    "backward ignores grad_output: it returns the local derivative but must multiply it "
    "by the incoming gradient grad_output (chain rule)"
)
_IGNORED_OTHER = (
    "backward ignores grad_output: it returns the same gradient whatever grad_output is, "
    "but the chain rule needs the local derivative multiplied by the incoming gradient "
    "grad_output"
)


def _ignores_grad_output(
    apply: Callable[..., Any],
    xs: list[Any],
    in_idx: list[int],
    out_idx: list[int],
    numerical: dict[tuple[int, int], torch.Tensor],
) -> dict[int, str]:
    """Inputs whose gradient from backward does not depend on grad_output at all.

    A correct backward is linear in grad_output: scaling grad_output scales
    the gradient. So if three quite different grad_outputs (all ones, all
    -0.5, and random values) give the same non-zero gradient, backward
    cannot be using grad_output. Returns input index -> diagnosis; an
    exception, or anything short of equality within tolerance, claims nothing.
    """
    if not in_idx or not out_idx:
        return {}
    gen = torch.Generator().manual_seed(0)
    probes: list[list[torch.Tensor]] = []
    try:
        outs = apply(*xs)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        wrt = [xs[i] for i in in_idx]
        chosen = [outs[j] for j in out_idx]
        makers = (
            lambda o: torch.ones_like(o),
            lambda o: torch.full_like(o, -0.5),
            # Random in [0.5, 2.5) with random signs: no entry is 0 or ±1.
            lambda o: (torch.rand(o.shape, generator=gen, dtype=torch.float64) * 2 + 0.5)
            * torch.where(torch.rand(o.shape, generator=gen) < 0.5, -1.0, 1.0).to(
                torch.float64
            ),
        )
        for make in makers:
            vs = [make(o).to(o.dtype) for o in chosen]
            grads = torch.autograd.grad(
                chosen, wrt, grad_outputs=vs, retain_graph=True, allow_unused=True
            )
            probes.append([
                torch.zeros_like(xs[i]) if g is None else g.detach()
                for i, g in zip(in_idx, grads, strict=True)
            ])  # fmt: skip
    except Exception:  # backward errors are reported by the Jacobian check
        return {}
    found: dict[int, str] = {}
    for k, i in enumerate(in_idx):
        first = probes[0][k].to(torch.float64).reshape(-1)
        if first.is_complex() or bool((first.abs() <= _JAC_ATOL).all()):
            continue  # an all-zero gradient is the same for every grad_output anyway
        if not all(
            _close(p[k].to(torch.float64).reshape(-1), first, _JAC_RTOL, _JAC_ATOL)
            for p in probes[1:]
        ):
            continue
        # What backward should give when grad_output is all ones: the column
        # sums of the (finite-difference) Jacobians, i.e. the local derivative.
        local = sum(numerical[j, i].sum(dim=0) for j in out_idx)
        if _close(first, local, _JAC_RTOL, _JAC_ATOL):
            found[i] = _IGNORED_LOCAL
        else:
            extra = _diagnose(first, local, _JAC_RTOL, _JAC_ATOL, accumulation=False)
            found[i] = _IGNORED_OTHER + (
                "; also, even for grad_output all ones "
                + extra.replace("your answer", "its result").replace("yours", "its")
                if extra else ""
            )  # fmt: skip
    return found


def _run_check(
    fn: Callable[..., Any], apply: Callable[..., Any], xs: list[Any]
) -> tuple[bool, str]:
    try:
        ok = bool(fn(apply, tuple(xs), raise_exception=True))
        return ok, ""
    except Exception as exc:  # GradcheckError, or the learner's code raising
        return False, _exc_text(fn.__name__, exc).split(": ", 1)[-1]


def _gradgrad_check(apply: Callable[..., Any], xs: list[Any], in_idx: list[int]) -> Check:
    """gradgradcheck, telling 'backward not differentiable' apart from 'wrong'."""
    not_diff = (
        "backward is correct but is not itself differentiable, so double backward "
        "(second derivatives, create_graph=True) fails: {why}. Fine for first-order "
        "training; to support it, compute backward from differentiable torch operations"
    )
    try:
        outs = apply(*xs)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        grads = torch.autograd.grad(
            # grad_outputs that require grad, as gradgradcheck uses: a backward
            # that only detaches a saved tensor still has a grad_fn then, and
            # is caught below as wrong rather than excused as non-differentiable.
            outs, [xs[i] for i in in_idx],
            grad_outputs=[torch.ones_like(o, requires_grad=True) for o in outs],
            create_graph=True, allow_unused=True,
        )  # fmt: skip
    except Exception as exc:
        why = _exc_text("it", exc)
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    # @once_differentiable hands back results whose grad_fn is an Error node.
    if any(g is not None and g.grad_fn is not None and "Error" in g.grad_fn.name() for g in grads):
        why = "backward is marked @once_differentiable"
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    if all(g is None or not g.requires_grad for g in grads):
        why = (
            "its result has no grad_fn (it leaves the graph, e.g. via .detach(), .item(), "
            "numpy or no_grad)"
        )
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    ok, err = _run_check(torch.autograd.gradgradcheck, apply, xs)
    if ok:
        return Check(
            "gradgradcheck", True, "pass", "passed (backward is itself differentiable and correct)"
        )
    if re.search(r"once_differentiable|does not require grad|does not have a grad_fn", err):
        return Check("gradgradcheck", True, "warning", not_diff.format(why=err))
    return Check(
        "gradgradcheck", False, "fail",
        "backward gives the right first derivatives, but differentiating backward itself "
        f"gives wrong second derivatives (does backward use a detached copy of a saved "
        f"tensor?): {err}",
    )  # fmt: skip


# --------------------------------------------------------------------------
# check_graph
# --------------------------------------------------------------------------


def _parse_names(prediction: Any) -> list[str]:
    if isinstance(prediction, str):
        parts = re.split(r"->|→|,|\n", prediction)
    elif isinstance(prediction, (list, tuple)) and all(isinstance(p, str) for p in prediction):
        parts = list(prediction)
    else:
        raise TypeError(
            "prediction: expected a list of node names or one string separated by newlines, "
            f"commas or '->', got {_type_name(prediction)}"
        )
    return [p.strip() for p in parts if p.strip()]


def _actual_names(output: Any) -> list[str]:
    if isinstance(output, torch.Tensor):
        from .graph import describe  # lazy: graph.py is a sibling module, imported on use

        return list(describe(output).names())
    names = getattr(output, "names", None)
    if callable(names):
        return list(names())
    if isinstance(output, (list, tuple)) and all(isinstance(n, str) for n in output):
        return list(output)
    raise TypeError(
        "output: expected a torch.Tensor, a Graph or a list of node names, got "
        f"{_type_name(output)}"
    )


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
    predicted = _parse_names(prediction)
    actual = _actual_names(output)
    want, got = Counter(actual), Counter(predicted)
    missing, extra = want - got, got - want

    def listing(c: Counter[str]) -> str:
        return ", ".join(n if k == 1 else f"{n} (×{k})" for n, k in c.items())

    checks = []
    if not missing and not extra:
        checks.append(Check("nodes", True, "pass", f"all {len(actual)} nodes named"))
    else:
        parts = []
        if missing:
            parts.append(f"missing {listing(missing)}")
        if extra:
            hints = []
            unused = list(missing)
            for name in extra:
                close = [m for m in unused if m.lower().startswith(name.lower())]
                if not close:
                    # Compare stems: a shared "Backward0" suffix says nothing.
                    stems = {_stem(m): m for m in unused}
                    near = difflib.get_close_matches(_stem(name), list(stems), n=1, cutoff=0.75)
                    close = [stems[n] for n in near]
                if close:
                    unused.remove(close[0])
                hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
            parts.append("extra " + ", ".join(hints))
        checks.append(Check("nodes", False, "fail", "; ".join(parts)))

    # Order: among the names both lists share, keep a longest common
    # subsequence; whatever falls outside it is out of order.
    left = Counter(want)
    shared = []
    for name in predicted:
        if left[name] > 0:
            shared.append(name)
            left[name] -= 1
    left = Counter(got)
    actual_shared = []
    for name in actual:
        if left[name] > 0:
            actual_shared.append(name)
            left[name] -= 1
    keep = _lcs_mask(shared, actual_shared)
    wrong = [name for name, k in zip(shared, keep, strict=False) if not k]
    if not wrong:
        checks.append(Check("order", True, "pass", "the nodes are in the right order"))
    else:
        lines = []
        for name in dict.fromkeys(wrong):
            pos = actual_shared.index(name)
            after = f"it comes after {actual_shared[pos - 1]}" if pos else "it comes first"
            lines.append(f"{name} is out of order: {after}")
        checks.append(Check("order", False, "fail", "; ".join(lines)))
    return Report(tuple(checks))


def _stem(name: str) -> str:
    return re.sub(r"Backward\d*$", "", name).lower()


def _lcs_mask(a: list[str], b: list[str]) -> list[bool]:
    """For each item of ``a``: is it part of a longest common subsequence with ``b``?"""
    if len(a) * len(b) > 4_000_000:  # too big for the table: difflib's good-enough match
        mask = [False] * len(a)
        for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
            for k in range(block.a, block.a + block.size):
                mask[k] = True
        return mask
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = (
                table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
            )
    mask = [False] * n
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            mask[i] = True
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return mask
