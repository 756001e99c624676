"""backproplab: make PyTorch's autograd graph visible, and check gradients.

>>> import torch, backproplab as bl
>>> a = torch.tensor(2.0, requires_grad=True)
>>> bl.describe(a * a, names={"a": a}).names()
['MulBackward0', 'AccumulateGrad']

``plot`` and ``widgets`` import matplotlib and ipywidgets only when one of
their functions is first called, and ``course`` (nbformat) loads on first
use, so ``import backproplab`` costs little more than ``import torch``.
"""

import importlib

from . import data, plot, widgets
from .check import (
    Check,
    Report,
    check_function,
    check_grad,
    check_graph,
    compare,
    diagnose,
    numerical_grad,
)
from .exercise import (
    AutogradForbidden,
    check_by_hand,
    check_prediction,
    count_autograd,
    forbid_autograd,
)
from .graph import Edge, Graph, LeafInfo, Node, SavedTensor, describe
from .trace import Step, TensorInfo, Trace, trace_backward

__version__ = "0.1.0"


def __getattr__(name: str):
    # nbformat pulls in jsonschema, over a second of import time that only
    # instructors releasing assignments need.
    if name == "course":
        return importlib.import_module(".course", __name__)
    raise AttributeError(f"module 'backproplab' has no attribute {name!r}")


__all__ = [
    "AutogradForbidden", "check_by_hand", "check_prediction", "count_autograd",
    "forbid_autograd",
    "Check", "Edge", "Graph", "LeafInfo", "Node", "Report", "SavedTensor", "Step",
    "TensorInfo", "Trace", "check_function", "check_grad", "check_graph", "compare",
    "course", "data", "describe", "diagnose", "numerical_grad", "plot", "trace_backward",
    "widgets",
]
