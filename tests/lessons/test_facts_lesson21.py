"""Lesson 21's facts, read from the stored outputs and held against torch again.

Every order and number the prose states is what the lesson printed: the edges into each
node, the parts that add up in a buffer, the empty slot, the broadcast summed down, the
sequence numbers and the orders they give, ties, several outputs, the nodes pruned, the
order of hooks, threads, the nested pass and the three settings. Then the ready queue's
rule, which the lesson states from a few graphs, is tested on many random ones: the
check's own executor (a heap on the sequence number, as the lesson describes the engine)
reproduces torch's recorded order and gradients on every graph; the operation nodes run in
falling sequence number and each AccumulateGrad node right after its last user; heapq's
ties are torch's for more sizes than the lesson tries; and each slip the check names
differs from torch on its graph for every seed, so a kept slip fails everywhere.
"""

from __future__ import annotations

import heapq
import re
from pathlib import Path

import nbformat
import pytest
import torch
from stored import output_text as _text

from backproplab.course.exercises import lesson21 as lesson
from backproplab.course.exercises.lesson21 import engine, layers

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "21-inside-torchs-engine.ipynb"
ACC = 2**64 - 1


@pytest.fixture(scope="module")
def cells() -> list[nbformat.NotebookNode]:
    return nbformat.read(NOTEBOOK, as_version=4).cells


def _code(cells, fragment: str) -> nbformat.NotebookNode:
    """The one code cell whose source holds ``fragment``."""
    found = [c for c in cells if c.cell_type == "code" and fragment in c.source]
    assert len(found) == 1, f"{len(found)} code cells hold {fragment!r}"
    return found[0]


def _prose(cells) -> str:
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


def _lines(cell) -> list[str]:
    return _text(cell).strip().splitlines()


# --------------------------------------------------------------------------- section 2


def test_u_waits_for_three_parts_that_add_up_once(cells):
    table = {}
    for line in _lines(_code(cells, "edges_in = {}")):
        name, count = re.match(r"(\S+)\s+(\d) edge", line).groups()
        table.setdefault(name, []).append(int(count))
    assert sorted(table["MulBackward0"]) == [1, 3] and table["SumBackward0"] == [0]
    assert "The `MulBackward0` with three edges in is $u$'s node" in _prose(cells)
    lines = _lines(_code(cells, "def sent_to_u"))
    parts = [line for line in lines if " sends u " in line]
    assert [p.split()[0] for p in parts] == ["AddBackward0", "ExpBackward0", "SinBackward0"]
    receives = [line for line in lines if "receives" in line]
    assert len(receives) == 1 and receives[0].endswith(", once")
    added = lines[-1].split(": ", 1)[1]
    assert added == receives[0].split("receives ")[1].removesuffix(", once")


def test_an_unused_piece_leaves_its_slot_empty(cells):
    text = _text(_code(cells, "split_node ="))
    assert "SplitBackward0 has 3 input slots" in text
    assert "it is called with [[30.0], None, [10.0]]" in text
    assert "x.grad: tensor([300.,   0., 100.])" in text


def test_a_broadcast_gradient_is_summed_down_to_the_slot(cells):
    text = _text(_code(cells, "acc_s ="))
    assert "gradient of shape (3,)" in text and "expects shape       ()" in text
    assert "s.grad after backward(): tensor(6.) = that gradient summed: tensor(6.)" in text
    a = torch.ones(3, requires_grad=True)
    s = torch.tensor(2.0, requires_grad=True)
    node = (a * s).grad_fn
    with torch.no_grad():
        sent = node(torch.ones(3))
    assert sent[1].shape == (3,)  # the node itself does not sum it down


# --------------------------------------------------------------------------- section 3


def test_the_node_made_last_runs_first(cells):
    assert _lines(_code(cells, "s = torch.sin(a)  # made second")) == [
        "['AddBackward0', 'SinBackward0', 'acc(a)', 'ExpBackward0', 'acc(b)']"]
    first, second, swapped = _lines(_code(cells, "def numbered("))
    assert "'SinBackward0 1'" in first and "'ExpBackward0 0'" in first
    assert "'SinBackward0 0'" in second and "'ExpBackward0 1'" in second
    assert "'acc(a) max'" in first
    assert swapped == "['AddBackward0', 'ExpBackward0', 'acc(b)', 'SinBackward0', 'acc(a)']"
    assert lesson.PREDICTIONS["l21-predict-first"].answer() == "SinBackward0"


def test_accumulate_grad_has_the_largest_number():
    leaf = torch.ones(2, requires_grad=True)
    node = (leaf * 2).grad_fn.next_functions[0][0]
    assert node.name() == "torch::autograd::AccumulateGrad" and node._sequence_nr() == ACC
    assert "$2^{64} - 1$" in _prose(nbformat.read(NOTEBOOK, as_version=4).cells)


def test_the_network_follows_the_rule_and_is_drawn(cells):
    assert _lines(_code(cells, "def last_user_step")) == [
        "operation nodes in falling sequence number: True",
        "each AccumulateGrad right after its last user: True"]
    picture = _code(cells, "bl.plot.draw_dag(")
    assert any("image/png" in o.get("data", {}) for o in picture.outputs)


def test_ties_follow_the_heap(cells):
    torch_lines = _lines(_code(cells, "def stacked_order"))
    heap_lines = _lines(_code(cells, "def heap_order"))
    assert torch_lines == ["nothing waiting:   [0, 2, 1, 3]", "two nodes waiting: [0, 3, 1, 2]"]
    assert heap_lines[:2] == torch_lines
    assert heap_lines[2] == "torch and heapq agree in 16 of 16 cases"
    alone = [0, 2, 1, 3]
    assert alone not in ([0, 1, 2, 3], [3, 2, 1, 0])  # neither FIFO nor LIFO
    assert lesson.PREDICTIONS["l21-predict-ties"].answer() == alone


# --------------------------------------------------------------------------- sections 4, 5


def test_an_output_below_another_waits_for_it(cells):
    text = " ".join(_text(_code(cells, "y = torch.sin(a) + 2")).split())
    assert "AddBackward0 1" in text
    order = text.split("the engine's order: ")[1].split(" numbers")[0].split(", ")
    assert order == ["SumBackward0", "MulBackward0", "ExpBackward0", "AddBackward0",
                     "SinBackward0", "acc(a)"]
    assert "`y`'s node (number 1) runs after" in _prose(cells)
    assert "numbers the call itself took: 1" in text
    assert "the call took one sequence number for itself" in _prose(cells)


def test_pruning_counts(cells):
    text = _text(_code(cells, "everything = engine_order("))
    assert "backward():            10 nodes" in text
    assert ("backward(inputs=[x]):   7 nodes, skips ['SumBackward0', 'PowBackward0', 'acc(w)']"
            in text)
    assert "w.grad: None" in text
    grad_text = _text(_code(cells, "(grad_w,) = torch.autograd.grad"))
    assert "autograd.grad(loss, [w]): 8 nodes, skips ['acc(x)', 'acc(w)']" in grad_text
    assert "w.grad: None" in grad_text
    edge_text = " ".join(_text(_code(cells, "edge = get_gradient_edge(h)")).split())
    assert edge_text.startswith("SinBackward0 slot 0")
    assert ("4 nodes, AddBackward0, SumBackward0, MulBackward0, ExpBackward0" in edge_text)
    left, right = edge_text.split("dloss/dh: ")[1].split(" = ")
    assert left == right


def test_pruned_nodes_do_not_shift_ties(cells):
    assert _lines(_code(cells, "ask_all=False))")) == [
        "every leaf asked for:     [0, 2, 1]", "the stacked leaves only:  [0, 1, 2]"]


# --------------------------------------------------------------------------- section 6


def test_hooks_run_in_the_stated_order(cells):
    lines = _lines(_code(cells, "h.retain_grad()\nh.register_hook"))
    who = [re.split(r" sees| sends|, sends| \(after|, x\.grad", line)[0] for line in lines]
    assert who == ["h: tensor hook 1", "h: tensor hook 2", "h's node: pre-hook",
                   "h's node: hook", "x: tensor hook", "acc(x): pre-hook",
                   "x: post-accumulate", "acc(x): hook", "h.grad: tensor([ 60., 120.])"]
    assert "`h.grad` holds what the hooks made of the gradient: 60 and 120" in _prose(cells)


def test_a_hook_before_an_in_place_change_sees_the_old_value(cells):
    assert _lines(_code(cells, "a.mul_(3)")) == [
        "registered after mul_ sees  tensor([1., 1.])",
        "registered before mul_ sees tensor([3., 3.])",
        "a.grad (retain_grad, asked before mul_): tensor([1., 1.])"]
    assert "(3 per entry, since the new value is 3 times the old)" in _prose(cells)


def test_multi_grad_hooks(cells):
    assert _lines(_code(cells, 'mode="any"')) == [
        "all: [[3.0, 3.0], [3.0]]", "all: [None, [3.0]]", "any: tensor([3., 3.])"]
    text = " ".join(_text(_code(cells, 'lambda grads: print("never printed")')).split())
    assert text.startswith("RuntimeError: A leaf node was passed to _will_engine_execute_node")


# --------------------------------------------------------------------------- section 7, 8


def test_threads(cells):
    assert _lines(_code(cells, "def on_calling_thread")) == [
        "main thread: True | another thread: True"]
    assert _lines(_code(cells, "def backward_in_threads")) == [
        "a graph each:       ['ok', 'ok'] w.grad: tensor([4., 8.])",
        "one shared graph:   ['ok', 'ok'] w.grad: tensor([4., 8.])"]
    assert _lines(_code(cells, "together=False")) == [
        "['ok', 'Trying to backward through the graph a second time']"]


def test_the_nested_pass_runs_inside_the_outer_node(cells):
    lines = _lines(_code(cells, "class SinByInnerPass"))
    assert lines[:8] == [
        "SumBackward0", "MulBackward0", "SinByInnerPassBackward",
        "SinByInnerPassBackward starts",
        "  inner SinBackward0: same thread True, new graph task True",
        "SinByInnerPassBackward ends", "MulBackward0", "acc(x)"]
    left, right = lines[8].split(": ", 1)[1].split(" = 6 cos(2x): ")
    assert left == right


def test_reentrant_checkpointing_refuses_a_pruned_pass(cells):
    cell = _code(cells, "use_reentrant=True")
    assert "raises-exception" in cell.metadata.get("tags", [])
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert "incompatible with .grad() or passing an `inputs` parameter" in error.evalue


def test_the_three_settings(cells):
    assert _lines(_code(cells, "class TwoOutputs")) == [
        "set_materialize_grads True", "  backward receives tensor([1., 1.]) tensor([0., 0.])",
        "set_materialize_grads False", "  backward receives tensor([1., 1.]) None"]
    left, right = _text(_code(cells, "allow_mutation_on_saved_tensors()")).strip().split(
        ": ", 1)[1].split(" = cos of the old a: ")
    assert left == right
    text = _text(_code(cells, "is_grads_batched=True"))
    assert "the same as row by row: True | engine runs: 1 against 3" in text
    assert _lines(_code(cells, "for create_graph in (False, True)")) == [
        "create_graph=False: grad mode inside the node False",
        "create_graph=True: grad mode inside the node True"]


# --------------------------------------------------------------------------- the rule, at scale


def _positions(graph: engine.Graph, nodes: list) -> list[int]:
    index = {node: i for i, node in enumerate(engine.graph_nodes(graph.roots))}
    return [index[node] for node in nodes]


@pytest.mark.parametrize("seed", range(0, 60, 30))
def test_the_heap_on_sequence_numbers_is_torchs_order_on_random_graphs(seed):
    for k in range(seed, seed + 30):
        for what, maker in engine.GRAPHS:
            theirs, mine = engine.build(maker, k), engine.build(maker, k)
            want = _positions(theirs, engine.torch_order(theirs))
            got = _positions(mine, engine.execute(mine))
            assert got == want, f"{what}, seed {k}"
            for a, b in zip(theirs.leaves, mine.leaves, strict=True):
                assert (a.grad is None) == (b.grad is None)
                assert a.grad is None or torch.equal(a.grad, b.grad), f"{what}, seed {k}"


@pytest.mark.parametrize("seed", range(1000, 1150, 50))
def test_falling_numbers_and_accumulate_grad_right_after_its_last_user(seed):
    for k in range(seed, seed + 50):
        graph = engine.build(engine._random, k)
        ran = engine.torch_order(graph)
        numbers = [n._sequence_nr() for n in ran if n._sequence_nr() != ACC]
        assert numbers == sorted(numbers, reverse=True), k
        for step, node in enumerate(ran):
            if node._sequence_nr() != ACC:
                continue
            last = max(j for j, user in enumerate(ran)
                       if any(fn is node for fn, _ in user.next_functions))
            assert all(m._sequence_nr() == ACC for m in ran[last + 1:step]), k


def _stacked(n_tied: int, n_waiting: int) -> list[int]:
    """The order torch runs n_tied stacked leaves' nodes in, n_waiting older nodes waiting."""
    older = [torch.tensor(1.0, requires_grad=True) for _ in range(n_waiting)]
    waiting = [torch.sin(t) for t in older]
    leaves = [torch.tensor(float(k), requires_grad=True) for k in range(n_tied)]
    total = torch.stack(leaves).sum()
    for w in waiting:
        total = total + w
    every = older + leaves  # asked for all: pruned nodes would never wait in the queue
    ran = engine.torch_order(engine.Graph([total], [torch.tensor(1.0)], every, every))
    return [k for node in ran for k, leaf in enumerate(leaves)
            if getattr(node, "variable", None) is leaf]


class _Key:
    def __init__(self, key: int, label: object) -> None:
        self.key, self.label = key, label

    def __lt__(self, other: _Key) -> bool:
        return self.key > other.key


def _heap(n_tied: int, n_waiting: int) -> list[object]:
    heap: list[_Key] = []
    for k in range(n_waiting):
        heapq.heappush(heap, _Key(k, None))
    for k in range(n_tied):
        heapq.heappush(heap, _Key(ACC, k))
    return [heapq.heappop(heap).label for _ in range(n_tied)]


def test_the_layers_check_has_a_root_parameter_and_nested_layers():
    """"every module of model": the check's networks have a parameter on the root (name
    '') and layers one level down, which a walk of named_children() alone misses."""
    for seed in range(20):
        model, _ = layers.layer_model(torch.Generator().manual_seed(seed))
        own = layers._own(model)
        assert "" in own and any("." in name for name in own)


def test_heapq_ties_are_torchs_for_more_sizes():
    for tied in range(2, 9):
        for waiting in range(0, 8):
            assert _stacked(tied, waiting) == _heap(tied, waiting), (tied, waiting)


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 17, 2203, 9001])
def test_each_named_slip_differs_from_torch_on_its_graph(seed):
    """What makes every kept slip fail on every seed: its probe graph always tells it apart."""
    probes = {"fifo": engine._branches, "lifo": engine._branches, "oldest": engine._branches,
              "arrival": engine._ties}
    for queue, maker in probes.items():
        theirs, mine = engine.build(maker, seed), engine.build(maker, seed)
        assert (_positions(mine, engine.execute(mine, queue=queue))
                != _positions(theirs, engine.torch_order(theirs))), (queue, seed)
    pruned = engine.build(engine._pruned, seed)
    everything = engine.execute(pruned, prune=False)
    assert len(everything) > len(engine.execute(engine.build(engine._pruned, seed)))
    later, first = (engine.build(engine._later_output, seed) for _ in range(2))
    engine.execute(later)
    engine.execute(first, output_nr=False)
    assert later.roots[0].output_nr > 0
    assert not torch.equal(later.leaves[0].grad, first.leaves[0].grad)
