"""Edge labels from a Trace, drawing any DAG, and where box ids are written."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import backproplab as bl  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _expected(trace) -> dict[tuple[int, int, int], str]:
    """(src, dst, position) -> the trace's gradient text, from the trace itself."""
    step_of = {s.node_id: s for s in trace.steps}
    return {
        (e.src, e.dst, e.position): str(step_of[e.src].grad_inputs[e.position])
        for e in trace.graph.edges
        if e.src in step_of and step_of[e.src].grad_inputs[e.position] is not None
    }


def test_multi_input_nodes_label_every_input_with_its_own_gradient():
    x, y, z, w = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 1.0, -1.0))
    t = bl.trace_backward((torch.maximum(x * y, z) + x) * w, names=dict(x=x, y=y, z=z, w=w))
    labels = bl.plot.draw_graph(t, edge_grads=True).backproplab["edge_labels"]
    assert labels == _expected(t)
    mul = t.graph.nodes[0]
    # The output's multiplication sends w (-1) to the sum and the sum (8) to w.
    assert sorted(v for (s, _, _), v in labels.items() if s == mul.id) == ["-1", "8"]
    # max routes the gradient to the winner (x*y) and 0 to z.
    mx = next(n for n in t.graph.nodes if n.name == "MaximumBackward0")
    assert [labels[(mx.id, e.dst, e.position)] for e in t.graph.out_edges(mx.id)] == ["-1", "0"]


def test_shared_leaf_gets_a_label_on_both_edges():
    a = torch.tensor(3.0, requires_grad=True)
    t = bl.trace_backward(a * a, names={"a": a})
    labels = bl.plot.draw_graph(t, edge_grads=True).backproplab["edge_labels"]
    assert labels == {(0, 1, 0): "3", (0, 1, 1): "3"} == _expected(t)


def test_node_with_two_outputs_labels_edges_by_position():
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    first, second = p.unbind(0)
    t = bl.trace_backward(first * 5 + second * 7, names={"p": p})
    labels = bl.plot.draw_graph(t, edge_grads=True).backproplab["edge_labels"]
    assert labels == _expected(t)
    unbind = next(n for n in t.graph.nodes if n.name == "UnbindBackward0")
    into = [e for e in t.graph.edges if e.dst == unbind.id]
    assert sorted(e.input_nr for e in into) == [0, 1]
    assert sorted(labels[(e.src, e.dst, e.position)] for e in into) == ["5", "7"]


def test_edge_grads_needs_a_trace():
    a = torch.tensor(3.0, requires_grad=True)
    with pytest.raises(TypeError, match="edge_grads: needs a Trace"):
        bl.plot.draw_graph(bl.describe(a * a), edge_grads=True)


def test_draw_dag_draws_any_graph_with_labels_and_kinds():
    ax = bl.plot.draw_dag(
        ["out = a*b + c", "a*b", "a", "b", "c"],
        [(0, 1), (0, 4), (1, 2), (1, 3)],
        edge_labels={(1, 2): "b", (1, 3): "a"},
        highlight=1,
    )
    facts = ax.backproplab
    assert facts["node_ids"] == [0, 1, 2, 3, 4] and facts["highlight"] == 1
    assert facts["labels"][0] == "out = a*b + c" and facts["edge_labels"] == {
        (1, 2, 0): "b", (1, 3, 1): "a"}
    assert sorted(facts["edges"]) == [(0, 1), (0, 4), (1, 2), (1, 3)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "input" in legend and "operation" in legend


@pytest.mark.parametrize(
    ("args", "error", "pattern"),
    [
        ((["a", "b"], [(0, 2)]), ValueError, "edges: expected"),
        ((["a", "b"], [(0, 1), (1, 0)]), ValueError, "cycle"),
        (([1, "b"], [(0, 1)]), TypeError, "labels: expected str"),
        (("ab", [(0, 1)]), TypeError, "labels: expected a non-empty list"),
    ],
)
def test_draw_dag_names_bad_input(args, error, pattern):
    with pytest.raises(error, match=pattern):
        bl.plot.draw_dag(*args)


def test_draw_dag_rejects_labels_for_missing_edges():
    with pytest.raises(ValueError, match="edge_labels"):
        bl.plot.draw_dag(["a", "b"], [(0, 1)], edge_labels={(1, 0): "x"})


def test_box_ids_sit_where_no_arrow_ends():
    torch.manual_seed(0)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(torch.ones(5) @ w + b, torch.zeros(3))
    ax = bl.plot.draw_graph(loss, names={"w": w, "b": b})
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ids = {str(n) for n in ax.backproplab["node_ids"]}
    id_boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text() in ids]
    assert len(id_boxes) == len(ids)
    ends = []
    for patch in ax.patches:
        if type(patch).__name__ == "FancyArrowPatch":
            x, y = patch.get_path().vertices[-1]
            ends.append(ax.transData.transform((x, y)))
    assert ends
    for box in id_boxes:
        for x, y in ends:
            assert not box.expanded(1.2, 1.2).contains(x, y)
