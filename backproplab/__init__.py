"""backproplab: see what PyTorch's autograd does, and check gradients you derive.

The lab, in the order the lessons meet it:

- ``graph``     describe(outputs): the autograd graph as plain data (nodes,
                edges, leaves, saved tensors and their memory), as text or DOT
- ``trace``     trace_backward(loss): a real backward pass, node by node
- ``explain``   the chain rule of a traced pass written out with numbers
- ``check``     compare, check_grad: what is wrong with a hand-derived gradient (a Report)
- ``diagnosis`` diagnose(): name the mistake that turns the reference into an answer
- ``values``    two values side by side: conversion, tolerance, closeness
- ``numerical`` numerical_grad: central finite differences
- ``custom_function`` check_function: a custom autograd.Function's backward
- ``graph_quiz`` check_graph: a learner's list of node names against the graph
- ``watch``     count_autograd, forbid_autograd: what a piece of code asks of autograd
- ``plot``      figures: graph drawings, loss curves, fits, gradient flow
- ``widgets``   a backward stepper and a learning-rate explorer
- ``data``      tiny data sets made in code
- ``tracebacks`` short_tracebacks(): errors in a notebook show your own code
- ``processes`` run(): worker processes joined by torch.distributed

The course grades and hands out; it imports the lab, never the reverse:

- ``course.grading``    check_exercise, check_prediction, reveal: exercises and
                        "predict, then run" questions, by id
- ``course.byhand``     check_by_hand: a gradient worked out by hand, on new inputs
- ``course.exercises``  each lesson's checks, references and answers
- ``course.assignment`` the exercise format; student and learner versions
- ``course.handout``    writing them out: ``backproplab release`` and ``learn``
- ``course.audit``      what in submitted notebooks tampers with grading
- ``course.distributed`` lesson 23's experiments (``bl.distributed``)

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
    "compare": "check", "check_grad": "check", "Check": "check", "Report": "check",
    "diagnose": "diagnosis", "numerical_grad": "numerical",
    "check_function": "custom_function", "check_graph": "graph_quiz",
    "count_autograd": "watch", "forbid_autograd": "watch", "AutogradForbidden": "watch",
    "check_by_hand": "course.byhand", "check_prediction": "course.grading",
    "reveal": "course.grading", "Prediction": "course.grading",
    "ByHand": "course.byhand", "Method": "course.grading",
    "check_exercise": "course.grading",
    "short_tracebacks": "tracebacks",
}
# bl.<name> -> the module it stands for.
_MODULES = {
    "graph": "graph", "trace": "trace", "check": "check", "plot": "plot",
    "widgets": "widgets", "data": "data", "course": "course",
    "distributed": "course.distributed",
}


def __getattr__(name: str):
    if name in _MODULES:
        module = importlib.import_module(f".{_MODULES[name]}", __name__)
        globals()[name] = module  # later lookups skip this function
        return module
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'backproplab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME, *_MODULES})


__all__ = sorted({*_HOME, *_MODULES})
