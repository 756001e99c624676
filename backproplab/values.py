"""Two values side by side: what every checker needs before it can judge an answer.

`as_value` turns an answer (a tensor, a number, an array, nested lists) into
a float64 tensor on the answer's own device, refusing what a gradient cannot
be; `aligned` puts two of them on one device; `resolve_tolerance`
gives the tolerance the less precise dtype allows; `all_close` is the
closeness test every verdict uses. The rest writes numbers, shapes and
positions the way a report shows them. :mod:`backproplab.check` and
:mod:`backproplab.diagnosis` are built on these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "TOLERANCES",
    "Value",
    "abs_diff",
    "aligned",
    "all_close",
    "as_value",
    "close_mask",
    "default_tolerance",
    "dtype_name",
    "exact_nan_equal",
    "finite_abs",
    "fmt",
    "index_text",
    "index_words",
    "on_one_device",
    "position",
    "relative",
    "resolve_tolerance",
    "shape_text",
    "tolerance_text",
    "type_name",
]

# (rtol, atol) per dtype. float32/float16/bfloat16 follow torch.testing's
# defaults; float64 is tighter than torch.testing's (1e-7, 1e-7) on purpose:
# a hand-derived float64 gradient should agree to ~1e-7 or it is a mistake.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


# --------------------------------------------------------------------------
# Input handling and closeness
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    tensor: torch.Tensor  # float64 (or complex128) copy for comparison, on the value's
    # own device (the CPU for Python numbers, lists and numpy arrays)
    dtype: torch.dtype  # the original dtype
    is_number: bool  # a Python/NumPy scalar: no shape or dtype of its own


def type_name(obj: object) -> str:
    return type(obj).__name__


def as_value(obj: object, arg: str) -> Value:
    """Convert an accepted value to a float64 tensor, or raise naming ``arg``.

    A tensor stays on its device (a CUDA gradient is compared on the GPU, see `aligned`);
    Python and numpy values are read onto the CPU, whatever torch's default device.
    """
    expected = f"{arg}: expected a tensor, number or numpy array, got"
    if isinstance(obj, bool):
        raise TypeError(f"{expected} bool (a gradient is never True/False)")
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.device.type == "meta":
            raise TypeError(f"{expected} a tensor on the meta device (it holds no values)")
        if t.layout != torch.strided:  # sparse gradients (e.g. an embedding's) compare densely
            t = t.to_dense()
        is_number = False
    elif isinstance(obj, (int, float)):
        # A Python float carries float64 precision: compare it as float64, never
        # as torch's default float32 (which would make 1e40 inf and 0.1 + 0.2 == 0.3).
        # Integers beyond int64 are compared as float64 too.
        if isinstance(obj, int) and -(2**63) <= obj < 2**63:
            t = torch.tensor(obj, dtype=torch.int64, device="cpu")
        else:
            t = torch.tensor(float(obj), dtype=torch.float64, device="cpu")
        is_number = True
    elif isinstance(obj, complex):  # a Python complex has float64 parts: complex128
        t = torch.tensor(obj, dtype=torch.complex128, device="cpu")
        is_number = True
    elif type(obj).__module__ == "numpy":
        import numpy as np  # numpy is a torch dependency, imported only when used

        if not isinstance(obj, (np.ndarray, np.generic)):
            raise TypeError(f"{expected} {type_name(obj)}")
        if obj.dtype.kind not in "iufc":
            raise TypeError(f"{expected} a numpy array of dtype {obj.dtype}")
        t = torch.from_numpy(np.array(obj))
        is_number = isinstance(obj, np.generic)
    elif isinstance(obj, (list, tuple)):
        try:
            t = torch.tensor(obj, device="cpu")
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"{expected} a {type_name(obj)} that is not a rectangular list of numbers"
            ) from None
        is_number = False
    elif obj is None:
        # The usual source: reading x.grad before any backward() reached x.
        raise TypeError(f"{expected} None (a .grad is None until backward() has reached it)")
    else:
        raise TypeError(f"{expected} {type_name(obj)}")
    if t.dtype == torch.bool:
        raise TypeError(f"{expected} a boolean tensor (a gradient is never True/False)")
    if t.is_complex():
        return Value(t.to(torch.complex128), t.dtype, is_number)
    return Value(t.to(torch.float64), t.dtype, is_number)


def default_tolerance(*dtypes: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) of the least precise floating dtype; (0, 0) for integers only."""
    tols = [TOLERANCES[d] for d in dtypes if d in TOLERANCES]
    if not tols:
        return 0.0, 0.0
    return max(t[0] for t in tols), max(t[1] for t in tols)


def close_mask(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Element-wise symmetric closeness; equal infinities and NaN==NaN count as close."""
    with torch.no_grad():
        diff = (a - b).abs()
        scale = torch.maximum(a.abs(), b.abs())
        # isfinite: with an inf on one side, rtol * inf would excuse any gap.
        ok = (diff <= atol + rtol * scale) & torch.isfinite(diff)
        both_nan = a.isnan() & b.isnan()
        same_inf = a.isinf() & (a == b)
        return ok | both_nan | same_inf


def all_close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    return bool(close_mask(a, b, rtol, atol).all())


def fmt(x: float, digits: int = 4) -> str:
    """A float rounded for people: 4 significant digits, no trailing noise."""
    if isinstance(x, complex):
        return f"{x:.{digits}g}"
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def shape_text(s: Sequence[int]) -> str:
    s = tuple(s)
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def position(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """The index of entry ``flat`` of a tensor of ``shape`` (row-major): ``()`` for a scalar.

    >>> position(5, (2, 3))
    (1, 2)
    """
    idx = []
    for size in reversed(tuple(shape)):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def index_words(index: Sequence[int]) -> str:
    """An index as a report shows it: ``[1, 2]``; empty for a scalar's ``()``."""
    return "[" + ", ".join(map(str, index)) + "]" if len(index) else ""


def index_text(flat: int, shape: Sequence[int]) -> str:
    return index_words(position(flat, shape))


def tolerance_text(rtol: float, atol: float, dtype_note: str = "") -> str:
    text = f"rtol={rtol:.2g}, atol={atol:.2g}"
    return f"{text} for {dtype_note}" if dtype_note else text


def dtype_name(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def exact_nan_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal except that NaNs sit in the same places on both sides."""
    nan = a.isnan()
    return bool(torch.equal(a[~nan], b[~nan])) and bool(nan.any())


def finite_abs(t: torch.Tensor) -> torch.Tensor:
    t = t.abs()
    return torch.where(torch.isfinite(t), t, torch.zeros_like(t))


def relative(got: object, want: object, *, ord: float = math.inf) -> float:
    """How far ``got`` is from ``want``, relative to ``want``'s size: ``‖got - want‖ /
    ‖want‖`` over all entries, by the largest entry (``ord=inf``, the default) or by
    another vector norm (``ord=2``: the Euclidean norm). Only ``want``'s finite entries
    count towards its size. It is ``inf`` when the shapes differ or a value is not a
    number or tensor.

    >>> relative(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]))
    0.25
    """
    try:
        g, w = as_value(got, "got").tensor, as_value(want, "want").tensor
    except TypeError:
        return math.inf
    if g.shape != w.shape:
        return math.inf
    g, w = on_one_device(g, w)
    scale = float(torch.linalg.vector_norm(finite_abs(w), ord)) if w.numel() else 0.0
    gap = float(torch.linalg.vector_norm((g - w).abs(), ord)) if w.numel() else 0.0
    return gap / max(scale, 1e-300)


def abs_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The distance ``abs(a - b)``, with matching NaN/inf counted as 0 and other non-finite
    values as inf."""
    d = (a - b).abs()
    same = (a.isnan() & b.isnan()) | (a.isinf() & (a == b))
    d = torch.where(same, torch.zeros_like(d), d)
    return torch.where(d.isnan(), torch.full_like(d, math.inf), d)


def resolve_tolerance(
    m: Value, r: Value, rtol: float | None, atol: float | None
) -> tuple[float, float, str]:
    """The tolerance to use for ``m`` against ``r``, and a note saying where it came from."""
    d_rtol, d_atol = default_tolerance(m.dtype, r.dtype)
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
        note = dtype_name(loosest) if loosest is not None else "integers"
    return (
        d_rtol if rtol is None else float(rtol),
        d_atol if atol is None else float(atol),
        note,
    )


def on_one_device(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` on one device, to be compared there: an answer written on the CPU
    (a list, a number) against a CUDA reference is compared on the GPU, where the
    reference already is; between two accelerators, on ``b``'s."""
    if a.device == b.device:
        return a, b
    if b.device.type == "cpu":
        return a, b.to(a.device)
    return a.to(b.device), b


def aligned(m: Value, r: Value) -> tuple[torch.Tensor, torch.Tensor]:
    """The two tensors to compare, on one device; a bare number stands for any
    one-element tensor."""
    a, b = on_one_device(m.tensor, r.tensor)
    if m.is_number and b.numel() == 1:
        a = a.reshape(b.shape)
    if r.is_number and a.numel() == 1:
        b = b.reshape(a.shape)
    return a, b
