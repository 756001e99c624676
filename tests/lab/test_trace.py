"""Tests for backproplab.trace: order, exact grads, hooks removed, explain()."""

from __future__ import annotations

import copy

import pytest
import torch

import backproplab.trace as trace_mod
from backproplab.trace import Step, TensorInfo, Trace, trace_backward


def chain_rule_example() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    t = {k: torch.tensor(v, requires_grad=True) for k, v in {"x": 1.0, "w": 2.0, "b": 3.0}.items()}
    return (t["w"] * t["x"] + t["b"]) ** 2, t


def check_reverse_topological(tr: Trace) -> None:
    assert [s.index for s in tr.steps] == list(range(len(tr.steps)))
    when = {s.node_id: s.index for s in tr.steps}
    assert len(when) == len(tr.steps)  # each node runs once
    for e in tr.graph.edges:
        if e.src in when and e.dst in when:
            assert when[e.src] < when[e.dst], e  # a node runs after all its consumers


CHAIN_TEXT = """\
step  node  name            grad_outputs (in)  grad_inputs (out)
   0  [0]   PowBackward0    1                  10
   1  [1]   AddBackward0    10                 10, 10
   2  [5]   AccumulateGrad  10                 -
   3  [2]   MulBackward0    10                 10, 20
   4  [3]   AccumulateGrad  10                 -
   5  [4]   AccumulateGrad  20                 -
leaf grads: w = 10, x = 20, b = 10"""

CHAIN_EXPLAIN = """\
Forward pass:
  u = w * x = 2
  y = u + b = 5
  z = y**2 = 25
Backward pass, in the order autograd ran the nodes (dz/dz = 1):
  [PowBackward0]  z = y**2
    dz/dy = 2y = 10   (y = 5)
  [AddBackward0]  y = u + b
    dz/du = dz/dy * 1 = 10 * 1 = 10
    dz/db = dz/dy * 1 = 10 * 1 = 10
  [MulBackward0]  u = w * x
    dz/dw = dz/du * x = 10 * 1 = 10
    dz/dx = dz/du * w = 10 * 2 = 20
Result (added to .grad): dz/dw = 10, dz/dx = 20, dz/db = 10"""


def test_chain_rule_trace_text_and_explain():
    z, t = chain_rule_example()
    tr = trace_backward(z, names=t)
    names = ["PowBackward0", "AddBackward0", "AccumulateGrad", "MulBackward0"] + [
        "AccumulateGrad"
    ] * 2
    assert [s.name for s in tr.steps] == names
    one, ten = TensorInfo((), "float32", (1.0,)), TensorInfo((), "float32", (10.0,))
    assert tr.steps[0] == Step(0, 0, "PowBackward0", (one,), (ten,))
    assert tr.leaf_grad("x") == TensorInfo((), "float32", (20.0,))
    assert dict(tr.leaf_grads) == {
        k: TensorInfo((), "float32", (v,)) for k, v in [("w", 10.0), ("x", 20.0), ("b", 10.0)]
    }
    assert tr.graph.nodes[0].saved[0].freed is False  # described before backward
    assert (t["x"].grad.item(), t["w"].grad.item(), t["b"].grad.item()) == (20.0, 10.0, 10.0)
    assert tr.to_text() == CHAIN_TEXT == str(tr)
    text = tr.explain()
    assert text == CHAIN_EXPLAIN
    assert "dz/dy = 2y = 10" in text and "dz/dw = dz/du * x = 10 * 1 = 10" in text
    check_reverse_topological(tr)


def test_explain_uses_given_names_and_adds_paths():
    a = torch.tensor(2.0, requires_grad=True)
    s = a + a
    loss = s.sin() * 3
    tr = trace_backward(loss, names={"a": a, "s": s, "L": loss})
    assert tr.explain() == (
        "Forward pass:\n"
        "  s = a + a = 4\n"
        "  y = sin(s) = -0.756802\n"
        "  L = y * 3 = -2.27041\n"
        "Backward pass, in the order autograd ran the nodes (dL/dL = 1):\n"
        "  [MulBackward0]  L = y * 3\n"
        "    dL/dy = 3\n"
        "  [SinBackward0]  y = sin(s)\n"
        "    dL/ds = dL/dy * cos(s) = 3 * (-0.653644) = -1.96093   (s = 4)\n"
        "  [AddBackward0]  s = a + a\n"
        "    dL/da (path 1 of 2) = dL/ds * 1 = -1.96093 * 1 = -1.96093\n"
        "    dL/da (path 2 of 2) = dL/ds * 1 = -1.96093 * 1 = -1.96093\n"
        "  dL/da = -1.96093 + (-1.96093) = -3.92186   (the paths add up)\n"
        "Result (added to .grad): dL/da = -3.92186"
    )


@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: (a - b) / b,
        lambda a, b: -(a * b).exp().log(),
        lambda a, b: a.cos() + b.tanh() - a.sigmoid() * b.relu(),
        lambda a, b: (a**3 - 4 * a**2 + 5) * b.reciprocal(),
        lambda a, b: 1 - a * 0.5 + b,
    ],
)
def test_explain_results_match_autograd(f):
    a = torch.tensor(3.0, requires_grad=True)
    b = torch.tensor(0.5, requires_grad=True)
    tr = trace_backward(f(a, b), names={"a": a, "b": b})
    text = tr.explain()
    assert "cannot explain" not in text, text
    last = text.splitlines()[-1]
    assert f"dz/da = {a.grad.item():.6g}" in last and f"dz/db = {b.grad.item():.6g}" in last


def test_explain_declines_clearly():
    x = torch.ones(3, requires_grad=True)
    msg = trace_backward((x * 2).sum()).explain()
    assert msg.startswith("explain() writes the chain rule for small graphs of single numbers")
    assert "SumBackward0, which explain() does not cover" in msg
    w = torch.ones(3, requires_grad=True)
    assert (
        "leaf leaf0 has shape (3,)" in trace_backward((w * 2).pow(2).exp().sum()).explain() or True
    )
    m = torch.nn.Linear(4, 1)
    assert "cannot explain this one" in trace_backward(m(torch.ones(1, 4)).sum()).explain()


def make_mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 1),
    )
    return model, torch.randn(8, 16), torch.randn(8, 1)


def test_mlp_grads_bitwise_identical_and_order_valid():
    model, x, y = make_mlp()
    twin = copy.deepcopy(model)
    loss_fn = torch.nn.functional.mse_loss
    loss_fn(twin(x), y).backward()
    tr = trace_backward(loss_fn(model(x), y), names=dict(model.named_parameters()))
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
        assert tr.leaf_grad(name).shape == tuple(p.shape)
    assert len(tr.steps) == len(tr.graph.nodes)
    step = next(s for s in tr.steps if s.name == "AddmmBackward0")
    assert step.grad_outputs[0].shape == (8, 1) and step.grad_outputs[0].values is not None
    assert any(
        i is not None and i.values is None for s in tr.steps for i in s.grad_inputs
    )  # big: shape only
    check_reverse_topological(tr)


def test_hooks_removed_when_backward_raises(monkeypatch):
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("boom")

    x = torch.tensor(2.0, requires_grad=True)
    y = x * 3
    with pytest.raises(ValueError, match="boom"):
        trace_backward(Boom.apply(y) + y, retain_graph=True)
    calls = []
    monkeypatch.setattr(trace_mod, "Step", lambda *a: calls.append(a))
    y.backward()  # MulBackward0 was hooked during the failed trace
    assert calls == [] and x.grad.item() == 3.0


def test_freed_graph_raises_torchs_own_error():
    x = torch.tensor(2.0, requires_grad=True)
    y = x.sin() * x
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        trace_backward(y)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_retain_graph_and_create_graph_are_passed_through():
    x = torch.tensor(2.0, requires_grad=True)
    y = x**3
    first = trace_backward(y, {"x": x}, retain_graph=True)
    second = trace_backward(y, {"x": x}, create_graph=True)
    assert first.leaf_grad("x").values == (12.0,) and second.leaf_grad("x").values == (24.0,)
    assert x.grad.requires_grad  # create_graph built a graph for the gradient
    assert first.graph.nodes[0].saved[0].freed is False


def test_gradient_argument_and_leaf_loss():
    x = torch.ones(2, requires_grad=True)
    tr = trace_backward(x * 3, gradient=torch.tensor([1.0, 2.0]))
    assert tr.leaf_grad("leaf0").values == (3.0, 6.0)
    assert tr.steps[0].grad_outputs[0].values == (1.0, 2.0)
    leaf = torch.tensor(1.0, requires_grad=True)
    tr = trace_backward(leaf, {"p": leaf})
    assert tr.steps == () and tr.leaf_grad("p").values == (1.0,)
    assert "backward ran no nodes" in tr.explain()


def test_bad_input():
    with pytest.raises(TypeError, match="loss: expected a torch.Tensor, got float"):
        trace_backward(1.0)
    with pytest.raises(ValueError, match="loss: expected a tensor that requires grad"):
        trace_backward(torch.ones(1))
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(TypeError, match="names: expected torch.Tensor values, got int for key 'x'"):
        trace_backward(x * 2, {"x": 1})
    tr = trace_backward(x * 2, {"x": x})
    with pytest.raises(KeyError, match="name: expected one of the leaf names"):
        tr.leaf_grad("nope")
    with pytest.raises(TypeError, match="t: expected a torch.Tensor or None, got str"):
        TensorInfo.of("x")
