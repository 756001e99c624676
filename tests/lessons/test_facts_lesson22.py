"""Lesson 22's numbers: what the lesson prints and what its prose states, computed again on the
running torch. The gradients at kinks (relu, abs, sqrt, log, clamp against hardtanh, the norm at
zero), ReLU spelled three ways (clamp's choice and fmax's as the lesson says torch 2.13 and 2.15
make them), every op of the ties table split or picked as the prose sorts
them, the NaN through torch.where and what nan_to_num makes of it, the complex .grad of |z|²,
the two descents on a complex gain, the Wirtinger derivatives of z² and z|z|², gradcheck on
both complex backwards, and the worked examples of exercises 3 and 4."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from stored import flat_text, printed
from torch.autograd.gradcheck import GradcheckError

from backproplab.course.exercises import lesson22
from backproplab.course.exercises.lesson22 import softplus

LESSON = Path(__file__).parents[2] / "notebooks" / "22-where-calculus-runs-out.ipynb"


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(LESSON, as_version=4).cells}


def _prose(cells, *ids) -> str:
    return " ".join(" ".join(cells[i].source.split()) for i in ids)


# What the lesson says each release sends where clamp meets its bound and where fmax meets a
# tie, and the stored outputs, made with the locked torch 2.13.
RELEASE = ".".join(torch.__version__.split(".")[:2])
CLAMP_AT_BOUND = {"2.13": 1.0, "2.15": 0.0}
FMAX_AT_TIE = {"2.13": [1.0, 1.0, 0.0, 0.0], "2.15": [0.5, 0.5, 0.5, 0.5]}


def slopes(f, *points):
    x = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    f(x).sum().backward()
    return x.grad.tolist()


# --------------------------------------------------------------------------- kinks


def test_relu_abs_sqrt_and_log_at_their_kinks(cells):
    relu, absolute = slopes(torch.relu, -1.0, 0.0, 1.0), slopes(torch.abs, -1.0, 0.0, 1.0)
    assert relu == [0.0, 0.0, 1.0] and absolute == [-1.0, 0.0, 1.0]
    assert f"relu at -1, 0, 1: {relu}" in printed(cells["l22-03"])
    assert f"abs at -1, 0, 1:  {absolute}" in printed(cells["l22-06"])
    l1 = slopes(lambda p: F.l1_loss(p, torch.full_like(p, 3.0)), 3.0)
    assert l1 == [0.0] and f"F.l1_loss at its target: {l1}" in printed(cells["l22-06"])
    assert lesson22.PREDICTIONS["l22-predict-abs"].answer() == 0.0
    # rules 4 and 5, as printed
    out = printed(cells["l22-08"])
    assert slopes(torch.sqrt, 0.0, 1.0) == [float("inf"), 0.5] and "[inf, 0.5]" in out
    assert str(slopes(torch.sqrt, -1.0)) == "[nan]" and "[nan]" in out
    assert slopes(torch.log, -1.0) == [-1.0] and "log at -1:       [-1.0]" in out
    prose = _prose(cells, "l22-04", "l22-07")
    assert "slope from the left" in prose and "abs sent 0, the middle of −1 and 1" in prose
    # the subgradients the rule list names: the slopes on either side of the corner
    assert slopes(torch.abs, -0.5, 0.5) == [-1.0, 1.0] and slopes(torch.relu, -0.5, 0.5) == [0, 1]
    assert "for abs every slope from −1 to 1, for relu every one from 0 to 1" in prose


def test_relu_spelled_three_ways(cells):
    at_zero = [slopes(torch.relu, 0.0)[0],
               slopes(lambda x: torch.maximum(x, torch.zeros_like(x)), 0.0)[0]]
    assert at_zero == [0.0, 0.5] == lesson22.PREDICTIONS["l22-predict-relu"].answer()
    assert "relu_guess = [0.0, 0.5]" in cells["l22-predict-relu"].source
    clamp = slopes(lambda x: x.clamp(min=0), 0.0)[0]
    assert clamp == CLAMP_AT_BOUND.get(RELEASE, clamp) and clamp in (0.0, 1.0)
    out = printed(cells["l22-10"])
    assert "torch 2.13.0" in out  # the stored outputs are the locked torch's
    assert "torch.relu(x)            at -1, 0, 1: [0.0, 0.0, 1.0]" in out
    assert "x.clamp(min=0)           at -1, 0, 1: [0.0, 1.0, 1.0]" in out
    assert "torch.maximum(x, zeros)  at -1, 0, 1: [0.0, 0.5, 1.0]" in out
    prose = _prose(cells, "l22-11")
    assert "smallest subgradient 0" in prose and "(1/2, 1/2)" in prose
    assert "`x` gets 0.5" in prose and "In torch 2.13 its backward passes the gradient" in prose
    assert "so it sends 1 at a bound" in prose and "Torch 2.15 follows the rule: 0" in prose


def test_clamp_against_hardtanh_at_the_bounds(cells):
    clamp = slopes(lambda x: x.clamp(-1, 1), -1.0, 1.0)
    hardtanh, relu6 = slopes(F.hardtanh, -1.0, 1.0), slopes(F.relu6, 0.0, 6.0)
    assert clamp == [CLAMP_AT_BOUND.get(RELEASE, clamp[0])] * 2
    assert hardtanh == [0.0, 0.0] and relu6 == [0.0, 0.0]
    out = printed(cells["l22-12"])
    assert "at -1, 1: [1.0, 1.0]" in out and f"F.hardtanh(x)  at -1, 1: {hardtanh}" in out
    assert f"at  0, 6: {relu6}" in out
    # the two are the same function
    u = torch.linspace(-3, 3, 61, dtype=torch.float64)
    assert torch.equal(u.clamp(-1, 1), F.hardtanh(u))
    assert "clamp takes 1 in torch 2.13 and 0 in 2.15" in _prose(cells, "l22-13")


def test_the_norm_at_zero_and_its_spellings(cells):
    norm = slopes(lambda x: x.norm(), 0.0, 0.0)
    by_hand = slopes(lambda x: (x**2).sum().sqrt(), 0.0, 0.0)
    hypot = slopes(lambda x: torch.hypot(x[0], x[1]), 0.0, 0.0)
    assert norm == [0.0, 0.0] and all(v != v for v in by_hand + hypot)  # NaN
    out = printed(cells["l22-16"])
    assert "x.norm()            at (0, 0): [0.0, 0.0]" in out
    assert "sqrt((x**2).sum())  at (0, 0): [nan, nan]" in out
    assert "torch.hypot(x0, x1) at (0, 0): [nan, nan]" in out and "inf * 0 = nan" in out


# --------------------------------------------------------------------------- ties

TIES = [2.0, 3.0, 3.0, 2.0, 1.0, 1.0]
OPS = {
    "x.max()": lambda x: x.max(),
    "x.amax(dim=0)": lambda x: x.amax(dim=0),
    "x.max(dim=0).values": lambda x: x.max(dim=0).values,
    "x.topk(1).values": lambda x: x.topk(1).values,
    "F.max_pool1d(x, 6)": lambda x: F.max_pool1d(x.view(1, 1, -1), 6),
    "x.median()": lambda x: x.median(),
    "x.median(dim=0).values": lambda x: x.median(dim=0).values,
    "x.min()": lambda x: x.min(),
    "x.min(dim=0).values": lambda x: x.min(dim=0).values,
    "torch.maximum(x[:2], x[3:1:-1])": lambda x: torch.maximum(x[:2], x[2:4].flip(0)),
    "torch.fmax(x[:2], x[3:1:-1])": lambda x: torch.fmax(x[:2], x[2:4].flip(0)),
}
SPLIT = {"x.max()", "x.amax(dim=0)", "x.median()", "x.min()", "torch.maximum(x[:2], x[3:1:-1])"}


def test_every_tie_is_split_or_picked_as_the_prose_says(cells):
    out = printed(cells["l22-18"])
    for name, f in OPS.items():
        if name.startswith("torch.fmax"):
            continue  # the op whose choice changed, below
        grad = slopes(f, *TIES)
        kind = "split" if name in SPLIT else "pick"
        assert sum(grad) == pytest.approx(1.0 if "(x[:2]" not in name else 2.0)
        if kind == "split":
            assert all(g in (0.0, 0.5) for g in grad) and grad.count(0.5) >= 2, name
        else:
            assert all(g in (0.0, 1.0) for g in grad), name
        assert f"{name:<32} {kind:<6} x.grad = {grad}" in out
    # fmax picks its first input in torch 2.13 (the stored table) and splits in 2.15
    fmax = slopes(OPS["torch.fmax(x[:2], x[3:1:-1])"], *TIES)
    assert fmax[:4] == FMAX_AT_TIE.get(RELEASE, fmax[:4]) and fmax[4:] == [0.0, 0.0]
    stored = f"{'torch.fmax(x[:2], x[3:1:-1])':<32} pick   x.grad = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]"
    assert stored in out
    # the even count's median is the lower middle value, tied at entries 0 and 3
    assert torch.tensor(TIES).median().item() == 2.0
    prose = _prose(cells, "l22-17", "l22-19")
    for listed in ("`max()`, `amax`, `median()`, `min()`) splits",
                   "(`max(dim=...)`, `topk`, max pooling, `median(dim=...)`, `min(dim=...)`)",
                   "`torch.fmax`, the NaN-ignoring twin of `torch.maximum`, is the other op "
                   "that changed: in torch 2.13 it picks its first input, and in 2.15 it "
                   "splits like `maximum`"):
        assert listed in prose


def test_sort_gives_each_input_the_weight_of_its_place(cells):
    x = torch.tensor([3.0, 1.0, 3.0, 2.0], dtype=torch.float64, requires_grad=True)
    values, indices = x.sort()
    (values * torch.tensor([1.0, 10.0, 100.0, 1000.0], dtype=torch.float64)).sum().backward()
    assert x.grad.tolist() == [100.0, 1.0, 1000.0, 10.0]
    out = printed(cells["l22-20"])
    assert f"from inputs: {indices.tolist()}" in out and f"x.grad: {x.grad.tolist()}" in out


# --------------------------------------------------------------------------- where


def _where_grad(fix=None):
    x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
    inner = torch.where(x > 0, x, 1.0) if fix else x
    out = torch.where(x > 0, torch.sqrt(inner), x)
    (out.nan_to_num() if fix == "output" else out).sum().backward()
    return x.grad


def test_nan_through_where_and_the_fixes(cells):
    grad = _where_grad()
    assert grad[:2].isnan().all() and grad[2].item() == 0.25
    assert "x.grad:   tensor([   nan,    nan, 0.2500])" in printed(cells["l22-22"])
    assert "sqrt(x):  tensor([nan, 0., 2.])" in printed(cells["l22-22"])
    out = printed(cells["l22-26"])
    x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
    torch.where(x > 0, torch.sqrt(x), x).nan_to_num().sum().backward()
    assert x.grad[:2].isnan().all()
    assert "nan_to_num on the output:   tensor([   nan,    nan, 0.2500])" in out
    assert grad.nan_to_num().tolist() == [0.0, 0.0, 0.25]
    assert "nan_to_num on the gradient: tensor([0.0000, 0.0000, 0.2500])" in out
    fixed = _where_grad(fix=True)
    assert fixed.tolist() == [1.0, 1.0, 0.25]  # "the truth: 1, 1, 0.25"
    assert "x.grad: tensor([1.0000, 1.0000, 0.2500])" in printed(cells["l22-28"])
    assert "(the truth: 1, 1, 0.25)" in printed(cells["l22-22"])
    assert torch.isnan(torch.tensor(0.0) * torch.tensor(float("inf")))


def test_the_trace_shows_the_zero_turned_into_nan(cells):
    text = flat_text(cells["l22-24"])
    assert re.search(r"WhereBackward0 \[1\] \[0\], \[1\]", text)
    assert re.search(r"SqrtBackward0 \[0\] \[nan\]", text)
    assert "leaf grads: x = [nan]" in text


# --------------------------------------------------------------------------- complex


def test_the_complex_grad_of_abs_squared(cells):
    z = torch.tensor(1 + 2j, dtype=torch.complex128, requires_grad=True)
    (z.abs() ** 2).backward()
    assert z.grad.item() == 2 + 4j == lesson22.PREDICTIONS["l22-predict-complex"].answer()
    assert "dL/dx = 2.0  dL/dy = 4.0" in printed(cells["l22-31"])
    assert "z.grad = (2+4j)" in printed(cells["l22-31"])
    # 2 ∂L/∂z* = 2z for L = z z*
    assert z.grad.item() == 2 * (1 + 2j)
    assert "(|z|² at 1 + 2i gives 2 + 4i)" in _prose(cells, "l22-50")


def _descend(conjugate: bool):
    gen = torch.Generator().manual_seed(0)
    signal = torch.randn(64, generator=gen, dtype=torch.complex128)
    noise = 0.1 * torch.randn(64, generator=gen, dtype=torch.complex128)
    observed = (1.5 - 0.8j) * signal + noise

    def loss_of(w):
        return ((w * signal - observed).abs() ** 2).mean()

    w = torch.tensor(-1.0 + 1.0j, dtype=torch.complex128, requires_grad=True)
    losses = []
    for _ in range(25):
        w.grad = None
        loss = loss_of(w)
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * (w.grad.conj() if conjugate else w.grad)
    best = (signal.conj() * observed).sum() / (signal.abs() ** 2).sum()
    return w.item(), loss_of(w).item(), losses, best.item()


def test_descent_on_a_complex_gain(cells):
    out = printed(cells["l22-33"])
    w, loss, _, best = _descend(conjugate=False)
    assert f"torch's .grad (SGD)      w = {w:.3f}, loss {loss:.4g}" in out  # SGD = w - lr grad
    assert abs(w - best) < 0.02 and abs(w - (1.5 - 0.8j)) < 0.05  # "about 1.5 − 0.8i"
    w, loss, losses, _ = _descend(conjugate=True)
    assert f"the conjugate of .grad   w = {w:.3f}, loss {loss:.4g}" in out
    assert w.imag > 100 and all(b > a for a, b in zip(losses[2:], losses[3:], strict=False))
    assert "about 1.5 − 0.8i" in _prose(cells, "l22-35")


def test_wirtinger_derivatives_of_the_two_functions(cells):
    out = printed(cells["l22-37c"])
    assert "z**2        ds/dz = [2+4j, -1+2j]   ds/dz* = [0+0j, 0+0j]" in out
    assert "z * |z|**2  ds/dz = [10+0j, 2.5+0j]   ds/dz* = [-3+4j, -0.75-1j]" in out
    assert printed(cells["l22-37b"]).count("torch's VJP equals the formula: True") == 2
    z = torch.tensor([1 + 2j, -0.5 + 1j], dtype=torch.complex128)
    assert (2 * z).tolist() == [2 + 4j, -1 + 2j]  # ∂(z²)/∂z = 2z
    assert torch.allclose(2 * z.abs() ** 2, torch.tensor([10.0, 2.5], dtype=torch.float64))
    assert (z**2).tolist() == [-3 + 4j, -0.75 - 1j]
    g = torch.tensor([0.3 - 1j, 2 + 0.5j], dtype=torch.complex128)
    leaf = z.clone().requires_grad_()
    (vjp,) = torch.autograd.grad(leaf * leaf.abs() ** 2, leaf, g)
    assert torch.allclose(vjp, g.conj() * z**2 + g * 2 * z.abs() ** 2)


def test_complex_backward_and_gradcheck(cells):
    error = next(o for o in cells["l22-39"].outputs if o.output_type == "error")
    assert error.ename == "RuntimeError"
    assert "only for real scalar outputs but got torch.complex128" in error.evalue

    class Cubic(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z * z.abs() ** 2

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            return g * 2 * z.abs() ** 2  # the ∂s/∂z* term left out

    z = torch.tensor([1 + 2j, -0.5 + 1j], dtype=torch.complex128, requires_grad=True)
    with pytest.raises(GradcheckError, match="imaginary part of complex outputs"):
        torch.autograd.gradcheck(Cubic.apply, (z,))
    text = flat_text(cells["l22-41"])
    assert "CubicGain: gradcheck passed" in text
    assert "CubicGainAsIfHolomorphic: While considering the imaginary part" in text


# --------------------------------------------------------------------------- exercises


def test_the_worked_examples_of_the_exercises(cells):
    X = torch.tensor([[1.0, 0.0, -1.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
    y = torch.tensor([1.0, -1.0, 1.0])
    w = torch.tensor([0.5, -1.0, 0.25, 0.75], requires_grad=True)
    lesson22.hinge_loss(X, y, w, 0.5).backward()
    out = printed(cells["l22-45"])
    assert "scores: tensor([ 1.0000, -0.7500,  0.2500])" in out
    assert f"w.grad: {w.grad}" in out
    x = torch.tensor([-3.0, 0.5, 30.0, 1000.0], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([1.0, 2.0, 1.0, 1.0], dtype=torch.float64, requires_grad=True)
    softplus.soft_relu(x, beta).sum().backward()
    assert x.grad[:3].isfinite().all() and x.grad[3].isnan() and beta.grad[3].isnan()
    assert "x.grad:    tensor([0.0474, 0.7311, 1.0000,    nan]" in printed(cells["l22-48"])


def test_the_hinge_check_meets_every_kink_on_every_trial():
    """The inputs the check makes hit relu's kink, a clip bound with the margin positive,
    a score beyond the bound and a zero pair of weights, on every seed; and a violated
    margin inside the clip, so the hinge always sends a gradient (its sign shows)."""
    for seed in range(40):
        X, y, w, lam = lesson22.hinge_inputs(torch.Generator().manual_seed(seed))
        s = X @ w
        assert ((y * s) == 1).any() and ((y * s) == -2).any() and ((y * s) == -3).any()
        assert ((y * s) == -1).any()
        assert (w.view(-1, 2).abs().sum(dim=1) == 0).any() and lam > 0


def test_the_where_check_meets_every_region_on_every_trial():
    for seed in range(40):
        x, beta = softplus.soft_inputs(torch.Generator().manual_seed(seed))
        bx = beta * x
        assert (bx > 709.8).any() and ((bx > 20) & (bx < 22)).any()
        assert (bx <= 20).any() and (bx < -745).any()
        assert softplus.soft_relu(x.requires_grad_(), beta).isfinite().all()
