"""Tests for backproplab.graph: structure, text, DOT, awkward graphs, bad input."""

from __future__ import annotations

import re
import threading

import pytest
import torch
from custom_functions import Square

from backproplab.graph import Edge, Graph, LeafInfo, Node, SavedTensor, describe


def scalars(**values: float) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, requires_grad=True) for k, v in values.items()}


def check_topological(g: Graph) -> None:
    assert [n.id for n in g.nodes] == list(range(len(g.nodes)))
    for e in g.edges:
        assert e.src < e.dst, e  # every node before all the nodes it sends to


# -- lesson 1: e = (a + b) * d ---------------------------------------------

E_TEXT = """\
[0] MulBackward0  saved: other (float32, ()), self (float32, ())
 ├─[1] AddBackward0
 │  ├─[2] AccumulateGrad  a  shape=()  value=2.0
 │  └─[3] AccumulateGrad  b  shape=()  value=3.0
 └─[4] AccumulateGrad  d  shape=()  value=4.0"""

E_DOT = """\
digraph autograd {
  rankdir=TB;
  node [shape=box, fontname="Helvetica", fontsize=10];
  n0 [label="[0] MulBackward0\\nsaved: other, self"];
  n1 [label="[1] AddBackward0"];
  n2 [label="[2] AccumulateGrad\\na  ()  value=2.0", style=filled, fillcolor="lightblue"];
  n3 [label="[3] AccumulateGrad\\nb  ()  value=3.0", style=filled, fillcolor="lightblue"];
  n4 [label="[4] AccumulateGrad\\nd  ()  value=4.0", style=filled, fillcolor="lightblue"];
  n0 -> n1;
  n0 -> n4;
  n1 -> n2;
  n1 -> n3;
}
"""


def test_e_structure_text_and_dot():
    t = scalars(a=2.0, b=3.0, d=4.0)
    e = (t["a"] + t["b"]) * t["d"]
    g = describe(e, names=t)
    assert g.names() == ["MulBackward0", "AddBackward0"] + ["AccumulateGrad"] * 3
    assert [n.kind for n in g.nodes] == ["op", "op", "leaf", "leaf", "leaf"]
    assert g.edges == (Edge(0, 1, 0, 0), Edge(0, 4, 1, 0), Edge(1, 2, 0, 0), Edge(1, 3, 1, 0))
    assert g.roots == (0,)
    assert g.nodes[0].saved == (
        SavedTensor("other", (), "float32", False),
        SavedTensor("self", (), "float32", False),
    )
    leaf = g.node("a").leaf
    assert leaf == LeafInfo("a", (), "float32", (2.0,), None, False, t["a"])
    assert leaf.tensor is t["a"] and g.node(2).fn.variable is t["a"]
    assert g.nodes[0].fn is e.grad_fn
    assert [n.leaf.name for n in g.leaves()] == ["a", "b", "d"]
    assert [n.id for n in g.children(0)] == [1, 4] and [n.id for n in g.parents(4)] == [0]
    assert g.to_text() == E_TEXT == str(g)
    assert g._repr_html_() == "<pre>" + E_TEXT.replace("<", "&lt;") + "</pre>"
    assert g.to_dot() == E_DOT
    assert repr(g) == "Graph(5 nodes, 4 edges, roots=(0,))"
    check_topological(g)


def test_same_code_same_text_and_default_names():
    texts = []
    for _ in range(2):
        t = scalars(a=2.0, b=3.0, d=4.0)
        texts.append(describe((t["a"] + t["b"]) * t["d"]).to_text())
    assert texts[0] == texts[1]
    assert "leaf0  shape=()  value=2.0" in texts[0] and "leaf2" in texts[0]
    assert "0x" not in texts[0]


def test_after_backward_saved_tensors_are_freed_and_grads_shown():
    t = scalars(a=2.0, b=3.0, d=4.0)
    e = (t["a"] + t["b"]) * t["d"]
    e.backward()
    g = describe(e, names=t)
    assert g.nodes[0].saved == (
        SavedTensor("other", None, None, True),
        SavedTensor("self", None, None, True),
    )
    assert g.node("d").leaf.grad == (5.0,) and g.node("d").leaf.has_grad
    assert g.to_text() == (
        "[0] MulBackward0  saved: other (freed), self (freed)\n"
        " ├─[1] AddBackward0\n"
        " │  ├─[2] AccumulateGrad  a  shape=()  value=2.0  grad=4.0\n"
        " │  └─[3] AccumulateGrad  b  shape=()  value=3.0  grad=4.0\n"
        " └─[4] AccumulateGrad  d  shape=()  value=4.0  grad=5.0"
    )


# -- lesson 2: chain rule ----------------------------------------------------


def test_chain_rule_example():
    t = scalars(x=1.0, w=2.0, b=3.0)
    z = (t["w"] * t["x"] + t["b"]) ** 2
    g = describe(z, names=t)
    assert g.names() == ["PowBackward0", "AddBackward0", "MulBackward0"] + ["AccumulateGrad"] * 3
    assert g.to_text() == (
        "[0] PowBackward0  saved: self (float32, ())\n"
        " └─[1] AddBackward0\n"
        "    ├─[2] MulBackward0  saved: other (float32, ()), self (float32, ())\n"
        "    │  ├─[3] AccumulateGrad  w  shape=()  value=2.0\n"
        "    │  └─[4] AccumulateGrad  x  shape=()  value=1.0\n"
        "    └─[5] AccumulateGrad  b  shape=()  value=3.0"
    )


def test_leaf_used_twice_is_one_node_with_two_edges():
    t = scalars(a=2.0)
    g = describe(t["a"] + t["a"], names=t)
    assert g.names() == ["AddBackward0", "AccumulateGrad"]
    assert g.edges == (Edge(0, 1, 0, 0), Edge(0, 1, 1, 0))
    assert g.children(0) == (g.nodes[1],)
    assert g.to_text() == (
        "[0] AddBackward0\n"
        " ├─[1] AccumulateGrad  a  shape=()  value=2.0\n"
        " └─(see [1]) AccumulateGrad a"
    )


def test_several_outputs_share_a_subgraph():
    t = scalars(a=2.0, b=3.0)
    y = t["a"] * t["b"]
    g = describe([y + 1, y * 2, y], names=t)
    assert g.names() == [
        "AddBackward0",
        "MulBackward0",
        "MulBackward0",
        "AccumulateGrad",
        "AccumulateGrad",
    ]
    assert g.roots == (0, 1, 2)
    assert sum(n.fn is y.grad_fn for n in g.nodes) == 1
    assert g.to_text() == (
        "[0] AddBackward0\n"
        " └─[2] MulBackward0  saved: other (float32, ()), self (float32, ())\n"
        "    ├─[3] AccumulateGrad  a  shape=()  value=2.0\n"
        "    └─[4] AccumulateGrad  b  shape=()  value=3.0\n"
        "[1] MulBackward0  saved: other (int64, ())\n"
        " └─(see [2]) MulBackward0\n"
        "(see [2]) MulBackward0"
    )
    check_topological(g)


def test_leaf_output_is_a_one_node_graph():
    x = torch.ones(2, requires_grad=True)
    g = describe(x, names={"x": x})
    assert len(g.nodes) == 1 and g.edges == () and g.roots == (0,)
    n = g.nodes[0]
    assert (n.name, n.kind, n.fn, n.leaf.name, n.leaf.value) == (
        "Leaf",
        "leaf",
        None,
        "x",
        (1.0, 1.0),
    )
    assert g.to_text() == "[0] Leaf  x  shape=(2,)  value=[1.0, 1.0]"
    # a leaf output also used by another output is the same node
    g2 = describe([x.sin(), x], names={"x": x})
    assert g2.names() == ["SinBackward0", "AccumulateGrad"] and g2.roots == (0, 1)


def test_views_and_in_place_ops():
    b = torch.arange(3.0, requires_grad=True)
    a = torch.tensor(5.0, requires_grad=True)
    c = b.clone()
    c[1:].mul_(2)
    c[0] = a
    g = describe(c.sum(), names={"a": a, "b": b})
    assert (
        g.names()
        == ["SumBackward0", "CopySlices", "CopySlices", "CloneBackward0"] + ["AccumulateGrad"] * 2
    )
    parts = b.unbind()
    g = describe(parts[0] * parts[2], names={"b": b})
    assert [(e.dst, e.input_nr) for e in g.edges] == [(1, 0), (1, 2), (2, 0)]
    assert g.to_text().endswith(" └─(see [1]) UnbindBackward0  (output 2)")
    check_topological(g)


def test_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    loss = torch.nn.functional.mse_loss(model(torch.ones(2, 4)), torch.zeros(2, 1))
    g = describe(loss, names=dict(model.named_parameters()))
    assert g.names() == [
        "MseLossBackward0", "AddmmBackward0", "AccumulateGrad", "ReluBackward0", "AddmmBackward0",
        "AccumulateGrad", "TBackward0", "AccumulateGrad", "TBackward0", "AccumulateGrad",
    ]  # fmt: skip
    assert [n.leaf.name for n in g.leaves()] == ["2.bias", "0.bias", "0.weight", "2.weight"]
    assert g.node("0.weight").leaf.shape == (3, 4) and g.node("0.weight").leaf.value is not None
    assert g.node(3).saved == (SavedTensor("result", (2, 3), "float32", False),)
    check_topological(g)



def test_custom_function():
    a = torch.tensor(3.0, requires_grad=True)
    s = Square.apply(a) * 2
    g = describe(s, names={"a": a})
    assert g.names() == ["MulBackward0", "SquareBackward", "AccumulateGrad"]
    assert [n.kind for n in g.nodes] == ["op", "custom", "leaf"]
    assert g.nodes[1].saved == (SavedTensor("saved_tensors[0]", (), "float32", False),)
    assert (
        "[1] SquareBackward  (custom Function)  saved: saved_tensors[0] (float32, ())"
        in g.to_text()
    )
    s.backward()
    assert describe(s).nodes[1].saved == (SavedTensor("saved_tensors", None, None, True),)


def test_double_backward_graph():
    x = torch.tensor(2.0, requires_grad=True)
    (dy,) = torch.autograd.grad(x**3, x, create_graph=True)
    g = describe(dy, names={"x": x})
    assert g.names() == ["MulBackward0", "MulBackward1", "PowBackward0", "AccumulateGrad"]
    assert g.node("x").leaf.tensor is x
    (d2,) = torch.autograd.grad(dy, x)
    assert d2.item() == 12.0


# -- size: no recursion --------------------------------------------------------


def free_in_big_stack(holder: list) -> None:
    """Drop the last references to a deep graph in a thread with a large stack.

    Once Python has seen a node (any grad_fn / next_functions walk does),
    torch 2.13 frees the chain through the Python wrappers recursively,
    which overflows the default 8 MB stack at about 50,000 levels.
    """
    old = threading.stack_size(512 * 2**20)
    try:
        t = threading.Thread(target=holder.clear)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)


def test_deep_chain_of_100000_ops():
    x = torch.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y.sin()
    g = describe(y, names={"x": x})
    assert len(g.nodes) == 100_001 and len(g.edges) == 100_000
    assert g.nodes[-1].leaf.name == "x"
    check_topological(g)
    text = g.to_text()
    assert len(text) < 100 * len(g.nodes)  # indentation is capped: linear size
    assert max(map(len, text.splitlines())) < 200
    assert text.count("[100000] AccumulateGrad  x") == 1
    dot = g.to_dot()
    assert dot.count(" -> ") == 100_000
    holder = [y, g]
    del y, g
    free_in_big_stack(holder)


def test_graph_of_a_million_nodes():
    # 1000 groups of 1000 additions, each group stacked, then all stacked:
    # 1,001,003 nodes but shallow, so freeing it needs no deep stack.
    x = torch.tensor(1.0, requires_grad=True)
    out = torch.stack([torch.stack([x + 1 for _ in range(1000)]) for _ in range(1000)]).sum()
    g = describe(out, names={"x": x})
    assert len(g.nodes) == 1_001_003 and len(g.edges) == 2_001_001
    assert g.names()[:3] == ["SumBackward0", "StackBackward0", "StackBackward0"]
    assert g.nodes[-1].leaf.name == "x" and len(g.in_edges(len(g.nodes) - 1)) == 1_000_000
    check_topological(g)


# -- bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("outputs", "names", "error", "pattern"),
    [
        (3, None, TypeError, r"outputs: expected a torch.Tensor or a sequence of tensors, got int"),
        ("ab", None, TypeError, r"outputs: .* got str"),
        ([1, 2], None, TypeError, r"outputs: .* got a list holding int at index 0"),
        ([], None, ValueError, r"outputs: .* got an empty list"),
        (torch.ones(2), None, ValueError, r"outputs: expected tensors that require grad"),
        ("grad", ["w"], TypeError, r"names: expected a mapping from str to torch.Tensor, got list"),
        ("grad", {1: torch.ones(1)}, TypeError, r"names: expected str keys, got int key 1"),
        (
            "grad",
            {"w": 2.0},
            TypeError,
            r"names: expected torch.Tensor values, got float for key 'w'",
        ),
    ],
)
def test_bad_input(outputs, names, error, pattern):
    if isinstance(outputs, str) and outputs == "grad":
        outputs = torch.ones(2, requires_grad=True) * 2
    with pytest.raises(error, match=pattern):
        describe(outputs, names)


def test_bad_keys_for_node_lookup():
    t = scalars(a=2.0)
    g = describe(t["a"] + t["a"] * 2, names=t)
    with pytest.raises(ValueError, match=r"key: .* got 'MulBackward9'"):
        g.node("MulBackward9")
    with pytest.raises(TypeError, match=r"key: .* got float"):
        g.node(1.5)
    with pytest.raises(ValueError, match=r"key: expected a node id in 0..2, got 7"):
        g.node(7)


def test_one_line_per_node_in_mixed_graph_is_not_required_but_ids_are_unique():
    x = torch.randn(3, requires_grad=True)
    g = describe([x.exp().sum(), (x * 2).mean()], names={"x": x})
    ids = re.findall(r"^\s*(?:[├└]─)?\[(\d+)\]", g.to_text(), re.M)
    assert sorted(map(int, ids)) == list(range(len(g.nodes)))


# -- DOT validity ----------------------------------------------------------------


def parse_dot(src: str) -> tuple[set[str], list[tuple[str, str]]]:
    """A small checker: balanced braces, quoted strings closed, edges between declared nodes."""
    depth, in_str, escaped = 0, False, False
    for ch in src:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            assert depth >= 0
    assert depth == 0 and not in_str
    assert src.startswith("digraph ") and src.rstrip().endswith("}")
    string = r'"(?:[^"\\]|\\.)*"'
    decl = re.compile(rf"^  (n\d+) \[label={string}(?:, [a-z]+=(?:[a-z]+|{string}))*\];$")
    edge = re.compile(rf"^  (n\d+) -> (n\d+)(?: \[label={string}\])?;$")
    nodes, edges = set(), []
    for line in src.splitlines()[3:-1]:
        if m := decl.match(line):
            nodes.add(m.group(1))
        elif m := edge.match(line):
            edges.append((m.group(1), m.group(2)))
        else:
            raise AssertionError(f"unexpected DOT line: {line!r}")
    assert all(a in nodes and b in nodes for a, b in edges)
    return nodes, edges


def test_dot_is_valid_and_quotes_awkward_names():
    w = torch.ones(2, 2, requires_grad=True)
    x = torch.ones(2, requires_grad=True)
    parts = (w @ x).unbind()
    g = describe([parts[0] * parts[1], Square.apply(x).sum()], names={'w "weights"\\': w, "x": x})
    nodes, edges = parse_dot(g.to_dot())
    assert len(nodes) == len(g.nodes) and len(edges) == len(g.edges)
    assert r"w \"weights\"\\" in g.to_dot()
    assert '[label="output 1"]' in g.to_dot()
    parse_dot(E_DOT)


def test_node_and_edge_are_frozen():
    t = scalars(a=1.0)
    g = describe(t["a"] * 3)
    with pytest.raises(AttributeError):
        g.nodes[0].name = "x"  # type: ignore[misc]
    assert isinstance(g.nodes, tuple) and isinstance(g.nodes[0], Node)


# -- the column form behind describe ------------------------------------------


def test_graph_built_from_objects_equals_described_graph():
    t = scalars(a=2.0, b=3.0, d=4.0)
    g = describe((t["a"] + t["b"]) * t["d"], names=t)
    text, dot = g.to_text(), g.to_dot()  # rendered before nodes/edges exist
    assert g.names() == ["MulBackward0", "AddBackward0"] + ["AccumulateGrad"] * 3
    same = Graph(g.nodes, g.edges, g.roots)
    assert same == g and hash(same) == hash(g)
    assert same.to_text() == text == E_TEXT and same.to_dot() == dot == E_DOT
    assert g.nodes is g.nodes and g.edges is g.edges  # built once
    assert g.nodes[2].label() == "[2] AccumulateGrad  a  shape=()  value=2.0"


def test_graph_is_frozen():
    t = scalars(a=1.0)
    g = describe(t["a"] * 3)
    for attr in ("nodes", "edges", "roots", "extra"):
        with pytest.raises(AttributeError):
            setattr(g, attr, ())
    with pytest.raises(AttributeError):
        del g.roots


def test_one_saved_tensor_fast_path_tracks_shapes_and_freeing():
    x = torch.ones(2, 3, requires_grad=True)
    s = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    ys = [x.sin(), s.sin(), x.sin().sin()]
    g = describe(ys, names={"x": x, "s": s})
    saved = {n.id: n.saved for n in g.nodes if n.name == "SinBackward0"}
    assert sorted(map(str, saved.values())) == sorted(
        [str((SavedTensor("self", (2, 3), "float32", False),))] * 3
        + [str((SavedTensor("self", (), "float64", False),))]
    )
    ys[1].backward()
    g = describe(ys[1], names={"s": s})
    assert g.nodes[0].saved == (SavedTensor("self", None, None, True),)
    assert g.to_text().startswith("[0] SinBackward0  saved: self (freed)\n")
    # a fresh node of the same type after a freed one still reads its tensor
    assert describe(s.sin()).nodes[0].saved == (SavedTensor("self", (), "float64", False),)


def test_edges_with_gaps_and_output_numbers_from_columns():
    x = torch.tensor(2.0, requires_grad=True)
    parts = torch.stack([x, x * 3]).unbind()
    y = torch.tensor(1.5) * parts[1]  # next_functions starts with None: position 1
    g = describe([parts[1] * 2 + y], names={"x": x})
    expected = [(e.src, e.dst, e.position, e.input_nr) for e in g.edges]
    assert any(nr == 1 for *_, nr in expected)
    lone = [e for e in g.edges if len(g.out_edges(e.src)) == 1]
    assert any(e.position == 1 for e in lone)  # the None before it still counts
    again = Graph(g.nodes, g.edges, g.roots)
    assert again.to_text() == g.to_text() and again.to_dot() == g.to_dot()
    assert '[label="output 1"]' in g.to_dot()
