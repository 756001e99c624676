"""``draw_graph``: the autograd graph as boxes and arrows, drawn with matplotlib.

This module turns a :class:`~backproplab.graph.Graph` into text and box
sizes, asks :mod:`backproplab.layout` where the boxes go, and draws them.
The steps of `draw_graph` follow one another: measure the boxes (text and
size), place them, pick the figure and font, draw the boxes, draw the edges.
Learners meet it as ``bl.plot.draw_graph`` (``plot`` re-exports it). Like
the rest of ``plot``, matplotlib is imported on first draw only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .figure import fmt_shape, fmt_value, new_or_given_ax, pyplot
from .layout import V_GAP, layered_layout

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
# The gaps between boxes and layers are layout's H_GAP and V_GAP.
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
            first = f"{leaf.name} = {fmt_value(leaf.value[0])}"
        elif leaf.value is not None and len(leaf.value) <= 3:
            first = f"{leaf.name} = [{', '.join(fmt_value(v) for v in leaf.value)}]"
        else:
            first = f"{leaf.name}  shape {fmt_shape(leaf.shape)}"
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
            lines.append(f"grad {fmt_value(grad[0])}")
        elif grad is not None and len(grad) <= 3:
            lines.append(f"grad [{', '.join(fmt_value(v) for v in grad)}]")
        else:
            lines.append(f"grad shape {fmt_shape(leaf.shape)}")
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
            desc = fmt_shape(s.shape)
        lines.append(f"{s.name} ({desc})")
    return lines


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
    graph, final_grads = _graph_of(graph_or_tensor, names)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes: expected a positive int, got {max_nodes!r}")
    # Private hooks for the backward stepper: nodes already run, and text to
    # write on edges, keyed by (src id, position).
    notes = dict(_edge_notes or {})
    if edge_grads:
        notes = _edge_grads(graph_or_tensor) | notes
    n_all = len(graph.nodes)
    if highlight is not None and (
        isinstance(highlight, bool) or not isinstance(highlight, int)
        or not 0 <= highlight < n_all
    ):
        raise ValueError(
            f"highlight: expected a node id between 0 and {n_all - 1} or None, got {highlight!r}"
        )
    done = set(_done)
    boxes = _Boxes.measure(graph, max_nodes, values, grads, final_grads)
    place = _place(graph, boxes)
    handles = _legend(graph, boxes, highlight, done, _kind_names)
    ax, fontsize, figsize = _axes(ax, boxes, place, handles)
    patches, node_ids = _draw_boxes(ax, graph, boxes, place, fontsize, highlight, done)
    drawn_notes = _draw_edges(ax, boxes, place, fontsize, highlight, notes)
    legend_fs = max(6.0, min(9.0, fontsize))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              ncol=min(len(handles), 3), fontsize=legend_fs, frameon=False)
    ax.set_title(_title, fontsize=legend_fs + 1)
    ax.backproplab = {
        "node_ids": node_ids,
        "labels": boxes.labels,
        "patches": patches,
        "highlight": highlight if highlight in patches else None,
        "hidden": boxes.hidden,
        "figsize": figsize,  # what draw_graph would pick for a figure of its own
        "edges": [(boxes.kept[u], boxes.kept[v]) for u, v in place.pairs],
        # text written on edges, keyed by (src id, dst id, position in src's inputs)
        "edge_labels": drawn_notes,
    }
    return ax


def _graph_of(graph_or_tensor: Any, names: Mapping[str, Any] | None,
              ) -> tuple[Any, dict[str, Any] | None]:
    """The Graph to draw, and a Trace's final leaf gradients (None for a Graph)."""
    from .graph import Graph, describe
    from .trace import Trace

    if isinstance(graph_or_tensor, (Graph, Trace)):
        if names is not None:
            kind = type(graph_or_tensor).__name__
            raise ValueError(
                f"names: only used when graph_or_tensor is a tensor; a {kind} already "
                "carries its leaf names"
            )
        if isinstance(graph_or_tensor, Trace):
            return graph_or_tensor.graph, dict(graph_or_tensor.leaf_grads)
        return graph_or_tensor, None
    try:
        return describe(graph_or_tensor, names=names), None
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


def _edge_grads(graph_or_tensor: Any) -> dict[tuple[int, int], str]:
    """The gradient each recorded step sent along each edge, keyed by (src id, position)."""
    from .trace import Trace

    if not isinstance(graph_or_tensor, Trace):
        raise TypeError(
            "edge_grads: needs a Trace (from bl.trace_backward) to take the gradients "
            f"from, got {type(graph_or_tensor).__name__}"
        )
    return {
        (s.node_id, pos): str(g)
        for s in graph_or_tensor.steps
        for pos, g in enumerate(s.grad_inputs)
        if g is not None
    }


@dataclass
class _Boxes:
    """What each box says and how big it is, in em; the last box may stand for the
    nodes left out (``marker``). Ids are topological positions, so the kept prefix
    of ids is the part of the graph nearest the output."""

    kept: list[int]
    hidden: int
    marker: int | None
    labels: dict[int, str]
    note_lines: dict[int, list[str]]
    box_w: list[float]
    box_h: list[float]
    slot_w: list[float]  # the box with its saved-tensor note
    note_w: list[float]

    @classmethod
    def measure(cls, graph: Any, max_nodes: int, values: bool, grads: bool,
                final_grads: Mapping[str, Any] | None) -> _Boxes:
        n_all = len(graph.nodes)
        kept = list(range(min(n_all, max_nodes)))
        hidden = n_all - len(kept)
        n_boxes = len(kept) + (1 if hidden else 0)
        b = cls(kept, hidden, len(kept) if hidden else None, {}, {}, [0.0] * n_boxes,
                [0.0] * n_boxes, [0.0] * n_boxes, [0.0] * n_boxes)
        for i in range(n_boxes):
            if i == b.marker:
                lines = [b.hidden_text]
            else:
                node = graph.nodes[kept[i]]
                lines = (
                    _leaf_label(node, values, grads, final_grads)
                    if node.kind == "leaf" else node.name.split("\n")
                )  # fmt: skip
                b.labels[node.id] = "\n".join(lines)
                if node.saved:
                    b.note_lines[i] = _saved_label(node)
            b.box_w[i] = max(len(s) for s in lines) * _CHAR_W + _PAD_X
            b.box_h[i] = len(lines) * _LINE_H + _PAD_Y
            b.slot_w[i] = b.box_w[i]
            if i in b.note_lines:
                nl = b.note_lines[i]
                b.note_w[i] = (max(len(s) for s in nl) * _CHAR_W + _PAD_X) * _NOTE_SCALE
                b.slot_w[i] += 0.6 + b.note_w[i]
                b.box_h[i] = max(b.box_h[i], (len(nl) * _LINE_H + _PAD_Y) * _NOTE_SCALE)
        return b

    @property
    def hidden_text(self) -> str:
        return f"… {self.hidden} more node{'s' if self.hidden != 1 else ''} hidden"

    @property
    def count(self) -> int:
        return len(self.box_w)


@dataclass
class _Placement:
    """Where the boxes go: centres, the bends of long edges, and the drawn edges."""

    centres: list[tuple[float, float]]
    extents: list[tuple[float, float]]  # room left and right of each centre
    bends: dict[tuple[int, int], list[tuple[float, float]]]
    pairs: list[tuple[int, int]]  # one per drawn edge (box indices; duplicates kept)
    positions: list[int]  # each edge's position in src.next_functions
    stubs: dict[int, int]  # box -> number of its edges into the hidden part


def _place(graph: Any, b: _Boxes) -> _Placement:
    local = {nid: i for i, nid in enumerate(b.kept)}
    pairs: list[tuple[int, int]] = []
    positions: list[int] = []
    stubs: dict[int, int] = {}
    for e in graph.edges:
        if e.src in local:
            if e.dst in local:
                pairs.append((local[e.src], local[e.dst]))
                positions.append(e.position)
            else:
                stubs[local[e.src]] = stubs.get(local[e.src], 0) + 1
    n_kept = len(b.kept)
    # The left extent makes room for the box's id, written beside it, where
    # no arrow ends (arrows enter boxes from above).
    extents = [(b.box_w[i] / 2 + _ID_W, b.slot_w[i] - b.box_w[i] / 2) for i in range(n_kept)]
    layout = layered_layout(n_kept, pairs, extents, b.box_h[:n_kept])
    box_c = layout.centres
    if b.marker is not None:
        # The hidden part sits under everything; edges into it are drawn as
        # short dashed stubs rather than long lines criss-crossing the picture.
        left = min(c[0] - e[0] for c, e in zip(box_c, extents, strict=True))
        right = max(c[0] + e[1] for c, e in zip(box_c, extents, strict=True))
        bottom = min(c[1] - hh / 2 for c, hh in zip(box_c, b.box_h, strict=False))
        box_c.append(((left + right) / 2, bottom - V_GAP - b.box_h[b.marker] / 2))
        extents.append((b.box_w[b.marker] / 2, b.box_w[b.marker] / 2))
    return _Placement(box_c, extents, layout.bends, pairs, positions, stubs)


def _legend(graph: Any, b: _Boxes, highlight: int | None, done: set[int],
            kind_names: Mapping[str, str] | None) -> list[Any]:
    """Legend entries for only the kinds present, so it explains exactly what is on screen."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kinds_present = [k for k in _KIND_STYLE if any(graph.nodes[n].kind == k for n in b.kept)]
    handles: list[Any] = [
        Patch(facecolor=_KIND_STYLE[k][0], edgecolor=_KIND_STYLE[k][1],
              label=(kind_names or {}).get(k, _KIND_STYLE[k][2]))
        for k in kinds_present
    ]
    if b.note_lines:
        handles.append(Patch(facecolor=_SAVED_STYLE[0], edgecolor=_SAVED_STYLE[1],
                             label="saved for backward"))
    if highlight is not None:
        handles.append(Patch(facecolor="white", edgecolor=_HIGHLIGHT, linewidth=2.5,
                             label="current node"))
    if done and any(n not in done for n in b.kept):
        handles.append(Patch(facecolor="white", edgecolor="#777777", label="not run yet"))
    if b.hidden:
        handles.append(Patch(facecolor=_HIDDEN_STYLE[0], edgecolor=_HIDDEN_STYLE[1],
                             linestyle="--", label="hidden nodes (dashed arrows)"))
    handles.append(Line2D([], [], color=_EDGE_COLOR, marker=">", markersize=5,
                          label="backward / gradient flow"))
    return handles


def _axes(ax: Axes | None, b: _Boxes, place: _Placement, handles: list[Any],
          ) -> tuple[Axes, float, tuple[float, float]]:
    """The Axes to draw on (a figure of our own when none is given), its limits set; the
    font size that makes one em one data unit; the figure size we pick for ourselves."""
    box_c, extents = place.centres, place.extents
    xs = [box_c[i][0] + d for i in range(b.count) for d in (-extents[i][0], extents[i][1])]
    ys = [box_c[i][1] + d for i in range(b.count) for d in (-b.box_h[i] / 2, b.box_h[i] / 2)]
    margin = 1.0
    x_lo, x_hi = min(xs, default=0) - margin, max(xs, default=1) + margin
    y_lo, y_hi = min(ys, default=0) - margin, max(ys, default=1) + margin
    span_w, span_h = x_hi - x_lo, y_hi - y_lo
    # Our own figure: the graph area at ~9 pt text, plus strips for title and legend.
    title_in, legend_in = 0.45, 0.25 * math.ceil(len(handles) / 3) + 0.2
    graph_w = min(span_w * _INCH_PER_EM, 16.0)
    graph_h = min(span_h * _INCH_PER_EM, 24.0)
    fig_w = max(graph_w + 0.2, 7.0)  # wide enough for the legend
    fig_h = max(graph_h, 1.5) + title_in + legend_in
    if ax is None:
        _fig, ax = pyplot().subplots(
            figsize=(fig_w, fig_h),
            gridspec_kw={"left": 0.01, "right": 0.99, "top": 1 - title_in / fig_h,
                         "bottom": legend_in / fig_h},
        )
    else:
        ax = new_or_given_ax(ax, (0, 0))
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
    return ax, max(3.0, min(11.0, inch_per_unit * 72)), (fig_w, fig_h)


def _draw_boxes(ax: Axes, graph: Any, b: _Boxes, place: _Placement, fontsize: float,
                highlight: int | None, done: set[int]) -> tuple[dict[int, Any], list[int]]:
    """Each box with its text, its id to the left and its saved-tensor note to the right."""
    from matplotlib.patches import FancyBboxPatch

    patches: dict[int, Any] = {}
    node_ids: list[int] = []
    for i in range(b.count):
        (cx, cy), bw, bh = place.centres[i], b.box_w[i], b.box_h[i]
        if i == b.marker:
            face, edge = _HIDDEN_STYLE
            text, ls = b.hidden_text, "--"
            nid = None
        else:
            node = graph.nodes[b.kept[i]]
            nid = node.id
            face, edge, _ = _KIND_STYLE.get(node.kind, _KIND_STYLE["op"])
            text, ls = b.labels[nid], "-"
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
        if i in b.note_lines:
            _draw_note(ax, b, i, (cx, cy), fontsize)
    return patches, node_ids


def _draw_note(ax: Axes, b: _Boxes, i: int, centre: tuple[float, float],
               fontsize: float) -> None:
    """The grey note beside box ``i`` listing what its node saved, joined by a dotted line."""
    from matplotlib.patches import FancyBboxPatch

    (cx, cy), bw, note_w = centre, b.box_w[i], b.note_w[i]
    nx = cx + bw / 2 + 0.6 + note_w / 2
    nh = (len(b.note_lines[i]) * _LINE_H + _PAD_Y) * _NOTE_SCALE
    ax.add_patch(FancyBboxPatch(
        (nx - note_w / 2, cy - nh / 2), note_w, nh,
        boxstyle="square,pad=0", facecolor=_SAVED_STYLE[0],
        edgecolor=_SAVED_STYLE[1], linewidth=0.8, zorder=2,
    ))
    ax.plot([cx + bw / 2, nx - note_w / 2], [cy, cy], linestyle=":",
            color=_SAVED_STYLE[1], linewidth=1, zorder=1)
    ax.text(nx, cy, "\n".join(b.note_lines[i]), ha="center", va="center",
            fontsize=fontsize * _NOTE_SCALE, color="#444444", zorder=3,
            linespacing=1.15)


def _arrow(ax: Axes, pts: list[tuple[float, float]], fontsize: float, hl: bool,
           dashed: bool = False) -> None:
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path

    codes = [Path.MOVETO] + [Path.LINETO] * (len(pts) - 1)
    ax.add_patch(FancyArrowPatch(
        path=Path(pts, codes), arrowstyle="-|>", mutation_scale=fontsize * 1.1,
        color=_HIGHLIGHT if hl else _EDGE_COLOR, linewidth=2.0 if hl else 1.0,
        linestyle="--" if dashed else "-", zorder=1,
    ))


def _draw_edges(ax: Axes, b: _Boxes, place: _Placement, fontsize: float,
                highlight: int | None, notes: Mapping[tuple[int, int], str],
                ) -> dict[tuple[int, int, int], str]:
    """The arrows, with the notes written on them; stubs into the hidden part. Parallel
    edges (b = a + a) are drawn side by side so both show. Returns the notes drawn."""
    seen: dict[tuple[int, int], int] = {}
    multiplicity: dict[tuple[int, int], int] = {}
    for p in place.pairs:
        multiplicity[p] = multiplicity.get(p, 0) + 1
    box_c, box_w, box_h, kept = place.centres, b.box_w, b.box_h, b.kept
    drawn_notes: dict[tuple[int, int, int], str] = {}
    for (u, v), pos in zip(place.pairs, place.positions, strict=True):
        k = seen.get((u, v), 0)
        seen[(u, v)] = k + 1
        m = multiplicity[(u, v)]
        # shift each copy sideways, staying inside the narrower box
        offset = (k - (m - 1) / 2) * min(1.2, 0.8 * min(box_w[u], box_w[v]) / m)
        mids = [(mx + offset, my) for mx, my in place.bends.get((u, v), [])]
        src = (box_c[u][0] + offset, box_c[u][1])
        dst = (box_c[v][0] + offset, box_c[v][1])
        start = _border_point(src, box_w[u] - 2 * abs(offset), box_h[u], mids[0] if mids else dst)
        end = _border_point(dst, box_w[v] - 2 * abs(offset), box_h[v], mids[-1] if mids else src)
        _arrow(ax, [start, *mids, end], fontsize, highlight is not None and kept[u] == highlight)
        note = notes.get((kept[u], pos))
        if note is not None:  # e.g. the gradient the stepper's current node sends here
            drawn_notes[(kept[u], kept[v], pos)] = note
            nxt = mids[0] if mids else end
            ax.text((start[0] + nxt[0]) / 2, (start[1] + nxt[1]) / 2, note,
                    ha="center", va="center", fontsize=fontsize * 0.85, color="#b35900",
                    zorder=4, bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                                    "edgecolor": _HIGHLIGHT, "linewidth": 0.8})
    for u, count in place.stubs.items():
        start = (box_c[u][0], box_c[u][1] - box_h[u] / 2)
        _arrow(ax, [start, (start[0], start[1] - 1.6)], fontsize,
               highlight is not None and kept[u] == highlight, dashed=True)
        if count > 1:
            ax.text(start[0] + 0.3, start[1] - 1.0, f"×{count}", fontsize=fontsize * 0.7,
                    color="#777777", va="center")
    return drawn_notes
