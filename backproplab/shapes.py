"""Pictures of tensor shapes for lesson 09: what a backward gets and gives back.

`vjp_shapes` draws an operation's input, output and the gradients flowing
back as grids of cells, shape for shape; `index_routes` draws where the rows
of an indexing operation's gradient land, and which of them add up. Both are
found as ``bl.plot.vjp_shapes`` and ``bl.plot.index_routes`` too.

matplotlib is imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .figure import new_or_given_ax

if TYPE_CHECKING:  # only for annotations
    from matplotlib.axes import Axes

__all__ = ["index_routes", "vjp_shapes"]


# --------------------------------------------------------------------------- vjp_shapes
# Lesson 09 (the rules for a tensor operation's backward): shapes in, shapes out.

_FORWARD_FILL, _OUTPUT_FILL, _GRAD_FILL = "#cfe2f3", "#fde3c8", "#f4cccc"


def _check_shape(shape: Any, argname: str) -> tuple[int, ...]:
    """A shape of at most 3 dimensions as a tuple of positive ints, or a clear error."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"{argname}: expected a shape such as (4, 3), got {type(shape).__name__}")
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape):
        raise ValueError(f"{argname}: expected sizes >= 1, got {tuple(shape)!r}")
    if len(shape) > 3:
        raise ValueError(f"{argname}: at most 3 dimensions can be drawn, got {tuple(shape)!r}")
    return tuple(shape)


def _grid_size(shape: tuple[int, ...], cell: float) -> tuple[float, float]:
    """Width and height of a tensor drawn as a grid of cells (stacked copies for 3-D)."""
    rows, cols = (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else shape[-2:]
    depth = shape[0] if len(shape) == 3 else 1
    shift = 0.35 * cell * (min(depth, 4) - 1)
    return cols * cell + shift, rows * cell + shift


def _draw_grid(ax: Axes, x: float, y: float, shape: tuple[int, ...], cell: float,
               fill: str) -> None:
    """A tensor as a grid of cells with its lower left corner at (x, y); a 3-D tensor as a
    stack of grids (at most 4 drawn, the front one last)."""
    from matplotlib.patches import Rectangle

    rows, cols = (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else shape[-2:]
    depth = min(shape[0], 4) if len(shape) == 3 else 1
    for k in reversed(range(depth)):
        dx = dy = 0.35 * cell * k
        for i in range(rows):
            for j in range(cols):
                ax.add_patch(Rectangle((x + dx + j * cell, y + dy + (rows - 1 - i) * cell),
                                       cell, cell, facecolor=fill, edgecolor="#555555",
                                       linewidth=0.8))


def vjp_shapes(
    inputs: Mapping[str, Sequence[int]],
    output: tuple[str, Sequence[int]],
    grads: Mapping[str, str],
    *,
    op: str = "",
    ax: Axes | None = None,
) -> Axes:
    """Draw an operation's shapes in and out, forward above and backward below.

    ``inputs`` maps each input's name to its shape (at most 3 dimensions), ``output`` is
    ``(name, shape)``, and ``grads`` maps each input's name to the formula of its gradient.
    Forward: the inputs and, after an arrow labelled ``op``, the output. Backward: the
    output's gradient ``G`` (shaped like the output) and, under each input, its gradient,
    drawn with the input's own shape: the first test of any hand-derived VJP.

    Example:
        >>> ax = vjp_shapes({"X": (4, 3), "W": (3, 5)}, ("Y", (4, 5)),
        ...                 {"X": "G @ W.T", "W": "X.T @ G"}, op="X @ W")
        >>> ax.backproplab["backward"]
        {'G': (4, 5), 'dX': (4, 3), 'dW': (3, 5)}
    """
    if not isinstance(inputs, Mapping) or not inputs:
        raise TypeError(f"inputs: expected a dict of name -> shape, got {type(inputs).__name__}")
    shapes = {str(k): _check_shape(v, f"inputs[{k!r}]") for k, v in inputs.items()}
    if not (isinstance(output, tuple) and len(output) == 2):
        raise TypeError(f"output: expected (name, shape), got {type(output).__name__}")
    out_name, out_shape = str(output[0]), _check_shape(output[1], "output")
    if not isinstance(grads, Mapping) or set(map(str, grads)) != set(shapes):
        raise ValueError(f"grads: expected one formula per input ({', '.join(shapes)}), got "
                         f"{sorted(map(str, grads)) if isinstance(grads, Mapping) else grads!r}")
    if not isinstance(op, str):
        raise TypeError(f"op: expected a str, got {type(op).__name__}")

    biggest = max(max(s, default=1) for s in [*shapes.values(), out_shape])
    cell = min(0.5, 3.0 / biggest)
    sizes = {name: _grid_size(s, cell) for name, s in shapes.items()}
    out_w, out_h = _grid_size(out_shape, cell)
    gap, arrow, char = 0.6, 1.6, 0.1  # char: about one monospace character, in cells' units
    xs, x = {}, 0.0
    for name, (w, _h) in sizes.items():
        slot = max(w, char * (len(grads[name]) + 2))  # room for the formula under the grid
        xs[name] = x + (slot - w) / 2
        x += slot + gap
    out_x = x - gap + arrow
    lane = max([h for _w, h in sizes.values()] + [out_h]) + 1.1
    top, bottom = lane, 0.0
    width = out_x + out_w

    ax = new_or_given_ax(ax, (max(5.0, 1.1 * width + 1.5), max(3.2, 0.95 * 2 * lane + 0.6)))

    def label(x0: float, y0: float, w: float, h: float, text: str, below: str = "") -> None:
        ax.text(x0 + w / 2, y0 + h + 0.12, text, ha="center", va="bottom", fontsize=10)
        if below:
            ax.text(x0 + w / 2, y0 - 0.12, below, ha="center", va="top", fontsize=9,
                    family="monospace", color="#990000")

    def shape_text(shape: tuple[int, ...]) -> str:
        return str(shape) if len(shape) != 1 else f"({shape[0]},)"

    for name, shape in shapes.items():
        w, h = sizes[name]
        _draw_grid(ax, xs[name], top, shape, cell, _FORWARD_FILL)
        label(xs[name], top, w, h, f"{name} {shape_text(shape)}")
        _draw_grid(ax, xs[name], bottom, shape, cell, _GRAD_FILL)
        label(xs[name], bottom, w, h, f"d{name} {shape_text(shape)}", f"= {grads[name]}")
    _draw_grid(ax, out_x, top, out_shape, cell, _OUTPUT_FILL)
    label(out_x, top, out_w, out_h, f"{out_name} {shape_text(out_shape)}")
    _draw_grid(ax, out_x, bottom, out_shape, cell, _GRAD_FILL)
    label(out_x, bottom, out_w, out_h, f"G = dL/d{out_name} {shape_text(out_shape)}")

    style = {"arrowstyle": "-|>", "color": "#333333", "linewidth": 1.2}
    last = list(shapes)[-1]
    start = xs[last] + sizes[last][0] + 0.15
    ax.annotate("", xy=(out_x - 0.15, top + out_h / 2), xytext=(start, top + out_h / 2),
                arrowprops=style)
    if op:
        ax.text((start + out_x) / 2, top + out_h / 2 + 0.12, op, ha="center", va="bottom",
                fontsize=9, family="monospace")
    ax.annotate("", xy=(start, bottom + out_h / 2), xytext=(out_x - 0.15, bottom + out_h / 2),
                arrowprops={**style, "color": "#990000"})
    ax.text(-0.5, top + out_h / 2, "forward", ha="right", va="center", fontsize=10,
            style="italic")
    ax.text(-0.5, bottom + out_h / 2, "backward", ha="right", va="center", fontsize=10,
            style="italic", color="#990000")
    ax.set_xlim(-2.2, width + 0.4)
    ax.set_ylim(-0.9, top + lane - 0.4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.backproplab = {
        "forward": {**shapes, out_name: out_shape},
        "backward": {"G": out_shape, **{f"d{n}": s for n, s in shapes.items()}},
    }
    return ax


# --------------------------------------------------------------------------- index_routes


def index_routes(index: Sequence[int], n_rows: int, *, ax: Axes | None = None) -> Axes:
    """Draw ``out = x[index]`` (rows of x copied to rows of out) and its backward.

    Left: the forward pass, a line from row ``index[i]`` of ``x`` to row ``i`` of ``out``.
    Right: the backward pass, row ``i`` of ``G`` (the gradient of ``out``) sent back to row
    ``index[i]`` of ``dx``. A row of x read k times receives k gradients, and they add up:
    the row's label says which. ``ax.backproplab["arrivals"]`` counts them per row.

    Example:
        >>> ax = index_routes([0, 3, 0, 4], 5)
        >>> ax.backproplab["arrivals"]
        [2, 0, 0, 1, 1]
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, int) or n_rows < 1:
        raise ValueError(f"n_rows: expected a positive int, got {n_rows!r}")
    if hasattr(index, "tolist"):
        index = index.tolist()
    if isinstance(index, (str, bytes)) or not isinstance(index, Sequence) or not index:
        raise TypeError(f"index: expected a non-empty list of row numbers, got "
                        f"{type(index).__name__}")
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_rows for i in index):
        raise ValueError(f"index: expected row numbers between 0 and {n_rows - 1}, got {index!r}")
    from matplotlib.patches import Rectangle

    n_out = len(index)
    height = max(n_rows, n_out)
    ax = new_or_given_ax(ax, (9.0, 0.45 * height + 1.6))

    def column(x: float, n: int, name: str, fill: str, notes: Sequence[str] = ()) -> None:
        for r in range(n):
            y = height - 1 - r
            ax.add_patch(Rectangle((x, y + 0.1), 1.0, 0.8, facecolor=fill, edgecolor="#555555"))
            ax.text(x + 0.5, y + 0.5, f"{name}[{r}]", ha="center", va="center", fontsize=9)
            if r < len(notes) and notes[r]:
                ax.text(x + 1.15, y + 0.5, notes[r], ha="left", va="center", fontsize=9,
                        color="#990000")

    def link(x0: float, r0: int, x1: float, r1: int, colour: str) -> None:
        ax.annotate("", xy=(x1, height - 1 - r1 + 0.5), xytext=(x0, height - 1 - r0 + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 1.1})

    arrivals = [index.count(r) for r in range(n_rows)]
    sums = [" + ".join(f"G[{i}]" for i, r in enumerate(index) if r == row) or "0"
            for row in range(n_rows)]
    column(0.0, n_rows, "x", _FORWARD_FILL)
    column(3.0, n_out, "out", _OUTPUT_FILL)
    for i, r in enumerate(index):
        link(1.0, r, 3.0, i, "#333333")
    column(5.5, n_out, "G", _GRAD_FILL)
    column(8.5, n_rows, "dx", _GRAD_FILL, [f"= {s}" for s in sums])
    for i, r in enumerate(index):
        link(6.5, i, 8.5, r, "#990000")
    ax.text(2.0, height + 0.3, f"forward: out = x[{index}]", ha="center", fontsize=10)
    ax.text(7.5, height + 0.3, "backward: dx[index[i]] += G[i]", ha="center", fontsize=10,
            color="#990000")
    ax.set_xlim(-0.3, 12.0)
    ax.set_ylim(-0.3, height + 0.9)
    ax.axis("off")
    ax.backproplab = {"index": list(index), "arrivals": arrivals, "sums": sums}
    return ax

