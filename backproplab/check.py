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
* Accepted values: ``torch.Tensor``, Python ``int``/``float``/``complex``, NumPy
  arrays and NumPy scalars, and (nested) lists/tuples of numbers. ``bool`` values and
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
This module holds the reports (`Check`, `Report`), `compare` and
`check_grad`. Naming the mistake is :mod:`backproplab.diagnosis`'s job (with
the value conversion and closeness test both share); finite differences are
in :mod:`backproplab.numerical`; the other checkers have a module each:
:mod:`backproplab.custom_function` (``check_function``) and
:mod:`backproplab.graph_quiz` (``check_graph``).
"""

from __future__ import annotations

import dataclasses
import html
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .diagnosis import diagnose, name_mistake
from .mistakes import Diagnosis
from .numerical import inputs_device, numerical_grad
from .values import (
    TOLERANCES,
    Value,
    abs_diff,
    aligned,
    all_close,
    as_value,
    close_mask,
    default_tolerance,
    dtype_name,
    exact_nan_equal,
    finite_abs,
    fmt,
    index_words,
    position,
    resolve_tolerance,
    shape_text,
    tolerance_text,
    type_name,
)

__all__ = [
    "TOLERANCES",
    "Check",
    "Mismatch",
    "Report",
    "check_grad",
    "compare",
    "diagnose",
    "lay_out",
    "numerical_grad",
    "show",
    "wrap",
]

# --------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------

_SYMBOL = {True: "✓", False: "✗"}
# Longer lines wrap, mid-word, in a default JupyterLab window.
WIDTH = 88


def wrap(text: str) -> str:
    """Each line of ``text`` wrapped at word boundaries, continuation lines indented."""
    return "\n".join(
        textwrap.fill(line, WIDTH, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2),
                      break_long_words=False, break_on_hyphens=False)
        for line in text.split("\n")
    )


@dataclass(frozen=True)
class Mismatch:
    """The numbers of a failed comparison, as data.

    ``index``: the worst entry's index (``()`` for a scalar); ``got`` and ``expected``:
    the two values there; ``max_abs_diff``; ``rel_error`` (relative to the reference's
    largest finite entry; None when it has none, ``reference_zeros`` saying whether that
    is because it is all zeros); ``differing`` of ``size`` entries are outside the
    tolerance ``rtol``/``atol``, which comes from the dtype ``tolerance_of`` ("" when the
    caller gave it); ``dtypes``: (the answer's, the reference's) when they differ;
    ``entry``: the worst entry's name, when the caller knows one (``"w.grad"``).
    """

    index: tuple[int, ...]
    got: float | complex
    expected: float | complex
    max_abs_diff: float
    rel_error: float | None
    differing: int
    size: int
    rtol: float
    atol: float
    tolerance_of: str = ""
    reference_zeros: bool = False
    dtypes: tuple[str, str] | None = None
    entry: str | None = None


def lay_out(words: str, numbers: Mismatch) -> str:
    """A mismatch's words, then its numbers on a line of their own.

    Every message that shows a mismatch's numbers is laid out here, and nothing reads
    them back from the text: a caller that needs a number reads the `Mismatch`.

    >>> print(lay_out("mismatch", Mismatch((1,), 2.0, 4.0, 2.0, 0.5, 1, 2, 1e-07, 1e-07)))
    ... # doctest: +ELLIPSIS
    mismatch
      worst entry [1]: yours 2, expected 4; 1 of 2 entries differ, max abs diff 2, ...
    """
    m = numbers
    if m.rel_error is not None:
        rel_text = f"relative error {fmt(m.rel_error, 3)}"
    elif m.reference_zeros:
        rel_text = "the reference is all zeros"
    else:
        rel_text = "no relative error (the reference has no finite non-zero entry)"
    at = index_words(m.index)
    at += f" ({m.entry})" if m.entry and at else ""
    count = f"{m.differing} of {m.size} entries differ, " if m.size > 1 else ""
    dtypes = f" (note: dtype {m.dtypes[0]} vs {m.dtypes[1]})" if m.dtypes else ""
    return (
        f"{words}\n  worst entry{' ' + at if at else ''}: {_pair(m.got, m.expected)}; "
        f"{count}max abs diff {fmt(m.max_abs_diff, 3)}, {rel_text} "
        f"({tolerance_text(m.rtol, m.atol, m.tolerance_of)}){dtypes}"
    )


@dataclass(frozen=True)
class Check:
    """One checked item: a name, a verdict, and what explains it, as data.

    ``verdict`` is one of ``"exact"``, ``"close"``, ``"mismatch"``,
    ``"shape"``, ``"missing"`` (no answer: None), ``"error"``, ``"pass"``,
    ``"fail"``, ``"warning"``.
    A ``"warning"`` is ``ok`` but printed with ``⚠`` so it is not missed.

    ``text`` is the check's own words; a failed comparison also carries its
    `Diagnosis` (the likely mistake, or None) and its `Mismatch` (the numbers), and
    ``note`` says what follows them. ``message`` puts these together only when the
    check is shown: code that needs the mistake or a number reads the fields.

    >>> str(Check("dx", True, "exact", "exact match"))
    '✓ dx: exact match'
    """

    name: str
    ok: bool
    verdict: str
    text: str
    diagnosis: Diagnosis | None = None
    max_abs_diff: float | None = None
    rel_error: float | None = None
    numbers: Mismatch | None = None
    note: str = ""

    @property
    def symbol(self) -> str:
        return "⚠" if self.verdict == "warning" else _SYMBOL[self.ok]

    @property
    def message(self) -> str:
        """The words, the likely mistake and the numbers, as the learner reads them."""
        words = self.text
        if self.diagnosis is not None:
            words += f". {self.diagnosis.likely()}"
        if self.numbers is not None:
            words = lay_out(words, self.numbers)
        return f"{words} {self.note}" if self.note else words

    def __str__(self) -> str:
        return wrap(f"{self.symbol} {self.name}: {self.message}")


@dataclass(frozen=True)
class Report:
    """A list of checks, printed one line per check.

    >>> r = Report((Check("dx", True, "exact", "exact match"),))
    >>> bool(r), str(r)
    (True, '✓ dx: exact match')
    >>> r.assert_ok()
    ✓ dx: exact match
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

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` carrying the report text unless all passed; show it if so.

        It returns None on purpose: a graded cell ending in ``.assert_ok()`` then has no
        value, which nbgrader would try to read as a partial score.
        """
        __tracebackhide__ = True  # the learner's cell is the place to look, not this frame
        if not self.ok:
            # The report starts on a line of its own: the lab shows "AssertionError: " before
            # the message, and the report's lines are already as wide as the lab allows.
            raise AssertionError("\n" + str(self)) from None
        show(self)

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


def show(report: Report) -> None:
    """Display a report: as HTML in a notebook, as text elsewhere."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        from IPython.display import display

        display(report)
    else:
        print(report)


# What to try when no mistake can be named.
NEXT_STEPS = (
    "Work out the local derivative of each step again and chain them, trying each step "
    "alone in a scratch cell against torch.autograd.grad of that step."
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
    explain: bool = True,
    accumulation: bool = True,
    advice: str = NEXT_STEPS,
) -> Report:
    """Compare a hand-derived value with a reference: shape first, then values.

    The verdict is ``exact`` (bit-for-bit equal), ``close`` (within the stated
    tolerance), ``mismatch`` (with max abs diff, relative error, worst entry and,
    when one fits, a plain-words diagnosis) or ``shape``.

    Default tolerances come from the less precise dtype (``TOLERANCES``); pass
    ``rtol``/``atol`` to override (an unset one keeps its default). With
    ``explain=False`` a mismatch gets its numbers but no diagnosis: quicker, for
    a caller that needs only the verdict. With ``accumulation=False`` (a reference the
    caller computed itself, where no ``.grad`` can have accumulated), a factor 2 or 1/2
    is not said to come from backward passes adding up. ``advice`` is what a mismatch
    that no common mistake explains says to try next (by default, for a derivation).

    >>> import torch
    >>> print(compare("dW", torch.ones(3, 5), torch.ones(5, 3)))  # doctest: +ELLIPSIS
    ✗ dW: dW has shape (3, 5); expected (5, 3)...
    >>> compare("dz/dx", 20, torch.tensor(20.0)).ok
    True
    """
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type_name(name)}")
    if not isinstance(advice, str):
        raise TypeError(f"advice: expected a str, got {type_name(advice)}")
    r = as_value(reference, "reference")
    if manual is None:
        # In a graded cell this is an unanswered exercise or a .grad that was
        # never filled: a failed check the learner can read, not a TypeError.
        return Report((Check(
            name, False, "missing",
            f"{name} is None: no value yet (a .grad stays None until backward() "
            "reaches the tensor, and zero_grad() resets it to None)",
        ),))
    m = as_value(manual, "manual")
    return Report((_compare_values(name, m, r, rtol, atol, explain=explain,
                                   accumulation=accumulation, advice=advice),))


def _compare_values(
    name: str,
    m: Value,
    r: Value,
    rtol: float | None,
    atol: float | None,
    *,
    accumulation: bool = True,
    explain: bool = True,
    advice: str = NEXT_STEPS,
) -> Check:
    rtol_, atol_, note = resolve_tolerance(m, r, rtol, atol)
    a, b = aligned(m, r)

    if a.shape != b.shape:
        words = f"{name} has shape {shape_text(a.shape)}; expected {shape_text(b.shape)}"
        diag = name_mistake(a, b, rtol_, atol_, accumulation=accumulation) if explain else None
        if explain and diag is None and a.ndim >= 2 and tuple(reversed(a.shape)) == tuple(b.shape):
            diag = Diagnosis("reversed-shape")
        return Check(name, False, "shape", words, diagnosis=diag)

    dtypes = None
    if not (m.is_number or r.is_number) and m.dtype != r.dtype:
        dtypes = (dtype_name(m.dtype), dtype_name(r.dtype))
    extra = f" (note: dtype {dtypes[0]} vs {dtypes[1]})" if dtypes else ""

    if torch.equal(a, b) or bool((a.isnan() == b.isnan()).all() and exact_nan_equal(a, b)):
        return Check(name, True, "exact", "exact match" + extra, max_abs_diff=0.0, rel_error=0.0)

    diff = abs_diff(a, b)
    max_diff = float(diff.max()) if diff.numel() else 0.0
    ref_scale = float(finite_abs(b).max()) if b.numel() else 0.0
    rel = max_diff / ref_scale if ref_scale > 0 else None

    if all_close(a, b, rtol_, atol_):
        return Check(
            name, True, "close",
            f"close (max abs diff {max_diff:.2g}, within {tolerance_text(rtol_, atol_, note)})"
            f"{extra}",
            max_abs_diff=max_diff, rel_error=rel,
        )  # fmt: skip

    worst = int(diff.flatten().argmax()) if diff.numel() else 0
    numbers = Mismatch(
        index=position(worst, a.shape), got=a.flatten()[worst].item(),
        expected=b.flatten()[worst].item(), max_abs_diff=max_diff, rel_error=rel,
        differing=int((~close_mask(a, b, rtol_, atol_)).sum()), size=a.numel(),
        rtol=rtol_, atol=atol_, tolerance_of=note,
        reference_zeros=rel is None and bool((b == 0).all()), dtypes=dtypes,
    )  # fmt: skip
    diag = name_mistake(a, b, rtol_, atol_, accumulation=accumulation) if explain else None
    if diag is None and explain:
        words = f"mismatch, and no single common mistake explains it. {advice}"
    else:
        words = "mismatch"
    return Check(name, False, "mismatch", words, diagnosis=diag, max_abs_diff=max_diff,
                 rel_error=rel, numbers=numbers)


def _pair(mine: float | complex, ref: float | complex) -> str:
    """'yours A, expected B' with just enough digits that A and B look different."""
    for digits in (4, 6, 8, 10, 17):
        if fmt(mine, digits) != fmt(ref, digits) or mine == ref:
            break
    return f"yours {fmt(mine, digits)}, expected {fmt(ref, digits)}"


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
    dtype's, whichever is looser), both computed on the inputs' device (they
    must share one; a manual gradient on another device is compared all the
    same). A check passes when it matches autograd; a finite-difference
    disagreement on top is reported in the same line (it usually means ``f``
    is not smooth at that point).

    >>> import torch
    >>> x, w = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    >>> print(check_grad(lambda x, w: (x * w).sum(), [x, w], [w, x], names=["dx", "dw"]))
    ✓ dx: matches autograd (exact match) and finite differences (close)
    ✓ dw: matches autograd (exact match) and finite differences (close)
    """
    if not callable(f):
        raise TypeError(f"f: expected a callable, got {type_name(f)}")
    xs = _as_tensor_list(inputs)
    if not xs:
        raise ValueError("inputs: expected at least one floating-point tensor, got none")
    grads = _as_tensor_list(manual_grads)
    for i, x in enumerate(xs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            what = f"a {x.dtype} tensor" if isinstance(x, torch.Tensor) else type_name(x)
            raise TypeError(f"inputs[{i}]: expected a floating-point tensor, got {what}")
    inputs_device(xs)  # one device for all: f and both references run there
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
    values = [as_value(g, f"manual_grads[{i}]") for i, g in enumerate(grads)]

    leaves = [x.detach().clone().requires_grad_(True) for x in xs]
    out = f(*leaves)
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        shape = shape_text(out.shape) if isinstance(out, torch.Tensor) else type_name(out)
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
        ref = Value(ga.detach().to(torch.float64), ga.dtype, False)
        c_auto = _compare_values(name, m, ref, None, None)
        fd_rtol, fd_atol = FD_TOLERANCE
        own_rtol, own_atol = default_tolerance(m.dtype, x.dtype)
        fd_tol = (max(fd_rtol, own_rtol), max(fd_atol, own_atol))
        c_fd = _compare_values(name, m, Value(gn, torch.float64, False), *fd_tol)
        fd_text = _verdict_word(c_fd, fd_tol)
        if not c_auto.ok:
            checks.append(dataclasses.replace(c_auto, note=f"[finite differences: {fd_text}]"))
            continue
        msg = f"matches autograd ({_verdict_word(c_auto, None)})"
        if c_fd.ok:
            msg += f" and finite differences ({fd_text})"
        else:
            msg += (
                f" but not finite differences ({fd_text}): f may not be differentiable "
                "at this point"
            )
        checks.append(Check(name, True, c_auto.verdict, msg, max_abs_diff=c_auto.max_abs_diff,
                            rel_error=c_auto.rel_error))
    return Report(tuple(checks))


def _verdict_word(c: Check, tol: tuple[float, float] | None) -> str:
    if c.verdict == "exact":
        return "exact match"
    if c.verdict == "close":
        return "close"
    if c.verdict == "shape":
        return "shape differs"
    return f"mismatch, max abs diff {fmt(c.max_abs_diff or 0.0, 3)}"
