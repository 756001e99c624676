"""Small helpers shared by the figure modules (plot, drawing, widgets).

Nothing here imports matplotlib at module level: the figures load it on
their first call, so ``import backproplab`` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations
    from matplotlib.axes import Axes

__all__ = ["fmt_shape", "fmt_value", "new_or_given_ax", "pyplot", "to_float_list"]


def pyplot() -> Any:
    import matplotlib.pyplot as plt

    return plt


def new_or_given_ax(ax: Any, figsize: tuple[float, float]) -> Axes:
    """Return ``ax`` after checking it, or a fresh Axes on a new figure."""
    if ax is None:
        _fig, new_ax = pyplot().subplots(figsize=figsize)
        return new_ax
    from matplotlib.axes import Axes as _Axes

    if not isinstance(ax, _Axes):
        raise TypeError(f"ax: expected a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def fmt_value(v: float) -> str:
    """Compact number for a label: 4 significant digits, floats keep a '.0'."""
    s = f"{v:.4g}"
    if s.lstrip("-").isdigit():
        s += ".0"  # "2.0" reads as a float value, as torch prints it
    return s


def fmt_shape(shape: Sequence[int]) -> str:
    return "scalar" if len(shape) == 0 else "×".join(str(d) for d in shape)


def to_float_list(values: Any, argname: str) -> list[float]:
    """Turn a sequence/array/1-D tensor of numbers into floats, or raise naming ``argname``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(
            f"{argname}: expected a tensor or sequence of numbers, got {type(values).__name__}"
        )
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach()
    if hasattr(values, "reshape") and hasattr(values, "tolist"):  # tensor or numpy array
        # One column or one row of numbers is fine (x of shape (100, 1)); a
        # real table is not a list of numbers and must not be flattened silently.
        shape = tuple(values.shape)
        if sum(d > 1 for d in shape) > 1:
            raise ValueError(
                f"{argname}: expected one row or column of numbers, got shape {shape}"
            )
        values = values.reshape(-1).tolist()
    out: list[float] = []
    for i, v in enumerate(values):
        try:
            if isinstance(v, (str, bytes, bool)):
                raise TypeError
            out.append(float(v))
        except (TypeError, ValueError):
            raise TypeError(
                f"{argname}: expected a tensor or sequence of numbers, item {i} is "
                f"{type(v).__name__} ({v!r})"
            ) from None
    return out
