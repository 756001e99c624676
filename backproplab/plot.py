"""Matplotlib figures for the lessons: the autograd graph, losses, fits, gradients.

Every function draws into ``ax`` when one is given (and then creates no new
figure), otherwise it makes a fresh figure with ``plt.subplots``. Each returns
the Axes it drew on, never calls ``plt.show()`` and never touches global
matplotlib state (rcParams, styles, the current figure).

What a test (or a curious learner) may want to check afterwards is stored on
the returned Axes as a plain dict, ``ax.backproplab``; for example
``draw_graph(...).backproplab["node_ids"]`` lists the node ids drawn.

matplotlib itself is imported on first use, so ``import backproplab`` stays
light.

Example:
    >>> import torch, backproplab as bl
    >>> ax = bl.plot.tangent_plot(torch.sin, 0.0)
    >>> round(ax.backproplab["slope"], 3)
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations; importing these is what we avoid at runtime
    import torch
    from matplotlib.axes import Axes

__all__ = [
    "draw_graph",
    "loss_curve",
    "fit_plot",
    "grad_flow",
    "jacobian_heatmap",
    "tangent_plot",
]

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
_CHAR_W = 0.62  # average glyph width of DejaVu Sans, in em
_LINE_H = 1.3
_PAD_X = 1.2
_PAD_Y = 0.8
_NOTE_SCALE = 0.8  # saved-tensor notes use a smaller font
_H_GAP = 1.6  # horizontal gap between neighbouring boxes
_V_GAP = 3.2  # vertical gap between layers
_INCH_PER_EM = 0.13  # ~9.4 pt text when we pick the figure size ourselves


# --------------------------------------------------------------------------- helpers


def _pyplot() -> Any:
    import matplotlib.pyplot as plt

    return plt


def _new_or_given_ax(ax: Any, figsize: tuple[float, float]) -> Axes:
    """Return ``ax`` after checking it, or a fresh Axes on a new figure."""
    if ax is None:
        _fig, new_ax = _pyplot().subplots(figsize=figsize)
        return new_ax
    from matplotlib.axes import Axes as _Axes

    if not isinstance(ax, _Axes):
        raise TypeError(f"ax: expected a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _fmt(v: float) -> str:
    """Compact number for a label: 4 significant digits, floats keep a '.0'."""
    s = f"{v:.4g}"
    if s.lstrip("-").isdigit():
        s += ".0"  # "2.0" reads as a float value, as torch prints it
    return s


def _fmt_shape(shape: Sequence[int]) -> str:
    return "scalar" if len(shape) == 0 else "×".join(str(d) for d in shape)


def _to_float_list(values: Any, argname: str) -> list[float]:
    """Turn a sequence/array/1-D tensor of numbers into floats, or raise naming ``argname``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(
            f"{argname}: expected a sequence of numbers, got {type(values).__name__}"
        )
    if hasattr(values, "detach"):  # a torch tensor: flatten it
        values = values.detach().reshape(-1).tolist()
    out: list[float] = []
    for i, v in enumerate(values):
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise TypeError(
                f"{argname}: expected a sequence of numbers, item {i} is "
                f"{type(v).__name__} ({v!r})"
            ) from None
    return out


# --------------------------------------------------------------------------- loss_curve


def loss_curve(
    losses: Sequence[float] | Mapping[str, Sequence[float]],
    *,
    log: bool = False,
    ax: Axes | None = None,
) -> Axes:
    """Plot one loss curve, or several labelled ones, against the epoch (1, 2, ...).

    ``losses`` is a sequence of numbers (a list, array or 1-D tensor) or a
    mapping ``label -> sequence`` for comparing runs. ``log=True`` uses a
    logarithmic loss axis, which shows both slow progress and divergence.
    Non-finite values (a diverged run) leave a gap rather than an error.

    Example:
        >>> ax = loss_curve({"lr=0.01": [4.0, 2.0, 1.0], "lr=0.1": [4.0, 9.0, 30.0]}, log=True)
        >>> [line.get_label() for line in ax.get_lines()]
        ['lr=0.01', 'lr=0.1']
    """
    if isinstance(losses, Mapping):
        if not losses:
            raise ValueError("losses: expected at least one curve, got an empty mapping")
        curves = {str(k): _to_float_list(v, f"losses[{k!r}]") for k, v in losses.items()}
        show_legend = True
    else:
        curves = {"loss": _to_float_list(losses, "losses")}
        show_legend = False
    for label, ys in curves.items():
        if not ys:
            where = "losses" if not show_legend else f"losses[{label!r}]"
            raise ValueError(f"{where}: expected at least one value, got an empty sequence")
    ax = _new_or_given_ax(ax, (6, 4))
    for label, ys in curves.items():
        epochs = list(range(1, len(ys) + 1))
        ax.plot(epochs, ys, label=label, marker="o" if len(ys) <= 30 else None, markersize=3)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3, which="major")
    if show_legend:
        ax.legend()
    ax.backproplab = {"curves": curves, "log": bool(log)}
    return ax


# --------------------------------------------------------------------------- fit_plot


def fit_plot(
    x: Any,
    y: Any,
    lines: Mapping[str, tuple[float, float]],
    ax: Axes | None = None,
) -> Axes:
    """Scatter the data (x, y) and draw straight lines ``y = slope * x + intercept``.

    ``lines`` maps a label to ``(slope, intercept)``, e.g. the hand-trained fit
    and the least-squares answer. The y-range follows the data, so a wildly
    wrong (or diverged) line is visibly off the chart instead of squashing
    the data flat.

    Example:
        >>> ax = fit_plot([0, 1, 2], [1, 3, 5], {"true": (2.0, 1.0)})
        >>> [float(v) for v in ax.get_lines()[0].get_ydata()]
        [1.0, 5.0]
    """
    xs = _to_float_list(x, "x")
    ys = _to_float_list(y, "y")
    if len(xs) != len(ys):
        raise ValueError(f"x, y: expected the same number of points, got {len(xs)} and {len(ys)}")
    if not xs:
        raise ValueError("x: expected at least one point, got none")
    if not isinstance(lines, Mapping):
        raise TypeError(
            "lines: expected a mapping label -> (slope, intercept), "
            f"got {type(lines).__name__}"
        )
    parsed: dict[str, tuple[float, float]] = {}
    for label, pair in lines.items():
        try:
            slope, intercept = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise TypeError(
                f"lines[{label!r}]: expected (slope, intercept), got {pair!r}"
            ) from None
        parsed[str(label)] = (slope, intercept)

    ax = _new_or_given_ax(ax, (6, 4))
    ax.scatter(xs, ys, s=14, alpha=0.6, color="#7f7f7f", label="data")
    lo, hi = min(xs), max(xs)
    for label, (slope, intercept) in parsed.items():
        sign = "-" if intercept < 0 else "+"
        ax.plot(
            [lo, hi],
            [slope * lo + intercept, slope * hi + intercept],
            linewidth=2,
            label=f"{label}: y = {_fmt(slope)}x {sign} {_fmt(abs(intercept))}",
        )
    # Keep the data in view: limits from the points, not from the lines.
    y_lo, y_hi = min(ys), max(ys)
    pad = 0.1 * (y_hi - y_lo) or 1.0
    ax.set_ylim(y_lo - pad, y_hi + pad)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.backproplab = {"lines": parsed, "n_points": len(xs)}
    return ax


# --------------------------------------------------------------------------- grad_flow


def grad_flow(model: Any, ax: Axes | None = None, *, log: bool = True) -> Axes:
    """Bar chart of mean and max |grad| for each parameter of ``model`` (after backward).

    Parameters appear in registration order (input layer first), so shrinking
    bars from right to left are vanishing gradients. ``log=True`` (default)
    makes tiny gradients visible. Parameters whose ``.grad`` is None (no
    backward yet, or unused) get a grey "no grad" marker (frozen ones, with
    ``requires_grad=False``, are marked "frozen") instead of a bar, so they
    are not mistaken for zero gradients.

    Example:
        >>> import torch
        >>> net = torch.nn.Linear(3, 1)
        >>> net(torch.ones(2, 3)).sum().backward()
        >>> grad_flow(net).backproplab["names"]
        ['weight', 'bias']
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    named = list(model.named_parameters())
    if not named:
        raise ValueError("model: it has no parameters, so there is no gradient to show")
    names, means, maxes, missing, frozen = [], [], [], [], []
    for name, p in named:
        names.append(name)
        if p.grad is None:
            means.append(math.nan)
            maxes.append(math.nan)
            missing.append(name)
            if not p.requires_grad:
                frozen.append(name)
        else:
            g = p.grad.detach().abs().double()
            means.append(float(g.mean()))
            maxes.append(float(g.max()))

    ax = _new_or_given_ax(ax, (max(5.0, 0.8 * len(names) + 2), 4))
    idx = list(range(len(names)))
    width = 0.38
    ax.bar([i - width / 2 for i in idx], maxes, width, label="max |grad|", color="#1f77b4")
    ax.bar([i + width / 2 for i in idx], means, width, label="mean |grad|", color="#ff7f0e")
    if log:
        ax.set_yscale("log")
    # Markers for missing grads sit on the axis floor, whichever scale is used.
    finite = [v for v in maxes + means if v == v and v > 0]
    floor = (min(finite) / 3 if finite else 1e-3) if log else 0.0
    for i, name in enumerate(names):
        if name in missing:
            ax.scatter([i], [floor], marker="x", color="#7f7f7f", s=50, zorder=3)
            ax.annotate("frozen" if name in frozen else "no grad", (i, floor),
                        textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=8, color="#7f7f7f")
    ax.set_xticks(idx)
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_xlabel("parameter")
    ax.set_ylabel("|grad|" + (" (log scale)" if log else ""))
    ax.set_title("gradient flow per parameter")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    ax.backproplab = {
        "names": names,
        "mean": means,
        "max": maxes,
        "no_grad": missing,
        "frozen": frozen,
        "log": bool(log),
    }
    return ax


# --------------------------------------------------------------------------- jacobian_heatmap


def jacobian_heatmap(
    jac: Any,
    *,
    in_labels: Sequence[str] | None = None,
    out_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Show a Jacobian matrix (rows = outputs, columns = inputs) as a heatmap.

    ``jac`` is a 2-D tensor or array (a 1-D one is drawn as one row, e.g. the
    gradient of a scalar). Colours are centred on 0 (red positive, blue
    negative); with at most 64 cells the values are written in the cells.
    A Jacobian of a matrix-valued function has 4 dimensions: reshape it to
    (outputs, inputs) first.

    Example:
        >>> import torch
        >>> ax = jacobian_heatmap(torch.eye(3) * 2)
        >>> ax.get_xlabel(), ax.get_ylabel()
        ('input index', 'output index')
    """
    import numpy as np

    if hasattr(jac, "detach"):
        arr = jac.detach().cpu().double().numpy()
    else:
        try:
            arr = np.asarray(jac, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(
                f"jac: expected a 2-D tensor or array of numbers, got {type(jac).__name__}"
            ) from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        n_out = int(np.prod(arr.shape[: arr.ndim // 2]))
        n_in = int(np.prod(arr.shape[arr.ndim // 2 :]))
        raise ValueError(
            f"jac: expected a 2-D matrix (outputs × inputs), got shape {tuple(arr.shape)}; "
            f"flatten it first, e.g. jac.reshape({n_out}, {n_in})"
        )
    n_out, n_in = arr.shape
    if arr.size == 0:
        raise ValueError(f"jac: expected a non-empty matrix, got shape {tuple(arr.shape)}")
    for labels, n, argname in ((in_labels, n_in, "in_labels"), (out_labels, n_out, "out_labels")):
        if labels is not None and (isinstance(labels, str) or len(labels) != n):
            got = "a string" if isinstance(labels, str) else f"{len(labels)} labels"
            raise ValueError(f"{argname}: expected {n} labels, got {got}")

    ax = _new_or_given_ax(ax, (max(4.0, 0.5 * n_in + 2.5), max(3.0, 0.45 * n_out + 1.5)))
    finite = arr[np.isfinite(arr)]
    vmax = float(np.abs(finite).max()) if finite.size else 1.0
    vmax = vmax or 1.0  # an all-zero Jacobian still needs a colour range
    image = ax.imshow(arr, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
    ax.figure.colorbar(image, ax=ax, label="∂ output / ∂ input")
    if arr.size <= 64:
        for i in range(n_out):
            for j in range(n_in):
                v = arr[i, j]
                dark = abs(v) > 0.6 * vmax  # white text on strongly coloured cells
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=9,
                        color="white" if dark else "black")
    ax.set_xticks(range(n_in))
    ax.set_yticks(range(n_out))
    if in_labels is not None:
        ax.set_xticklabels([str(s) for s in in_labels], rotation=45 if n_in > 6 else 0)
        ax.set_xlabel("input")
    else:
        ax.set_xlabel("input index")
    if out_labels is not None:
        ax.set_yticklabels([str(s) for s in out_labels])
        ax.set_ylabel("output")
    else:
        ax.set_ylabel("output index")
    ax.set_title(f"Jacobian ({n_out} outputs × {n_in} inputs)")
    ax.backproplab = {"shape": (n_out, n_in), "annotated": bool(arr.size <= 64)}
    return ax


# --------------------------------------------------------------------------- tangent_plot


def tangent_plot(
    f: Callable[[torch.Tensor], torch.Tensor],
    x0: float,
    *,
    xlim: tuple[float, float] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Plot ``f`` and its tangent line at ``x0``; the slope comes from autograd.

    ``f`` takes a tensor and returns a tensor (``torch.sin``, ``lambda x: x**3``).
    The slope is ``d f / d x`` at ``x0``, computed in float64 by
    ``torch.autograd.grad``; the legend shows it. ``xlim`` defaults to
    ``(x0 - 3, x0 + 3)``.

    Example:
        >>> ax = tangent_plot(lambda x: x**3, 2.0)
        >>> ax.backproplab["slope"]
        12.0
    """
    import torch

    if not callable(f):
        raise TypeError(f"f: expected a callable taking a tensor, got {type(f).__name__}")
    if isinstance(x0, bool) or not isinstance(x0, (int, float)):
        if hasattr(x0, "numel") and x0.numel() == 1:
            x0 = float(x0)
        else:
            raise TypeError(f"x0: expected a number, got {type(x0).__name__}")
    x0 = float(x0)
    if xlim is None:
        xlim = (x0 - 3.0, x0 + 3.0)
    try:
        lo, hi = (float(v) for v in xlim)
    except (TypeError, ValueError):
        raise TypeError(f"xlim: expected (low, high), got {xlim!r}") from None
    if not lo < hi:
        raise ValueError(f"xlim: expected low < high, got {xlim!r}")

    x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
    y = f(x)
    if not isinstance(y, torch.Tensor) or y.numel() != 1:
        raise ValueError(
            "f: expected f(tensor scalar) to return a one-element tensor, "
            f"got {type(y).__name__}{'' if not isinstance(y, torch.Tensor) else tuple(y.shape)}"
        )
    if not y.requires_grad:
        raise ValueError("f: its output does not depend on the input through autograd")
    (slope_t,) = torch.autograd.grad(y.reshape(()), x, allow_unused=True)
    slope = 0.0 if slope_t is None else float(slope_t)
    y0 = float(y.detach())

    xs = torch.linspace(lo, hi, 300, dtype=torch.float64)
    with torch.no_grad():
        try:
            ys = f(xs)
            if not isinstance(ys, torch.Tensor) or ys.shape != xs.shape:
                raise ValueError
        except Exception:  # f may not broadcast: evaluate point by point instead
            ys = torch.stack([torch.as_tensor(f(xi)).reshape(()) for xi in xs])
    xs_l, ys_l = xs.tolist(), ys.double().tolist()

    ax = _new_or_given_ax(ax, (6, 4))
    ax.plot(xs_l, ys_l, linewidth=2, label="f(x)", color="#1f77b4")
    ax.plot([lo, hi], [y0 + slope * (lo - x0), y0 + slope * (hi - x0)], "--",
            color="#d62728", linewidth=1.5, label=f"tangent at x = {_fmt(x0)}: slope {_fmt(slope)}")
    ax.scatter([x0], [y0], color="#d62728", zorder=3, s=40)
    ax.annotate(f"({_fmt(x0)}, {_fmt(y0)})", (x0, y0), textcoords="offset points",
                xytext=(8, -14), fontsize=9)
    # The tangent can run far off; keep the y-range about the curve.
    finite = [v for v in ys_l if math.isfinite(v)] + [y0]
    y_lo, y_hi = min(finite), max(finite)
    pad = 0.15 * (y_hi - y_lo) or 1.0
    ax.set_ylim(y_lo - pad, y_hi + pad)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.backproplab = {"x0": x0, "y0": y0, "slope": slope}
    return ax


# --------------------------------------------------------------------------- draw_graph


def _leaf_label(
    node: Any, values: bool, grads: bool, final_grads: Mapping[str, Any] | None = None
) -> list[str]:
    """Box text of a leaf; ``final_grads`` (name -> TensorInfo) replaces ``leaf.grad``."""
    leaf = node.leaf
    if leaf is None:  # defensive: a leaf-kind node without its tensor info
        return [node.name]
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


def _layered_layout(
    n: int,
    edges: Sequence[tuple[int, int]],
    extents: Sequence[tuple[float, float]],
    heights: Sequence[float],
    *,
    sinks_last: bool = False,
) -> tuple[list[tuple[float, float]], dict[tuple[int, int], list[tuple[float, float]]]]:
    """Layered (Sugiyama-style) layout of a DAG whose edges point away from the roots.

    ``extents[i]`` is how far node i reaches (left, right) of its centre
    (boxes with a note beside them are lopsided). Returns the centre of each
    node and, for each edge spanning more than one layer, the bend points it
    should pass through. All loops are iterative and
    every tie is broken by node index, so the result is deterministic.
    """
    children: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in edges:
        children[u].append(v)
        indeg[v] += 1
    # 1. Topological order (Kahn), then longest-path layering from the roots.
    order, ready, k = [], [i for i in range(n) if indeg[i] == 0], 0
    remaining = indeg[:]
    ready.sort()
    while k < len(ready):
        u = ready[k]
        k += 1
        order.append(u)
        for v in children[u]:
            remaining[v] -= 1
            if remaining[v] == 0:
                ready.append(v)
    if len(order) != n:  # cannot happen for an autograd graph; fail loudly if it does
        raise ValueError("graph_or_tensor: the graph has a cycle")
    layer = [0] * n
    for u in order:
        for v in children[u]:
            layer[v] = max(layer[v], layer[u] + 1)
    if sinks_last and n:
        bottom = max(layer)
        for i in range(n):
            if not children[i]:
                layer[i] = bottom

    # 2. Split long edges with dummy nodes so ordering and routing see them.
    ext = list(extents)
    h = list(heights)
    lay = list(layer)
    seg_edges: list[tuple[int, int]] = []
    chains: dict[tuple[int, int], list[int]] = {}
    for u, v in dict.fromkeys(edges):  # unique pairs, first-seen order
        prev = u
        chain = []
        for _ in range(lay[u] + 1, lay[v]):
            d = len(ext)
            ext.append((0.3, 0.3))
            h.append(0.0)
            lay.append(lay[prev] + 1)
            seg_edges.append((prev, d))
            chain.append(d)
            prev = d
        seg_edges.append((prev, v))
        chains[(u, v)] = chain
    total = len(ext)
    n_layers = (max(lay) + 1) if total else 0
    up: list[list[int]] = [[] for _ in range(total)]
    down: list[list[int]] = [[] for _ in range(total)]
    for a, b in seg_edges:
        down[a].append(b)
        up[b].append(a)

    # 3. Order within layers: barycenter sweeps, keeping the order with fewest crossings.
    rank_of_topo = {u: i for i, u in enumerate(order)}
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    for i in sorted(range(total), key=lambda i: rank_of_topo.get(i, n + i)):
        layers[lay[i]].append(i)

    def crossings(ls: list[list[int]]) -> int:
        pos = {v: i for layer_nodes in ls for i, v in enumerate(layer_nodes)}
        count = 0
        for li in range(len(ls) - 1):
            segs = sorted((pos[a], pos[b]) for a in ls[li] for b in down[a])
            for i in range(len(segs)):
                for j in range(i + 1, len(segs)):
                    if segs[i][0] < segs[j][0] and segs[i][1] > segs[j][1]:
                        count += 1
        return count

    best = [list(x) for x in layers]
    best_c = crossings(best)
    for sweep in range(8):
        downward = sweep % 2 == 0
        idx_range = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
        for li in idx_range:
            ref = layers[li - 1] if downward else layers[li + 1]
            ref_pos = {v: i for i, v in enumerate(ref)}
            keyed = []
            for i, v in enumerate(layers[li]):
                nbrs = [ref_pos[x] for x in (up[v] if downward else down[v]) if x in ref_pos]
                bary = sum(nbrs) / len(nbrs) if nbrs else float(i)
                keyed.append((bary, i, v))
            layers[li] = [v for _, _, v in sorted(keyed)]
        c = crossings(layers)
        if c < best_c:
            best, best_c = [list(x) for x in layers], c
    layers = best

    # 4. x coordinates: pack, then pull each node towards its neighbours' mean
    #    while keeping order and spacing (average of a left and a right pass).
    x = [0.0] * total
    for ls in layers:
        cur = 0.0
        for i, v in enumerate(ls):
            if i:
                cur += ext[ls[i - 1]][1] + ext[v][0] + _H_GAP
            x[v] = cur
        shift = cur / 2
        for v in ls:
            x[v] -= shift

    def place(ls: list[int], want: list[float]) -> list[float]:
        m = len(ls)
        sep = [ext[ls[i - 1]][1] + ext[ls[i]][0] + _H_GAP for i in range(1, m)]
        left = list(want)
        for i in range(1, m):
            left[i] = max(left[i], left[i - 1] + sep[i - 1])
        right = list(want)
        for i in range(m - 2, -1, -1):
            right[i] = min(right[i], right[i + 1] - sep[i])
        return [(a + b) / 2 for a, b in zip(left, right, strict=True)]

    for sweep in range(6):
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

    # 5. y coordinates: layer 0 on top, each layer as tall as its tallest box.
    y = [0.0] * total
    top = 0.0
    for ls in layers:
        layer_h = max((h[v] for v in ls), default=0.0)
        for v in ls:
            y[v] = top - layer_h / 2
        top -= layer_h + _V_GAP
    centres = [(x[i], y[i]) for i in range(n)]
    bends = {e: [(x[d], y[d]) for d in chain] for e, chain in chains.items() if chain}
    return centres, bends


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
    _done: Iterable[int] = (),
    _edge_notes: Mapping[tuple[int, int], str] | None = None,
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
    id (as in ``Graph.to_text()``) is written above its top-left corner.
    ``values=True`` writes leaf values (or shapes), ``grads=True`` their
    ``.grad``. ``highlight`` is a node id drawn with a thick orange border.
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
        graph = describe(graph_or_tensor, names=names)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes: expected a positive int, got {max_nodes!r}")
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
                if node.kind == "leaf" else [node.name]
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
    extents = [(box_w[i] / 2, slot_w[i] - box_w[i] / 2) for i in range(n_kept)]
    box_c, bends = _layered_layout(n_kept, pairs, extents, box_h[:n_kept])
    if marker is not None:
        # The hidden part sits under everything; edges into it are drawn as
        # short dashed stubs rather than long lines criss-crossing the picture.
        left = min(c[0] - e[0] for c, e in zip(box_c, extents, strict=True))
        right = max(c[0] + e[1] for c, e in zip(box_c, extents, strict=True))
        bottom = min(c[1] - hh / 2 for c, hh in zip(box_c, box_h, strict=False))
        box_c.append(((left + right) / 2, bottom - _V_GAP - box_h[marker] / 2))
        extents.append((box_w[marker] / 2, box_w[marker] / 2))

    # ---- drawing
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch
    from matplotlib.path import Path

    # Extent of everything (+1 em above each box for its id label).
    xs = [box_c[i][0] + d for i in range(n_boxes) for d in (-extents[i][0], extents[i][1])]
    ys = [box_c[i][1] + d for i in range(n_boxes) for d in (-box_h[i] / 2, box_h[i] / 2 + 1)]
    margin = 1.0
    x_lo, x_hi = min(xs, default=0) - margin, max(xs, default=1) + margin
    y_lo, y_hi = min(ys, default=0) - margin, max(ys, default=1) + margin
    span_w, span_h = x_hi - x_lo, y_hi - y_lo
    # Legend: only the kinds present, so it explains exactly what is on screen.
    kinds_present = [k for k in _KIND_STYLE if any(graph.nodes[n].kind == k for n in kept)]
    handles: list[Any] = [
        Patch(facecolor=_KIND_STYLE[k][0], edgecolor=_KIND_STYLE[k][1], label=_KIND_STYLE[k][2])
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
            ax.text(cx - bw / 2, cy + bh / 2 + 0.15, str(nid), ha="left", va="bottom",
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
    ax.set_title("autograd graph — arrows: backward pass, output → leaves",
                 fontsize=legend_fs + 1)
    ax.backproplab = {
        "node_ids": node_ids,
        "labels": labels,
        "patches": patches,
        "highlight": highlight if highlight in patches else None,
        "hidden": hidden,
        "figsize": (fig_w, fig_h),  # what draw_graph would pick for a figure of its own
        "edges": [(kept[u], kept[v]) for u, v in pairs],
    }
    return ax
