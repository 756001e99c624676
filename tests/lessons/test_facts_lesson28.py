"""Lesson 28's claims, checked again on the locked torch: the formula table that ships in
torchgen (its entries, the digit counting an operation's overloads, the saved names a formula
reads, shared helpers, double backward and the four ways to have no gradient), the dispatch
keys on the path of a call and what no_grad and inference_mode change there, where a dispatch
mode sits (the prediction), the aten operations a backward runs, node by node, and what torch's
own cumprod and atan2 formulas do where the plain formulas fail. The exercises' graphs hold
what the check is built to catch: an engine sum between nodes and a node that runs nothing."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
import torchgen
from stored import printed
from torch.utils._python_dispatch import TorchDispatchMode

from backproplab.course.exercises import lesson28
from backproplab.course.exercises.lesson28 import recording

LESSON = Path(__file__).parents[2] / "notebooks" / "28-the-dispatcher.ipynb"
SITE = Path(torchgen.__file__).parents[1]
TABLE = SITE / "torchgen" / "packaged" / "autograd" / "derivatives.yaml"
HEADER = SITE / "torch" / "include" / "torch" / "csrc" / "autograd" / "generated" / "Functions.h"
ENTRIES = re.split(r"\n(?=- name: )", TABLE.read_text())[1:]


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def entry(name: str) -> str:
    return next(e for e in ENTRIES if e.removeprefix("- name: ").startswith(name + "("))


def overloads(op: str) -> list[str]:
    names = [e.removeprefix("- name: ").split("(")[0] for e in ENTRIES]
    return [n for n in names if n.split(".")[0] == op]


def keys(of: torch.Tensor | torch._C.DispatchKeySet) -> list[str]:
    """A tensor's dispatch keys (or a key set's), highest first."""
    found = []
    keyset = torch._C._dispatch_keys(of) if isinstance(of, torch.Tensor) else of
    while (key := keyset.highestPriorityTypeId()) != torch._C.DispatchKey.Undefined:
        found.append(torch._C._dispatch_key_name(key))
        keyset = keyset.remove(key)
    return found


class Log(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func).removeprefix("aten."))
        return func(*args, **(kwargs or {}))


# --------------------------------------------------------------------------- the table


def test_a_node_saves_what_its_formulas_read(cells):
    assert "self: grad * self.cos().conj()" in entry("sin")
    assert "self: grad * result.conj()" in entry("exp")
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    for out, saved in [(torch.sin(x), {"_saved_self"}), (torch.exp(x), {"_saved_result"}),
                       (x * x.detach(), {"_saved_self", "_saved_other"})]:
        assert {a for a in dir(out.grad_fn) if a.startswith("_saved_")} == saved
    assert "MulBackward0  its formulas read ['other', 'self']; the node saved ['other', 'self']" \
        in printed(cells["l28-07"])
    declared = re.search(r"struct TORCH_API MulBackward0 .*?\n};", HEADER.read_text(), re.S)[0]
    assert "SavedVariable self_;" in declared and "self_.reset_data();" in declared


def test_the_digit_counts_an_operations_entries_in_table_order(cells):
    assert overloads("pow") == ["pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar"]
    assert overloads("max") == ["max.dim", "max"]
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    names = [(x**2).grad_fn.name(), (x**x).grad_fn.name(), (2**x).grad_fn.name(),
             x.max().grad_fn.name(), x.max(dim=0).values.grad_fn.name()]
    assert names == ["PowBackward0", "PowBackward1", "PowBackward2", "MaxBackward1",
                     "MaxBackward0"]
    out = printed(cells["l28-11"])
    assert "x.max(dim=0)  MaxBackward0  entry 0: max.dim" in out
    out = printed(cells["l28-13"])
    assert "class names by the rule; all in the header: True" in out
    assert "all for _foreach_ operations or view copies: True" in out


def test_shared_helpers_split_or_pick_ties():
    users = [e.removeprefix("- name: ").split("(")[0] for e in ENTRIES
             if "evenly_distribute_backward(" in e]
    assert {"max", "min", "median"} <= set(users)
    x = torch.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]  # split evenly
    x.grad = None
    x.max(dim=0).values.backward()
    assert sorted(x.grad.tolist()) == [0.0, 0.0, 1.0]  # all to the index it returns


def test_composites_double_backward_and_four_ways_to_no_gradient():
    assert overloads("square") == [] and overloads("normalize") == []
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    assert x.square().grad_fn.name() == "PowBackward0"
    (g,) = torch.autograd.grad(torch.relu(x).sum(), x, create_graph=True)
    assert g.grad_fn.name() == "ThresholdBackwardBackward0"
    table = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    bags = torch.nn.functional.embedding_bag(torch.tensor([1, 2, 4, 5]), table,
                                             torch.tensor([0, 2]), mode="mean")
    (g,) = torch.autograd.grad((bags**2).sum(), table, create_graph=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        g.sum().backward()  # on torch 2.13 and 2.15 alike (cdist's is implemented in 2.15)
    torch.floor(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert torch.histc(x, 4).grad_fn is None
    with pytest.raises(RuntimeError, match="not implemented"):
        torch.special.zeta(x, x.detach() + 1).sum().backward()
    assert overloads("heaviside") == []
    assert torch.heaviside(x, x.detach()).grad_fn.name() == "torch::autograd::NotImplemented"


# --------------------------------------------------------------------------- the dispatcher


def table_of(op: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in torch._C._dispatch_dump_table(op).splitlines())


def test_the_autograd_key_sits_above_the_kernel_on_every_tensor():
    for tensor in (torch.ones(2, requires_grad=True), torch.ones(2)):
        assert keys(tensor) == ["AutocastCPU", "AutogradCPU", "ADInplaceOrView", "CPU"]
    assert keys(torch.ones(2, 2).to_mkldnn()) == ["AutogradOther", "ADInplaceOrView",
                                                  "MkldnnCPU"]
    mul, mul_ = table_of("aten::mul.Tensor"), table_of("aten::mul_.Tensor")
    assert "autograd kernel" in mul["AutogradCPU"] and mul["ADInplaceOrView"].startswith(
        "fallthrough")
    assert not mul_["ADInplaceOrView"].startswith("fallthrough")
    assert "math kernel" in table_of("aten::linear")["AutogradCPU"]


def test_starting_below_a_key_skips_its_job(cells):
    a = torch.ones(3)
    with torch._C._AutoDispatchBelowADInplaceOrView():
        a.mul_(2)
    assert a._version == 0 and a.tolist() == [2.0, 2.0, 2.0]
    x = torch.ones(2, requires_grad=True)
    with torch._C._AutoDispatchBelowAutograd():
        out = x * x
    assert out.grad_fn is None and not out.requires_grad
    assert "x * w below Autograd:           grad_fn None" in printed(cells["l28-30"])


def test_no_grad_keeps_the_path_and_inference_mode_drops_autograd(cells):
    x = torch.ones(3, requires_grad=True)

    def path() -> list[str]:
        bits = torch._C._dispatch_keys(x).raw_repr()
        bits |= torch._C._dispatch_tls_local_include_set().raw_repr()
        bits &= ~torch._C._dispatch_tls_local_exclude_set().raw_repr()
        return keys(torch._C.DispatchKeySet.from_raw_repr(bits))

    usual = path()
    assert usual[0] == "AutogradCPU"
    with torch.no_grad():
        assert path() == usual
    with torch.inference_mode():
        assert path() == [k for k in usual if k != "AutogradCPU"]
        made = torch.ones(3)
    assert "Autograd" not in keys(made) and "ADInplaceOrView" not in keys(made)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        made * torch.ones(3, requires_grad=True)
    assert "inference_mode  ['ADInplaceOrView', 'BackendSelect', 'CPU']" in printed(
        cells["l28-32"])


def test_a_mode_sits_below_autograd_so_it_sees_no_node(cells):
    assert lesson28.PREDICTIONS["l28-predict-grad-fn"].answer() is None
    assert "out.requires_grad False, out.grad_fn None" in printed(cells["l28-36"])
    with Log():
        assert "Python" in repr(torch._C._dispatch_tls_local_include_set())


# --------------------------------------------------------------------------- watching


def test_the_aten_operations_of_a_backward(cells):
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, -1.0, 0.5], requires_grad=True)
    loss = (x * w).exp().sum()
    with Log() as log:
        loss.backward()
    assert log.ops == ["ones_like.default", "expand.default", "detach.default", "mul.Tensor",
                       "mul.Tensor", "mul.Tensor", "detach.default", "detach.default"]
    with Log() as again:
        (x * w).exp().sum().backward()
    assert again.ops[-2:] == ["add_.Tensor", "add_.Tensor"]  # .grad already there
    assert "the last two operations: ['add_.Tensor', 'add_.Tensor']" in printed(cells["l28-41"])


def test_the_exercise_graphs_hold_an_engine_sum_and_a_silent_node():
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        spec = recording.make_inputs(gen)["graphs"][0]  # the shared shape
        line = recording.timeline(spec)
        between = [op for who, ops in line if who is None for op in ops]
        assert "aten.ones_like.default" in between and "aten.add.Tensor" in between
        assert ("AddBackward0", []) in [(who, ops) for who, ops in line]
        assert sum(who == "torch::autograd::AccumulateGrad" for who, _ in line) == 2


def test_torchs_cumprod_and_atan2_formulas_where_the_plain_ones_fail(cells):
    runs = []
    for values in ([0.5, 2.0, -1.0, 3.0], [0.5, 0.0, -1.0, 0.0]):
        row = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        loss = torch.cumprod(row, 0).sum()
        with Log() as log:
            loss.backward()
        runs.append(log.ops)
        assert torch.isfinite(row.grad).all()
    assert runs[0] == runs[1] and "div.Tensor" in runs[0]  # no branch on the values
    assert "the same operations without zeros and with two: True" in printed(cells["l28-50"])
    ys = torch.tensor([[1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    xs = torch.tensor([2.0, 0.0], dtype=torch.float64, requires_grad=True)
    torch.atan2(ys, xs).sum().backward()
    assert ys.grad.tolist() == [[0.4, 0.0]] and xs.grad.tolist() == [-0.2, 0.0]
    plain = xs.detach() / (xs.detach() ** 2 + ys.detach() ** 2)
    assert torch.isnan(plain[0, 1])
    assert "torch: dy [[0.4, 0.0]], dx [-0.2, 0.0]" in printed(cells["l28-54"])


def test_the_prose_of_the_reveal_and_the_recap(cells):
    prose = " ".join(cells["l28-56"].source.split())
    assert "`inference_mode` takes the autograd keys off the path" in prose
    assert "F.linear" in " ".join(cells["l28-29"].source.split())
    out = F.linear(torch.ones(1, 2, requires_grad=True), torch.ones(3, 2), torch.ones(3))
    assert out.grad_fn.name() == "AddmmBackward0"
