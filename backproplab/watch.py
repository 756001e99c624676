"""Watching what a learner's code asks torch to do: the machinery behind
:func:`backproplab.forbid_autograd` and :func:`backproplab.count_autograd`.

Every reverse pass (``Tensor.backward``, ``torch.autograd.grad``, and
``torch.func``/``torch.autograd.functional`` built on them) goes through one
engine object, and every forward-mode pass starts with
``forward_ad.make_dual``. Both are swapped for the length of a ``with`` block
and always put back.

``forbid_autograd`` also refuses grad mode switched back on inside the block (a
graph could then be built and its nodes called by hand, ``y.grad_fn(g)``). What
else a by-hand answer must not use (torch's backward kernels, complex numbers,
numerical estimates) is read on its source by `backproplab.course.rules`, before
it runs, and estimates are seen as they run by `backproplab.course.nudges`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.forward_ad as forward_ad
from torch.autograd.variable import Variable
from torch.utils._python_dispatch import TorchDispatchMode

SET_GRAD_ENABLED = torch._C._set_grad_enabled  # the real switch, put back after a block

__all__ = [
    "AutogradCount",
    "AutogradForbidden",
    "EngineWatch",
    "QuietDispatchMode",
    "caller_api",
    "count_autograd",
    "forbid_autograd",
    "watch",
]

_TRANSFORMS = {"grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
               "linearize"}


def caller_api(direct: str = "autograd", depth: int = 2) -> str:
    """The torch function the learner's code called, e.g. ``Tensor.backward()``;
    ``direct`` when the learner called the watched function itself."""
    frame = sys._getframe(depth)
    outermost = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("torch") or module.startswith("backproplab."):
            if module.startswith("torch"):
                outermost = frame
        elif outermost is not None:
            break
        frame = frame.f_back
    if outermost is None:
        return direct
    module = outermost.f_globals.get("__name__", "")
    name = outermost.f_code.co_name
    if module == "torch._tensor":
        return f"Tensor.{name}()"
    if module.startswith("torch._functorch") or module.startswith("torch.func"):
        # a transform run by the learner's function inside vmap(...) (``vmap(per_example)``
        # where per_example calls grad) is batched by that vmap, as ``vmap(grad(f))`` is
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith("torch._functorch") \
                    and _transform_name(frame.f_code) == "torch.func.vmap":
                return "torch.func.vmap"
            frame = frame.f_back
        return _transform_name(outermost.f_code)
    if module == "torch.autograd" or module == "torch.autograd.__init__":
        return f"torch.autograd.{name}"
    return f"{module}.{name}"


def _transform_name(code: Any) -> str:
    """``torch.func.jacfwd`` for the frames of ``jacfwd(f)(x)``, so a check can tell a
    full Jacobian from one ``jvp``. The transform is the function whose closure runs:
    ``jacfwd.<locals>.wrapper_fn``, or ``_vjp_with_argnums...`` for a pullback."""
    outer = getattr(code, "co_qualname", code.co_name).split(".")[0]  # co_qualname: 3.11+
    name = outer.lstrip("_").removesuffix("_with_argnums")
    if name in _TRANSFORMS:
        return f"torch.func.{name}"
    return "a torch.func transform (grad, vjp, jvp, jacrev, jacfwd, ...)"


class EngineWatch:
    """Stands in for autograd's engine: counts or refuses reverse passes."""

    def __init__(self, engine: Any, on_pass: Callable[[str], None]) -> None:
        self.engine = engine
        self._on_pass = on_pass

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        self._on_pass(caller_api())
        return self.engine.run_backward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@contextlib.contextmanager
def watch(on_reverse: Callable[[str], None], on_forward: Callable[[str], None]) -> Iterator[None]:
    """Call ``on_reverse``/``on_forward`` with the API's name before each pass."""
    engine = Variable._execution_engine
    make_dual = forward_ad.make_dual

    def watched_make_dual(*args: Any, **kwargs: Any) -> Any:
        on_forward(caller_api("torch.autograd.forward_ad.make_dual (dual numbers)"))
        return make_dual(*args, **kwargs)

    Variable._execution_engine = EngineWatch(engine, on_reverse)
    forward_ad.make_dual = watched_make_dual
    try:
        yield
    finally:
        Variable._execution_engine = engine
        forward_ad.make_dual = make_dual


class QuietDispatchMode(TorchDispatchMode):
    """A dispatch mode that only watches, and keeps torch's compiler unloaded."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep the compiler out of it, and
        # that wrapper imports the whole compiler stack on its first call: seconds
        # before a learner's first check answers. Nothing compiles under a watcher.
        return False


# --------------------------------------------------------------------------
# What a learner and the checks use
# --------------------------------------------------------------------------


class AutogradForbidden(AssertionError):
    """Raised by any autograd pass inside `forbid_autograd`.

    It is an ``AssertionError`` so that a graded cell fails the way any other
    failed check does. ``did`` says what the code did ("called Tensor.backward()"), for
    a checker that words the refusal in its exercise's own terms.
    """

    def __init__(self, message: str, did: str = "") -> None:
        super().__init__(message)
        self.did = did


@contextlib.contextmanager
def forbid_autograd(reason: str = "this exercise asks for the gradient by hand",
                    how: str = "Work the chain rule out and compute the gradient with plain "
                               "tensor operations.") -> Iterator[None]:
    """Make every autograd pass inside the block raise `AutogradForbidden`.

    Reverse mode (``Tensor.backward``, ``torch.autograd.grad``, ``torch.func.grad``,
    ``vjp``, ``jacrev``, ``torch.autograd.functional``) and forward mode
    (``torch.func.jvp``, ``jacfwd``, dual numbers) are all refused. The
    message names the call and ``reason``, then says ``how`` to do without it.

    >>> import torch
    >>> x = torch.tensor(2.0, requires_grad=True)
    >>> with forbid_autograd():  # doctest: +ELLIPSIS
    ...     (x * x).backward()
    Traceback (most recent call last):
    ...
    backproplab.watch.AutogradForbidden: ... but your code called Tensor.backward()...
    """
    for name, words in (("reason", reason), ("how", how)):
        if not isinstance(words, str):
            raise TypeError(f"forbid_autograd: {name} must be a str (words for the refusal), "
                            f"got {type(words).__name__}")

    def refuse(api: str) -> None:
        did = api if api.startswith("used ") else f"called {api}"
        raise AutogradForbidden(f"{reason}, but your code {did}. {how}", did)

    with watch(refuse, refuse), _grad_mode_refused(refuse):
        yield


@contextlib.contextmanager
def _grad_mode_refused(refuse: Callable[[str], None]) -> Iterator[None]:
    """Grad mode switched back on inside a block that started with it off is refused too:
    a graph built there could be differentiated by calling its nodes (``y.grad_fn(g)``)."""
    started_off = not torch.is_grad_enabled()

    def watched(mode: bool) -> None:
        if mode and started_off:
            api = caller_api("torch._C._set_grad_enabled")
            if api.startswith("torch.autograd.grad_mode"):  # the learner's own enable_grad()
                api = ("torch.enable_grad() (this code runs with autograd off, so that no "
                       "graph is built to differentiate)")
            refuse(api)  # else a transform such as torch.func.grad, named as such
        SET_GRAD_ENABLED(mode)

    torch._C._set_grad_enabled = watched
    try:
        yield
    finally:
        torch._C._set_grad_enabled = SET_GRAD_ENABLED


@dataclass
class AutogradCount:
    """What `count_autograd` saw: reverse passes and forward-mode tangents.

    ``calls`` lists the torch function behind each, in order, e.g.
    ``["Tensor.backward()", "Tensor.backward()"]``. A ``torch.func`` transform
    is named by the one the code called (``"torch.func.jacfwd"``, not the
    ``jvp`` inside it), so a check can tell a full Jacobian from one product.
    """

    reverse: int = 0
    forward: int = 0
    calls: list[str] | None = None

    def __post_init__(self) -> None:
        if self.calls is None:
            self.calls = []


@contextlib.contextmanager
def count_autograd() -> Iterator[AutogradCount]:
    """Count the backward passes (and forward-mode tangents) run inside the block.

    A ``torch.func.jacrev`` or ``vmap``-ed ``vjp`` counts once per engine run,
    which is the point: it batches many rows into one pass.

    >>> import torch
    >>> x = torch.tensor(3.0, requires_grad=True)
    >>> with count_autograd() as seen:
    ...     for _ in range(2):
    ...         (2 * x).backward()
    >>> seen.reverse, seen.calls
    (2, ['Tensor.backward()', 'Tensor.backward()'])
    """
    seen = AutogradCount()

    def reverse(api: str) -> None:
        seen.reverse += 1
        seen.calls.append(api)

    def forward(api: str) -> None:
        seen.forward += 1
        seen.calls.append(api)

    with watch(reverse, forward):
        yield seen
