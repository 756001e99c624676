"""Shortcuts for the exercises of 28-the-dispatcher.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. The dispatch mode: the check's own recorder borrowed
from the package, and torch's private current-node lookup (refused, and it would put the
engine's sums under the node before). The formulas: central finite differences written out,
bl.numerical_grad, a table of the visible check's answers, grad mode switched back on, and
torch's own backward kernel for cumprod, and one estimate in disguise per formula
(tests/cheats/estimates.py).
"""

from cheats.builders import autograd_back_on, finite_differences, lookup, numerical_grad
from cheats.estimates import Plan, gradients, with_disguised

CUMPROD = "cumprod_backward(x, dim, g)"
ATAN2 = "atan2_backward(y, x, g)"
STEPS = {
    "l28-cumprod": (CUMPROD, [("(torch.cumprod(t, dim) * g).sum()", "x")]),
    "l28-atan2": (ATAN2, [("(torch.atan2(t, x) * g).sum()", "y"),
                          ("(torch.atan2(y, t) * g).sum()", "x")]),
}


def _common(key: str) -> list[tuple[str, str]]:
    signature, outputs = STEPS[key]
    return [(finite_differences(signature, outputs), "numerical estimate"),
            (numerical_grad(signature, outputs), "numerical_grad"),
            (lookup(key, signature), "raised KeyError"),
            (autograd_back_on(signature, outputs), "enable_grad")]


CHEATS = {
    "l28-ops-by-node": [
        # The check's own recorder, borrowed from the lesson's exercise module.
        ("from backproplab.course.exercises.lesson28 import recording as _recording\n\n\n"
         "def ops_by_node(loss):\n"
         "    recorder = _recording._Recorder()\n"
         "    with recorder:\n"
         "        loss.backward()\n"
         "    return recorder.entries\n",
         "backproplab.course.exercises.lesson28"),
        # torch's private lookup of the node that runs now.
        ("from torch.utils._python_dispatch import TorchDispatchMode\n\n\n"
         "class ByCurrentNode(TorchDispatchMode):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.report = []\n\n"
         "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
         "        node = torch._C._current_autograd_node()\n"
         "        if node is not None:\n"
         "            if not self.report or self.report[-1][0] is not node:\n"
         "                self.report.append((node, []))\n"
         "            self.report[-1][1].append(str(func))\n"
         "        return func(*args, **(kwargs or {}))\n\n\n"
         "def ops_by_node(loss):\n"
         "    mode = ByCurrentNode()\n"
         "    with mode:\n"
         "        loss.backward()\n"
         "    return [(node.name(), ops) for node, ops in mode.report]\n",
         "torch._C._current_autograd_node"),
    ],
    "l28-cumprod": _common("l28-cumprod") + [
        # torch's backward kernel for cumprod.
        ("def cumprod_backward(x, dim, g):\n"
         "    return torch.ops.aten.cumprod_backward(g, x, dim, torch.cumprod(x, dim))\n",
         "backward kernels"),
    ],
    "l28-atan2": _common("l28-atan2"),
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
PLANS = {key: Plan(signature, gradients(outputs)) for key, (signature, outputs) in STEPS.items()}
CHEATS = with_disguised(CHEATS, PLANS)
