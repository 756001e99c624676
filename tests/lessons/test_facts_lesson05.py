"""Facts lesson 05 states, checked against its stored outputs.

Paths adding up inside one pass and accumulation across calls are told apart,
and micro-batching is shown to differ from the full batch through BatchNorm in
train mode (while it agrees for the linear model and in eval mode).
"""

from __future__ import annotations

import json
import re

from notebook_runner import NOTEBOOKS
from stored import printed

LESSON = NOTEBOOKS / "05-gradient-accumulation.ipynb"
CELLS = json.loads(LESSON.read_text())["cells"]
BY_ID = {c["id"]: c for c in CELLS}
PROSE = "\n".join("".join(c["source"]) for c in CELLS if c["cell_type"] == "markdown")


def _printed(cell_id: str) -> str:
    return printed(BY_ID[cell_id])


def _number(text: str, label: str) -> float:
    return float(re.search(re.escape(label) + r"\s*(-?\d+\.\d+)", text).group(1))


def test_micro_batches_through_batchnorm_differ_from_the_full_batch():
    printed = _printed("l05-35")
    largest = _number(printed, "largest gradient entry, full batch:")
    difference = _number(printed, "largest difference, 4 micro-batches of 2:")
    assert difference > 0.5 * largest > 0
    assert f"{difference:.2f}" in PROSE  # the recap quotes the number the lesson computes
    assert "eval mode, difference below 1e-6: True" in _printed("l05-37")


def test_micro_batches_of_the_linear_model_match():
    assert "✓ micro-batches: close" in _printed("l05-17")


def test_the_two_mechanisms_are_kept_apart():
    assert "three reasons" not in PROSE
    assert "Inside one backward pass, paths add up" in PROSE
    assert "Across backward calls, `.grad` accumulates" in PROSE
    aim = "".join(BY_ID["l05-00"]["source"])
    assert "adds" not in aim and "add" not in aim.split("**Aim.**")[1].split("?")[0]


def test_accumulation_is_in_place_and_the_first_gradient_may_be_a_copy():
    """AccumulateGrad adds into the same tensor; the first gradient is stored as it arrived
    or, when something else holds it (a tensor handed to backward()), as a copy."""
    printed = _printed("l05-40")
    assert ".grad is still the first tensor: True | it now holds [4.0, 4.0]" in printed
    assert ".grad is the tensor we handed over: False" in printed
    assert "v.grad after we change ours: [1.0, 1.0]" in printed
    prose = "".join(BY_ID["l05-39"]["source"])
    assert "in place" in prose and "copy" in prose and "strides" in prose
    assert "simply store" not in PROSE  # the old, unqualified claim
    assert "x.grad += incoming" not in PROSE


def test_the_first_gradient_is_copied_exactly_when_the_lesson_says():
    """On the locked torch: stored as it arrived when nothing else holds it and its strides
    match the leaf's; a copy when the caller holds it or its strides differ."""
    import torch

    def stored_as_arrived(make_loss, shape=(2, 3)):
        leaf = torch.ones(shape, requires_grad=True)
        arrived = []
        leaf.register_hook(lambda g: arrived.append(g.data_ptr()))
        make_loss(leaf).backward()
        return leaf.grad.data_ptr() == arrived[0]

    assert stored_as_arrived(lambda t: (3 * t).sum())
    assert not stored_as_arrived(lambda t: (t.t() * torch.ones(3, 2)).sum())  # other strides
    assert not stored_as_arrived(lambda t: t.sum())  # an expanded gradient (stride 0)
    leaf, mine = torch.ones(2, requires_grad=True), torch.ones(2)
    leaf.backward(mine)
    assert leaf.grad.data_ptr() != mine.data_ptr()


def test_no_pointer_forward_and_no_create_graph():
    """Lesson 05 comes before zeroing (06) and higher order (13): it names neither, and
    create_graph (lesson 17's) is not used."""
    assert "lesson 06" not in PROSE and "lesson 17" not in PROSE and "next lesson" not in PROSE
    assert "set to `None`" in "".join(BY_ID["l05-08"]["source"])
    everything = json.dumps(CELLS)
    assert "create_graph" not in everything


def test_the_unequal_pieces_are_left_to_the_exercise():
    """No cell above Exercise 1 says how to weight pieces of unequal size."""
    above = CELLS[:[c["id"] for c in CELLS].index("l05-microbatch")]
    text = "\n".join("".join(c["source"]) for c in above if c["id"] != "l05-41")
    assert not re.search(r"share of the batch|unequal pieces|len\(X_part\) / ", text)


def test_the_tied_weight_gradient_has_one_term_per_use():
    """The exercise's reference is autograd; the two-term formula of the solution equals it,
    and either term alone does not (so 'only one use counted' is a real slip)."""
    import torch

    from backproplab.course.exercises import lesson05

    inputs = lesson05._rnn_inputs(torch.Generator().manual_seed(11))
    want = lesson05._rnn_reference(*[t.clone() for t in inputs])
    both = lesson05._rnn_slip()(*inputs)
    assert torch.allclose(both, want, rtol=1e-13, atol=1e-13)
    for one in (lesson05._rnn_slip(step1=False), lesson05._rnn_slip(step2=False)):
        assert not torch.allclose(one(*inputs), want, rtol=1e-6, atol=1e-6)
    source = "".join(BY_ID["l05-tied"]["source"])
    assert "torch.outer(h1, dpre2)" in source and "torch.outer(h0, dpre1)" in source
    assert "l05-shared" not in json.dumps(CELLS)
