"""Lesson 25's facts, read from its stored outputs and, where it is cheap, measured again with
the locked torch: what each partitioner keeps for the backward of (x @ w).sin().cos().sum(),
how many graphs a graph break makes (forward and backward), what compiled autograd captures,
the FLOPs of a Linear layer's backward (exactly twice its forward) and of an MLP's, and
compiled gradients equal to eager ones.
"""

from __future__ import annotations

import itertools
import logging
import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import flat_text as _text

import backproplab as bl

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "25-compiled-backward.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def _cell(cells, needle: str) -> nbformat.NotebookNode:
    """The one code cell whose source holds ``needle`` (ids move when cells are added)."""
    found = [c for c in cells.values() if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, (needle, [c.id for c in found])
    return found[0]


@pytest.fixture(scope="module")
def quiet():
    torch._logging.set_logs(dynamo=logging.ERROR, aot=logging.ERROR, inductor=logging.ERROR)
    yield
    torch._logging.set_logs()


def test_the_joint_graph_holds_the_vjp_rules(cells):
    joint = _text(_cell(cells, 'show(seen["joint"])'))
    for line in ("expand = expand(tangents_1, [4, 2])",
                 "tanh_backward = tanh_backward(expand, detach_1)",
                 "mm_1 = mm(t, tanh_backward)", "mm_2 = mm(tanh_backward, t_1)",
                 "output sum_1, mm_2, mm_1"):
        assert line in joint, line
    order = _text(_cell(cells, 'print("after the first call:'))
    assert "after the first call: ['forward', 'joint']" in order
    assert "after the first backward: ['backward', 'forward', 'joint']" in order
    halves = _text(_cell(cells, 'print("forward:")'))
    assert "output sum_1, primals_1, primals_2, detach" in halves


def test_saved_tensors_under_both_partitioners(cells):
    default = _text(_cell(cells, "out, nbytes = kept_by(default_partition)"))
    assert "eager autograd: 8,192 bytes beyond x and w" in default
    assert "default_partition: 8,192 bytes beyond x and w" in default
    assert "kept: primals_1 (64, 32), primals_2 (32, 16), mm (64, 16), sin (64, 16)" in default
    min_cut = _text(_cell(cells, "out, nbytes = kept_by(min_cut_rematerialization_partition)"))
    assert "min-cut: 4,096 bytes beyond x and w" in min_cut
    assert "kept: mm (64, 16), t (32, 64), t_1 (16, 32)" in min_cut
    assert "sin = sin(mm)" in min_cut  # the forward's sin, recomputed in the backward
    by_hand = _text(_cell(cells, 'by_graph = seen["backward"](*saved'))
    assert by_hand.count("exact match") == 2


def test_saved_bytes_measured_again(quiet):
    from functorch.compile import (
        aot_function,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )

    def g(x, w):
        return (x @ w).sin().cos().sum()

    def nop(gm, example_inputs):
        return make_boxed_func(gm.forward)

    x = torch.randn(64, 32, requires_grad=True)
    w = torch.randn(32, 16, requires_grad=True)
    kept = {}
    for partition in (default_partition, min_cut_rematerialization_partition):
        out = aot_function(g, nop, nop, partition_fn=partition)(x, w)
        memory = bl.describe(out).saved_memory()
        kept[partition.__name__] = memory.total - memory.leaf_bytes
    assert kept == {"default_partition": 8192, "min_cut_rematerialization_partition": 4096}


def test_graph_breaks_split_the_backward(cells):
    chatty = _text(_cell(cells, "def chatty(x, w):"))
    assert "after the forward: {'graphs': 2, 'forward': 2, 'backward': 0}" in chatty
    assert "after the backward: {'graphs': 2, 'forward': 2, 'backward': 2}" in chatty
    assert ("behind the loss: CompiledFunctionBackward, CompiledFunctionBackward, "
            "AccumulateGrad") in chatty
    branch = _text(_cell(cells, "compiled_branchy = torch.compile"))
    assert "with x and its backward: {'graphs': 2, 'forward': 2, 'backward': 2}" in branch
    assert "with -x and its backward: {'graphs': 3, 'forward': 3, 'backward': 3}" in branch
    hooks = _text(_cell(cells, "def logging_doubling(grad):"))
    assert "doubling: {'graphs': 1, 'forward': 1, 'backward': 1}" in hooks
    assert ("logging_doubling: {'graphs': 2, 'forward': 2, 'backward': 2} dL/dw as eager: "
            "True, hook calls logged: [(6, 3)]") in hooks
    reveal = _text(_cell(cells, 'bl.reveal("l25-predict-branch")'))
    assert "the answer is 3" in reveal


def test_graph_break_measured_again(quiet):
    import torch._dynamo
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    counts = {"forward": 0, "backward": 0}

    def counted(half):
        def compiler(gm, example_inputs):
            counts[half] += 1
            return make_boxed_func(gm.forward)
        return compiler

    def chatty(x, w):
        h = torch.tanh(x @ w)
        h.detach().max().item()  # a Python number read from a tensor: the graph ends here
        return (h * h).sum()

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=counted("forward"), bw_compiler=counted("backward"))
    torch.compile(chatty, backend=backend)(torch.randn(6, 4),
                                           torch.randn(4, 3, requires_grad=True)).backward()
    torch._dynamo.reset()
    assert counts == {"forward": 2, "backward": 2}


def test_compiled_autograd_captures_the_whole_backward(cells):
    out = _text(_cell(cells, "compiled_autograd=True"))
    assert ("graphs: {'graphs': 2, 'forward': 2, 'backward': 0} captures by compiled "
            "autograd: 1") in out
    assert "AccumulateGrad calls in it: 1 hook calls logged: [(6, 3)]" in out
    assert "dL/dw as eager: True" in out
    assert "BackwardState requires CompiledAutograd" in " ".join(
        c.source for c in cells.values() if c.cell_type == "markdown")


def test_flops_of_the_backward(cells):
    linear = _text(_cell(cells, "layer = nn.Linear(32, 16)"))
    assert ("input needs a gradient: forward {'addmm': 65536}, backward {'mm': 131072} "
            "backward / forward = 2.0") in linear
    assert ("input is data: forward {'addmm': 65536}, backward {'mm': 65536} "
            "backward / forward = 1.0") in linear
    mlp = _text(_cell(cells, "forward, backward = flops(lambda: mlp_loss(data))"))
    ratios = re.findall(r"ratio (\d\.\d+)", mlp)
    assert ratios == ["1.698", "1.698"]
    assert "2 - first layer's share: 1.698" in mlp


def test_linear_backward_is_twice_the_forward_measured_again():
    from torch.utils.flop_counter import FlopCounterMode

    layer = torch.nn.Linear(24, 8)
    x = torch.randn(16, 24, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        loss = layer(x).sum()
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    assert forward.get_total_flops() == 2 * 16 * 24 * 8
    assert backward.get_total_flops() / forward.get_total_flops() == 2.0


def test_compiled_gradients_equal_eager(cells):
    assert _text(_cell(cells, 'eager_x, eager_w = torch.autograd.grad(f(x, w)')).count(
        "exact match") == 2
    out = _text(_cell(cells, 'compiled_loss = torch.compile(mlp_loss, backend="aot_eager")'))
    assert out.count("compiled against eager: exact match") == 6


def test_predictions_follow_the_pattern(cells):
    for key, answer in (("l25-predict-min-cut", "the answer is 4096"),
                        ("l25-predict-branch", "the answer is 3"),
                        ("l25-predict-break", "the answer is 'c'")):
        check = _cell(cells, f'bl.check_prediction("{key}"')
        assert check.metadata["nbgrader"]["points"] == 0
        assert answer in _text(_cell(cells, f'bl.reveal("{key}")'))


def _rows(text: str) -> dict[str, list[str]]:
    """A printed table's rows by their first column: the numbers after it, without commas,
    and the closing True or False."""
    rows = {}
    for m in re.finditer(r"^\s*(.*?)\s+((?:[\d,]+\s+)+)(True|False)$", text, re.M):
        rows[m.group(1)] = [n.replace(",", "") for n in m.group(2).split()] + [m.group(3)]
    return rows


def test_selective_checkpointing_keeps_the_products_and_recomputes_none(cells):
    """Section 5: the policy that keeps matrix products recomputes no product FLOPs, keeps
    less than plain autograd and more than whole blocks checkpointed, and the prose's numbers
    are the printed ones; the plain and whole-block rows are lesson 16's."""
    table = _rows(_cell(cells, "def keep_products(").outputs[0]["text"])
    assert table["none"] == ["229376", "0", "True"]
    assert table["whole blocks"] == ["32768", "4718592", "True"]
    kept, flops, same = table["keep the products"]
    assert int(kept) == 188_416 and 32_768 < int(kept) < 229_376 and flops == "0" and same == "True"
    lesson16 = nbformat.read(NOTEBOOK.with_name("16-what-backward-keeps.ipynb"), as_version=4)
    measured = _rows(next(c for c in lesson16.cells if c.id == "l16-45").outputs[0]["text"])
    assert measured["none"][0] == "229376" and measured["all"][0] == "32768"


def test_a_lower_memory_budget_keeps_less_and_recomputes_more(cells):
    """Section 5's budgets: bytes kept fall and recomputation grows as the budget falls, the
    first step down recomputes element-wise functions only, budget 1 keeps what eager keeps,
    the gradients stay eager's, and the numbers the prose compares are the printed ones."""
    table = _rows(_cell(cells, "activation_memory_budget=budget").outputs[0]["text"])
    rows = [(float(b), *map(int, v[:3]), v[3]) for b, v in table.items()]
    assert [r[0] for r in rows] == [1.0, 0.8, 0.5, 0.3, 0.0]
    assert rows[0][1:] == (229_376, 0, 0, "True")
    assert rows[1][3] == 0 < rows[1][2]  # element-wise only
    for before, after in itertools.pairwise(rows):
        assert after[1] < before[1] and after[3] >= before[3] and after[2] >= before[2]
    assert all(r[4] == "True" for r in rows)
    prose = cells["l25-66"].source
    assert f"{rows[3][1]:,}" in prose and f"{rows[3][3]:,}" in prose and "4,718,592" in prose


def test_the_ratio_policy_on_the_mixed_model_is_what_the_prose_says(cells):
    """After Exercise 4: at ratio 16 the policy keeps what section 5's keeps, at 64 only the
    wide blocks' second products (256 FLOPs a byte), which saves no FLOPs over whole blocks,
    at 256 what whole blocks keep; and the min-cut numbers the prose quotes are section 5's."""
    printed = _cell(cells, "for ratio in (16, 64, 256)").outputs[0]["text"].splitlines()[1:]
    table = {ratio: [n.replace(",", "") for n in rest] for ratio, *rest in map(str.split, printed)}
    whole = _rows(_cell(cells, "def keep_products(").outputs[0]["text"])
    assert table["16"] == [whole["keep the products"][0], "0", "True"]
    assert table["256"] == whole["whole blocks"]
    kept, flops, same = table["64"]
    # One (32, 64) float32 result more than whole blocks: the first wide block's product is
    # the next block's input, which the checkpoint keeps anyway; the last one's is new.
    assert int(kept) == 32_768 + 32 * 64 * 4 and flops == whole["whole blocks"][1]
    assert same == "True"
    assert 2 * 512 / 4 == 256 and 2 * 64 / 4 < 64  # FLOPs a byte: inner sizes 512 and 64
    prose = " ".join(next(c for c in cells.values() if c.cell_type == "markdown"
                          and "At 16 every product" in c.source).source.split())
    budgets = _rows(_cell(cells, "activation_memory_budget=budget").outputs[0]["text"])
    assert f"kept {int(budgets['0.3'][0]):,} bytes for {int(budgets['0.3'][2]):,} FLOPs" in prose


def test_a_wrong_flop_count_is_named_by_what_every_graph_shows():
    """Counting mm alone leaves out addmm and bmm; on the addmm function's graph, where
    addmm makes half of the FLOPs, that count is also half the total. The check names what
    every graph shows (the products left out), never the multiply-adds, which would halve
    every graph's count, the right ones too."""
    from backproplab.course.exercises.lesson25 import flops

    mm_only = [(96, {"mm": 96}), (192, {"mm": 192, "addmm": 192}), (0, {"bmm": 80})]
    said = flops._flop_slip(192, "int", mm_only[1][1], mm_only)
    assert "addmm nodes are missing" in said and "Half" not in said
    said = flops._flop_slip(0, "int", mm_only[2][1], mm_only)
    assert "bmm nodes are missing" in said and "addmm" not in said
    halved = [(48, {"mm": 96}), (192, {"mm": 192, "addmm": 192}), (40, {"bmm": 80})]
    assert "multiply-adds" in flops._flop_slip(192, "int", halved[1][1], halved)
    # A count that fits neither on every graph is given the plain advice.
    mixed = [(48, {"mm": 96}), (192, {"mm": 192, "addmm": 192}), (80, {"bmm": 80})]
    assert "Look for the mm, addmm and bmm nodes" in flops._flop_slip(
        192, "int", mixed[1][1], mixed)
