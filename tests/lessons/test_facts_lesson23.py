"""Lesson 23's corrected facts about buckets and float16, read from the stored outputs, so
an edit cannot bring the old claims back: a bucket closes once it reaches or passes the cap
(336 bytes in a 300-byte bucket), the default cap makes the first bucket 1 MiB, the one
first-step bucket holds only without find_unused_parameters, and a float16 hook divides
before the all-reduce because the sum can overflow.

(tests/lab/test_distributed.py runs the workers themselves; this file reads the lesson.)"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

ROOT = Path(__file__).parents[2]
LESSON = ROOT / "notebooks" / "23-backward-across-processes.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def _markdown(cells) -> str:
    return "\n".join(c.source for c in cells.values() if c.cell_type == "markdown")


def test_a_bucket_closes_once_it_reaches_or_passes_the_cap(cells):
    # 84 float32 values = 336 bytes went out in one bucket under a 300-byte cap.
    assert "bucket 0: fc3.bias, fc3.weight, fc2.bias (84 values)" in _text(cells["l23-17"])
    assert "reaches or passes the cap" in cells["l23-15"].source
    assert "336 bytes under a 300-byte cap" in cells["l23-15"].source
    assert "of at most\n`bucket_cap_mb`" not in cells["l23-15"].source
    assert "reaches or passes `bucket_cap_mb`" in cells["l23-39"].source


def test_the_default_cap_makes_the_first_bucket_one_mebibyte(cells):
    out = _text(cells["l23-40"])
    assert "default cap: 26,214,400 bytes; first bucket: 1,048,576 bytes" in out
    assert "1 MiB" in cells["l23-25"].source and "1 MiB" in cells["l23-39"].source


def test_one_first_step_bucket_only_without_find_unused_parameters(cells):
    out = _text(cells["l23-40"])
    assert "find_unused_parameters=False: first-step buckets of 1936 bytes" in out
    assert "find_unused_parameters=True : first-step buckets of 16, 320, 1088, 512 bytes" in out
    assert "one bucket" in _text(cells["l23-20"]) or "bucket 0: fc1.weight" in _text(
        cells["l23-20"])
    assert "find_unused_parameters=True" in cells["l23-21"].source
    assert "unless `find_unused_parameters=True`" in cells["l23-39"].source


def test_the_float16_hook_divides_before_the_sum(cells):
    out = _text(cells["l23-41"])
    assert "float16, sum then divide: inf" in out
    assert "float16, divide then sum: 40000.0" in out
    task = cells["l23-37"].source
    assert "40000 + 40000 overflows" in task and "fp16_compress_hook" in task
    assert task.index("Divide it by the number of processes") < task.index("convert it to\nfloat16")
    solution = cells["l23-fp16-hook"].source
    assert solution.index("/ world") < solution.index("all_reduce")
    assert "✓ fp16_average" in _text(cells["l23-fp16-hook-check"])


# --------------------------------------------------------------------------
# Section 6: the same model under FSDP2's fully_shard, in 2 processes
# --------------------------------------------------------------------------


def test_each_rank_holds_a_row_shard_of_every_parameter_and_gradient(cells):
    out = _text(cells["l23-44"])
    assert "placement of every parameter: (Shard(dim=0),)" in out
    assert "fc1.weight (16, 8)   (8, 8), (8, 8); gradients (8, 8), (8, 8)" in out
    assert "fc2.weight (16, 16)  (8, 16), (8, 16); gradients (8, 16), (8, 16)" in out
    assert "fc3.bias   (4,)      (2,), (2,); gradients (2,), (2,)" in out


def test_six_all_gathers_and_three_reduce_scatters_per_step(cells):
    out = _text(cells["l23-46"])
    # every rank and step counted; one kind of step only
    assert "on each rank, in each step: 6 all-gathers, 3 reduce-scatters\n" in out
    backward = out[out.index("backward:"):out.index("backward() returned")]
    order = [line.split()[:2] for line in backward.splitlines()[1:]]
    assert order == [["all-gather", "fc3"], ["all-gather", "fc2"], ["reduce-scatter", "fc3"],
                     ["all-gather", "fc1"], ["reduce-scatter", "fc2"],
                     ["reduce-scatter", "fc1"]]
    kept = _text(cells["l23-48"])
    assert "reshard_after_forward=True : 6 all-gathers, 3 reduce-scatters per step" in kept
    assert "reshard_after_forward=False: 3 all-gathers, 3 reduce-scatters per step" in kept
    assert "6 all-gathers and 3 reduce-scatters" in cells["l23-47"].source


def test_fsdp_keeps_half_the_bytes_of_ddp_and_the_same_gradients(cells):
    out = _text(cells["l23-50"])
    for rank in (0, 1):
        assert f"rank {rank}: FSDP 968 + 968 = 1,936 bytes; DDP 3,872 bytes" in out
    grads = _text(cells["l23-52"])
    assert "FSDP, 2 processes, vs the whole batch: all 6 close: True" in grads
    assert "equal to DDP's, bit for bit: True" in grads


def test_the_bucket_checks_model_fills_its_gradients_in_the_order_the_rule_assumes():
    """The check's model registers its output layer first: its parameters() start with a
    gradient backward fills second, so neither that order nor its reverse is the order
    the hooks fire in, which is what `ready_order` and `_registered` say."""
    from backproplab.course.exercises.lesson23 import buckets

    widths = [5, 7, 9, 4, 3]
    model = buckets.bucket_model(widths, seed=0)
    fired: list[int] = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: fired.append(p.numel()))
    model(torch.randn(4, 5)).pow(2).sum().backward()
    assert fired == buckets.ready_order(widths)
    listed = [p.numel() for p in model.parameters()]
    assert listed == [buckets._size(widths, q) for q in buckets._registered(widths)]
    assert listed[0] == fired[1]  # the first listed is the second ready
    assert listed not in (fired, fired[::-1])


def test_the_reduce_scatter_exercise_is_graded_in_two_and_three_processes(cells):
    from backproplab.course.exercises.lesson23 import common

    assert common.WORLD_SIZES == (2, 3)
    out = _text(cells["l23-shard-mean-check"])
    assert out.count("✓ shard_mean") == 2  # the visible check and the hidden tests
    assert "in 2 and in 3 processes" in out and "3, 3, 1 over 3" in out
    task = cells["l23-54"].source
    assert "`dist.reduce_scatter` is what you are building" in task
    assert "followed by a slice is refused" in task
    solution = cells["l23-shard-mean"].source
    assert "isend" in solution and "irecv" in solution and "all_reduce" not in solution


def test_the_bucket_exercise_asks_for_the_buckets_ddp_made(cells):
    from backproplab.course.exercises.lesson23 import buckets

    # Section 3's tiny_mlp (8 -> 16 -> 16 -> 4) under a 300-byte cap: the rule the
    # exercise checks gives DDP's three buckets, and the moments they went out.
    sizes = buckets.ready_order([8, 16, 16, 4])
    assert sizes == [4, 64, 16, 256, 16, 128]
    assert buckets.buckets(sizes, 300) == [84, 256, 144]
    timeline = _text(cells["l23-17"])
    for k, values in enumerate((84, 256, 144)):
        assert f"bucket {k}: " in timeline and f"({values} values)" in timeline
    assert buckets._earliest([84, 256, 144], sizes) == [0, 0, 1, 2, 2, 3]
    # The prediction's model under 4,000 bytes: the two buckets of its reveal.
    assert len(buckets.buckets(buckets.ready_order([32, 32, 32, 10]), 4000)) == 2
    assert "the answer\n  is 2." in _text(cells["l23-predict-buckets-reveal"])
    # The check's draws: every slip gives other sizes than the rule and than each other.
    for seed in range(20):
        widths, cap = buckets.pick(seed)
        layouts = [buckets.buckets(buckets.ready_order(widths), cap),
                   *buckets._slips(widths, cap).values()]
        assert len({tuple(x) for x in layouts}) == len(layouts)
    out = _text(cells["l23-buckets-check"])
    assert out.count("✓ bucketed_averaging") == 2  # the visible check and the hidden tests
