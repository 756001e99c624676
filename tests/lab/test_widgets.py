"""Tests for backproplab.widgets, driven headlessly by setting slider values."""

import matplotlib

matplotlib.use("Agg")  # off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

import backproplab as bl  # noqa: E402
from backproplab import widgets  # noqa: E402
from backproplab.figure import fmt_value  # noqa: E402
from backproplab.trace import trace_backward  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _chain_rule_trace():
    x, w, b = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))
    return trace_backward((w * x + b) ** 2, names={"x": x, "w": w, "b": b})


def _line_data(n=40, noise=0.0):
    g = torch.Generator().manual_seed(1)
    x = torch.linspace(0, 10, n).reshape(-1, 1)
    y = 2 * x + 1 + noise * torch.randn(x.shape, generator=g)
    return x, y


# --------------------------------------------------------------------------- train_linear


def test_train_linear_matches_the_hand_written_loop():
    x, y = _line_data(noise=1.0)
    losses, w_fit, b_fit = widgets.train_linear(x, y, 0.01, 5)
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    expected = []
    for _ in range(5):
        loss = ((w * x.reshape(-1) + b - y.reshape(-1)) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.01 * w.grad
            b -= 0.01 * b.grad
        w.grad.zero_()
        b.grad.zero_()
        expected.append(loss.item())
    assert losses == expected
    assert (w_fit, b_fit) == (w.item(), b.item())
    assert losses[0] == pytest.approx(float((y**2).mean()))  # epoch 1 starts from w = b = 0
    assert widgets.train_linear(x, y, 0.01, 5) == (losses, w_fit, b_fit)  # deterministic


def test_train_linear_converges_and_diverges():
    x, y = _line_data()
    losses, w, b = widgets.train_linear(x, y, 0.02, 3000)
    assert (w, b) == (pytest.approx(2.0, abs=1e-2), pytest.approx(1.0, abs=5e-2))
    assert losses[-1] < losses[0]
    big, *_ = widgets.train_linear(x, y, 0.5, 30)
    assert not big[-1] < big[0]  # grew, possibly to inf/nan


def test_train_linear_bad_input():
    x, y = _line_data()
    with pytest.raises(ValueError, match="lr: expected a positive number"):
        widgets.train_linear(x, y, -0.1, 5)
    with pytest.raises(ValueError, match="epochs: expected a positive int"):
        widgets.train_linear(x, y, 0.1, 2.5)
    with pytest.raises(ValueError, match="x, y: expected the same number of points"):
        widgets.train_linear(x, y[:-1], 0.1, 5)
    with pytest.raises(TypeError, match="x: expected a tensor or sequence"):
        widgets.train_linear(object(), y, 0.1, 5)


# --------------------------------------------------------------------------- stepper logic


def test_step_text_names_node_and_grads():
    trace = _chain_rule_trace()
    first = widgets.step_text(trace, 0)
    last = len(trace.steps) - 1
    assert first.splitlines()[0] == f"step 0 (of 0-{last}): [0] PowBackward0"
    assert "grad arriving (w.r.t. its output): 1.0" in first
    assert "input 0 -> [1] AddBackward0: 10.0" in first
    last = widgets.step_text(trace, len(trace.steps) - 1)
    assert "backward done; leaf grads:" in last
    assert "x.grad = 20.0" in last and "w.grad = 10.0" in last and "b.grad = 10.0" in last
    leaf_steps = [i for i, s in enumerate(trace.steps) if s.name == "AccumulateGrad"]
    assert any("into b.grad" in widgets.step_text(trace, i) for i in leaf_steps)


def test_render_step_highlights_current_node():
    trace = _chain_rule_trace()
    fig, ax = plt.subplots()
    for i, step in enumerate(trace.steps):
        ax.clear()
        ax, text = widgets.render_step(trace, i, ax)
        assert ax.backproplab["highlight"] == step.node_id
        assert to_hex(ax.backproplab["patches"][step.node_id].get_edgecolor()) == "#ff7f0e"
        assert text == widgets.step_text(trace, i)
    # on the first step nothing below the root has run yet: drawn white
    ax.clear()
    ax, _ = widgets.render_step(trace, 0, ax)
    not_run = [n for n in ax.backproplab["node_ids"] if n != trace.steps[0].node_id]
    assert all(to_hex(ax.backproplab["patches"][n].get_facecolor()) == "#ffffff"
               for n in not_run)
    # the gradients the current node sends are written on its arrows
    assert "10.0" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_stepper_inputs_are_checked():
    trace = _chain_rule_trace()
    with pytest.raises(TypeError, match="trace: expected a backproplab.trace.Trace"):
        widgets.backward_stepper("trace")
    with pytest.raises(ValueError, match="step: expected 0 <= step < 6"):
        widgets.step_text(trace, 6)
    with pytest.raises(TypeError, match="step: expected an int"):
        widgets.step_text(trace, 1.0)


# ----------------------------------------------------------------- backward_stepper widget


def test_backward_stepper_follows_the_slider():
    trace = _chain_rule_trace()
    figs_before = plt.get_fignums()
    w = widgets.backward_stepper(trace)
    assert "bl-stepper" in w._dom_classes
    assert (w.slider.min, w.slider.max, w.slider.value) == (0, len(trace.steps) - 1, 0)
    assert w.state["node_id"] == trace.steps[0].node_id
    images, texts = {bytes(w.image.value)}, {w.text.value}
    assert bytes(w.image.value).startswith(PNG) and w.output is w.image
    for i in (3, 1, len(trace.steps) - 1):
        w.slider.value = i
        step = trace.steps[i]
        assert w.state == {"step": i, "node_id": step.node_id, "name": step.name,
                           "text": widgets.step_text(trace, i)}
        assert w.current_text == w.state["text"]
        assert w.figure.axes[0].backproplab["highlight"] == step.node_id
        # The slider's number and the text's agree (both count from 0, like Trace.to_text).
        assert w.text.value.split(">", 1)[1].startswith(f"step {i} (of 0-")
        images.add(bytes(w.image.value))
        texts.add(w.text.value)
    assert len(images) == 4 and len(texts) == 4  # every step redrew picture and text
    assert plt.get_fignums() == figs_before  # no pyplot figures left behind
    assert len(w.figure.axes) == 1  # old drawings are cleared, not stacked


# --------------------------------------------------------------------------- lr_explorer widget


def test_lr_explorer_retrains_on_slider_changes():
    x, y = _line_data(noise=1.0)
    figs_before = plt.get_fignums()
    w = widgets.lr_explorer(x, y, lr=0.01, epochs=50)
    assert "bl-lr-explorer" in w._dom_classes
    assert w.result["lr"] == pytest.approx(0.01) and w.result["epochs"] == 50
    assert (w.result["losses"], w.result["w"], w.result["b"]) == widgets.train_linear(
        x, y, w.lr_slider.value, 50)
    assert not w.result["diverged"]
    first_image = bytes(w.image.value)
    loss_ax, fit_ax = w.figure.axes
    assert loss_ax.get_yscale() == "log"
    assert len(loss_ax.get_lines()[0].get_ydata()) == 50

    w.lr_slider.value = 0.1
    assert w.result["diverged"]
    assert w.result["message"].startswith("diverged: loss grew to")
    assert "diverged" in w.message.value
    assert bytes(w.image.value) != first_image
    assert "diverged" in w.figure.axes[0].get_title()

    w.lr_slider.value = 0.01
    w.epochs_slider.value = 400
    assert not w.result["diverged"]
    assert len(w.result["losses"]) == 400
    assert w.result["w"] == pytest.approx(2.0, abs=0.15)
    fit_line = w.figure.axes[1].get_lines()[0]
    assert fit_line.get_label().startswith(f"fit: y = {fmt_value(w.result['w'])}x")
    assert plt.get_fignums() == figs_before


def test_lr_explorer_bad_input():
    x, y = _line_data()
    with pytest.raises(ValueError, match="lr: expected a positive number"):
        widgets.lr_explorer(x, y, lr=0)
    with pytest.raises(ValueError, match="x, y: expected the same number"):
        widgets.lr_explorer(x, y[:3])


def test_widgets_carry_a_still_picture_for_saved_notebooks():
    import base64

    x = torch.tensor(3.0, requires_grad=True)
    stepper = widgets.backward_stepper(bl.trace_backward(x * x, names={"x": x}))
    explorer = widgets.lr_explorer(*bl.data.linear_data(), lr=0.01, epochs=5)
    for w, what in ((stepper, "backward stepper"), (explorer, "learning-rate explorer")):
        bundle = w._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert bundle["text/plain"].startswith(what)
        assert base64.b64decode(bundle["image/png"]) == w.image.value


def test_stepper_picture_is_shown_at_its_own_size():
    import io

    from PIL import Image

    x = torch.tensor(3.0, requires_grad=True)
    w = widgets.backward_stepper(bl.trace_backward((x * x).sin(), names={"x": x}))
    width = Image.open(io.BytesIO(w.image.value)).size[0]
    assert w.image.layout.width == f"{width}px"
    w.slider.value = 1
    assert Image.open(io.BytesIO(w.image.value)).size[0] == int(w.image.layout.width[:-2])


def test_lr_explorer_never_writes_nan_in_its_legend():
    w = widgets.lr_explorer(*bl.data.linear_data(), lr=0.01, epochs=50)
    w.lr_slider.value = 1.0
    assert w.result["diverged"]
    legends = [ax.get_legend() for ax in w.figure.axes if ax.get_legend() is not None]
    texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    texts += [ax.get_title() for ax in w.figure.axes]
    assert not any("nan" in t for t in texts), texts
