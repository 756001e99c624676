"""``draw_graph``: the autograd graph as boxes and arrows, drawn with matplotlib.

This module turns a :class:`~backproplab.graph.Graph` into text and box
sizes, asks :mod:`backproplab._layout` where the boxes go, and draws them.
It is private: use it as ``backproplab.plot.draw_graph``, which re-exports it.
Like the rest of ``plot``, matplotlib is imported on first draw only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._figure import _fmt, _fmt_shape, _new_or_given_ax, _pyplot
from ._layout import V_GAP, layered_layout

if TYPE_CHECKING:  # only for annotations; importing these is what we avoid at runtime
    from matplotlib.axes import Axes

__all__ = ["draw_graph"]

# Colours (face, edge) per node kind. Chosen to stay distinguishable for the
# common colour-vision deficiencies: green/blue/purple differ in lightness too.
_KIND_STYLE: dict[str, tuple[str, str, str]] = {
    # kind: (face, edge, legend label)
    "leaf": ("#c7e9c0", "#2e7d32", "leaf (AccumulateGrad)"),
    "op": ("#cfe2f3", "#1f5f99", "operation (…Backward)"),
    "custom": ("#e1d5f0", "#6a3d9a", "custom autograd.Function"),
}
_SAVED_STYLE = ("#eeeeee", "#888888")
_HIDDEN_STYLE = ("#fff8e1", "#9e9e9e")
_HIGHLIGHT = "#ff7f0e"
_EDGE_COLOR = "#555555"

# Geometry is laid out in "em" units (1 unit = the font size), so boxes fit
# their text whatever size the Axes ends up; the font is scaled to the Axes.
# The gaps between boxes and layers are _layout's H_GAP and V_GAP.
_CHAR_W = 0.62  # average glyph width of DejaVu Sans, in em
_LINE_H = 1.3
_PAD_X = 1.2
_PAD_Y = 0.8
_NOTE_SCALE = 0.8  # saved-tensor notes use a smaller font
_INCH_PER_EM = 0.13  # ~9.4 pt text when we pick the figure size ourselves
_ID_W = 1.2  # room left of each box for its id


def _leaf_label(
    node: Any, values: bool, grads: bool, final_grads: Mapping[str, Any] | None = None
) -> list[str]:
    """Box text of a leaf; ``final_grads`` (name -> TensorInfo) replaces ``leaf.grad``."""
    leaf = node.leaf
    if leaf is None:  # a leaf box of draw_dag: its label is all there is
        return node.name.split("\n")
    first = leaf.name
    if values:
        if leaf.value is not None and len(leaf.value) == 1:
            first = f"{leaf.name} = {_fmt(leaf.value[0])}"
        elif leaf.value is not None and len(leaf.value) <= 3:
            first = f"{leaf.name} = [{', '.join(_fmt(v) for v in leaf.value)}]"
        else:
            first = f"{leaf.name}  shape {_fmt_shape(leaf.shape)}"
    lines = [first]
    if grads:
        if final_grads is not None:
            # A Trace's graph was described before backward: use what backward left.
            info = final_grads.get(leaf.name)
            has_grad, grad = info is not None, None if info is None else info.values
        else:
            has_grad, grad = leaf.has_grad, leaf.grad
        if not has_grad:
            lines.append("grad None")
        elif grad is not None and len(grad) == 1:
            lines.append(f"grad {_fmt(grad[0])}")
        elif grad is not None and len(grad) <= 3:
            lines.append(f"grad [{', '.join(_fmt(v) for v in grad)}]")
        else:
            lines.append(f"grad shape {_fmt_shape(leaf.shape)}")
    return lines


def _saved_label(node: Any) -> list[str]:
    """Text of the grey note listing what a node saved for backward."""
    lines = ["saved:"]
    for s in node.saved:
        if s.freed:
            desc = "freed"
        elif s.shape is None:
            desc = "?"
        else:
            desc = _fmt_shape(s.shape)
        lines.append(f"{s.name} ({desc})")
    return lines


def dag_as_graph(
    labels: Any, edges: Any, kinds: Any, edge_labels: Any
) -> tuple[Any, dict[tuple[int, int], str]]:
    """A `Graph` holding any DAG, so `draw_graph` can draw it; checks the input.

    Returns the graph and the edge texts keyed by (src, position), the form
    draw_graph's notes take. Boxes keep their indices as node ids.
    """
    from .graph import Edge, Graph, Node

    if isinstance(labels, str) or not isinstance(labels, Sequence) or not labels:
        raise TypeError(f"labels: expected a non-empty list of str, got {labels!r:.60}")
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise TypeError(f"labels: expected str items, got {type(label).__name__} at {i}")
    n = len(labels)
    pairs = []
    for e in edges if isinstance(edges, Sequence) else [edges]:
        if (
            not isinstance(e, (tuple, list)) or len(e) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n for v in e)
        ):
            raise ValueError(
                f"edges: expected (src, dst) pairs of box indices 0..{n - 1}, got {e!r}"
            )
        pairs.append((e[0], e[1]))
    if kinds is None:
        has_out = {s for s, _ in pairs}
        kinds = ["op" if i in has_out else "leaf" for i in range(n)]
    elif len(kinds) != n or any(k not in ("op", "leaf", "custom") for k in kinds):
        raise ValueError(f'kinds: expected {n} of "op", "leaf" or "custom", got {kinds!r:.80}')
    # A topological order (Kahn's algorithm); what is left over lies on a cycle.
    waiting = [0] * n
    for _, d in pairs:
        waiting[d] += 1
    ready = [i for i in range(n) if waiting[i] == 0]
    order = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for s, d in pairs:
            if s == i:
                waiting[d] -= 1
                if waiting[d] == 0:
                    ready.append(d)
    if len(order) < n:
        raise ValueError("edges: they form a cycle, so this is not a DAG to draw")
    nodes = tuple(Node(i, labels[i], kinds[i], (), None, None) for i in range(n))
    position: dict[int, int] = {}
    graph_edges, notes = [], {}
    for s, d in sorted(pairs, key=lambda p: p[0]):
        pos = position.get(s, 0)
        position[s] = pos + 1
        graph_edges.append(Edge(s, d, pos, 0))
        if edge_labels and (s, d) in edge_labels:
            notes[(s, pos)] = str(edge_labels[(s, d)])
    for key in edge_labels or {}:
        if tuple(key) not in set(pairs):
            raise ValueError(f"edge_labels: {key!r} is not one of the edges")
    return Graph(nodes, tuple(graph_edges), (order[0],)), notes


def _border_point(
    centre: tuple[float, float], w: float, h: float, toward: tuple[float, float]
) -> tuple[float, float]:
    """Where the segment from a box's centre towards ``toward`` leaves the box."""
    dx, dy = toward[0] - centre[0], toward[1] - centre[1]
    if dx == 0 and dy == 0:
        return centre
    t = min((w / 2) / abs(dx) if dx else math.inf, (h / 2) / abs(dy) if dy else math.inf)
    return centre[0] + dx * t, centre[1] + dy * t


def draw_graph(
    graph_or_tensor: Any,
    *,
    names: Mapping[str, Any] | None = None,
    values: bool = False,
    grads: bool = False,
    highlight: int | None = None,
    max_nodes: int = 60,
    ax: Axes | None = None,
    edge_grads: bool = False,
    _done: Iterable[int] = (),
    _edge_notes: Mapping[tuple[int, int], str] | None = None,
    _title: str = "autograd graph — arrows: backward pass, output → leaves",
    _kind_names: Mapping[str, str] | None = None,
) -> Axes:
    """Draw the autograd graph with matplotlib (no graphviz needed).

    ``graph_or_tensor`` is a :class:`backproplab.graph.Graph`, a
    :class:`backproplab.trace.Trace`, or the output tensor(s) to describe
    (then ``names`` names the leaves, as in ``describe``). A Trace draws its
    ``graph``; as that graph was described *before* backward ran, its leaves
    carry no ``.grad``, so ``grads=True`` then shows the trace's recorded
    final leaf gradients (``Trace.leaf_grads``) instead. The output (root)
    is at the top and the leaves at the bottom. **Arrows point the way
    backward runs**: from the output down to the leaves, which is the
    direction gradients flow (and the direction of ``grad_fn.next_functions``).

    Boxes: green = leaf (AccumulateGrad, labelled with the leaf's name),
    blue = built-in operation, purple = custom ``autograd.Function``; a grey
    note beside a box lists the tensors it saved for backward. Each box's
    id (as in ``Graph.to_text()``) is written to its left.
    ``values=True`` writes leaf values (or shapes), ``grads=True`` their
    ``.grad``. With a Trace, ``edge_grads=True`` writes on every arrow the
    gradient that flowed along it in the recorded backward pass (what the
    arrow's upper node sent to that input, as ``Trace.to_text`` prints it).
    ``highlight`` is a node id drawn with a thick orange border.
    Graphs with more than ``max_nodes`` nodes keep the first ``max_nodes``
    in topological order and show one "… N more nodes hidden" box.

    Drawn facts are stored in ``ax.backproplab``: ``node_ids``, ``labels``
    (id -> text), ``patches`` (id -> box), ``highlight``, ``hidden``.

    Example:
        >>> import torch, backproplab as bl
        >>> a, b, d = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
        >>> e = (a + b) * d
        >>> ax = draw_graph(e, names={"a": a, "b": b, "d": d}, values=True)
        >>> ax.backproplab["node_ids"]
        [0, 1, 2, 3, 4]
        >>> t = bl.trace_backward(e, names={"a": a, "b": b, "d": d})
        >>> draw_graph(t, grads=True).backproplab["labels"][2].splitlines()  # de/da = d
        ['a', 'grad 4.0']
    """
    from .graph import Graph, describe
    from .trace import Trace

    final_grads: dict[str, Any] | None = None
    if isinstance(graph_or_tensor, (Graph, Trace)):
        if names is not None:
            kind = type(graph_or_tensor).__name__
            raise ValueError(
                f"names: only used when graph_or_tensor is a tensor; a {kind} already "
                "carries its leaf names"
            )
        if isinstance(graph_or_tensor, Trace):
            graph = graph_or_tensor.graph
            final_grads = dict(graph_or_tensor.leaf_grads)
        else:
            graph = graph_or_tensor
    else:
        try:
            graph = describe(graph_or_tensor, names=names)
        except (TypeError, ValueError) as err:
            # describe() calls its argument "outputs"; here the learner passed graph_or_tensor.
            text = str(err)
            if not text.startswith("outputs:"):
                raise
            got = text.removeprefix("outputs:").split(",", 1)[-1]
            raise type(err)(
                "graph_or_tensor: expected a Graph, a Trace, or what bl.describe takes (a "
                f"tensor or tensors with a grad_fn);{got}"
            ) from None
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes: expected a positive int, got {max_nodes!r}")
    if edge_grads:
        if not isinstance(graph_or_tensor, Trace):
            raise TypeError(
                "edge_grads: needs a Trace (from bl.trace_backward) to take the gradients "
                f"from, got {type(graph_or_tensor).__name__}"
            )
        _edge_notes = {
            (s.node_id, pos): str(g)
            for s in graph_or_tensor.steps
            for pos, g in enumerate(s.grad_inputs)
            if g is not None
        } | dict(_edge_notes or {})
    n_all = len(graph.nodes)
    if highlight is not None and (
        isinstance(highlight, bool) or not isinstance(highlight, int)
        or not 0 <= highlight < n_all
    ):
        raise ValueError(
            f"highlight: expected a node id between 0 and {n_all - 1} or None, got {highlight!r}"
        )
    # Private hooks for the backward stepper: nodes already run, and text to
    # write on edges, keyed by (src id, position).
    done = set(_done)
    _edge_notes = _edge_notes or {}

    # Which nodes to draw. Ids are topological positions, so a prefix of ids is
    # the part of the graph nearest the output.
    kept = list(range(min(n_all, max_nodes)))
    hidden = n_all - len(kept)
    marker = len(kept) if hidden else None  # local index of the "hidden" box
    n_boxes = len(kept) + (1 if hidden else 0)

    labels: dict[int, str] = {}
    note_lines: dict[int, list[str]] = {}
    # box size, and the width including its saved-tensor note (the "slot")
    box_w, box_h, slot_w = [0.0] * n_boxes, [0.0] * n_boxes, [0.0] * n_boxes
    note_w = [0.0] * n_boxes
    for i in range(n_boxes):
        if i == marker:
            lines = [f"… {hidden} more node{'s' if hidden != 1 else ''} hidden"]
        else:
            node = graph.nodes[kept[i]]
            lines = (
                _leaf_label(node, values, grads, final_grads)
                if node.kind == "leaf" else node.name.split("\n")
            )  # fmt: skip
            labels[node.id] = "\n".join(lines)
            if node.saved:
                note_lines[i] = _saved_label(node)
        box_w[i] = max(len(s) for s in lines) * _CHAR_W + _PAD_X
        box_h[i] = len(lines) * _LINE_H + _PAD_Y
        slot_w[i] = box_w[i]
        if i in note_lines:
            nl = note_lines[i]
            note_w[i] = (max(len(s) for s in nl) * _CHAR_W + _PAD_X) * _NOTE_SCALE
            slot_w[i] += 0.6 + note_w[i]
            box_h[i] = max(box_h[i], (len(nl) * _LINE_H + _PAD_Y) * _NOTE_SCALE)

    local = {nid: i for i, nid in enumerate(kept)}
    pairs: list[tuple[int, int]] = []  # one entry per drawn edge (duplicates kept)
    positions: list[int] = []  # the edge's position in src.next_functions
    stubs: dict[int, int] = {}  # local src -> number of its edges into the hidden part
    for e in graph.edges:
        if e.src in local:
            if e.dst in local:
                pairs.append((local[e.src], local[e.dst]))
                positions.append(e.position)
            else:
                stubs[local[e.src]] = stubs.get(local[e.src], 0) + 1
    n_kept = len(kept)
    # The left extent makes room for the box's id, written beside it, where
    # no arrow ends (arrows enter boxes from above).
    extents = [(box_w[i] / 2 + _ID_W, slot_w[i] - box_w[i] / 2) for i in range(n_kept)]
    layout = layered_layout(n_kept, pairs, extents, box_h[:n_kept])
    box_c, bends = layout.centres, layout.bends
    if marker is not None:
        # The hidden part sits under everything; edges into it are drawn as
        # short dashed stubs rather than long lines criss-crossing the picture.
        left = min(c[0] - e[0] for c, e in zip(box_c, extents, strict=True))
        right = max(c[0] + e[1] for c, e in zip(box_c, extents, strict=True))
        bottom = min(c[1] - hh / 2 for c, hh in zip(box_c, box_h, strict=False))
        box_c.append(((left + right) / 2, bottom - V_GAP - box_h[marker] / 2))
        extents.append((box_w[marker] / 2, box_w[marker] / 2))

    # ---- drawing
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch
    from matplotlib.path import Path

    # Extent of everything.
    xs = [box_c[i][0] + d for i in range(n_boxes) for d in (-extents[i][0], extents[i][1])]
    ys = [box_c[i][1] + d for i in range(n_boxes) for d in (-box_h[i] / 2, box_h[i] / 2)]
    margin = 1.0
    x_lo, x_hi = min(xs, default=0) - margin, max(xs, default=1) + margin
    y_lo, y_hi = min(ys, default=0) - margin, max(ys, default=1) + margin
    span_w, span_h = x_hi - x_lo, y_hi - y_lo
    # Legend: only the kinds present, so it explains exactly what is on screen.
    kinds_present = [k for k in _KIND_STYLE if any(graph.nodes[n].kind == k for n in kept)]
    handles: list[Any] = [
        Patch(facecolor=_KIND_STYLE[k][0], edgecolor=_KIND_STYLE[k][1],
              label=(_kind_names or {}).get(k, _KIND_STYLE[k][2]))
        for k in kinds_present
    ]
    if note_lines:
        handles.append(Patch(facecolor=_SAVED_STYLE[0], edgecolor=_SAVED_STYLE[1],
                             label="saved for backward"))
    if highlight is not None:
        handles.append(Patch(facecolor="white", edgecolor=_HIGHLIGHT, linewidth=2.5,
                             label="current node"))
    if done and any(n not in done for n in kept):
        handles.append(Patch(facecolor="white", edgecolor="#777777", label="not run yet"))
    if hidden:
        handles.append(Patch(facecolor=_HIDDEN_STYLE[0], edgecolor=_HIDDEN_STYLE[1],
                             linestyle="--", label="hidden nodes (dashed arrows)"))
    handles.append(Line2D([], [], color=_EDGE_COLOR, marker=">", markersize=5,
                          label="backward / gradient flow"))
    # Our own figure: the graph area at ~9 pt text, plus strips for title and legend.
    title_in, legend_in = 0.45, 0.25 * math.ceil(len(handles) / 3) + 0.2
    graph_w = min(span_w * _INCH_PER_EM, 16.0)
    graph_h = min(span_h * _INCH_PER_EM, 24.0)
    fig_w = max(graph_w + 0.2, 7.0)  # wide enough for the legend
    fig_h = max(graph_h, 1.5) + title_in + legend_in
    if ax is None:
        _fig, ax = _pyplot().subplots(
            figsize=(fig_w, fig_h),
            gridspec_kw={"left": 0.01, "right": 0.99, "top": 1 - title_in / fig_h,
                         "bottom": legend_in / fig_h},
        )
    else:
        ax = _new_or_given_ax(ax, (0, 0))
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_aspect("equal", adjustable="box")
    ax.set_axis_off()
    # Scale the font so that one em is one data unit in the final Axes.
    bbox = ax.get_position()
    fig = ax.figure
    ax_w_in = bbox.width * fig.get_figwidth()
    ax_h_in = bbox.height * fig.get_figheight()
    inch_per_unit = min(ax_w_in / span_w, ax_h_in / span_h)
    fontsize = max(3.0, min(11.0, inch_per_unit * 72))

    patches: dict[int, Any] = {}
    node_ids: list[int] = []
    for i in range(n_boxes):
        (cx, cy), bw, bh = box_c[i], box_w[i], box_h[i]
        if i == marker:
            face, edge = _HIDDEN_STYLE
            text, ls = f"… {hidden} more node{'s' if hidden != 1 else ''} hidden", "--"
            nid = None
        else:
            node = graph.nodes[kept[i]]
            nid = node.id
            face, edge, _ = _KIND_STYLE.get(node.kind, _KIND_STYLE["op"])
            text, ls = labels[nid], "-"
        lw = 1.2
        if nid is not None and nid == highlight:
            edge, lw = _HIGHLIGHT, 3.5
        elif nid is not None and done and nid not in done:
            face = "#ffffff"  # stepper: nodes backward has not reached yet are left blank
        box = FancyBboxPatch(
            (cx - bw / 2, cy - bh / 2), bw, bh,
            boxstyle="round,pad=0,rounding_size=0.5" if nid is None or
            graph.nodes[nid].kind != "leaf" else "round,pad=0,rounding_size=1.0",
            facecolor=face, edgecolor=edge, linewidth=lw, linestyle=ls, zorder=2,
        )
        ax.add_patch(box)
        ax.text(cx, cy, text, ha="center", va="center", fontsize=fontsize, zorder=3,
                linespacing=1.15)
        if nid is not None:
            patches[nid] = box
            node_ids.append(nid)
            ax.text(cx - bw / 2 - 0.25, cy, str(nid), ha="right", va="center",
                    fontsize=fontsize * 0.7, color="#777777", zorder=3)
        if i in note_lines:
            nx = cx + bw / 2 + 0.6 + note_w[i] / 2
            nh = (len(note_lines[i]) * _LINE_H + _PAD_Y) * _NOTE_SCALE
            ax.add_patch(FancyBboxPatch(
                (nx - note_w[i] / 2, cy - nh / 2), note_w[i], nh,
                boxstyle="square,pad=0", facecolor=_SAVED_STYLE[0],
                edgecolor=_SAVED_STYLE[1], linewidth=0.8, zorder=2,
            ))
            ax.plot([cx + bw / 2, nx - note_w[i] / 2], [cy, cy], linestyle=":",
                    color=_SAVED_STYLE[1], linewidth=1, zorder=1)
            ax.text(nx, cy, "\n".join(note_lines[i]), ha="center", va="center",
                    fontsize=fontsize * _NOTE_SCALE, color="#444444", zorder=3,
                    linespacing=1.15)

    # Edges. Parallel edges (b = a + a) are drawn side by side so both show.
    seen: dict[tuple[int, int], int] = {}
    multiplicity: dict[tuple[int, int], int] = {}
    for p in pairs:
        multiplicity[p] = multiplicity.get(p, 0) + 1

    def arrow(pts: list[tuple[float, float]], hl: bool, dashed: bool = False) -> None:
        codes = [Path.MOVETO] + [Path.LINETO] * (len(pts) - 1)
        ax.add_patch(FancyArrowPatch(
            path=Path(pts, codes), arrowstyle="-|>", mutation_scale=fontsize * 1.1,
            color=_HIGHLIGHT if hl else _EDGE_COLOR, linewidth=2.0 if hl else 1.0,
            linestyle="--" if dashed else "-", zorder=1,
        ))

    edge_notes = dict(_edge_notes)
    drawn_notes: dict[tuple[int, int, int], str] = {}
    for (u, v), pos in zip(pairs, positions, strict=True):
        k = seen.get((u, v), 0)
        seen[(u, v)] = k + 1
        m = multiplicity[(u, v)]
        # shift each copy sideways, staying inside the narrower box
        offset = (k - (m - 1) / 2) * min(1.2, 0.8 * min(box_w[u], box_w[v]) / m)
        mids = [(mx + offset, my) for mx, my in bends.get((u, v), [])]
        src = (box_c[u][0] + offset, box_c[u][1])
        dst = (box_c[v][0] + offset, box_c[v][1])
        start = _border_point(src, box_w[u] - 2 * abs(offset), box_h[u], mids[0] if mids else dst)
        end = _border_point(dst, box_w[v] - 2 * abs(offset), box_h[v], mids[-1] if mids else src)
        arrow([start, *mids, end], highlight is not None and kept[u] == highlight)
        note = edge_notes.get((kept[u], pos))
        if note is not None:  # e.g. the gradient the stepper's current node sends here
            drawn_notes[(kept[u], kept[v], pos)] = note
            nxt = mids[0] if mids else end
            ax.text((start[0] + nxt[0]) / 2, (start[1] + nxt[1]) / 2, note,
                    ha="center", va="center", fontsize=fontsize * 0.85, color="#b35900",
                    zorder=4, bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                                    "edgecolor": _HIGHLIGHT, "linewidth": 0.8})
    for u, count in stubs.items():
        start = (box_c[u][0], box_c[u][1] - box_h[u] / 2)
        arrow([start, (start[0], start[1] - 1.6)], highlight is not None and kept[u] == highlight,
              dashed=True)
        if count > 1:
            ax.text(start[0] + 0.3, start[1] - 1.0, f"×{count}", fontsize=fontsize * 0.7,
                    color="#777777", va="center")

    legend_fs = max(6.0, min(9.0, fontsize))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              ncol=min(len(handles), 3), fontsize=legend_fs, frameon=False)
    ax.set_title(_title, fontsize=legend_fs + 1)
    ax.backproplab = {
        "node_ids": node_ids,
        "labels": labels,
        "patches": patches,
        "highlight": highlight if highlight in patches else None,
        "hidden": hidden,
        "figsize": (fig_w, fig_h),  # what draw_graph would pick for a figure of its own
        "edges": [(kept[u], kept[v]) for u, v in pairs],
        # text written on edges, keyed by (src id, dst id, position in src's inputs)
        "edge_labels": drawn_notes,
    }
    return ax
