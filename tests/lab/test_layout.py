"""Tests for backproplab.layout: the layered DAG layout behind draw_graph (no matplotlib)."""

import ast
import random
from itertools import pairwise
from pathlib import Path

import pytest

from backproplab import layout as _layout
from backproplab.layout import H_GAP, V_GAP, Layout, layered_layout


def _random_dag(seed: int, n_max: int = 25):
    """A DAG whose edges go from lower to higher ids, as in an autograd Graph."""
    rng = random.Random(seed)
    n = rng.randint(1, n_max)
    edges = [(rng.randrange(v), v) for v in range(1, n) for _ in range(rng.randint(0, 3))]
    rng.shuffle(edges)
    extents = [(rng.uniform(0.5, 4), rng.uniform(0.5, 8)) for _ in range(n)]  # lopsided boxes
    heights = [rng.uniform(1, 4) for _ in range(n)]
    return n, edges, extents, heights


def _crossings(lay: Layout, edges):
    """Crossing pairs of one-layer segments, counted from the final x coordinates."""
    segs = []
    for u, v in dict.fromkeys(edges):
        path = [u, *lay.chains[(u, v)], v]
        segs += [(lay.layer[a], lay.x[a], lay.x[b]) for a, b in pairwise(path)]
    return sum(
        1
        for i, (la, a0, a1) in enumerate(segs)
        for lb, b0, b1 in segs[i + 1:]
        if la == lb and (a0 - b0) * (a1 - b1) < 0
    )


SEEDS = range(12)


def test_small_example_by_hand():
    # 0 -> 1 -> 2 plus the shortcut 0 -> 2, which needs one dummy node in layer 1
    lay = layered_layout(3, [(0, 1), (1, 2), (0, 2)])
    assert lay.n == 3
    assert lay.layer == [0, 1, 2, 1]
    assert lay.chains == {(0, 1): [], (1, 2): [], (0, 2): [3]}
    assert sorted(lay.layers[1]) == [1, 3]
    assert list(lay.bends) == [(0, 2)]
    assert lay.bends[(0, 2)] == [(lay.x[3], lay.y[3])]
    assert len(lay.centres) == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_is_deterministic(seed):
    n, edges, extents, heights = _random_dag(seed)
    first = layered_layout(n, edges, extents, heights)
    assert all(layered_layout(n, edges, extents, heights) == first for _ in range(3))


@pytest.mark.parametrize("seed", SEEDS)
def test_roots_on_top_and_every_edge_goes_down(seed):
    n, edges, extents, heights = _random_dag(seed)
    lay = layered_layout(n, edges, extents, heights)
    parents = {v: [u for u, w in edges if w == v] for v in range(n)}
    for v in range(n):
        # longest-path layering: one layer below the lowest parent, roots on layer 0
        assert lay.layer[v] == max((lay.layer[u] + 1 for u in parents[v]), default=0)
    for u, v in edges:
        assert lay.layer[u] < lay.layer[v]
        assert lay.y[u] > lay.y[v]  # y grows upwards: the root is drawn at the top
        path = [u, *lay.chains[(u, v)], v]
        assert [lay.layer[p] for p in path] == list(range(lay.layer[u], lay.layer[v] + 1))


def test_sinks_last_puts_every_leaf_on_the_bottom_layer():
    # 0 -> 1 -> 2 -> 3 and 0 -> 4: the leaf 4 would sit on layer 1 without sinks_last
    edges = [(0, 1), (1, 2), (2, 3), (0, 4)]
    assert layered_layout(5, edges).layer[4] == 1
    lay = layered_layout(5, edges, sinks_last=True)
    assert lay.layer[3] == lay.layer[4] == 3
    assert lay.chains[(0, 4)] == [5, 6]


@pytest.mark.parametrize("seed", SEEDS)
def test_no_two_boxes_overlap(seed):
    n, edges, extents, heights = _random_dag(seed)
    lay = layered_layout(n, edges, extents, heights)
    ext = extents + [(0.3, 0.3)] * (len(lay.layer) - n)  # dummies are thin
    h = heights + [0.0] * (len(lay.layer) - n)
    # every node (dummies included) is in exactly one layer, the one it was given
    assert sorted(v for ls in lay.layers for v in ls) == list(range(len(lay.layer)))
    for k, ls in enumerate(lay.layers):
        assert all(lay.layer[v] == k for v in ls)
        assert len({lay.y[v] for v in ls}) == 1  # a layer is centred on one line
        for a, b in pairwise(ls):  # left to right, at least H_GAP apart
            assert lay.x[b] - ext[b][0] >= lay.x[a] + ext[a][1] + H_GAP - 1e-9
    for upper, lower in pairwise(lay.layers):
        bottom = min(lay.y[v] - h[v] / 2 for v in upper)
        top = max(lay.y[v] + h[v] / 2 for v in lower)
        assert bottom - top >= V_GAP - 1e-9


def test_dummy_nodes_for_long_edges():
    # 0 -> 1 -> 2 -> 3, and 0 -> 3 skipping two layers (twice: a repeated edge)
    edges = [(0, 1), (1, 2), (2, 3), (0, 3), (0, 3)]
    lay = layered_layout(4, edges)
    assert lay.layer[:4] == [0, 1, 2, 3]
    chain = lay.chains[(0, 3)]
    assert chain == [4, 5]  # one shared chain for the repeated edge
    assert [lay.layer[d] for d in chain] == [1, 2]
    assert lay.bends == {(0, 3): [(lay.x[4], lay.y[4]), (lay.x[5], lay.y[5])]}
    assert [y for _, y in lay.bends[(0, 3)]] == [lay.y[1], lay.y[2]]
    assert all(lay.chains[e] == [] for e in [(0, 1), (1, 2), (2, 3)])


def test_ordering_removes_an_avoidable_crossing(monkeypatch):
    # In plain topological order the long edge 0 -> 2 (via dummy 4, right of 1)
    # crosses 1 -> 3 (3 is right of 2); the barycenter sweeps untangle it.
    edges = [(0, 1), (0, 2), (1, 2), (1, 3)]
    assert _crossings(layered_layout(4, edges), edges) == 0
    monkeypatch.setattr(_layout, "_ORDER_SWEEPS", 0)
    assert _crossings(layered_layout(4, edges), edges) == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_never_worse_than_the_topological_order(seed, monkeypatch):
    n, edges, extents, heights = _random_dag(seed)
    lay = layered_layout(n, edges, extents, heights)
    # the same graph with the sweeps disabled: layers in plain topological order
    monkeypatch.setattr(_layout, "_ORDER_SWEEPS", 0)
    unordered = layered_layout(n, edges, extents, heights)
    assert _crossings(lay, edges) <= _crossings(unordered, edges)


def test_a_100000_node_chain_needs_no_recursion():
    # draw_graph only ever lays out max_nodes boxes, but the layout itself has
    # no size limit: every step is a loop, so a deep chain cannot overflow.
    n = 100_000
    lay = layered_layout(n, [(i, i + 1) for i in range(n - 1)])
    assert lay.layer[-1] == n - 1 and len(lay.layers) == n
    assert set(lay.x) == {0.0}  # a straight vertical line
    assert lay.y[0] > lay.y[-1]


def test_edge_cases_and_errors():
    empty = layered_layout(0, [])
    assert (empty.layer, empty.layers, empty.centres, empty.bends) == ([], [], [], {})
    lone = layered_layout(1, [], [(1.0, 2.0)], [3.0])
    assert lone.centres == [(0.0, -1.5)]  # top edge of the top layer at y = 0
    with pytest.raises(ValueError, match="cycle"):
        layered_layout(3, [(0, 1), (1, 2), (2, 1)])
    with pytest.raises(ValueError, match="expected 2 entries each"):
        layered_layout(2, [(0, 1)], [(1.0, 1.0)], [1.0, 1.0])


def test_gaps_are_parameters():
    lay = layered_layout(3, [(0, 1), (0, 2)], h_gap=10.0, v_gap=0.0)
    assert lay.x[2] - lay.x[1] == pytest.approx(11.0)  # 0.5 + 0.5 + h_gap
    assert lay.y[0] - lay.y[1] == pytest.approx(1.0)  # unit boxes, no gap


def test_layout_module_imports_no_matplotlib():
    tree = ast.parse(Path(_layout.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "collections.abc", "dataclasses"}
