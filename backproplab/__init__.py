"""backproplab: see what PyTorch's autograd does, and check gradients you derive.

The modules, in the order the lessons meet them:

- ``graph``     describe(outputs): the autograd graph as plain data (nodes,
                edges, leaves, saved tensors and their memory), as text or DOT
- ``trace``     trace_backward(loss): a real backward pass, node by node
- ``check``     compare, diagnose, numerical_grad, check_grad, check_function,
                check_graph: say what is wrong with a hand-derived gradient
- ``exercise``  check_by_hand, check_prediction, reveal, count_autograd:
                how the lessons' exercises are graded
- ``lessons``   check_exercise: each lesson's checks, references and answers
- ``plot``      figures: graph drawings, loss curves, fits, gradient flow
- ``widgets``   a backward stepper and a learning-rate explorer
- ``data``      tiny data sets made in code
- ``course``    the exercise format; student and learner versions of a lesson
- ``handout``   writing them out: ``backproplab release`` and ``learn``
- ``audit``     what in submitted notebooks tampers with grading
- ``notebook``  short_tracebacks(): errors in a notebook show your own code

>>> import torch, backproplab as bl
>>> a = torch.tensor(2.0, requires_grad=True)
>>> bl.describe(a * a, names={"a": a}).names()
['MulBackward0', 'AccumulateGrad']

Every name is loaded on first use, so ``import backproplab`` is quick and
``backproplab --help`` never waits for torch.
"""

import importlib

__version__ = "0.1.0"

# Public name -> the module that defines it.
_HOME = {
    "describe": "graph", "Graph": "graph", "Node": "graph", "Edge": "graph",
    "LeafInfo": "graph", "SavedTensor": "graph", "SavedMemory": "graph",
    "trace_backward": "trace", "Trace": "trace", "Step": "trace", "TensorInfo": "trace",
    "compare": "check", "diagnose": "check", "numerical_grad": "check",
    "check_grad": "check", "check_function": "check", "check_graph": "check",
    "Check": "check", "Report": "check",
    "check_by_hand": "exercise", "check_prediction": "exercise",
    "count_autograd": "exercise", "forbid_autograd": "exercise",
    "AutogradForbidden": "exercise", "reveal": "exercise", "Prediction": "exercise",
    "ByHand": "exercise", "Method": "exercise",
    "check_exercise": "lessons",
    "short_tracebacks": "notebook",
}
_MODULES = {"graph", "trace", "check", "exercise", "lessons", "plot", "widgets", "data", "course",
            "notebook", "distributed"}


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'backproplab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME, *_MODULES})


__all__ = sorted({*_HOME, *_MODULES})
