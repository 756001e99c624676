"""Lesson 26's numbers, read from the stored outputs and, where cheap, measured again:
the bytes one head keeps for backward at several sequence lengths (9 bytes per pair of
tokens, 192 per token, 8 for sqrt(d)), checkpointing the attention (bytes and the same
gradient bits), FlopCounterMode's forward and backward counts and their ratio, the mask's
exact zeros, the fused kernel's log-sum-exp, the residual add's gradient, and the by-hand
backward matching autograd.
"""

from __future__ import annotations

import math
import re
from functools import partial
from pathlib import Path

import nbformat
import pytest
import torch
from stored import flat_text as _text
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "26-attention-by-hand.ipynb"
WIDTH, D = 8, 4  # the lesson's head: d_model and the head width


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def _number(text: str) -> int:
    return int(text.replace(",", ""))


# --------------------------------------------------------------------------- measured again


def _future(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)


def _attend(Q, K, V):
    S = Q @ K.T / math.sqrt(Q.shape[1])
    return torch.softmax(S.masked_fill(_future(len(Q)), float("-inf")), dim=-1) @ V


def _head(X, Wq, Wk, Wv, Wo, recompute=False):
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    if recompute:
        return checkpoint(_attend, Q, K, V, use_reentrant=False) @ Wo
    return _attend(Q, K, V) @ Wo


def _weights(gen):
    shapes = [(WIDTH, D)] * 3 + [(D, WIDTH)]
    return [torch.randn(*s, generator=gen, dtype=torch.float64).requires_grad_() for s in shapes]


def _described_bytes(T):
    """(bytes kept beyond the leaves, bytes in (T, T) tensors), as the lesson measures them."""
    import backproplab as bl

    gen = torch.Generator().manual_seed(T)
    weights = _weights(gen)
    X = torch.randn(T, WIDTH, generator=gen, dtype=torch.float64)
    graph = bl.describe(_head(X, *weights).sum())
    memory = graph.saved_memory()
    square = {s.storage: s.nbytes for n in graph.nodes for s in n.saved if s.shape == (T, T)}
    return memory.total - memory.leaf_bytes, sum(square.values())


def test_saved_bytes_at_four_lengths(cells):
    out = _text(cells["l26-19"])
    found = {int(m.group(1)): (_number(m.group(2)), _number(m.group(3)))
             for m in re.finditer(r"T = +(\d+): +([\d,]+) bytes kept, +([\d,]+) of them", out)}
    assert found == {64: (49_160, 36_864), 128: (172_040, 147_456),
                     256: (638_984, 589_824), 512: (2_457_608, 2_359_296)}, out
    for T, (total, square) in found.items():
        assert square == 9 * T * T  # P in float64 and the boolean mask
        assert total - square == 192 * T + 8  # X, Q, K, V, O; and sqrt(d)
    assert "T 128 -> 256: x3.71" in out
    for T in (64, 128, 256):  # measured again, with the package's describe
        assert _described_bytes(T) == found[T]
    prose = " ".join(cells["l26-21"].source.split())
    assert "9 × 4,096² bytes = 144 MiB" in prose and 9 * 4096**2 == 144 * 2**20


def test_the_prediction_is_graded_then_revealed(cells):
    assert cells["l26-17"].metadata["nbgrader"]["points"] == 0
    assert "bl.check_prediction(\"l26-predict-growth\"" in cells["l26-17"].source
    assert "the answer is 'x4'" in _text(cells["l26-18"])


def _pack_bytes(run, weights):
    leaves = {w.untyped_storage().data_ptr() for w in weights}
    seen = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in leaves:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return out, sum(seen.values())


def test_recompute_keeps_no_square_tensor_and_the_same_gradient_bits(cells):
    out = _text(cells["l26-25"])
    found = {m.group(1): (_number(m.group(2)), m.group(3))
             for m in re.finditer(r"recompute (\w+) +([\d,]+) bytes kept, gradients the same "
                                  r"bits as without: (\w+)", out)}
    assert found == {"None": (638_976, "True"), "softmax": (573_440, "True"),
                     "attention": (49_152, "True")}, out
    assert 638_984 - 638_976 == 8  # section 3's count less the one-number sqrt(d)
    assert 638_976 - 573_440 == 256 * 256  # checkpointing the softmax frees only the mask
    assert 49_152 == 192 * 256  # X, Q, K, V and O

    gen = torch.Generator().manual_seed(256)
    weights = _weights(gen)
    X, dY = (torch.randn(256, WIDTH, generator=gen, dtype=torch.float64) for _ in range(2))
    results = {}
    for recompute in (False, True):
        y, nbytes = _pack_bytes(partial(_head, X, *weights, recompute=recompute), weights)
        results[recompute] = nbytes, torch.autograd.grad(y, weights, dY)
    assert (results[False][0], results[True][0]) == (638_976, 49_152)
    assert all(torch.equal(a, b) for a, b in zip(results[False][1], results[True][1],
                                                 strict=True))


def test_flop_counts_and_the_backward_to_forward_ratio(cells):
    out = _text(cells["l26-31"])
    rows = {m.group(1).strip(): (_number(m.group(2)), _number(m.group(3)), m.group(4))
            for m in re.finditer(r"(X [a-z ,]+?) +forward ([\d,]+) +backward ([\d,]+) +"
                                 r"ratio ([\d.]+)", out)}
    assert rows == {"X is data": (1_114_112, 2_179_072, "1.956"),
                    "X needs a gradient": (1_114_112, 2_228_224, "2.000"),
                    "X needs one, recomputed": (1_114_112, 2_752_512, "2.471")}, out
    T = 256
    square, projections, output = 2 * T * T * D, 2 * T * WIDTH * D, 2 * T * D * WIDTH
    assert 2 * square + 3 * projections + output == 1_114_112
    assert 2_228_224 - 2_179_072 == 3 * projections == 49_152  # the three dX products
    assert 2_752_512 - 2_228_224 == square  # Q @ K.T once more; P @ V is not run again
    prose = " ".join(cells["l26-32"].source.split())
    for claim in ("49,152 operations", "1,048,576 of the forward's 1,114,112",
                  "`Q @ K.T` once more, 524,288 operations"):
        assert claim in prose

    gen = torch.Generator().manual_seed(T)
    weights = _weights(gen)
    X = torch.randn(T, WIDTH, generator=gen, dtype=torch.float64, requires_grad=True)
    for recompute, want in ((False, 2_228_224), (True, 2_752_512)):
        with FlopCounterMode(display=False) as forward:
            y = _head(X, *weights, recompute=recompute)
        with FlopCounterMode(display=False) as backward:
            torch.autograd.grad(y.sum(), [X, *weights])
        assert (forward.get_total_flops(), backward.get_total_flops()) == (1_114_112, want)


def test_masked_scores_get_exact_zeros_and_dP_does_not(cells):
    out = _text(cells["l26-11"])
    assert "dSm above the diagonal, all exactly 0: True" in out
    assert "dS above the diagonal, all exactly 0: True" in out
    largest = float(re.search(r"dP above the diagonal, largest \|entry\|: ([\d.]+)", out)[1])
    assert largest > 0.1


def test_the_fused_kernel_keeps_a_log_sum_exp_not_p(cells):
    out = _text(cells["l26-27"])
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in out
    assert re.search(r"logsumexp \(1, 1, 256\) +2,048 bytes", out), out
    assert "(1, 1, 256, 256)" not in out
    assert "same output as attend(), to round-off: True" in out
    assert "exp(Sm - lse) equals P to round-off: True" in _text(cells["l26-28"])


def test_the_residual_add_passes_the_gradient_unchanged(cells):
    out = _text(cells["l26-34"])
    assert "AddBackward0: sends what arrives to the skip: True, to the branch: True" in out
    assert "what arrives is dy: True" in out
    assert "Wo = 0: x.grad equals dy exactly: True" in _text(cells["l26-36"])


def test_the_assembled_backward_matches_autograd_and_the_fused_kernel(cells):
    assert ("5 of 5 match autograd through head_forward to round-off: dX, dWq, dWk, dWv, dWo"
            in _text(cells["l26-54"]))
    out = _text(cells["l26-56"])
    assert "the fused kernel's node is in the graph: True" in out
    assert "5 of 5 match the fused kernel's to round-off: dX, dWq, dWk, dWv, dWo" in out


def test_three_by_hand_steps_are_graded(cells):
    checks = [c for c in cells.values() if c.metadata.get("nbgrader", {}).get("grade")
              and c.metadata["nbgrader"].get("points")]
    ids = [c.metadata["nbgrader"]["grade_id"] for c in checks]
    assert ids == ["l26-dscores-check", "l26-heads-check", "l26-flash-check"]
    for cell in checks:
        assert "matches autograd on 3 new random inputs" in _text(cell)


def test_the_blockwise_backward_refuses_a_square_tensor_and_gets_no_sum_for_free():
    """l26-flash: any (T, T) tensor is refused for its size, and the row sum over one block
    is named, on the inputs of the visible check (T never a multiple of the block)."""
    from backproplab.course.exercises import lesson26

    flash = lesson26.EXERCISES["l26-flash"]
    assert flash.without is not None
    for seed in range(3):
        inputs = flash.make_inputs(torch.Generator().manual_seed(seed))
        Q, block = inputs[0], inputs[-1]
        assert Q.ndim == 4 and Q.shape[1] != Q.shape[-1]  # H is never d
        assert Q.shape[-2] % block and block <= Q.shape[-1]  # a last, shorter block; tiles fit
        assert Q.shape[-2] ** 2 > Q.numel()  # even one (T, T) mask holds more than an input
