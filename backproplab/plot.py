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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

# The graph drawing is big enough for a module of its own (its layout, with no
# matplotlib at all, is in layout); re-exported so `bl.plot.draw_graph` works.
from .drawing import draw_graph
from .figure import fmt_value, new_or_given_ax, to_float_list

# Lesson 09's pictures of tensor shapes, likewise: `bl.plot.vjp_shapes`.
from .shapes import index_routes, vjp_shapes

if TYPE_CHECKING:  # only for annotations; importing these is what we avoid at runtime
    import torch
    from matplotlib.axes import Axes

__all__ = [
    "dag_as_graph",
    "draw_dag",
    "draw_graph",
    "loss_curve",
    "fit_plot",
    "grad_flow",
    "jacobian_heatmap",
    "tangent_plot",
    "vjp_shapes",
    "index_routes",
]


# --------------------------------------------------------------------------- draw_dag


def draw_dag(
    labels: Sequence[str],
    edges: Sequence[tuple[int, int]],
    *,
    kinds: Sequence[str] | None = None,
    edge_labels: Mapping[tuple[int, int], str] | None = None,
    highlight: int | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Draw any graph of boxes and arrows in the style of `draw_graph`.

    For graphs that are not torch's: lesson 03's home-made engine, say.
    ``labels[i]`` is the text of box ``i`` (it may hold line breaks);
    ``edges`` are ``(src, dst)`` pairs, drawn as arrows from ``src`` down to
    ``dst``: as in `draw_graph`, from the output towards the inputs, the way
    gradients flow. ``kinds[i]`` colours box ``i`` ("op", "leaf" or
    "custom"; by default a box with no outgoing edge is a "leaf"), and
    ``edge_labels`` maps an edge ``(src, dst)`` to a short text written on it.

    Example:
        >>> ax = draw_dag(["z = x*y", "x = 2", "y = 3"], [(0, 1), (0, 2)],
        ...               edge_labels={(0, 1): "3", (0, 2): "2"})
        >>> sorted(ax.backproplab["edge_labels"].values())
        ['2', '3']
    """

    graph, notes = dag_as_graph(labels, edges, kinds, edge_labels)
    if highlight is not None and (
        isinstance(highlight, bool) or not isinstance(highlight, int)
        or not 0 <= highlight < len(labels)
    ):
        raise ValueError(
            f"highlight: expected a box index between 0 and {len(labels) - 1} or None, "
            f"got {highlight!r}"
        )
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a str or None, got {type(title).__name__}")
    return draw_graph(graph, highlight=highlight, ax=ax, max_nodes=max(60, len(labels)),
                      _edge_notes=notes, _title=title or "arrows: backward pass, output → inputs",
                      _kind_names={"leaf": "input", "op": "operation", "custom": "custom"})


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
        curves = {str(k): to_float_list(v, f"losses[{k!r}]") for k, v in losses.items()}
        if len(curves) != len(losses):
            raise ValueError(
                f"losses: expected labels that differ as text, got {list(losses)!r} "
                "(two of them print the same, so their curves could not be told apart)"
            )
        show_legend = True
    else:
        curves = {"loss": to_float_list(losses, "losses")}
        show_legend = False
    for label, ys in curves.items():
        if not ys:
            where = "losses" if not show_legend else f"losses[{label!r}]"
            raise ValueError(f"{where}: expected at least one value, got an empty sequence")
    ax = new_or_given_ax(ax, (6, 4))
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
    xs = to_float_list(x, "x")
    ys = to_float_list(y, "y")
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
            if isinstance(pair, (str, bytes)) or len(pair) != 2:
                raise TypeError
            if any(isinstance(v, (str, bytes, bool)) for v in pair):
                raise TypeError
            slope, intercept = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise TypeError(
                f"lines[{label!r}]: expected (slope, intercept), got {pair!r}"
            ) from None
        parsed[str(label)] = (slope, intercept)

    ax = new_or_given_ax(ax, (6, 4))
    ax.scatter(xs, ys, s=14, alpha=0.6, color="#7f7f7f", label="data")
    lo, hi = min(xs), max(xs)
    for label, (slope, intercept) in parsed.items():
        sign = "-" if intercept < 0 else "+"
        ax.plot(
            [lo, hi],
            [slope * lo + intercept, slope * hi + intercept],
            linewidth=2,
            label=f"{label}: y = {fmt_value(slope)}x {sign} {fmt_value(abs(intercept))}",
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

    Parameters appear in registration order, the input layer at the top, so
    bars that shrink towards the top are vanishing gradients. ``log=True`` (default)
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

    # Horizontal bars: the parameter names read left to right, first layer on top.
    ax = new_or_given_ax(ax, (6.5, max(3.0, 0.32 * len(names) + 1.2)))
    idx = list(range(len(names)))
    height = 0.38
    ax.barh([i - height / 2 for i in idx], maxes, height, label="max |grad|", color="#1f77b4")
    ax.barh([i + height / 2 for i in idx], means, height, label="mean |grad|", color="#ff7f0e")
    if log:
        ax.set_xscale("log")
    # Markers for missing grads sit on the axis floor, whichever scale is used.
    finite = [v for v in maxes + means if v == v and v > 0]
    floor = (min(finite) / 3 if finite else 1e-3) if log else 0.0
    for i, name in enumerate(names):
        if name in missing:
            ax.scatter([floor], [i], marker="x", color="#7f7f7f", s=50, zorder=3)
            ax.annotate("frozen" if name in frozen else "no grad", (floor, i),
                        textcoords="offset points", xytext=(8, 0),
                        va="center", fontsize=9, color="#7f7f7f")
    ax.set_yticks(idx)
    ax.set_yticklabels(names, fontsize=9)
    ax.invert_yaxis()  # registration order: the input layer first, at the top
    ax.set_ylabel("parameter")
    ax.set_xlabel("|grad|" + (" (log scale)" if log else ""))
    ax.set_title("gradient flow per parameter")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=9)
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

    if jac is None or isinstance(jac, (str, bytes, bool)):
        raise TypeError(
            f"jac: expected a 2-D tensor or array of numbers, got {type(jac).__name__}"
        )
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
        if labels is None:
            continue
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise TypeError(
                f"{argname}: expected a sequence of {n} labels, got {type(labels).__name__}"
            )
        if len(labels) != n:
            raise ValueError(f"{argname}: expected {n} labels, got {len(labels)} labels")

    ax = new_or_given_ax(ax, (max(4.0, 0.5 * n_in + 2.5), max(3.0, 0.45 * n_out + 1.5)))
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
    if not math.isfinite(x0):
        raise ValueError(f"x0: expected a finite number, got {x0}")
    if xlim is None:
        xlim = (x0 - 3.0, x0 + 3.0)
    try:
        lo, hi = (float(v) for v in xlim)
    except (TypeError, ValueError):
        raise TypeError(f"xlim: expected (low, high), got {xlim!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"xlim: expected finite numbers with low < high, got {xlim!r}")

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
    if not (math.isfinite(y0) and math.isfinite(slope)):
        raise ValueError(
            f"f: at x0 = {fmt_value(x0)} it gives f = {y0} with slope {slope}; a tangent needs a "
            "finite value and slope there (pick another x0)"
        )

    xs = torch.linspace(lo, hi, 300, dtype=torch.float64)
    with torch.no_grad():
        try:
            ys = f(xs)
            if not isinstance(ys, torch.Tensor) or ys.shape != xs.shape:
                raise ValueError
        except Exception:  # f may not broadcast: evaluate point by point instead
            ys = torch.stack([torch.as_tensor(f(xi)).reshape(()) for xi in xs])
    xs_l, ys_l = xs.tolist(), ys.double().tolist()

    ax = new_or_given_ax(ax, (6, 4))
    ax.plot(xs_l, ys_l, linewidth=2, label="f(x)", color="#1f77b4")
    ax.plot([lo, hi], [y0 + slope * (lo - x0), y0 + slope * (hi - x0)], "--",
            color="#d62728", linewidth=1.5,
            label=f"tangent at x = {fmt_value(x0)}: slope {fmt_value(slope)}")
    ax.scatter([x0], [y0], color="#d62728", zorder=3, s=40)
    ax.annotate(f"({fmt_value(x0)}, {fmt_value(y0)})", (x0, y0), textcoords="offset points",
                xytext=(8, -14), fontsize=9)
    # The tangent can run far off, and f may blow up near a pole: keep the
    # y-range about the finite part of the curve.
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
