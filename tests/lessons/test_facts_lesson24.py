"""Lesson 24's facts, read from the stored outputs and, where cheap, measured again: the
float16 underflow count of section 2, the bytes kept for backward with and without autocast,
the loss scaler's skipped steps (which steps, the scale before and after), GradScaler equal
to the loop written by hand, what clipping sees with and without unscale_, and a 16-bit
compensation that keeps the updates float16 alone loses.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from stored import flat_text as _text
from stored import output_text
from torch import nn

import backproplab as bl
from backproplab.course.exercises import lesson24
from backproplab.course.exercises.lesson24 import compensated

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "24-lower-precision.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def test_float16_limits_are_printed(cells):
    out = _text(cells["l24-03"])
    assert "torch.float16 6.55e+04 6.1e-05 5.96e-08 0.000977" in out
    assert "torch.bfloat16 3.39e+38 1.18e-38 9.18e-41 0.00781" in out
    assert "and rounds half of it to: 0.0" in out


def _underflow_run():
    """Section 2 again: the counts of zeros in dL/dy on both sides of the cast and in the
    weight gradient."""
    torch.manual_seed(1)
    layer = nn.Linear(64, 32)
    x = torch.randn(256, 64)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        t = layer(x).float() + 2e-4 * torch.randn(256, 32)
    with torch.autocast("cpu", dtype=torch.float16):
        y16 = layer(x)
    y32 = y16.float()
    y16.retain_grad()
    y32.retain_grad()
    F.mse_loss(y32, t).backward()
    flushed = (y16.grad == 0) & (y32.grad != 0)
    return int(flushed.sum()), int((layer.weight.grad == 0).sum()), int(
        (y32.grad.T @ x == 0).sum())


def test_the_underflow_count(cells):
    out = _text(cells["l24-07"])
    found = re.search(r"(\d+) of them flushed by the cast", out)
    assert found and int(found.group(1)) == 3789, out
    assert "weight gradient (torch.float32): 60 zeros of 2048" in out
    assert "without the float16 rounding: 0 zeros" in out
    assert _underflow_run() == (3789, 60, 0)
    assert "3,789 of its 8,192 entries become 0" in " ".join(cells["l24-08"].source.split())
    rounded = _text(cells["l24-11"])
    assert "bfloat16 : 0 nonzero entries flushed to 0, the others off by up to 0.4%" in rounded
    assert "float16 : 3789 nonzero entries flushed to 0" in rounded


def test_autocast_dtypes_per_op(cells):
    rows = {line[:23].strip(): line[23:].split()
            for line in output_text(cells["l24-13"]).splitlines()[1:] if line.strip()}
    assert rows["linear"] == ["torch.bfloat16", "torch.float16"]
    assert rows["log_softmax(linear)"] == ["torch.bfloat16", "torch.float16"]
    assert rows["cross_entropy(linear)"] == ["torch.float32", "torch.float32"]
    assert rows["mse_loss(linear, 0)"] == ["torch.float32", "torch.float32"]


def _saved_bytes(on: bool) -> tuple[int, int]:
    torch.manual_seed(2)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    inputs, classes = torch.randn(256, 64), torch.randint(0, 10, (256,))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
        loss = F.cross_entropy(mlp(inputs), classes)
    memory = bl.describe(loss).saved_memory()
    return memory.total, memory.leaf_bytes


def test_saved_bytes_with_and_without_autocast(cells):
    out = _text(cells["l24-15"])
    assert "214,020 bytes saved, 5,120 of them in leaves; 0 ToCopyBackward0 nodes" in out
    assert "113,156 bytes saved, 0 of them in leaves; 5 ToCopyBackward0 nodes" in out
    assert "ReluBackward0 result bfloat16" in out
    assert _saved_bytes(False) == (214_020, 5_120)
    assert _saved_bytes(True) == (113_156, 0)


def test_updates_below_half_a_gap_vanish(cells):
    out = _text(cells["l24-19"])
    assert "float16: 1 + 1e-4 = 1.0 1 + 6e-4 = 1.0009765625" in out
    assert "weights kept in float16: [1.0, 0.51171875" in out
    assert "weights kept in float32: [0.9, 0.4, -1.0]" in out


def test_the_scaler_skips_and_backs_off(cells):
    out = output_text(cells["l24-23"])
    skipped = re.findall(r"step +(\d+): inf or NaN in the gradients, step skipped, "
                         r"scale (\d+) -> (\d+)", out)
    assert skipped == [("2", "65536", "32768"), ("11", "131072", "65536")]
    history = re.search(r"scale after each step, as a power of 2: (.*)", out).group(1)
    assert history.split() == ["16", "16", "15", "15", "15", "15", "16", "16",
                               "16", "16", "17", "16", "16", "16", "16", "17"]


def test_gradscaler_equals_the_loop_by_hand(cells):
    out = _text(cells["l24-25"])
    assert "same scale after every step: True" in out
    assert "same parameters, bit for bit: True" in out


def _scale_layers(seeds: int = 40):
    """The scale check's layers of the first ``seeds`` seeds, each with its seed and its
    gradients (dL/dy, dL/dW, dL/db) from autograd."""
    for seed in range(seeds):
        x, W, b, t = lesson24._new_layer(torch.Generator().manual_seed(seed))
        Wg, bg = W.clone().requires_grad_(), b.clone().requires_grad_()
        y = x @ Wg.T + bg
        yield seed, (x, W, b, t), torch.autograd.grad(F.mse_loss(y, t), (y, Wg, bg))


def test_the_scale_check_has_a_zero_and_a_negative_largest_on_every_trial():
    """dL/dy has an exact zero (left out of "every nonzero entry"). The largest |dL/db| and
    |dL/dW| are negative, and the largest entry of dL/dW and dL/db by sign is positive; the
    four sizes the highest scale can be taken from (by sign, |dL/dy|, |dL/dW|, |dL/db|) are
    each at least twice the one before. So a max without abs, the highest scale from dL/dy,
    the bias left out and the right answer each land on a power of two of their own, on
    every trial, and a max without abs has a positive number to take the log of."""
    for _, _, (gy, gW, gb) in _scale_layers():
        assert (gy == 0).any()
        assert gb.min() == -gb.abs().max() and gW.min() == -gW.abs().max()
        by_sign = torch.cat([gW.flatten(), gb]).max()
        sizes = [by_sign, gy.abs().max(), gW.abs().max(), gb.abs().max()]
        assert by_sign > 0 and all(2 * a <= b for a, b in itertools.pairwise(sizes))


def test_the_scale_check_sets_where_the_ways_of_rounding_part_on_every_trial():
    """The bounds' ratios are exact powers of two where the ways of rounding part (the
    lowest on even seeds, the highest on odd ones), whatever order the sums are taken in;
    and the largest |dL/dy| is 2**12 or more times the smallest, so taking the largest
    never lands where lifting the smallest to 2**-24 would (two slips told apart)."""
    for seed, layer, (gy, gW, gb) in _scale_layers():
        by_hand = lesson24._grads(*layer)
        rows = sum(by_hand[0][i] for i in range(len(gy)))  # another order of the same sum
        assert torch.equal(gy, by_hand[0]) and torch.equal(gb, by_hand[2])
        assert torch.equal(gb, rows)
        smallest, largest = gy.abs()[gy != 0].min(), gy.abs().max()
        high = torch.maximum(gW.abs().max(), gb.abs().max())
        low_exact = torch.log2(lesson24.FP16_NORMAL / smallest) % 1 == 0
        high_exact = torch.log2(lesson24.FP16_MAX / high) % 1 == 0
        assert (bool(low_exact), bool(high_exact)) == (seed % 2 == 0, seed % 2 == 1)
        assert largest / smallest >= 2**12


def test_a_compensated_step_keeps_what_rounding_drops():
    # Section 4's float16 run, compensated, ends where its float32 master weights do.
    w = torch.ones(3, dtype=torch.float16)
    comp = torch.zeros_like(w)
    update = -0.002 * torch.tensor([0.05, 0.3, 1.0])
    for _ in range(1000):
        w, comp = compensated.compensated_reference(w, comp, update)
    assert w.dtype == comp.dtype == torch.float16
    assert torch.allclose(w.double(), torch.tensor([0.9, 0.4, -1.0], dtype=torch.float64),
                          atol=2.0**-11)
    # On the check's own trainings it stays within a gap, and every kept slip ends far off
    # (ten gaps or more), so the limit of two gaps parts them on any seed.
    for seed in range(5):
        worst, wrong = compensated._trained(compensated.compensated_reference, seed)
        assert wrong is None and worst < 0.6
        for slip in compensated.STEP_SLIPS.values():
            worst, wrong = compensated._trained(slip, seed)
            assert wrong is not None and worst > 10


def test_clipping_scaled_gradients_shrinks_the_step(cells):
    out = _text(cells["l24-27"])
    assert "unscale_ first: True clipping saw norm 2.648, the step used norm 1" in out
    assert "unscale_ first: False clipping saw norm 4.339e+04, the step used norm 6.104e-05" in out
    error = _text(cells["l24-29"])
    assert "unscale_() has already been called on this optimizer" in error


def test_the_prediction_is_revealed_after_its_check(cells):
    assert cells["l24-32"].metadata["nbgrader"]["points"] == 0
    assert "the answer is 1." in _text(cells["l24-33"])
    rows = _text(cells["l24-34"])
    assert "weight gradient, first column: ['0.024', '0.0004', '3.34e-06', '0']" in rows
