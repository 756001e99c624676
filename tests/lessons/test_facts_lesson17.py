"""Lesson 17's corrected facts, read from the stored outputs, so that an edit cannot bring
back the old claims: a derivative that stops depending on x comes back without a graph (3x),
or with a graph that misses x (w·x: allow_unused / materialize_grads), a ReLU network returns
real zeros, and double backward's cost is counted in passes."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

LESSON = Path(__file__).parents[2] / "notebooks" / "17-higher-order-gradients.ipynb"


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(LESSON, as_version=4)


@pytest.fixture(scope="module")
def cells(nb) -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nb.cells}




def test_the_first_question_is_not_answered_before_it_is_asked(nb):
    ids = [c.id for c in nb.cells]
    for cell in nb.cells[: ids.index("l17-predict-second")]:
        assert "requires_grad: False" not in _text(cell)
        assert "grad_fn" not in _text(cell)


def test_linear_function_gives_a_gradient_without_graph(cells):
    text = _text(cells["l17-41"])
    assert "dy/dx = 3.0  grad_fn: None" in text
    assert "RuntimeError: element 0 of tensors does not require grad" in text


def test_polynomial_loses_its_graph_past_its_degree(cells):
    text = _text(cells["l17-43"])
    assert "order 2: [2.0, 2.0]  grad_fn: MulBackward0" in text
    assert "order 3: [0.0, 0.0]  grad_fn: None" in text
    assert "order 4: the previous derivative has no graph" in text


def test_unused_input_allow_unused_and_materialize_grads(cells):
    assert "appears to not have been used in the graph" in _text(cells["l17-45"])
    text = _text(cells["l17-47"])
    assert "allow_unused=True:      (None,)" in text
    assert "materialize_grads=True: (tensor([0., 0.]),)" in text
    # The argument exists in the torch these lessons are stored with.
    assert "materialize_grads" in inspect.signature(torch.autograd.grad).parameters


def test_relu_network_returns_real_zeros(cells):
    text = _text(cells["l17-49"])
    assert "mask node in g's graph: True" in text
    assert "tensor([0., 0., 0.])" in text


def test_double_backward_cost_is_counted_in_passes(cells):
    rows = [line.split() for line in _text(cells["l17-51"]).splitlines()[1:] if line.strip()]
    table = {int(n): (int(g), int(hv), int(h)) for n, g, hv, h in rows}
    assert set(table) == {3, 30, 300}
    for n, (grad, hv, hessian) in table.items():
        assert (grad, hv, hessian) == (1, 2, n + 1)
    nodes = [int(n) for n in re.findall(r"\d+", _text(cells["l17-53"]))]
    assert nodes == [10, 24]
    recap = cells["l17-35"].source
    assert "301" in recap and "24 nodes" in recap and "10" in recap


def test_the_hessian_vector_product_by_hand_is_double_backward():
    """The R-operator's formula the exercise asks for, x.T @ (tanh''(Z) * (x @ V) * a),
    agrees with double backward to round-off; with tanh' in the place of tanh'' it does not."""
    from backproplab.course.exercises import lesson17

    x, W, a, V = lesson17._hvp_inputs(torch.Generator().manual_seed(3))
    T = torch.tanh(x @ W)
    by_hand = x.T @ (-2 * T * (1 - T**2) * (x @ V) * a)
    reference = lesson17._hvp_reference(x, W, a, V)
    assert torch.allclose(by_hand, reference, rtol=1e-13, atol=1e-14)
    assert not torch.allclose(x.T @ ((1 - T**2) * (x @ V) * a), reference, rtol=1e-3)
