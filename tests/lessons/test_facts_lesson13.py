"""Lesson 13's numbers, read from the stored outputs and, where cheap, measured again: the
unfolded patches, conv2d as a matrix product, unfold's backward as fold and the patch counts
it gives, the turned kernel a pixel meets, max-pooling's saved indices and its first maximum,
dropout's noise and its eval mode, the LSTM step against nn.LSTMCell and the learner's
backpropagation through time against nn.LSTM; and the sizes the checks draw, as the lesson
states them.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from stored import flat_text as _text
from stored import printed

from backproplab.course.exercises import lesson13
from backproplab.course.exercises.lesson13 import layers

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "13-classic-layers-by-hand.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def _prose(cells, phrase: str) -> str:
    """The one markdown cell that states ``phrase``, its lines joined."""
    found = [" ".join(c.source.split()) for c in cells.values() if c.cell_type == "markdown"]
    found = [text for text in found if phrase in text]
    assert len(found) == 1, f"{len(found)} markdown cells say {phrase!r}"
    return found[0]


def _after(cells, grade_id: str, n: int) -> list[nbformat.NotebookNode]:
    """The cell graded as ``grade_id`` and the n - 1 cells after it."""
    ordered = list(cells.values())
    at = next(k for k, c in enumerate(ordered)
              if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return ordered[at:at + n]


def _cell_printing(cells, fragment: str) -> nbformat.NotebookNode:
    found = [c for c in cells.values() if c.cell_type == "code" and fragment in _text(c)]
    assert len(found) == 1, fragment
    return found[0]


# --------------------------------------------------------------------------- the convolution


def test_four_patches_of_nine_and_the_pixels_they_copy(cells):
    out = _text(_cell_printing(cells, "F.unfold(image, 3), shape (1, 9, 4)"))
    assert "F.unfold(image, 3), shape (1, 9, 4)" in out
    cols = F.unfold(torch.arange(1.0, 17.0).reshape(1, 1, 4, 4), 3)[0]
    assert "tensor([[ 1, 2, 5, 6], [ 2, 3, 6, 7]," in out  # the stored matrix is this one
    copies = {pixel: int((cols == pixel).any(0).sum()) for pixel in (1, 6)}
    assert copies == {1: 1, 6: 4}
    assert _prose(cells, "(pixel 6 into all four), a corner pixel into one")


def test_stride_and_padding_give_nine_patches_that_read_zeros(cells):
    assert _prose(cells, "the nine 3 × 3 patches overlap by one row or column")
    cols = F.unfold(torch.arange(1.0, 26.0).reshape(1, 1, 5, 5), 3, stride=2, padding=1)[0]
    assert cols.shape == (9, 9) and (cols[:, 0] == 0).any() and not (cols[:, 4] == 0).any()


def test_conv2d_as_a_matrix_product(cells):
    out = printed(_cell_printing(cells, "same as F.conv2d"))
    assert out.count("same as F.conv2d: True") == 3 and "False" not in out
    x, w, b = torch.randn(2, 3, 6, 7), torch.randn(4, 3, 3, 3), torch.randn(4)
    for stride, padding, shape in [(1, 0, (2, 4, 4, 5)), (2, 1, (2, 4, 3, 4)),
                                   (3, 2, (2, 4, 3, 3))]:
        assert f"stride {stride}, padding {padding}: out {shape}" in out
        mine = layers.conv2d_by_unfold(x, w, b, stride, padding)
        assert torch.allclose(mine, F.conv2d(x, w, b, stride=stride, padding=padding),
                              atol=1e-5)


def test_unfolds_backward_is_fold(cells):
    out = _text(_cell_printing(cells, "Im2ColBackward0"))
    assert "Im2ColBackward0: x (2, 3, 7, 8) -> cols (2, 27, 16)" in out
    assert "equals F.fold(G, (7, 8), 3, stride=2, padding=1): True" in out
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64, requires_grad=True)
    cols = F.unfold(x, 3, stride=2, padding=1)
    G = torch.randn_like(cols)
    assert cols.grad_fn.name() == "Im2ColBackward0"
    assert torch.equal(torch.autograd.grad(cols, x, G)[0],
                       F.fold(G, (7, 8), 3, stride=2, padding=1))


def _counts(k, s, p):
    ones = torch.ones(1, 1, 7, 7)
    return F.fold(F.unfold(ones, k, stride=s, padding=p), (7, 7), k, stride=s, padding=p)[0, 0]


def test_the_patch_counts(cells):
    out = printed(_cell_printing(cells, "each pixel read by"))
    assert "kernel 3, stride 1, padding 0: each pixel read by [1, 2, 3, 4, 6, 9] patches" in out
    assert "kernel 3, stride 2, padding 1: each pixel read by [1, 2, 4] patches" in out
    assert "kernel 2, stride 3, padding 0: each pixel read by [0, 1] patches" in out
    prose = _prose(cells, "read by all nine patches and a corner by one")
    plain = _counts(3, 1, 0)
    assert "read by all nine patches and a corner by one" in prose
    assert plain[3, 3] == 9 and plain[0, 0] == 1
    assert "every pixel is read by 1, 2 or 4 patches" in prose
    assert set(_counts(3, 2, 1).flatten().tolist()) == {1.0, 2.0, 4.0}
    skipping = _counts(2, 3, 0)
    assert "skips a row and a column between patches" in prose
    assert "the last row and column are never read" in prose
    assert skipping[2].sum() == 0 and skipping[:, 2].sum() == 0  # skipped between patches
    assert skipping[6].sum() == 0 and skipping[:, 6].sum() == 0  # the last ones


def test_the_centre_pixel_meets_the_kernel_turned(cells):
    out = printed(_cell_printing(cells, "pixel 13 met"))
    assert "outputs in row 0: pixel 13 met w[2,2]  w[2,1]  w[2,0]" in out
    assert "outputs in row 2: pixel 13 met w[0,2]  w[0,1]  w[0,0]" in out
    assert _prose(cells, "The kernel, turned by 180°")


def test_conv_transpose_and_the_turned_kernel_give_dx(cells):
    out = printed(_cell_printing(cells, "conv_transpose2d equals your dx"))
    assert out.count("conv_transpose2d equals your dx: True") == 2
    assert "conv2d(dout padded by 2, the turned kernel): True" in out
    x, w = torch.randn(2, 3, 7, 8, dtype=torch.float64), torch.randn(4, 3, 3, 3,
                                                                     dtype=torch.float64)
    dout = torch.randn(2, 4, 4, 4, dtype=torch.float64)
    dx = lesson13._dx_ref(x, w, dout, 2, 1)
    assert torch.allclose(F.conv_transpose2d(dout, w, stride=2, padding=1, output_padding=(0, 1)),
                          dx, atol=1e-12)


# --------------------------------------------------------------------------- max-pooling


def test_max_pooling_by_unfold(cells):
    assert "same as F.max_pool2d: True" in _text(_cell_printing(cells, "same as F.max_pool2d"))


def test_the_tie_goes_to_the_first_maximum(cells):
    check, reveal, _, ran = _after(cells, "l13-predict-pool-tie-check", 4)
    assert check.metadata["nbgrader"]["points"] == 0
    assert "the answer is [0.0, 1.0, 0.0, 0.0]" in _text(reveal)
    out = _text(ran)
    assert "x.grad, row by row: [0.0, 1.0, 0.0, 0.0] the index kept: 1" in out
    assert "saved: result1 (int64, (1, 1, 1, 1)), self (float32, (1, 1, 2, 2))" in out
    assert lesson13._tie_grad() == [0.0, 1.0, 0.0, 0.0]


def test_every_tie_in_a_hundred_windows_goes_to_the_first(cells):
    out = printed(_cell_printing(cells, "windows with a tie"))
    found = re.search(r"windows with a tie: (\d+) of 100; gradient at the first maximum, read "
                      r"row by row: (\d+) of (\d+)", out)
    assert found and found[1] == found[2] == found[3] and int(found[1]) > 50, out
    assert _prose(cells, "on 100 windows of random whole numbers")
    for seed in range(5):  # measured again: any tie goes to the first maximum
        gen = torch.Generator().manual_seed(seed)
        x = torch.randint(0, 3, (1, 1, 30, 30), generator=gen).double().requires_grad_()
        F.max_pool2d(x, 3).sum().backward()
        windows, routed = F.unfold(x.detach(), 3, stride=3)[0], F.unfold(x.grad, 3, stride=3)[0]
        assert torch.equal(routed.argmax(0), windows.argmax(0))


def test_overlapping_windows_add_at_a_shared_winner(cells):
    out = printed(_cell_printing(cells, "shared winner"))
    assert "x.grad at the shared winner (row 2, column 2): 12 = 1 + 2 + 4 + 5" in out
    assert _prose(cells, "3 × 3 windows with stride 2 (nine windows)")
    x = torch.zeros(1, 1, 7, 7, dtype=torch.float64)
    x[0, 0, 2, 2] = 5  # the largest entry of the four windows that hold it
    x.requires_grad_()
    out = F.max_pool2d(x, 3, stride=2)
    assert out.shape[-2:] == (3, 3)
    out.backward(torch.arange(1.0, 10.0, dtype=torch.float64).reshape(1, 1, 3, 3))
    assert x.grad[0, 0, 2, 2] == 1 + 2 + 4 + 5


# --------------------------------------------------------------------------- dropout


def test_dropout_by_hand_is_torchs(cells):
    out = printed(_cell_printing(cells, "same as F.dropout"))
    assert "same as F.dropout: True" in out
    assert "the noise's values: [0.0, 1.3333333333333333]" in out
    assert "over a million ones: 0.75 kept, mean of the output 1.00" in out
    x = torch.randn(3, 8, dtype=torch.float64)
    torch.manual_seed(0)
    noise = torch.empty_like(x).bernoulli_(0.75).div_(0.75)
    torch.manual_seed(0)
    assert torch.equal(x * noise, F.dropout(x, 0.25, training=True))


def test_what_dropout_keeps(cells):
    out = _text(_cell_printing(cells, "NativeDropoutBackward0"))
    assert "[0] MulBackward0 saved: other (float64, (3, 8))" in out
    assert "[0] NativeDropoutBackward0 saved: result1 (bool, (3, 8))" in out
    prose = _prose(cells, "keeps a boolean mask instead")
    assert "keeps a boolean mask instead (one byte per entry)" in prose
    assert "scales by 1/(1 − p) again in backward" in prose
    x = torch.randn(50, dtype=torch.float64, requires_grad=True)
    out, mask = torch.native_dropout(x, 0.25, True)
    g = torch.randn(50, dtype=torch.float64)
    (dx,) = torch.autograd.grad(out, x, g)
    assert torch.allclose(dx, g * mask / 0.75, rtol=1e-15, atol=0)


def test_dropout_in_eval_mode_is_its_input(cells):
    check, reveal, _, ran = _after(cells, "l13-predict-dropout-eval-check", 4)
    assert check.metadata["nbgrader"]["points"] == 0
    assert "the answer is 'all 1'" in _text(reveal)
    out = printed(ran)
    assert "y is x itself: True   y.grad_fn: None   x.grad: [1.0, 1.0, 1.0, 1.0]" in out
    assert "nn.Dropout in eval mode returns its input itself: True" in out
    x = torch.ones(4, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x


# --------------------------------------------------------------------------- the LSTM


def test_the_step_is_lstm_cell(cells):
    out = printed(_cell_printing(cells, "same as nn.LSTMCell"))
    assert "W (7, 16), b (16,)" in out
    assert "same as nn.LSTMCell: h_new True   c_new True" in out
    torch.manual_seed(3)
    cell = torch.nn.LSTMCell(3, 4).double()
    W = torch.cat([cell.weight_ih, cell.weight_hh], dim=1).T.detach()
    b = (cell.bias_ih + cell.bias_hh).detach()
    x, h, c = (torch.randn(2, n, dtype=torch.float64) for n in (3, 4, 4))
    h_torch, c_torch = cell(x, (h, c))
    step = layers.lstm_step(x, h, c, W, b)
    assert torch.allclose(step["h_new"], h_torch, atol=1e-12)
    assert torch.allclose(step["c_new"], c_torch, atol=1e-12)


def test_lstm_cells_graph_is_made_of_sigmoids_and_tanhs(cells):
    out = printed(_cell_printing(cells, "SigmoidBackward0"))
    assert out.count("SigmoidBackward0   result (2, 4)") == 3
    assert out.count("TanhBackward0      result (2, 4)") == 2


def test_your_bptt_matches_nn_lstm(cells):
    assert "xs (8, 3, 3) -> hs (8, 3, 4), same as nn.LSTM: True" in printed(
        _cell_printing(cells, "same as nn.LSTM:"))
    assert _prose(cells, "(8 steps, a batch of 3)")
    assert ("4 of 4 match nn.LSTM's gradients to round-off: dW, db, dh0, dc0"
            in printed(_cell_printing(cells, "match nn.LSTM's gradients")))


def test_six_by_hand_exercises_are_graded(cells):
    checks = [c for c in cells.values() if c.metadata.get("nbgrader", {}).get("grade")
              and c.metadata["nbgrader"].get("points")]
    ids = [c.metadata["nbgrader"]["grade_id"] for c in checks]
    assert ids == ["l13-conv-dx-check", "l13-conv-dw-check", "l13-pool-check",
                   "l13-dropout-check", "l13-lstm-step-check", "l13-lstm-bptt-check"]
    for cell in checks:
        assert "matches autograd on 3 new random inputs" in _text(cell)


# --------------------------------------------------------------------------- the checks' sizes


def _draws(make, n=200):
    return [make(torch.Generator().manual_seed(seed)) for seed in range(n)]


def test_the_convolution_checks_draw_what_the_lesson_says(cells):
    assert _prose(cells, "a batch of 2 or 3 images, 5 to 9 pixels a side, 1 to 3 input and 2 "
                         "to 4 output channels, a square kernel of 2 to 4, stride 2 or 3 and "
                         "padding from 1 up to half the kernel")
    draws = _draws(lesson13.fresh_conv)
    seen = {name: set() for name in ("N", "C_in", "C_out", "k", "side", "stride")}
    for x, w, _, stride, padding in draws:
        seen["N"].add(x.shape[0])
        seen["C_in"].add(x.shape[1])
        seen["C_out"].add(w.shape[0])
        seen["k"].add(w.shape[2])
        seen["side"] |= {x.shape[2], x.shape[3]}
        seen["stride"].add(stride)
        assert w.shape[2] == w.shape[3] and 1 <= padding <= w.shape[2] // 2
    assert seen == {"N": {2, 3}, "C_in": {1, 2, 3}, "C_out": {2, 3, 4}, "k": {2, 3, 4},
                    "side": set(range(5, 10)), "stride": {2, 3}}


def test_the_other_checks_draw_what_the_lesson_says(cells):
    assert _prose(cells, "whole numbers from 0 to 3, so that most windows have a tie, and a "
                         "few larger numbers; batches of 1 or 2 images of 1 or 2 channels; "
                         "kernels of 2 or 3 and a stride below the kernel")
    for x, _, kernel, stride in _draws(lesson13.fresh_pool):
        assert x.shape[0] in (1, 2) and x.shape[1] in (1, 2) and kernel in (2, 3)
        assert 1 <= stride < kernel
        assert set(x.unique().tolist()) <= {0.0, 1.0, 2.0, 3.0, lesson13.TIE, lesson13.PEAK}
    assert _prose(cells, "(1 to 4 examples, H from 2 to 5)")
    sizes = {(i.shape[0], i.shape[1]) for i, *_ in _draws(layers.fresh_step)}
    assert {n for n, _ in sizes} == {1, 2, 3, 4} and {h for _, h in sizes} == {2, 3, 4, 5}
    assert _prose(cells, "runs 3 to 5 steps")
    assert {xs.shape[0] for xs, *_ in _draws(layers.fresh_sequence)} == {3, 4, 5}
    assert _prose(cells, "alternates between training and eval from one trial to the next")
    modes = [lesson13.fresh_dropout(torch.Generator().manual_seed(s))[3] for s in range(6)]
    assert modes == [True, False] * 3
    for _, mask, p, training in _draws(lesson13.fresh_dropout):
        assert abs(p - 0.5) >= 0.1
        if training:
            assert mask.any() and not mask.all()
        else:
            assert mask.all()


# --------------------------------------------------------------------------- the kept slips


@pytest.mark.parametrize("key", sorted(lesson13.EXERCISES))
def test_every_kept_slip_is_named_on_every_seed(key):
    """Each slip, as its own function, fails the check and is named on seeds other than the
    visible one: the inputs make it show on every trial (ties and overlapping windows in
    every image, both dropout modes in every check, padding and stride never 0 or 1)."""
    from backproplab.course.byhand import check_by_hand

    exercise = lesson13.EXERCISES[key]
    for description, wrong in exercise.mistakes.items():
        for seed in (1, 2100, 99_991):  # seed 0 is the wrong answers' (tests/wrong_answers)
            report = check_by_hand(wrong, exercise.reference, exercise.make_inputs,
                                   name=exercise.name, outputs=exercise.outputs,
                                   trials=exercise.trials, seed=seed,
                                   mistakes=exercise.mistakes, advice=exercise.advice)
            assert not report.ok and description in " ".join(str(report).split()), (
                key, seed, description[:60], str(report)[:300])


def test_a_convolutions_backward_is_two_convolutions(cells):
    out = _text(cells["l13-conv1d"])
    assert "ConvolutionBackward0 of a length-12 sequence and a kernel of 3" in out
    assert "dx = conv1d(padded dy, flipped kernel), as autograd: True" in out
    assert "dw = conv1d(x, dy), as autograd: True" in out
