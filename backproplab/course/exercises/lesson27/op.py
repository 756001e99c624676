"""Lesson 27's custom op: the RMS norm's forward in numpy, its reference in torch, the
inputs the check makes, and how the check registers and calls the learner's pieces.

**Fresh names.** A custom op is registered globally, by its name. On torch 2.13 a second
``custom_op`` with a name already taken replaces the first without a word, and the first
op object then fails when called. So the check never reuses a name: each check registers
`rms_norm_forward` under a new one, ``backproplab_l24::rms_norm_<n>`` (n counts up; a name
found taken is skipped), and attaches the learner's pieces to that op alone. A corrected
answer is checked again in the same kernel on a new op; the learner's own ops, whatever
their names, are never touched.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import warnings
from typing import Any

import numpy as np
import torch

from .._spec import first_line

NAMESPACE = "backproplab_l24"
PIECES = ("fake", "setup_context", "backward")
_NUMBERS = itertools.count(1)


def rms_norm_forward(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The fused RMS norm in numpy: each row of x divided by its root mean square (eps
    added under the root), then scaled by w. Same code as the lesson's."""
    a, b = x.detach().numpy(), w.detach().numpy()
    r = 1.0 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)
    return torch.from_numpy(a * r * b)


def inverse_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """r = 1 / sqrt(mean(x**2) + eps) of each row of x, kept as a column."""
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The same RMS norm in torch operations, which autograd differentiates."""
    return x * inverse_rms(x, eps) * w


def fresh_name(stem: str = "rms_norm") -> str:
    """``<stem>_<n>``, a name not yet registered in the check's namespace."""
    while True:
        name = f"{stem}_{next(_NUMBERS)}"
        if not hasattr(getattr(torch.ops, NAMESPACE), name):
            return name


def register(pieces: dict[str, Any]) -> Any:
    """The forward as a new custom op, the learner's fake and autograd attached."""
    op = torch.library.custom_op(f"{NAMESPACE}::{fresh_name()}", rms_norm_forward,
                                 mutates_args=())
    op.register_fake(pieces["fake"])
    op.register_autograd(pieces["backward"], setup_context=pieces["setup_context"])
    return op


@contextlib.contextmanager
def quiet() -> Any:
    """torch's own warnings and log lines about a broken answer (anomaly mode inside
    opcheck, the fake-tensor logger), kept off stderr: the report says what failed."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


# --------------------------------------------------------------------------- inputs


_EPS = (0.1, 0.5, 1.0, 2.0)


def _sizes(gen: torch.Generator) -> tuple[int, int]:
    n, d = (int(s) for s in torch.randint(2, 7, (2,), generator=gen))
    return n, d


def _eps(gen: torch.Generator) -> float:
    return _EPS[int(torch.randint(len(_EPS), (1,), generator=gen))]


def rms_inputs(gen: torch.Generator) -> tuple[Any, ...]:
    """(x, w, eps, g): new sizes and values, eps large enough to matter, and g standing
    for the gradient arriving at the output."""
    n, d = _sizes(gen)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    g = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return x, w, _eps(gen), g


def dtype_cases(gen: torch.Generator) -> list[list[Any]]:
    """Two [x, w, eps] of new sizes, one in float64 and one in float32."""
    found = []
    for dtype in (torch.float64, torch.float32):
        n, d = _sizes(gen)
        x = torch.randn(n, d, generator=gen, dtype=dtype)
        w = torch.randn(d, generator=gen, dtype=dtype)
        found.append([x, w, _eps(gen)])
    return found


def reference_grads(x, w, eps, g):
    """autograd's dL/dx and dL/dw through `rms_norm_reference`, g arriving at y."""
    x, w = x.requires_grad_(), w.requires_grad_()
    return torch.autograd.grad(rms_norm_reference(x, w, eps), (x, w), g)


def said(err: BaseException) -> str:
    """What went wrong, in one line: the compiler's wrapper unwrapped, no final period."""
    inner = getattr(err, "inner_exception", None)
    err = inner if isinstance(inner, BaseException) else err
    return f"{type(err).__name__}: {first_line(err).rstrip('.')}"


def shape(t: Any) -> str:
    return str(tuple(t.shape))


class StandInContext:
    """What ``ctx`` offers setup_context and backward, so both can be called as plain
    functions: ``save_for_backward`` (tensors or None, as torch's) and ``saved_tensors``."""

    def __init__(self) -> None:
        self.needs_input_grad = (True, True, False)
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, torch.Tensor):
                raise TypeError(f"save_for_backward can only save tensors (or None), but "
                                f"argument {i} is of type {type(t).__name__}: keep a plain "
                                "number as an attribute of ctx instead")
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def call_directly(pieces: dict[str, Any], x, w, eps, g) -> tuple[Any, StandInContext]:
    """What the learner's backward returns for the gradient g, after their setup_context
    saw (x, w, eps) and the op's output, as autograd would call them."""
    ctx = StandInContext()
    pieces["setup_context"](ctx, (x, w, eps), rms_norm_forward(x, w, eps))
    return pieces["backward"](ctx, g), ctx


