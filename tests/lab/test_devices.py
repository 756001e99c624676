"""The lab on any device, tested on the CPU: every tensor check_grad, numerical_grad,
compare and diagnose make lives on their inputs' device, a closure over float32 tensors
gets a clear error, and inputs on two devices are refused by name.

No GPU is needed. On the CPU a helper made with ``device=x.device`` and one made with
no device at all look alike, and ``.cpu()`` changes nothing, so `on_inputs_device` makes
them differ: under ``torch.device("meta")`` a tensor made without a device lands on the
meta device, and any aten op that hands back a tensor off the CPU fails the test at
once; ``Tensor.cpu()`` and ``.numpy()`` (which on a GPU would take a tensor away from
the inputs) fail it too. tests/lab/test_cuda.py runs the same functions on a real GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import backproplab as bl
from backproplab import numerical


def _only_cpu_tensors(name: str, out: object) -> None:
    for t in tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise AssertionError(f"{name} made a tensor on {t.device}, not on the inputs' "
                                 "device (cpu)")


class _TorchCalls(TorchFunctionMode):
    """Fails on ``Tensor.cpu()`` and ``Tensor.numpy()`` (with inputs on a GPU, either takes
    a tensor off their device) and on any call returning a tensor off the CPU (it sees
    ``torch.tensor(...)``, which no aten op reports)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.cpu, torch.Tensor.numpy):
            raise AssertionError(f"Tensor.{func.__name__}() takes a tensor off the inputs' "
                                 "device")
        out = func(*args, **(kwargs or {}))
        _only_cpu_tensors(f"torch function {getattr(func, '__name__', func)}", out)
        return out


class _AtenOps(TorchDispatchMode):
    """Fails on any aten op returning a tensor off the CPU, including those run below
    Python: by autograd's engine, inside vmap."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        _only_cpu_tensors(str(func), out)
        return out


@contextlib.contextmanager
def on_inputs_device() -> Iterator[None]:
    """For CPU inputs: fail where a tensor is made without naming a device (it lands on
    meta here, on the CPU beside CUDA inputs) or is moved to the CPU explicitly."""
    with torch.device("meta"), _TorchCalls(), _AtenOps():
        yield


def test_on_inputs_device_catches_a_tensor_made_without_a_device():
    x = torch.ones(2)
    with on_inputs_device():
        assert torch.zeros(2, device=x.device).device == x.device  # the right way passes
        with pytest.raises(AssertionError, match="on meta, not on the inputs' device"):
            torch.zeros(2)
        with pytest.raises(AssertionError, match="^torch function tensor made a tensor on meta"):
            torch.tensor(1.0, dtype=torch.float64)
        with pytest.raises(AssertionError, match=r"Tensor.cpu\(\) takes a tensor off"):
            x.cpu()


# Each call's inputs are made before the guard is on: only what the lab makes is checked.
_X = torch.tensor([1.0, -2.0, 3.0])
_X64 = _X.double()
_A = torch.tensor([[1.0, 2.0, 0.5], [-1.0, 0.25, 3.0]], dtype=torch.float64)
_B = torch.tensor([0.5, -1.5], dtype=torch.float64)


def _loss(w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A linear layer's squared error: w (2, 3) and b (2,), input _X64 from the closure."""
    return ((w @ _X64 + b) ** 2).sum()


_RESIDUAL = 2 * (_A @ _X64 + _B)

CALLS = {
    "numerical_grad": lambda: bl.numerical_grad(lambda x: (x ** 3).sum(), _X),
    "numerical_grad, a number input": lambda: bl.numerical_grad(
        lambda x, c: (x * c).sum(), _X, 2.0),
    "numerical_grad, f returns a number": lambda: bl.numerical_grad(
        lambda x: (x ** 2).sum().item(), _X),
    "numerical_grad, v as a list": lambda: bl.numerical_grad(
        lambda x: x ** 2, _X, v=[1.0, 1.0, 2.0]),
    "numerical_grad, a closure": lambda: bl.numerical_grad(_loss, _A, _B),
    "compare, exact": lambda: bl.compare("dx", _X64, _X),
    "compare, a flipped sign": lambda: bl.compare("dx", -_X, _X64),
    "compare, a number": lambda: bl.compare("dx", 3.0, _X[2:]),
    "compare, a list": lambda: bl.compare("dx", [1.0, -2.0, 6.0], _X),
    "compare, a shape": lambda: bl.compare("db", _A, _A.T),
    "diagnose, a missing sum": lambda: bl.diagnose(_A, _A.sum(0)),
    "diagnose, a factor": lambda: bl.diagnose(_X, 2 * _X),
    "diagnose, a NaN": lambda: bl.diagnose(_X.log(), _X),
    "check_grad, right": lambda: bl.check_grad(
        _loss, [_A, _B], [torch.outer(_RESIDUAL, _X64), _RESIDUAL], names=["dw", "db"]),
    "check_grad, two slips": lambda: bl.check_grad(
        _loss, [_A, _B], [torch.outer(_X64, _RESIDUAL), _RESIDUAL / 2], names=["dw", "db"]),
    "check_grad, float32": lambda: bl.check_grad(lambda x: (x ** 2).sum(), _X, [[2.0, -4.0, 6.0]]),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_every_tensor_is_made_on_the_inputs_device(call):
    expected = call()
    with on_inputs_device():
        got = call()
    assert str(got) == str(expected)  # and the same answer as without the guard


def test_the_batched_nudges_run_under_the_guard():
    # vmap must not fall back to the loop there, or the guard would miss its tensors.
    with on_inputs_device():
        rows = numerical._fd_rows_vmap(lambda x: (x ** 2).sum(), [_X64], 0, 1e-6)
    assert rows is not None
    torch.testing.assert_close(rows.reshape(-1), 2 * _X64)


def test_numerical_grad_returns_on_the_inputs_device():
    (g,) = bl.numerical_grad(lambda x: (x ** 2).sum().item(), _X)  # f gives a Python float
    assert g.device == _X.device and g.dtype == torch.float64


# --------------------------------------------------------------------------
# A closure over float32 tensors
# --------------------------------------------------------------------------

_W32 = torch.tensor([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])  # float32, as torch.tensor makes it
_FLOAT32_CLOSURE = (r"^f: it runs on the inputs as given \(float32\) but not on the float64 "
                    r"copies.*closure or a global.*Make those float64 on the inputs' device "
                    r"\(w.double\(\)\)")


def test_numerical_grad_names_the_fix_for_a_float32_closure():
    with pytest.raises(ValueError, match=_FLOAT32_CLOSURE):
        bl.numerical_grad(lambda x: (x @ _W32).sum(), _X)
    (g,) = bl.numerical_grad(lambda x: (x @ _W32.double()).sum(), _X)
    torch.testing.assert_close(g, _W32.double().sum(1))


def test_check_grad_names_the_fix_for_a_float32_closure():
    with pytest.raises(ValueError, match=_FLOAT32_CLOSURE):
        bl.check_grad(lambda x: (x @ _W32).sum(), _X, _W32.sum(1))
    assert bl.check_grad(lambda x: (x @ _W32.double()).sum(), _X64, _W32.sum(1)).ok


# --------------------------------------------------------------------------
# Inputs on two devices (the meta device stands for the second one here)
# --------------------------------------------------------------------------

_TWO_DEVICES = r"^inputs: expected tensors on one device, got inputs\[0\] on cpu and " \
               r"inputs\[1\] on meta"


def test_check_grad_refuses_inputs_on_two_devices():
    with pytest.raises(ValueError, match=_TWO_DEVICES):
        bl.check_grad(lambda a, b: (a * b).sum(), [torch.ones(2), torch.ones(2, device="meta")],
                      [torch.ones(2), torch.ones(2)])


def test_numerical_grad_refuses_inputs_on_two_devices():
    with pytest.raises(ValueError, match=_TWO_DEVICES):
        bl.numerical_grad(lambda a, b: (a * b).sum(), torch.ones(2),
                          torch.ones(2, device="meta"))


@pytest.mark.parametrize("call, argument", [
    (lambda: bl.numerical_grad(lambda x: x.sum(), torch.ones(2, device="meta")), "inputs[0]"),
    (lambda: bl.numerical_grad(lambda c, x: x.sum(), 2.0, torch.ones(2, device="meta")),
     "inputs[1]"),
    (lambda: bl.check_grad(lambda x: x.sum(), torch.ones(2, device="meta"), [[1.0, 1.0]]),
     "inputs[0]"),
    (lambda: bl.compare("dx", torch.ones(2, device="meta"), torch.ones(2)), "manual"),
    (lambda: bl.diagnose(torch.ones(2), torch.ones(2, device="meta")), "reference"),
], ids=["numerical_grad", "numerical_grad-after-a-number", "check_grad", "compare", "diagnose"])
def test_a_tensor_without_values_is_refused_by_name(call, argument):
    with pytest.raises(TypeError, match=r"the meta device") as info:
        call()
    assert str(info.value).startswith(f"{argument}: expected")
