"""The lab's public checkers on real CUDA tensors: the same verdicts and diagnoses as on
the CPU. Skipped without a GPU; tests/lab/test_devices.py checks on the CPU that every
tensor these functions make lives on their inputs' device.

Where a message could differ between the devices only in round-off (the numbers of a
mismatch after a matmul), the diagnosis data are compared, not the text.
"""

from __future__ import annotations

import pytest
import torch

import backproplab as bl

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device: run .ci/gpu on a machine with one"
)

CUDA = torch.device("cuda")

# A linear layer's squared error; x is the closure's data, w (2, 3) and b (2,) the inputs.
_X = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
_W = torch.tensor([[1.0, 2.0, 0.5], [-1.0, 0.25, 3.0]], dtype=torch.float64)
_B = torch.tensor([0.5, -1.5], dtype=torch.float64)


def _layer(device: torch.device):
    """(loss, [w, b], the right [dw, db]) with every tensor on ``device``."""
    x, w, b = _X.to(device), _W.to(device), _B.to(device)

    def loss(w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ((w @ x + b) ** 2).sum()

    residual = 2 * (w @ x + b)
    return loss, [w, b], [torch.outer(residual, x), residual]


def _verdicts(report: bl.Report) -> list[tuple]:
    """Each check's name, verdict and diagnosis; "exact" and "close" count as one, since
    the GPU may sum in another order than the CPU."""
    return [(c.name, c.ok, "match" if c.verdict in ("exact", "close") else c.verdict,
             c.diagnosis) for c in report]


def test_check_grad_passes_on_cuda():
    loss, inputs, right = _layer(CUDA)
    report = bl.check_grad(loss, inputs, right, names=["dw", "db"])
    assert report.ok, str(report)
    assert all("and finite differences (close)" in c.message for c in report), str(report)


def test_check_grad_passes_on_cuda_in_float32():
    x = torch.tensor([1.0, -2.0, 3.0], device=CUDA)
    report = bl.check_grad(lambda x: (x ** 3).sum(), x, 3 * x ** 2)
    assert report.ok, str(report)
    assert str(report) == str(bl.check_grad(lambda x: (x ** 3).sum(), x.cpu(), 3 * x.cpu() ** 2))


@pytest.mark.parametrize("slip", ["transposed", "halved", "sign"])
def test_check_grad_names_the_same_slip_as_on_the_cpu(slip):
    def wrong(right):
        dw, db = right
        return {"transposed": [dw.T, db], "halved": [dw, db / 2], "sign": [-dw, db]}[slip]

    loss, inputs, right = _layer(torch.device("cpu"))
    on_cpu = bl.check_grad(loss, inputs, wrong(right), names=["dw", "db"])
    loss, inputs, right = _layer(CUDA)
    on_cuda = bl.check_grad(loss, inputs, wrong(right), names=["dw", "db"])
    assert not on_cuda.ok
    assert _verdicts(on_cuda) == _verdicts(on_cpu)
    kinds = [c.diagnosis.kind if c.diagnosis else None for c in on_cuda]
    assert kinds == {"transposed": ["transposed", None], "halved": [None, "factor"],
                     "sign": ["sign", None]}[slip]


def test_check_grad_takes_manual_gradients_from_the_cpu():
    loss, inputs, right = _layer(CUDA)
    assert bl.check_grad(loss, inputs, [g.cpu() for g in right]).ok
    assert bl.check_grad(loss, inputs, [g.tolist() for g in right]).ok


def test_check_grad_refuses_inputs_on_two_devices():
    with pytest.raises(ValueError, match=r"^inputs: expected tensors on one device, got "
                                         r"inputs\[0\] on cpu and inputs\[1\] on cuda:\d"):
        bl.check_grad(lambda w, b: (w.cuda() + b).sum(), [_B, _B.to(CUDA)], [_B, _B])


def test_numerical_grad_on_cuda():
    x = _X.to(CUDA)
    (g,) = bl.numerical_grad(lambda x: (x ** 3).sum(), x)
    assert g.device == x.device and g.dtype == torch.float64
    torch.testing.assert_close(g, 3 * x ** 2)

    loss, inputs, right = _layer(CUDA)
    for got, want in zip(bl.numerical_grad(loss, *inputs), right, strict=True):
        assert got.device == want.device
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_numerical_grad_on_cuda_with_numbers_v_and_item():
    x = _X.to(CUDA)
    gx, gc = bl.numerical_grad(lambda x, c: (c * x ** 2).sum(), x, 2.0)
    assert gx.device == gc.device == x.device
    torch.testing.assert_close(gx, 4 * x)
    torch.testing.assert_close(gc, (x ** 2).sum())

    (g,) = bl.numerical_grad(lambda x: x ** 2, x, v=[1.0, 1.0, 2.0])  # v from the CPU
    torch.testing.assert_close(g, 2 * x * torch.tensor([1.0, 1.0, 2.0], device=CUDA,
                                                       dtype=torch.float64))

    (g,) = bl.numerical_grad(lambda x: (x ** 2).sum().item(), x)  # f returns a Python float
    assert g.device == x.device
    torch.testing.assert_close(g, 2 * x)


def test_numerical_grad_names_the_fix_for_a_float32_closure_on_cuda():
    w32 = torch.tensor([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]], device=CUDA)
    x = torch.tensor([1.0, -2.0, 3.0], device=CUDA)
    with pytest.raises(ValueError, match=r"^f: it runs on the inputs as given \(float32\) but "
                                         r"not on the float64 copies.*closure or a global"):
        bl.numerical_grad(lambda x: (x @ w32).sum(), x)
    (g,) = bl.numerical_grad(lambda x: (x @ w32.double()).sum(), x)
    torch.testing.assert_close(g, w32.double().sum(1))


def test_numerical_grad_refuses_inputs_on_two_devices():
    with pytest.raises(ValueError, match=r"^inputs: expected tensors on one device, got "
                                         r"inputs\[0\] on cuda:\d and inputs\[1\] on cpu"):
        bl.numerical_grad(lambda a, b: (a.cpu() * b).sum(), _X.to(CUDA), _X)


@pytest.mark.parametrize("manual, reference", [
    (_X, _X), (-_X, _X), (2 * _X, _X), (_W.T, _W), (_W, _W.sum(0)), (_X.log(), _X),
], ids=["exact", "sign", "factor", "transposed", "missing-sum", "nan"])
def test_compare_and_diagnose_on_cuda_say_what_they_say_on_the_cpu(manual, reference):
    on_cpu = bl.compare("g", manual, reference)
    for m, r in [(manual.to(CUDA), reference.to(CUDA)),  # both on the GPU
                 (manual, reference.to(CUDA)),  # an answer from the CPU
                 (manual.to(CUDA), reference)]:  # a reference from the CPU
        on_cuda = bl.compare("g", m, r)
        assert _verdicts(on_cuda) == _verdicts(on_cpu)
        # The numbers too: the values were made on the CPU and compare element-wise.
        # (repr, since a NaN in them is not == to itself)
        assert repr(on_cuda[0].numbers) == repr(on_cpu[0].numbers)
        assert str(on_cuda) == str(on_cpu)
        assert bl.diagnose(m, r) == bl.diagnose(manual, reference)


def test_compare_takes_a_list_or_a_number_against_cuda():
    assert bl.compare("g", _X.tolist(), _X.to(CUDA)).ok
    assert bl.compare("g", 3.0, torch.tensor([3.0], device=CUDA)).ok
    assert bl.diagnose([-v for v in _X.tolist()], _X.to(CUDA)).kind == "sign"


def _chain(device: torch.device):
    t = {k: torch.tensor(v, device=device, requires_grad=True)
         for k, v in {"x": 1.0, "w": 2.0, "b": 3.0}.items()}
    return (t["w"] * t["x"] + t["b"]) ** 2, t


def test_describe_and_trace_backward_on_cuda():
    loss, names = _chain(torch.device("cpu"))
    graph_cpu = str(bl.describe(loss, names=names))
    trace_cpu = str(bl.trace_backward(loss, names=names))
    loss, names = _chain(CUDA)
    assert str(bl.describe(loss, names=names)) == graph_cpu
    trace = bl.trace_backward(loss, names=names)
    assert str(trace) == trace_cpu
    assert trace.leaf_grad("w").values == (10.0,)
    assert names["w"].grad.device == names["w"].device
