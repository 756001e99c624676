"""Tests for backproplab.plot: what each figure contains, not just that it draws."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from custom_functions import Square  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from backproplab import plot  # noqa: E402
from backproplab.graph import describe  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")  # the test's own figures; the functions never close anything


def _abde():
    a, b, d = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    return a, b, d, (a + b) * d


def _texts(ax):
    return [t.get_text() for t in ax.texts]


# --------------------------------------------------------------------------- import hygiene


def test_import_does_not_load_matplotlib_or_ipywidgets():
    code = (
        "import sys, backproplab, backproplab.plot, backproplab.widgets; "
        "bad = [m for m in ('matplotlib', 'ipywidgets') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- loss_curve


def test_loss_curve_single_sequence():
    ax = plot.loss_curve([4.0, 2.0, 1.0])
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [1, 2, 3]
    assert list(line.get_ydata()) == [4.0, 2.0, 1.0]
    assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == "loss"
    assert ax.get_yscale() == "linear"
    assert ax.get_legend() is None


def test_loss_curve_mapping_log_and_tensor_values():
    ax = plot.loss_curve({"slow": torch.tensor([3.0, 2.0]), "fast": [3.0, 0.5, 0.1]}, log=True)
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["slow", "fast"]
    assert list(lines[1].get_ydata()) == [3.0, 0.5, 0.1]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["slow", "fast"]


def test_loss_curve_keeps_non_finite_values_as_gaps():
    ax = plot.loss_curve([1.0, 10.0, float("inf"), float("nan")], log=True)
    assert len(ax.get_lines()[0].get_ydata()) == 4


@pytest.mark.parametrize(
    ("bad", "exc", "fragment"),
    [
        ("abc", TypeError, "losses"),
        (3.0, TypeError, "losses"),
        ([1.0, "x"], TypeError, "item 1"),
        ([], ValueError, "losses"),
        ({}, ValueError, "losses"),
        ({"run": [1.0, None]}, TypeError, "losses['run']"),
    ],
)
def test_loss_curve_bad_input(bad, exc, fragment):
    with pytest.raises(exc, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        plot.loss_curve(bad)


def test_bad_ax_is_rejected():
    with pytest.raises(TypeError, match="ax: expected a matplotlib Axes"):
        plot.loss_curve([1.0], ax="left")


# --------------------------------------------------------------------------- fit_plot


def test_fit_plot_lines_and_scatter():
    x = torch.tensor([[0.0], [1.0], [2.0], [4.0]])
    y = 2 * x + 1
    ax = plot.fit_plot(x, y, {"true": (2.0, 1.0), "guess": (1.0, -0.5)})
    true, guess = ax.get_lines()
    assert list(true.get_xdata()) == [0.0, 4.0]
    assert list(true.get_ydata()) == [1.0, 9.0]
    assert list(guess.get_ydata()) == [-0.5, 3.5]
    assert true.get_label() == "true: y = 2.0x + 1.0"
    assert guess.get_label() == "guess: y = 1.0x - 0.5"
    assert len(ax.collections[0].get_offsets()) == 4
    # y-range follows the data even when a line runs far away
    ax2 = plot.fit_plot([0, 1], [0, 1], {"wild": (1e9, 0.0)})
    assert ax2.get_ylim()[1] < 2


def test_fit_plot_bad_input():
    with pytest.raises(ValueError, match="x, y: expected the same number"):
        plot.fit_plot([1, 2, 3], [1, 2], {})
    with pytest.raises(TypeError, match="lines: expected a mapping"):
        plot.fit_plot([1, 2], [1, 2], [(2.0, 1.0)])
    with pytest.raises(TypeError, match=r"lines\['a'\]: expected \(slope, intercept\)"):
        plot.fit_plot([1, 2], [1, 2], {"a": 2.0})


# --------------------------------------------------------------------------- grad_flow


def _net_after_backward():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    unused = torch.nn.Linear(2, 2)
    net.add_module("unused", unused)  # its parameters never see a gradient
    net[0].bias.requires_grad_(False)  # frozen
    net[2](net[1](net[0](torch.randn(5, 4)))).pow(2).mean().backward()
    return net


def test_grad_flow_bars_and_missing_grads():
    net = _net_after_backward()
    ax = plot.grad_flow(net)
    info = ax.backproplab
    assert info["names"] == [n for n, _ in net.named_parameters()]
    assert info["no_grad"] == ["0.bias", "unused.weight", "unused.bias"]
    assert info["frozen"] == ["0.bias"]
    w = net[2].weight.grad.abs()
    assert info["mean"][2] == pytest.approx(float(w.mean()))
    assert info["max"][2] == pytest.approx(float(w.max()))
    assert [t.get_text() for t in ax.get_yticklabels()] == info["names"]
    assert ax.get_xscale() == "log"
    notes = [t.get_text() for t in ax.texts]
    assert notes.count("no grad") == 2 and notes.count("frozen") == 1
    # 2 bars per parameter (max, mean)
    assert len(ax.patches) == 2 * len(info["names"])
    assert plot.grad_flow(net, log=False).get_xscale() == "linear"


def test_grad_flow_bad_input():
    with pytest.raises(TypeError, match="model: expected a torch.nn.Module"):
        plot.grad_flow([torch.zeros(2)])
    with pytest.raises(ValueError, match="model: it has no parameters"):
        plot.grad_flow(torch.nn.ReLU())


# --------------------------------------------------------------------------- jacobian_heatmap


def test_jacobian_heatmap_small_is_annotated():
    jac = torch.tensor([[1.0, 0.0, -2.0], [0.5, 3.0, 0.0]])
    ax = plot.jacobian_heatmap(jac)
    assert ax.get_xlabel() == "input index" and ax.get_ylabel() == "output index"
    assert _texts(ax) == ["1", "0", "-2", "0.5", "3", "0"]
    (image,) = ax.get_images()
    assert image.get_array().shape == (2, 3)
    assert image.get_clim() == (-3.0, 3.0)  # centred on zero
    assert len(ax.figure.axes) == 2  # the heatmap and its colorbar


def test_jacobian_heatmap_labels_and_large():
    ax = plot.jacobian_heatmap(torch.ones(2, 2), in_labels=["x", "y"], out_labels=["u", "v"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["u", "v"]
    big = plot.jacobian_heatmap(torch.zeros(9, 9))  # 81 cells: too many to write
    assert _texts(big) == []
    row = plot.jacobian_heatmap([1.0, 2.0])  # a gradient: one row
    assert row.get_images()[0].get_array().shape == (1, 2)


def test_jacobian_heatmap_bad_input():
    with pytest.raises(ValueError, match=r"jac: .*reshape\(20, 20\)"):
        plot.jacobian_heatmap(torch.zeros(5, 4, 4, 5))
    with pytest.raises(ValueError, match="in_labels: expected 3 labels, got 2"):
        plot.jacobian_heatmap(torch.zeros(2, 3), in_labels=["a", "b"])
    with pytest.raises(TypeError, match="jac"):
        plot.jacobian_heatmap("matrix")


# --------------------------------------------------------------------------- tangent_plot


def test_tangent_plot_slope_from_autograd():
    ax = plot.tangent_plot(lambda x: x**3, 2.0, xlim=(0.0, 3.0))
    assert ax.backproplab["slope"] == pytest.approx(12.0)
    curve, tangent = ax.get_lines()
    assert curve.get_xdata()[0] == 0.0 and curve.get_xdata()[-1] == 3.0
    assert curve.get_ydata()[-1] == pytest.approx(27.0)
    assert list(tangent.get_ydata()) == pytest.approx([8 - 24, 8 + 12])
    assert "slope 12.0" in tangent.get_label()
    assert list(ax.collections[0].get_offsets()[0]) == [2.0, 8.0]
    assert ax.get_xlim() == (0.0, 3.0)


def test_tangent_plot_non_vectorised_function_and_default_xlim():
    ax = plot.tangent_plot(lambda x: torch.sin(x) if x.dim() == 0 else 1 / 0, 0.0)
    assert ax.backproplab["slope"] == pytest.approx(1.0)
    assert ax.get_xlim() == (-3.0, 3.0)


def test_tangent_plot_bad_input():
    with pytest.raises(TypeError, match="f: expected a callable"):
        plot.tangent_plot(3, 0.0)
    with pytest.raises(TypeError, match="x0: expected a number"):
        plot.tangent_plot(torch.sin, "0")
    with pytest.raises(ValueError, match="xlim: expected finite numbers with low < high"):
        plot.tangent_plot(torch.sin, 0.0, xlim=(1.0, -1.0))
    with pytest.raises(ValueError, match="f: expected f"):
        plot.tangent_plot(lambda x: torch.stack([x, x]), 0.0)


# --------------------------------------------------------------------------- draw_graph


def test_draw_graph_simple_graph():
    a, b, d, e = _abde()
    ax = plot.draw_graph(e, names={"a": a, "b": b, "d": d}, values=True)
    info = ax.backproplab
    assert info["node_ids"] == [0, 1, 2, 3, 4]
    assert info["hidden"] == 0 and info["highlight"] is None
    assert info["labels"] == {0: "MulBackward0", 1: "AddBackward0", 2: "a = 2.0",
                              3: "b = 3.0", 4: "d = 4.0"}
    texts = _texts(ax)
    for label in info["labels"].values():
        assert label in texts
    assert any(t.startswith("saved:") and "self" in t and "other" in t for t in texts)
    assert sorted(info["edges"]) == [(0, 1), (0, 4), (1, 2), (1, 3)]
    # root on top, leaves below their consumers
    y = {nid: p.get_y() for nid, p in info["patches"].items()}
    assert y[0] > y[1] > y[2] and y[0] > y[4]
    # kinds look different: leaves green, ops blue
    assert to_hex(info["patches"][2].get_facecolor()) == "#c7e9c0"
    assert to_hex(info["patches"][0].get_facecolor()) == "#cfe2f3"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "leaf (AccumulateGrad)" in legend and "backward / gradient flow" in legend
    assert "output → leaves" in ax.get_title()


def test_draw_graph_grads_and_highlight():
    a, b, d, e = _abde()
    e.backward()
    graph = describe(e, names={"a": a, "b": b, "d": d})
    ax = plot.draw_graph(graph, values=True, grads=True, highlight=1)
    info = ax.backproplab
    assert info["labels"][2] == "a = 2.0\ngrad 4.0"
    assert info["labels"][4] == "d = 4.0\ngrad 5.0"
    assert info["highlight"] == 1
    assert to_hex(info["patches"][1].get_edgecolor()) == "#ff7f0e"
    assert info["patches"][1].get_linewidth() > info["patches"][0].get_linewidth()
    assert to_hex(info["patches"][0].get_edgecolor()) != "#ff7f0e"
    assert any("freed" in t for t in _texts(ax))  # backward released the saved tensors


def _chain_rule_trace():
    from backproplab.trace import trace_backward

    x, w, b = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))
    return trace_backward((w * x + b) ** 2, names={"x": x, "w": w, "b": b})


def _leaf_labels(ax):
    """Leaf name -> its drawn label (the name is the label's first word)."""
    return {lab.split()[0]: lab for lab in ax.backproplab["labels"].values()}


def test_draw_graph_trace_shows_final_leaf_grads():
    t = _chain_rule_trace()
    labels = _leaf_labels(plot.draw_graph(t, values=True, grads=True))
    assert labels["x"] == "x = 1.0\ngrad 20.0"
    assert "grad 10.0" in labels["w"] and "grad 10.0" in labels["b"]
    # Same drawing as the trace's graph, only the grads differ.
    ax = plot.draw_graph(t)
    assert ax.backproplab["node_ids"] == list(range(len(t.graph.nodes)))
    assert "grad" not in _leaf_labels(ax)["x"]


def test_draw_graph_of_trace_graph_keeps_the_graphs_own_grads():
    # The Graph was described before backward: drawn as given, grads unknown.
    t = _chain_rule_trace()
    labels = _leaf_labels(plot.draw_graph(t.graph, grads=True))
    assert labels["x"] == "x\ngrad None"


def test_draw_graph_trace_large_and_missing_leaf_grads():
    from backproplab.trace import trace_backward

    w = torch.ones(5, 4, requires_grad=True)
    v = torch.ones(2, requires_grad=True)
    t = trace_backward((w.sum() * v).sum(), names={"w": w, "v": v})
    labels = _leaf_labels(plot.draw_graph(t, grads=True))
    assert labels["w"] == "w\ngrad shape 5×4"  # 20 values: more than a trace keeps
    assert labels["v"] == "v\ngrad [20.0, 20.0]"
    # A trace with a leaf name it has no grad for draws "grad None".
    from dataclasses import replace

    t2 = replace(t, leaf_grads=tuple(p for p in t.leaf_grads if p[0] != "v"))
    assert _leaf_labels(plot.draw_graph(t2, grads=True))["v"] == "v\ngrad None"


def test_draw_graph_trace_rejects_names():
    t = _chain_rule_trace()
    with pytest.raises(ValueError, match="names: only used when.*a Trace already"):
        plot.draw_graph(t, names={"x": torch.tensor(1.0)})


def test_draw_graph_tensor_values_show_shapes_and_custom_kind():
    w = torch.ones(5, 3, requires_grad=True)
    out = Square.apply(torch.ones(5) @ w).sum()
    ax = plot.draw_graph(out, names={"w": w}, values=True, grads=True)
    info = ax.backproplab
    labels = list(info["labels"].values())
    assert "w  shape 5×3\ngrad None" in labels
    custom = [n for n, lab in info["labels"].items() if lab.startswith("Square")]
    assert len(custom) == 1
    assert to_hex(info["patches"][custom[0]].get_facecolor()) == "#e1d5f0"
    assert "custom autograd.Function" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_draw_graph_parallel_edges_both_drawn():
    a = torch.tensor(1.0, requires_grad=True)
    ax = plot.draw_graph(a + a, names={"a": a})
    assert ax.backproplab["edges"] == [(0, 1), (0, 1)]
    from matplotlib.patches import FancyArrowPatch

    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 2
    starts = {tuple(p.get_path().vertices[0]) for p in arrows}
    assert len(starts) == 2  # side by side, not on top of each other


def test_draw_graph_large_graph_is_collapsed():
    h = torch.tensor(1.0, requires_grad=True)
    x = h
    for _ in range(2000):
        x = torch.tanh(x * 0.9)
    n_all = len(describe(x).nodes)
    # How long it takes is benchmarks/graph.py's business, not a unit test's.
    ax = plot.draw_graph(x, max_nodes=40)
    info = ax.backproplab
    assert info["node_ids"] == list(range(40))
    assert info["hidden"] == n_all - 40
    assert f"… {n_all - 40} more nodes hidden" in _texts(ax)


def test_draw_graph_is_deterministic():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    loss = net(torch.randn(2, 3)).sum()
    graph = describe(loss, names=dict(net.named_parameters()))

    def boxes():
        ax = plot.draw_graph(graph)
        return {n: (p.get_x(), p.get_y(), p.get_width()) for n, p in
                ax.backproplab["patches"].items()}

    first = boxes()
    assert first == boxes()
    assert len(first) == len(graph.nodes)


def test_draw_graph_bad_input():
    a, b, d, e = _abde()
    graph = describe(e)
    with pytest.raises(ValueError, match="names: only used when"):
        plot.draw_graph(graph, names={"a": a})
    with pytest.raises(ValueError, match="highlight: expected a node id between 0 and 4"):
        plot.draw_graph(graph, highlight=7)
    with pytest.raises(ValueError, match="max_nodes: expected a positive int"):
        plot.draw_graph(graph, max_nodes=0)
    with pytest.raises(ValueError, match="graph_or_tensor: .* requires_grad=False"):
        plot.draw_graph(torch.ones(2))  # no grad: named as draw_graph's own argument


# --------------------------------------------------------------------------- global state


def test_no_new_figure_and_no_rcparams_change_when_ax_given():
    a, b, d, e = _abde()
    net = _net_after_backward()
    fig, axes = plt.subplots(2, 3)
    before_rc = dict(matplotlib.rcParams)
    before_figs = plt.get_fignums()
    plot.loss_curve([1.0, 0.5], log=True, ax=axes[0, 0])
    plot.fit_plot([0, 1], [1, 3], {"f": (2.0, 1.0)}, ax=axes[0, 1])
    plot.grad_flow(net, ax=axes[0, 2])
    plot.jacobian_heatmap(torch.eye(3), ax=axes[1, 0])
    plot.tangent_plot(torch.sin, 0.5, ax=axes[1, 1])
    returned = plot.draw_graph(e, highlight=0, ax=axes[1, 2])
    assert returned is axes[1, 2]
    assert plt.get_fignums() == before_figs
    assert dict(matplotlib.rcParams) == before_rc
    assert plt.gcf() is fig


def test_each_function_makes_one_figure_without_ax():
    a, b, d, e = _abde()
    before = len(plt.get_fignums())
    ax = plot.draw_graph(e)
    assert len(plt.get_fignums()) == before + 1
    assert ax.figure.number in plt.get_fignums()
