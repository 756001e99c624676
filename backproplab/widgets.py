"""Interactive explorers (ipywidgets 8) built on :mod:`backproplab.trace` and :mod:`.plot`.

Each widget is a thin shell around plain functions that do the work, so the
logic runs (and is tested) without a browser:

- :func:`render_step` / :func:`step_text` draw and describe one step of a
  traced backward pass; :func:`backward_stepper` puts a slider on them.
- :func:`train_linear` fits ``y = w x + b`` by hand-written gradient descent;
  :func:`lr_explorer` puts learning-rate and epoch sliders on it.

Pictures are rendered to PNG and shown in an ``ipywidgets.Image``: that
updates in place in JupyterLab, and since the figures are built without
pyplot, the inline backend never shows a stray copy below the widget and
nothing is left open. The latest figure is kept on the widget as
``.figure`` for tests.

ipywidgets and matplotlib are imported on first use, not at ``import backproplab``.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .figure import fmt_shape, fmt_value, to_float_list

if TYPE_CHECKING:
    import torch
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .trace import Trace

__all__ = [
    "backward_stepper",
    "render_step",
    "step_text",
    "lr_explorer",
    "train_linear",
]

_PNG_DPI = 90
# The stepper draws at most this many nodes (a bigger picture is unreadable).
MAX_DRAWN = 200


def _picture_box(children: list, what: str) -> Any:
    """A VBox that also carries a still picture of itself.

    Besides the live widget, its display data hold the latest PNG and a line
    of text, so a saved notebook can show a picture where the widget was
    (a widget needs a running kernel; a picture does not).
    """
    import base64

    import ipywidgets as W

    class PictureBox(W.VBox):
        def _repr_mimebundle_(self, **kwargs: Any) -> dict:
            data = super()._repr_mimebundle_(**kwargs) or {}
            data["text/plain"] = f"{what} (run the cell to use it)"
            png = getattr(self, "image", None)
            if png is not None and png.value:
                data["image/png"] = base64.b64encode(png.value).decode("ascii")
            return data

    return PictureBox(children)


def _show_png(image: Any, fig: Figure) -> None:
    """Put the figure into the Image widget at its own pixel size (never stretched)."""
    png = _png(fig)
    image.value = png
    width = int.from_bytes(png[16:20], "big")  # a PNG's header stores its width here
    image.layout.width = f"{width}px"


def _figure(figsize: tuple[float, float]) -> Figure:
    # A bare Figure (not plt.figure): not tracked by pyplot, so no leak and no
    # duplicate inline display; garbage-collected with the widget.
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_PNG_DPI, bbox_inches="tight")
    return buf.getvalue()


# --------------------------------------------------------------------------- backward stepper


def _fmt_info(info: Any) -> str:
    """One-line description of a TensorInfo (or None: no gradient flows there)."""

    if info is None:
        return "None (no gradient)"
    vals = info.values
    if vals is not None and len(info.shape) == 0:
        return fmt_value(vals[0])
    if vals is not None and len(vals) <= 6:
        return f"[{', '.join(fmt_value(v) for v in vals)}]  (shape {fmt_shape(info.shape)})"
    return f"tensor of shape {fmt_shape(info.shape)}"


def _short_info(info: Any) -> str:
    """Shorter form for an arrow label: the value, up to 3 values, or the shape."""

    if info.values is not None and len(info.values) <= 3:
        inner = ", ".join(fmt_value(v) for v in info.values)
        return inner if len(info.shape) == 0 else f"[{inner}]"
    return fmt_shape(info.shape)


def _node_desc(graph: Any, node_id: int) -> str:
    node = graph.nodes[node_id]
    if node.kind == "leaf" and node.leaf is not None:
        return f"[{node_id}] {node.name} of leaf {node.leaf.name}"
    return f"[{node_id}] {node.name}"


def _check_step(trace: Any, i: Any) -> int:
    if isinstance(i, bool) or not isinstance(i, int):
        raise TypeError(f"step: expected an int, got {type(i).__name__}")
    n = len(trace.steps)
    if not 0 <= i < n:
        raise ValueError(f"step: expected 0 <= step < {n} (the number of steps), got {i}")
    return i


def _check_trace(trace: Any) -> None:
    from .trace import Trace

    if not isinstance(trace, Trace):
        raise TypeError(
            "trace: expected a backproplab.trace.Trace (from trace_backward), "
            f"got {type(trace).__name__}"
        )
    if not trace.steps:
        raise ValueError("trace: it recorded no backward steps, so there is nothing to step")


def step_text(trace: Trace, step: int) -> str:
    """Describe step ``step`` (0-based) of a traced backward pass in words.

    Says which node runs, the gradient arriving at it (w.r.t. its output) and
    the gradient it sends to each input; on the last step it also lists the
    final ``.grad`` of every leaf.

    Example:
        >>> import torch, backproplab as bl
        >>> x = torch.tensor(3.0, requires_grad=True)
        >>> print(step_text(bl.trace_backward(x * x, names={"x": x}), 0).splitlines()[0])
        step 0 (of 0-1): [0] MulBackward0
    """
    _check_trace(trace)
    i = _check_step(trace, step)
    s = trace.steps[i]
    graph = trace.graph
    # Steps count from 0, as the slider and Trace.to_text() do.
    lines = [f"step {i} (of 0-{len(trace.steps) - 1}): {_node_desc(graph, s.node_id)}"]
    arriving = ", ".join(_fmt_info(g) for g in s.grad_outputs) or "none recorded"
    lines.append(f"grad arriving (w.r.t. its output): {arriving}")
    node = graph.nodes[s.node_id]
    if node.kind == "leaf":
        name = node.leaf.name if node.leaf is not None else "the leaf"
        lines.append(f"it adds that grad into {name}.grad")
    else:
        by_position = {e.position: e.dst for e in graph.edges if e.src == s.node_id}
        if s.grad_inputs:
            lines.append("grads sent on (one per input):")
        for pos, g in enumerate(s.grad_inputs):
            dst = by_position.get(pos)
            target = _node_desc(graph, dst) if dst is not None else "(input needs no grad)"
            lines.append(f"  input {pos} -> {target}: {_fmt_info(g)}")
    if i == len(trace.steps) - 1 and trace.leaf_grads:
        lines.append("backward done; leaf grads:")
        lines.extend(f"  {name}.grad = {_fmt_info(info)}" for name, info in trace.leaf_grads)
    return "\n".join(lines)


def render_step(trace: Trace, step: int, ax: Axes | None = None) -> tuple[Axes, str]:
    """Draw the traced graph with step ``step``'s node highlighted; return (ax, text).

    Nodes backward has already run keep their colour, nodes it has not reached
    yet are drawn white, the current node has an orange border and the
    gradients it sends are written on its outgoing arrows. The text is
    :func:`step_text`.

    Example:
        >>> import torch, backproplab as bl
        >>> x = torch.tensor(3.0, requires_grad=True)
        >>> ax, text = render_step(bl.trace_backward(x * x, names={"x": x}), 0)
        >>> ax.backproplab["highlight"]
        0
    """
    from .plot import draw_graph

    text = step_text(trace, step)
    graph = trace.graph
    done = {s.node_id for s in trace.steps[: step + 1]}
    # A leaf the trace has no step for (a bare leaf output, say) counts as
    # reached once a node feeding it has run.
    stepped = {s.node_id for s in trace.steps}
    done |= {e.dst for e in graph.edges
             if e.src in done and e.dst not in stepped and graph.nodes[e.dst].kind == "leaf"}
    current = trace.steps[step]
    if current.node_id >= MAX_DRAWN:
        raise ValueError(
            f"step: its node [{current.node_id}] is past the first {MAX_DRAWN} nodes a drawing "
            "can show; for a graph this big, read Trace.to_text() instead"
        )
    notes = {(current.node_id, pos): _short_info(g)
             for pos, g in enumerate(current.grad_inputs) if g is not None}
    ax = draw_graph(graph, values=True, highlight=current.node_id, ax=ax, _done=done,
                    _edge_notes=notes, max_nodes=max(60, current.node_id + 1))
    return ax, text


def backward_stepper(trace: Trace) -> Any:
    """A slider that walks through a traced backward pass one node at a time.

    Returns an ``ipywidgets.VBox`` (CSS class ``bl-stepper``) holding a Play
    button, the step slider, the graph picture and the step's text. Useful
    attributes (tests drive it by setting ``w.slider.value``):

    - ``slider`` (IntSlider, 0-based step), ``play`` (Play, linked to it),
      ``image`` (Image with the PNG; ``output`` is the same widget),
      ``text`` (HTML with the step description);
    - ``state``: dict with ``step``, ``node_id``, ``name``, ``text``;
      ``current_text``: the same text; ``figure``: the matplotlib Figure.

    Example:
        >>> import torch, backproplab as bl
        >>> x = torch.tensor(3.0, requires_grad=True)
        >>> w = backward_stepper(bl.trace_backward(x * x, names={"x": x}))
        >>> w.slider.value = 1
        >>> w.state["name"]
        'AccumulateGrad'
    """
    import ipywidgets as W

    _check_trace(trace)
    n = len(trace.steps)
    slider = W.IntSlider(value=0, min=0, max=n - 1, step=1, description="step",
                         layout=W.Layout(width="420px"))
    play = W.Play(value=0, min=0, max=n - 1, step=1, interval=1200, description="play")
    W.jslink((play, "value"), (slider, "value"))  # browser-side link: no kernel round trip
    image = W.Image(format="png")
    text = W.HTML()
    box = _picture_box([W.HBox([play, slider]), image, text], "backward stepper")
    box.add_class("bl-stepper")
    fig = _figure((8, 5))
    box.slider, box.play, box.image, box.output, box.text, box.figure = (
        slider, play, image, image, text, fig)

    def show(i: int) -> None:
        fig.clear()
        ax = fig.add_subplot()
        ax, body = render_step(trace, i, ax)
        step = trace.steps[i]
        box.state = {"step": i, "node_id": step.node_id, "name": step.name, "text": body}
        box.current_text = body
        _show_png(image, fig)
        text.value = f"<pre class='bl-step-text'>{html.escape(body)}</pre>"

    # Size the figure to the graph's shape once, so boxes stay legible.
    probe = fig.add_subplot()
    render_step(trace, 0, probe)
    want_w, want_h = probe.backproplab["figsize"]
    fig.set_size_inches(want_w, want_h)
    show(0)
    slider.observe(lambda change: show(change["new"]), names="value")
    return box


# --------------------------------------------------------------------------- learning-rate explorer


def _as_1d_float(t: Any, argname: str) -> torch.Tensor:
    import torch

    # A tensor keeps its float dtype; anything else goes through the one
    # converter the figures share, which names the bad item.
    out = t.detach() if isinstance(t, torch.Tensor) else torch.tensor(to_float_list(t, argname))
    if not out.is_floating_point():
        out = out.float()
    # Flatten: an (n, 1) x against an (n,) y would silently broadcast to (n, n).
    return out.reshape(-1)


def train_linear(
    x: Any, y: Any, lr: float, epochs: int
) -> tuple[list[float], float, float]:
    """Fit ``y ≈ w * x + b`` by plain gradient descent; return (losses, w, b).

    The loop is the one lesson 4 writes by hand: start from ``w = b = 0``;
    each epoch compute the mean squared error on all points, call
    ``backward()``, step ``w -= lr * w.grad`` and ``b -= lr * b.grad`` under
    ``torch.no_grad()``, then zero both grads. ``losses[k]`` is the loss at
    the start of epoch ``k + 1`` (before its update), so ``losses[0]`` is the
    loss of the zero model. Deterministic; a too-large ``lr`` makes the
    losses grow (to inf/nan) instead of raising.

    Example:
        >>> losses, w, b = train_linear([0.0, 1.0, 2.0], [1.0, 3.0, 5.0], lr=0.1, epochs=500)
        >>> round(w, 2), round(b, 2)
        (2.0, 1.0)
    """
    import torch

    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr: expected a positive number, got {lr!r}")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: expected a positive int, got {epochs!r}")
    xs = _as_1d_float(x, "x")
    ys = _as_1d_float(y, "y")
    if xs.numel() != ys.numel():
        raise ValueError(
            f"x, y: expected the same number of points, got {xs.numel()} and {ys.numel()}"
        )
    if xs.numel() == 0:
        raise ValueError("x: expected at least one point, got none")
    ys = ys.to(xs.dtype)
    w = torch.zeros((), dtype=xs.dtype, requires_grad=True)
    b = torch.zeros((), dtype=xs.dtype, requires_grad=True)
    losses: list[float] = []
    for _ in range(epochs):
        loss = ((w * xs + b - ys) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
        losses.append(loss.item())
    return losses, w.item(), b.item()


def _verdict(losses: Sequence[float], w: float, b: float) -> tuple[bool, str]:
    """(diverged?, one-line message) for a run of train_linear."""
    bad = next((k for k, v in enumerate(losses) if not math.isfinite(v)), None)
    if bad is not None:
        peak = max((v for v in losses if math.isfinite(v)), default=math.inf)
        return True, (f"diverged: loss grew to {peak:.1e}, then overflowed to "
                      f"{losses[bad]} at epoch {bad + 1}")
    if len(losses) > 1 and losses[-1] > losses[0]:
        return True, f"diverged: loss grew to {losses[-1]:.1e}"
    return False, (f"loss {losses[0]:.4g} -> {losses[-1]:.4g}; "
                   f"fit y = {w:.3f} x {'-' if b < 0 else '+'} {abs(b):.3f}")


def lr_explorer(x: Any, y: Any, *, lr: float = 0.01, epochs: int = 50) -> Any:
    """Sliders for learning rate and epochs that retrain and redraw a linear fit.

    Returns an ``ipywidgets.VBox`` (CSS class ``bl-lr-explorer``): a
    FloatLogSlider ``lr_slider`` (1e-4 ... 1), an IntSlider ``epochs_slider``,
    a message (``message``, HTML; starts with "diverged:" when the loss
    grows) and a picture (``image``): loss curve on a log scale next to the
    data with the fitted line. ``result`` holds the latest run as a dict with
    ``lr``, ``epochs``, ``losses``, ``w``, ``b``, ``diverged``, ``message``;
    ``figure`` is the matplotlib Figure.

    Example:
        >>> import backproplab as bl
        >>> x, y = bl.data.linear_data()
        >>> w = lr_explorer(x, y, lr=0.01, epochs=50)
        >>> w.lr_slider.value = 0.1
        >>> w.result["diverged"]
        True
    """
    import ipywidgets as W

    from .plot import fit_plot, loss_curve

    # Validate once up front so a bad argument fails here, not inside a callback.
    train_linear(x, y, lr, epochs)
    xs, ys = _as_1d_float(x, "x"), _as_1d_float(y, "y")
    lr_slider = W.FloatLogSlider(
        value=lr, base=10, min=min(-4.0, math.log10(lr)), max=max(0.0, math.log10(lr)),
        step=0.05, description="learning rate", readout_format=".2g",
        style={"description_width": "initial"}, layout=W.Layout(width="420px"))
    epochs_slider = W.IntSlider(
        value=epochs, min=1, max=max(500, epochs), step=1, description="epochs",
        layout=W.Layout(width="360px"))
    message = W.HTML()
    image = W.Image(format="png")
    box = _picture_box([W.HBox([lr_slider, epochs_slider]), message, image],
                       "learning-rate explorer")
    box.add_class("bl-lr-explorer")
    fig = _figure((10, 3.8))
    box.lr_slider, box.epochs_slider, box.message, box.image, box.figure = (
        lr_slider, epochs_slider, message, image, fig)

    def update(_change: Any = None) -> None:
        cur_lr, cur_epochs = float(lr_slider.value), int(epochs_slider.value)
        losses, w, b = train_linear(xs, ys, cur_lr, cur_epochs)
        diverged, msg = _verdict(losses, w, b)
        box.result = {"lr": cur_lr, "epochs": cur_epochs, "losses": losses, "w": w, "b": b,
                      "diverged": diverged, "message": msg}
        fig.clear()
        ax_loss, ax_fit = fig.subplots(1, 2)
        loss_curve(losses, log=True, ax=ax_loss)
        if diverged:
            ax_loss.set_title(f"loss, lr = {cur_lr:.2g}: diverged", color="#c62828")
        else:
            ax_loss.set_title(f"loss, lr = {cur_lr:.2g}")
        if math.isfinite(w) and math.isfinite(b):
            fit_plot(xs, ys, {"fit": (w, b)}, ax=ax_fit)
            ax_fit.set_title("data and fitted line")
        else:  # no line to draw: w and b overflowed
            fit_plot(xs, ys, {}, ax=ax_fit)
            ax_fit.set_title("data (the fit diverged: no line)", color="#c62828")
        fig.tight_layout()
        _show_png(image, fig)
        colour = "#c62828" if diverged else "#2e7d32"
        message.value = f"<b style='color:{colour}'>{html.escape(msg)}</b>"

    update()
    lr_slider.observe(update, names="value")
    epochs_slider.observe(update, names="value")
    return box
