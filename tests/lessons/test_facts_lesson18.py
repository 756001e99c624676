"""Lesson 18's corrected facts, read from the stored outputs, so an edit cannot bring the
old claims back: jacrev's "one pass" holds for the default chunk_size only; what lessons
05, 08 and 17 teach (batch normalization's coupling, jacrev as a vmapped VJP, Hessian-vector
products by double backward) is pointed back to, not taught again; batch norm's refusal of a
batch of one is told apart from vmap's refusal of its running statistics; and a ready-made
hvp is named where it lives (torch.autograd.functional, not torch.func).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from stored import flat_text as _text

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "18-forward-mode-and-torch-func.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}




def test_hessian_vector_products_in_torch_func_forms_and_where_hvp_lives(cells):
    """Hessian-vector products are lesson 17's; here torch.func's two compositions, and the
    truth about a ready-made hvp: none in torch.func, vhp and hvp in torch.autograd.functional
    (two and three reverse passes, as counted)."""
    out = _text(cells["l18-28"])
    assert "jvp(grad(f)): Hv = [4.0, -4.0, -4.0] (1 reverse, 1 forward)" in out
    assert "vjp(grad(f)): Hv = [4.0, -4.0, -4.0] (2 reverse, 0 forward)" in out
    assert 'hasattr(torch.func, "hvp"): False' in out
    assert "torch.autograd.functional.vhp: [4.0, -4.0, -4.0] (2 reverse, 0 forward)" in out
    assert "torch.autograd.functional.hvp: [4.0, -4.0, -4.0] (3 reverse, 0 forward)" in out
    prose = " ".join(cells["l18-27"].source.split())
    assert "`torch.autograd.functional.vhp`" in prose and "`torch.autograd.functional.hvp`" in prose
    assert "two reverse passes" in prose and "in three" in prose
    code = "\n".join(c.source for c in cells.values() if c.cell_type == "code")
    assert "create_graph=True)\n    H_double" not in code  # no row-by-row double backward
    assert "1 reverse + 1 forward pass" in _text(cells["l18-26"])


def test_a_ready_made_hvp_is_where_the_lesson_says():
    import torch

    assert not hasattr(torch.func, "hvp")
    assert callable(torch.autograd.functional.hvp) and callable(torch.autograd.functional.vhp)


def test_jacrev_internals_point_back_to_lesson_08(cells):
    code = "\n".join(c.source for c in cells.values() if c.cell_type == "code")
    assert "vmap(pullback)" not in code
    assert "Lesson 08 took `jacrev` apart" in cells["l18-23"].source
    out = _text(cells["l18-24"])
    assert "vmap(jvp): (20, 5, 4) from 1 forward pass" in out
    assert "✓ vmapped JVP = jacfwd: exact match" in out


def test_jacrev_counts_depend_on_chunk_size(cells):
    out = _text(cells["l18-63"])
    counts = {chunk: int(n) for chunk, n in
              re.findall(r"jacrev\(chunk_size=(\w+)\): (\d+) reverse pass", out)}
    assert counts == {"None": 1, "8": 3, "5": 4, "1": 20}
    assert "with vectorize=True: 1 reverse pass" in out
    assert "jacfwd has a chunk_size argument: False" in out
    assert "always report" not in cells["l18-19"].source
    assert "default" in cells["l18-19"].source


def test_batch_norm_coupling_points_back_to_lesson_05(cells):
    """Batch norm's own refusal of a batch of one is not blamed on vmap: vmap's refusal is
    the in-place update of the running statistics, shown on groups of two examples."""
    out = _text(cells["l18-67"])
    assert "batch norm, one example, no vmap: Expected more than 1 value per channel" in out
    assert "Batch norm got a batched tensor as input while the running_mean or running_var, " \
           "which will be updated in place, were not batched." in out
    assert "Lesson 05 showed that batch normalization" in cells["l18-66"].source
    assert "vmap in training mode: Expected more than 1 value" not in out
    prose = " ".join(cells["l18-68"].source.split())
    assert "batch norm's own, `vmap` or not" in prose and "in place" in prose
    fixed = _text(cells["l18-74"])
    assert "running statistics left: {}" in fixed
    assert "equal to a loop over the groups: True" in fixed
    for gone in ("l18-69", "l18-70", "l18-71", "l18-72"):
        assert gone not in cells


def test_exercises_are_a_hand_written_jvp_and_clipping_in_one_vmapped_call(cells):
    assert "by hand" in cells["l18-53"].source.lower()
    assert _text(cells["l18-jvp-by-hand-check"]).count("matches autograd on 3 new") == 2
    clip = _text(cells["l18-clip-per-example-check"])
    assert clip.count("one vmapped pass, and the same as a loop of backward calls, one per "
                      "example, on 2 new models with batches of different sizes") == 2
    # The worked cells compute the norms but never clip: that is the exercise.
    assert "clamp" not in cells["l18-36"].source


def test_predictions_reveal_the_counted_answers(cells):
    assert "the answer is (64, 1)" in _text(cells["l18-58"])
    assert "the answer is (20, 1, 1)" in _text(cells["l18-61"])
    assert "the answer is ('jacrev', 'jacfwd', 'jacrev')" in _text(cells["l18-73"])
    for check in ("l18-57", "l18-60", "l18-predict-modes-check"):
        meta = cells[check].metadata["nbgrader"]
        assert meta["points"] == 0 and cells[check].source.startswith("bl.check_prediction(")


def test_the_bar_chart_is_wide_enough_for_its_labels(cells):
    assert "figsize=(8.5, 3.4)" in cells["l18-20"].source
    assert "<Figure size 850x340 with 1 Axes>" in _text(cells["l18-20"])


def test_linearize_runs_f_twice_for_every_column(cells):
    """linearize: 64 columns of J for two runs of f (the value, and the traced JVP) and one
    tangent, equal to jacfwd's; the prose says the counts the cell printed. Measured again."""
    import warnings

    import torch
    from torch.func import jacfwd, linearize

    out = _text(cells["l18-19b"])
    assert "64 columns: f ran 2 times, 1 tangent attached" in out
    assert "equal to jacfwd's: True" in out
    assert "Two runs of `f` instead of 64" in " ".join(cells["l18-19c"].source.split())
    runs = []
    A = torch.randn(8, 16, dtype=torch.float64)

    def f(x):
        runs.append(1)
        return torch.tanh(A @ x)

    x = torch.randn(16, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, jvp_at_x = linearize(f, x)
        columns = torch.stack([jvp_at_x(e) for e in torch.eye(16, dtype=x.dtype)], dim=1)
    assert len(runs) == 2
    torch.testing.assert_close(columns, jacfwd(lambda x: torch.tanh(A @ x))(x))
