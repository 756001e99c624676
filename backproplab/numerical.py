"""Central finite differences: `numerical_grad`, the gradient measured by nudging.

Every input is copied to float64 and nudged by ``±eps`` one element at a time;
each nudge gives one row of the Jacobian, and the rows are contracted with
``v`` to give ``vᵀJ``. The nudges run in batches through ``torch.func.vmap``
when ``f`` allows it (checked against one nudge run plainly), else in a loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .values import as_value, shape_text, type_name

# Largest number of float64 elements one batched (vmap) evaluation may hold.
_BATCH_ELEMENTS = 1 << 22

__all__ = ["central_differences", "inputs_device", "jacobian_rows", "numerical_grad"]


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
    tensor per input, on the inputs' device (they must share one; a number
    input joins them there). The nudges are evaluated in batches with
    ``torch.func.vmap`` when ``f`` allows it, else in a loop.

    >>> import torch
    >>> numerical_grad(lambda x: (x ** 2).sum(), torch.tensor([1.0, 3.0]))[0]
    tensor([2.0000, 6.0000], dtype=torch.float64)
    """
    return central_differences(f, inputs, v, eps)


def _as_output(y: Any, device: torch.device, arg: str = "f") -> torch.Tensor:
    """``f``'s result as a float64 tensor; a number (an ``f`` ending in ``.item()``)
    on ``device``, the inputs' one, so that it meets ``v`` and the other rows there."""
    if isinstance(y, torch.Tensor):
        return y.detach().to(torch.float64)
    if isinstance(y, (int, float)) and not isinstance(y, bool):
        return torch.tensor(float(y), dtype=torch.float64, device=device)
    raise TypeError(f"{arg}: expected f to return a tensor or a number, got {type_name(y)}")


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, with a NaN equal to a NaN in the same place (NaN != NaN otherwise)."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def central_differences(
    f: Callable[..., Any], inputs: Sequence[Any], v: Any, eps: float
) -> tuple[torch.Tensor, ...]:
    """``vᵀJ`` of ``f`` at ``inputs`` per input (see ``numerical_grad``, which documents it)."""
    if not callable(f):
        raise TypeError(f"f: expected a callable, got {type_name(f)}")
    if (
        not isinstance(eps, (int, float)) or isinstance(eps, bool)
        or not math.isfinite(eps) or not eps > 0
    ):
        raise ValueError(f"eps: expected a small positive number such as 1e-6, got {eps!r}")
    if not inputs:
        raise ValueError("inputs: expected at least one input tensor, got none")
    device = inputs_device(inputs)
    xs = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            xs.append(x.detach().to(torch.float64).clone())
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            xs.append(torch.tensor(float(x), dtype=torch.float64, device=device))
        else:
            what = f"a {x.dtype} tensor" if isinstance(x, torch.Tensor) else type_name(x)
            raise TypeError(f"inputs[{i}]: expected a floating-point tensor or number, got {what}")
    originals = [x.clone() for x in xs]
    with torch.no_grad():
        raw = _first_call(f, xs, inputs)
    if any(not _same_values(x, x0) for x, x0 in zip(xs, originals, strict=True)):
        raise ValueError(
            "f: it changed its input in place (e.g. with add_ or +=), so every nudge would "
            "start from a different point; compute on a copy (x = x + 1) instead"
        )
    if isinstance(raw, torch.Tensor) and raw.dtype in (torch.float32, torch.float16,
                                                       torch.bfloat16, torch.complex64):
        raise ValueError(
            f"f: it returned a {str(raw.dtype).removeprefix('torch.')} tensor for float64 "
            "inputs, so its result is rounded far more than the nudge eps and the slopes "
            "would be off in the 3rd digit; compute in float64 (e.g. avoid torch.tensor(...) "
            "without dtype, and .float())"
        )
    y0 = _as_output(raw, device)
    if v is None:
        if y0.numel() != 1:
            raise ValueError(
                f"v: f returns a tensor of shape {shape_text(y0.shape)}, not a scalar, so v "
                "(the vector in vᵀJ, shaped like the output) is required"
            )
        w = torch.ones(1, dtype=torch.float64, device=y0.device)
    else:
        w = as_value(v, "v").tensor.to(torch.float64)
        if w.numel() != y0.numel():
            raise ValueError(
                f"v: expected shape {shape_text(y0.shape)} (the output's), "
                f"got {shape_text(w.shape)}"
            )
        w = w.reshape(-1).to(y0.device)
    return tuple(_fd_one(f, xs, i, w, float(eps)) for i in range(len(xs)))


def inputs_device(inputs: Sequence[Any]) -> torch.device:
    """The one device of the tensors among ``inputs`` (the CPU when there are only
    numbers); a clear error when they are on two, or on the meta device, which holds
    no values to nudge."""
    where = [(i, x.device) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    for i, device in where:
        if device != where[0][1]:
            raise ValueError(
                f"inputs: expected tensors on one device, got inputs[{where[0][0]}] on "
                f"{where[0][1]} and inputs[{i}] on {device}; move them to one with .to(device)")
    if not where:
        return torch.device("cpu")
    if where[0][1].type == "meta":
        raise TypeError(f"inputs[{where[0][0]}]: expected a tensor holding values, got a "
                        "tensor on the meta device")
    return where[0][1]


def _first_call(f: Callable[..., Any], xs: list[torch.Tensor], inputs: Sequence[Any]) -> Any:
    """``f`` at the float64 copies; when only the inputs' own dtype or device works, an error
    that says why (``f`` uses a tensor of its own, from a closure or a global)."""
    try:
        return f(*xs)
    except Exception:
        own = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        try:
            f(*own)
        except Exception:
            raise  # f fails whatever it is given: its own error says why
        dtypes = ", ".join(sorted({str(x.dtype).removeprefix("torch.") for x in own
                                   if isinstance(x, torch.Tensor)}))
        raise ValueError(
            f"f: it runs on the inputs as given ({dtypes}) but not on the float64 copies "
            "numerical_grad nudges (float64 is what makes a nudge of 1e-6 measurable): it "
            "probably uses a tensor of its own, from a closure or a global, in another dtype "
            "or on another device. Make those float64 on the inputs' device (w.double()), or "
            "pass them to f as inputs too") from None


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
        rows = jacobian_rows(f, xs, i, eps)
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
                k = torch.arange(start, min(n, start + chunk), device=x.device)
                bump = torch.zeros(len(k), n, dtype=torch.float64, device=x.device)
                bump[torch.arange(len(k), device=x.device), k] = eps
                bump = bump.reshape(len(k), *x.shape)
                plus = batched(x + bump)
                minus = batched(x - bump)
                parts.append((plus - minus) / (2 * eps))
        rows = torch.cat(parts)
    except Exception:  # vmap rejects .item(), data-dependent control flow, etc.
        return None
    # Guard against f that silently mixes batch entries: spot-check one row.
    probe = jacobian_rows(f, xs, i, eps, only=int(n // 2))
    if not torch.allclose(rows[n // 2], probe[0], rtol=1e-6, atol=1e-9):
        return None
    return rows


def jacobian_rows(
    f: Callable[..., Any], xs: list[torch.Tensor], i: int, eps: float, only: int | None = None
) -> torch.Tensor:
    """The Jacobian rows of ``f`` for input ``i`` (or row ``only``), one nudge at a time."""
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
            plus = _as_output(f(*args), x.device).reshape(-1)
            args[i] = xm
            minus = _as_output(f(*args), x.device).reshape(-1)
            rows.append((plus - minus) / (2 * eps))
    return torch.stack(rows)
