"""Layered (Sugiyama-style) layout of a DAG: pure geometry, no matplotlib.

``draw_graph`` uses this to place the boxes of an autograd graph: the roots
(the output) on the top layer, every edge pointing down to a later layer.
The steps are the classic ones:

1. **Layering**: a topological order (Kahn), then longest-path layers, so
   each node sits one layer below its lowest parent.
2. **Dummy nodes**: an edge spanning several layers is split into a chain of
   small invisible nodes, one per crossed layer, which later become the
   edge's bend points.
3. **Ordering**: barycenter sweeps (down, up, ...) reorder each layer,
   keeping the order with the fewest edge crossings.
4. **Coordinates**: x by packing each layer, then pulling nodes towards
   their neighbours' mean without breaking order or spacing; y layer by
   layer, each layer as tall as its tallest box.

Units are "em" (the font size) in ``draw_graph``, but any unit works as long
as extents, heights and gaps agree. Every loop is iterative (a 100,000-node
chain is fine) and every tie is broken by node index, so the layout is
deterministic.

Example:
    >>> lay = layered_layout(3, [(0, 1), (1, 2), (0, 2)])
    >>> lay.layer  # nodes 0, 1, 2, then the dummy node 3 on the long edge 0 -> 2
    [0, 1, 2, 1]
    >>> lay.chains[(0, 2)]
    [3]
    >>> [round(y, 2) for _, y in lay.centres]
    [-0.5, -4.7, -8.9]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["H_GAP", "V_GAP", "Layout", "layered_layout"]

H_GAP = 1.6  # horizontal gap between neighbouring boxes
V_GAP = 3.2  # vertical gap between layers

# Dummy nodes are thin and flat: they only need room for an edge to pass.
_DUMMY_EXTENT = (0.3, 0.3)
_DUMMY_HEIGHT = 0.0
_ORDER_SWEEPS = 8  # barycenter sweeps; the best order seen is kept
_PLACE_SWEEPS = 6  # coordinate sweeps; after 2, both neighbour sides count

Point = tuple[float, float]


@dataclass(frozen=True)
class Layout:
    """Where every node goes. Ids ``0..n-1`` are the real nodes, ``n..`` the dummies.

    ``layer[i]`` is node i's layer (0 = top), ``layers[k]`` the nodes of
    layer k from left to right, ``x`` / ``y`` the centres, and
    ``chains[(u, v)]`` the dummy ids along edge u -> v, top to bottom
    (empty when the edge joins adjacent layers).
    """

    n: int
    layer: list[int]
    layers: list[list[int]]
    x: list[float]
    y: list[float]
    chains: dict[tuple[int, int], list[int]]

    @property
    def centres(self) -> list[Point]:
        """Centre of each real node, by id."""
        return [(self.x[i], self.y[i]) for i in range(self.n)]

    @property
    def bends(self) -> dict[tuple[int, int], list[Point]]:
        """The points each edge that spans several layers passes through, top to bottom."""
        return {
            e: [(self.x[d], self.y[d]) for d in chain]
            for e, chain in self.chains.items()
            if chain
        }


def layered_layout(
    n: int,
    edges: Sequence[tuple[int, int]],
    extents: Sequence[tuple[float, float]] | None = None,
    heights: Sequence[float] | None = None,
    *,
    sinks_last: bool = False,
    h_gap: float = H_GAP,
    v_gap: float = V_GAP,
) -> Layout:
    """Lay out the DAG with nodes ``0..n-1`` and ``edges`` (u, v) pointing away from the roots.

    ``extents[i]`` is how far node i reaches (left, right) of its centre;
    boxes in ``draw_graph`` are lopsided when a note sits beside them.
    ``heights[i]`` is its height. Both default to unit boxes. Repeated
    edges are allowed (they share one route). ``sinks_last=True`` puts
    every node without children on the bottom layer. Raises ValueError if
    the edges contain a cycle.
    """
    ext = list(extents) if extents is not None else [(0.5, 0.5)] * n
    h = list(heights) if heights is not None else [1.0] * n
    if len(ext) != n or len(h) != n:
        raise ValueError(
            f"extents, heights: expected {n} entries each, got {len(ext)} and {len(h)}"
        )
    order, children = _topological_order(n, edges)
    layer = _longest_path_layers(order, children, sinks_last)
    seg_edges, chains = _split_long_edges(edges, layer, ext, h)
    # Neighbours one layer up / down, dummies included.
    up: list[list[int]] = [[] for _ in layer]
    down: list[list[int]] = [[] for _ in layer]
    for a, b in seg_edges:
        down[a].append(b)
        up[b].append(a)
    layers = _order_layers(n, order, layer, up, down)
    x = _x_coordinates(layers, up, down, ext, h_gap)
    y = _y_coordinates(layers, h, v_gap)
    return Layout(n=n, layer=layer, layers=layers, x=x, y=y, chains=chains)


# --------------------------------------------------------------------------- steps


def _topological_order(
    n: int, edges: Sequence[tuple[int, int]]
) -> tuple[list[int], list[list[int]]]:
    """Kahn's algorithm; ready nodes are taken by index, so the order is deterministic."""
    children: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in edges:
        children[u].append(v)
        indeg[v] += 1
    ready = [i for i in range(n) if indeg[i] == 0]
    order: list[int] = []
    k = 0
    while k < len(ready):  # `ready` doubles as the queue: no recursion, no deque
        u = ready[k]
        k += 1
        order.append(u)
        for v in children[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(order) != n:  # cannot happen for an autograd graph; fail loudly if it does
        raise ValueError("graph_or_tensor: the graph has a cycle")
    return order, children


def _longest_path_layers(
    order: Sequence[int], children: Sequence[Sequence[int]], sinks_last: bool
) -> list[int]:
    """Each node one layer below its lowest parent: every edge goes strictly down."""
    layer = [0] * len(order)
    for u in order:
        for v in children[u]:
            layer[v] = max(layer[v], layer[u] + 1)
    if sinks_last and layer:
        bottom = max(layer)
        for i, ch in enumerate(children):
            if not ch:
                layer[i] = bottom
    return layer


def _split_long_edges(
    edges: Sequence[tuple[int, int]],
    layer: list[int],
    ext: list[tuple[float, float]],
    h: list[float],
) -> tuple[list[tuple[int, int]], dict[tuple[int, int], list[int]]]:
    """Add a dummy node per crossed layer, so ordering and routing see long edges.

    Appends the dummies to ``layer``, ``ext`` and ``h`` in place and returns
    the one-layer segments plus each edge's dummy chain.
    """
    seg_edges: list[tuple[int, int]] = []
    chains: dict[tuple[int, int], list[int]] = {}
    for u, v in dict.fromkeys(edges):  # unique pairs, first-seen order
        prev = u
        chain = []
        for _ in range(layer[u] + 1, layer[v]):
            d = len(ext)
            ext.append(_DUMMY_EXTENT)
            h.append(_DUMMY_HEIGHT)
            layer.append(layer[prev] + 1)
            seg_edges.append((prev, d))
            chain.append(d)
            prev = d
        seg_edges.append((prev, v))
        chains[(u, v)] = chain
    return seg_edges, chains


def _crossings(layers: list[list[int]], down: list[list[int]]) -> int:
    """Number of pairs of segments that cross between neighbouring layers."""
    pos = {v: i for layer_nodes in layers for i, v in enumerate(layer_nodes)}
    count = 0
    for li in range(len(layers) - 1):
        segs = sorted((pos[a], pos[b]) for a in layers[li] for b in down[a])
        for i in range(len(segs)):
            for j in range(i + 1, len(segs)):
                if segs[i][0] < segs[j][0] and segs[i][1] > segs[j][1]:
                    count += 1
    return count


def _order_layers(
    n: int,
    order: Sequence[int],
    layer: Sequence[int],
    up: list[list[int]],
    down: list[list[int]],
) -> list[list[int]]:
    """Barycenter sweeps over the layers; returns the order with the fewest crossings."""
    total = len(layer)
    n_layers = (max(layer) + 1) if total else 0
    # Start from topological order; dummies (absent from it) follow, by id.
    rank_of_topo = {u: i for i, u in enumerate(order)}
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    for i in sorted(range(total), key=lambda i: rank_of_topo.get(i, n + i)):
        layers[layer[i]].append(i)
    if all(len(ls) <= 1 for ls in layers):
        return layers  # nothing to reorder (a chain): skip the sweeps, long chains stay fast

    best = [list(ls) for ls in layers]
    best_c = _crossings(best, down)
    for sweep in range(_ORDER_SWEEPS):
        downward = sweep % 2 == 0
        idx_range = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
        for li in idx_range:
            if len(layers[li]) <= 1:
                continue  # a lone node's order cannot change
            ref = layers[li - 1] if downward else layers[li + 1]
            ref_pos = {v: i for i, v in enumerate(ref)}
            keyed = []
            for i, v in enumerate(layers[li]):
                nbrs = [ref_pos[x] for x in (up[v] if downward else down[v]) if x in ref_pos]
                bary = sum(nbrs) / len(nbrs) if nbrs else float(i)
                keyed.append((bary, i, v))  # ties keep the current order
            layers[li] = [v for _, _, v in sorted(keyed)]
        c = _crossings(layers, down)
        if c < best_c:
            best, best_c = [list(ls) for ls in layers], c
    return best


def _x_coordinates(
    layers: list[list[int]],
    up: list[list[int]],
    down: list[list[int]],
    ext: Sequence[tuple[float, float]],
    h_gap: float,
) -> list[float]:
    """Pack each layer centred on 0, then pull nodes towards their neighbours' mean."""
    x = [0.0] * len(ext)
    for ls in layers:
        cur = 0.0
        for i, v in enumerate(ls):
            if i:
                cur += ext[ls[i - 1]][1] + ext[v][0] + h_gap
            x[v] = cur
        shift = cur / 2
        for v in ls:
            x[v] -= shift

    def place(ls: list[int], want: list[float]) -> list[float]:
        # Closest positions to `want` that keep order and spacing: the average
        # of a left-to-right and a right-to-left pass, so neither side wins.
        m = len(ls)
        if m == 1:
            return want  # what the two passes give (w + w) / 2 == w, only faster
        sep = [ext[ls[i - 1]][1] + ext[ls[i]][0] + h_gap for i in range(1, m)]
        left = list(want)
        for i in range(1, m):
            left[i] = max(left[i], left[i - 1] + sep[i - 1])
        right = list(want)
        for i in range(m - 2, -1, -1):
            right[i] = min(right[i], right[i + 1] - sep[i])
        return [(a + b) / 2 for a, b in zip(left, right, strict=True)]

    n_layers = len(layers)
    for sweep in range(_PLACE_SWEEPS):
        downward = sweep % 2 == 0
        idx_range = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
        for li in idx_range:
            ls = layers[li]
            want = []
            for v in ls:
                nbrs = up[v] if downward else down[v]
                if sweep >= 2:  # later sweeps balance between both neighbour sides
                    nbrs = up[v] + down[v]
                want.append(sum(x[u] for u in nbrs) / len(nbrs) if nbrs else x[v])
            for v, xv in zip(ls, place(ls, want), strict=True):
                x[v] = xv
    return x


def _y_coordinates(layers: list[list[int]], h: Sequence[float], v_gap: float) -> list[float]:
    """Layer 0 on top; each layer as tall as its tallest box, ``v_gap`` between layers."""
    y = [0.0] * len(h)
    top = 0.0
    for ls in layers:
        layer_h = max((h[v] for v in ls), default=0.0)
        for v in ls:
            y[v] = top - layer_h / 2
        top -= layer_h + v_gap
    return y
