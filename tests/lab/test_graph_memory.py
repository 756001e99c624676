"""Graph.saved_memory against sizes worked out by hand; in-place and naming fixes."""

from __future__ import annotations

import pytest
import torch

import backproplab as bl
from backproplab.graph import SavedTensor, describe

F32 = 4  # bytes per float32 element


def test_one_saved_tensor_counts_its_storage():
    x = torch.ones(10, requires_grad=True)
    m = describe(x.sin().sum()).saved_memory()
    assert (m.total, m.leaf_bytes, m.storages) == (10 * F32, 10 * F32, 1)
    assert m.by_op == {"SinBackward0": 40}


def test_a_storage_saved_by_two_nodes_counts_once():
    x = torch.ones(4, requires_grad=True)
    y = x.exp()  # ExpBackward0 saves y
    g = describe((y * y).sum())  # MulBackward0 saves y twice
    m = g.saved_memory()
    assert m.total == 4 * F32 and m.storages == 1 and m.leaf_bytes == 0
    assert sum(m.by_node.values()) == m.total == sum(m.by_op.values())
    # Counted for the node that saved it first in the forward pass: exp.
    assert m.by_op == {"MulBackward0": 0, "ExpBackward0": 16}


def test_a_saved_view_keeps_its_whole_storage():
    base = torch.ones(100)
    w = torch.ones(10, requires_grad=True)
    view = base[:10]  # 10 elements of a 100-element storage
    m = describe((w * view).sum()).saved_memory()
    # Only the view is saved (w's gradient needs it; the view needs none), and
    # it keeps all 100 elements of its base alive.
    assert (m.total, m.leaf_bytes, m.storages) == (100 * F32, 0, 1)


def test_freed_tensors_count_nothing():
    x = torch.ones(8, requires_grad=True)
    z = (x * x).sum()
    assert describe(z).saved_memory().total == 8 * F32
    z.backward()
    m = describe(z).saved_memory()
    assert (m.total, m.storages) == (0, 0) and m.by_op == {"MulBackward0": 0}
    assert all(s.freed and s.nbytes is None for s in describe(z).nodes[1].saved)


def test_mlp_activations_grow_linearly_with_the_batch():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))

    def extra(batch: int) -> int:
        m = describe(net(torch.randn(batch, 10)).sum()).saved_memory()
        return m.total - m.leaf_bytes

    # Per example: the input, saved by the first layer (10 floats), and the ReLU
    # output, saved by ReLU and by the second layer (5 floats, one storage).
    # The second layer also saves its weight, which is a leaf and not counted here.
    assert extra(1) == 15 * F32 and extra(64) == 64 * 15 * F32 and extra(1024) == 1024 * 15 * F32


def test_an_unrolled_loop_10000_steps_deep():
    w = torch.tensor(0.5, requires_grad=True)
    h = torch.zeros(3)
    for _ in range(10_000):
        h = torch.tanh(w * h + 1.0)
    g = describe(h.sum())
    m = g.saved_memory()
    # Each step tanh saves its output (3 floats); the next step's mul saves that
    # same tensor again (counted once) and w (a leaf, once overall). The first
    # mul saves the starting zeros.
    assert m.by_op["TanhBackward0"] == 10_000 * 3 * F32
    assert m.total == 10_000 * 3 * F32 + 3 * F32 + F32 and m.leaf_bytes == F32
    assert len(g.nodes) > 30_000


def test_text_table_is_deterministic():
    x = torch.ones(2, 3, requires_grad=True)
    text = str(describe((x @ x.T).relu().sum()).saved_memory())
    # mm saves x and x.T (one storage, a leaf); relu saves its 2 x 2 output.
    last = "total 40 bytes in 2 storages (24 bytes of them in leaf tensors)"
    assert text.splitlines()[-1] == last
    assert "0x" not in text


def test_modified_in_place_is_not_reported_as_freed():
    x = torch.ones(2, requires_grad=True)
    t = x * 1
    y = t.sin()
    t.add_(1)
    g = describe(y.sum())
    saved = g.node("SinBackward0").saved[0]
    assert saved == SavedTensor("self", None, None, False, modified=True, versions=(0, 1))
    assert "self (modified in place: saved at version 0, now 1)" in g.to_text()
    assert "(modified in place)" in g.to_dot()
    assert "freed" not in g.to_text()


def test_default_leaf_names_never_repeat_a_given_name():
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    g = describe(a * b, names={"leaf0": b})
    assert sorted(n.leaf.name for n in g.leaves()) == ["leaf0", "leaf1"]
    assert g.node("leaf0").leaf.tensor is b
    trace = bl.trace_backward(a * b, names={"leaf0": b})
    assert trace.leaf_grad("leaf0").values == (2.0,)  # d(ab)/db = a


@pytest.mark.parametrize("bad", [None, 3, "x", [torch.ones(1)]])
def test_describe_names_the_bad_argument(bad):
    with pytest.raises((TypeError, ValueError), match="outputs"):
        describe(bad)
