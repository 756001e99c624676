"""Lesson 28, where torch's backward formulas live and how autograd sits in the dispatcher:
its exercises and its prediction.

Exercise 1 (``l28-ops-by-node``) is checked by method (module ``recording``): the learner
builds a dispatch mode that reports, node by node, the aten operations a backward pass
runs, checked on graphs the lesson never showed (module ``graphs``) against the check's own
recorder. Exercises 2 and 3 (``l28-cumprod``, ``l28-atan2``) are by hand (module
``formulas``): the backward of ``torch.cumprod`` on inputs with exact zeros, and of
``torch.atan2`` for both inputs, one of them broadcast.

The prediction: what a dispatch mode finds in ``grad_fn`` of the result it gets back from
the kernel, for a product whose input requires grad.
"""

from __future__ import annotations

import torch

from ....watch import QuietDispatchMode
from .._spec import Prediction
from .formulas import ATAN2, CUMPROD
from .recording import OPS_BY_NODE

# What the grade's sandbox loads before an answer runs: the module a dispatch mode comes from.
PRELOAD = ("torch.utils._python_dispatch",)

EXERCISES = {
    "l28-ops-by-node": OPS_BY_NODE,
    "l28-cumprod": CUMPROD,
    "l28-atan2": ATAN2,
}


def _grad_fn_answer() -> str | None:
    """Run x * w in a mode that looks at the kernel's result before handing it back."""
    seen: list[str | None] = []

    class Peek(QuietDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.append(None if out.grad_fn is None else out.grad_fn.name())
            return out

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with Peek():
        x * torch.tensor([3.0, 4.0])
    return seen[0]


PREDICTIONS = {
    "l28-predict-grad-fn": Prediction(
        question="the grad_fn a dispatch mode finds on the kernel's result for x * w "
                 "(x requires grad)",
        answer=_grad_fn_answer,
        hint="the mode runs at the Python key. Find that key on the path of the call, and the "
             "key whose kernel makes the node: which of the two runs first, and which one "
             "finishes its work first?",
        why="the mode sits at the Python key, below the Autograd key. The autograd kernel "
            "runs first: it saves what the formula needs and calls down, through the mode, "
            "to the CPU kernel. The result comes back up through the mode before the "
            "autograd kernel attaches MulBackward0 to it, so the mode sees {answer}",
        choices=("MulBackward0", None),
    ),
}
