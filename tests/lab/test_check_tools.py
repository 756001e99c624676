"""Tests of backproplab.check: numerical_grad, check_grad, check_function, check_graph."""

from __future__ import annotations

import pytest
import torch
from custom_functions import Square

from backproplab.check import check_grad
from backproplab.custom_function import check_function
from backproplab.graph_quiz import check_graph
from backproplab.numerical import numerical_grad

# --------------------------------------------------------------------------
# numerical_grad
# --------------------------------------------------------------------------



def flat(obj: object) -> str:
    """A report's text with its line wrapping undone, for looking up phrases."""
    return " ".join(str(obj).split())

def _autograd(f, *xs):
    leaves = [x.detach().double().requires_grad_(True) for x in xs]
    return torch.autograd.grad(f(*leaves), leaves)


@pytest.mark.parametrize(
    ("f", "shapes"),
    [
        (lambda x: (x**3).sum(), [(4,)]),
        (lambda x, w: torch.tanh(x @ w).sum(), [(3, 4), (4, 2)]),
        (lambda x, b: ((x + b) ** 2).mean(), [(5, 3), (3,)]),
        (lambda x: x.sin().prod(), [()]),
    ],
)
def test_numerical_grad_matches_autograd(f, shapes):
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s, generator=g) for s in shapes]
    before = [x.clone() for x in xs]
    fd = numerical_grad(f, *xs)
    for got, want, x, old in zip(fd, _autograd(f, *xs), xs, before, strict=True):
        assert got.dtype == torch.float64 and got.shape == x.shape
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        assert torch.equal(x, old)  # inputs untouched


def test_numerical_grad_vjp_for_non_scalar_output():
    x = torch.tensor([1.0, 2.0, 3.0])
    v = torch.tensor([1.0, 10.0, 100.0])
    (got,) = numerical_grad(lambda x: x**2, x, v=v)
    torch.testing.assert_close(got, 2 * x.double() * v.double())
    with pytest.raises(ValueError, match=r"^v: f returns a tensor of shape \(3,\)"):
        numerical_grad(lambda x: x**2, x)
    with pytest.raises(ValueError, match=r"^v: expected shape \(3,\)"):
        numerical_grad(lambda x: x**2, x, v=torch.ones(2))


def test_numerical_grad_falls_back_to_a_loop():
    # .item() cannot be vmapped: the loop must take over and still be right.
    (got,) = numerical_grad(lambda x: x.sum().item() ** 2, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(got, torch.tensor([8.0, 8.0], dtype=torch.float64))


def test_numerical_grad_names_a_float32_tensor_that_f_closes_over():
    w = torch.tensor([[1.0, -2.0], [0.5, 3.0]])  # float32, as torch.tensor makes it
    x = torch.tensor([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"^f: it runs on the inputs as given \(float32\) but "
                                         r"not on the float64 copies.*closure or a global"):
        numerical_grad(lambda x: (x @ w).sum(), x)
    (got,) = numerical_grad(lambda x: (x @ w.double()).sum(), x)
    torch.testing.assert_close(got, w.double().sum(dim=1, keepdim=True).T)


def test_numerical_grad_keeps_an_error_of_f_its_own():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        numerical_grad(lambda x: x.nothing(), torch.ones(2))


def test_numerical_grad_bad_arguments():
    with pytest.raises(TypeError, match="^f: expected a callable"):
        numerical_grad(3, torch.ones(2))
    with pytest.raises(TypeError, match=r"^inputs\[0\]: expected a floating-point tensor"):
        numerical_grad(lambda x: x.sum(), torch.ones(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="^eps: expected a small positive number"):
        numerical_grad(lambda x: x.sum(), torch.ones(2), eps=0)


# --------------------------------------------------------------------------
# check_grad
# --------------------------------------------------------------------------


def test_check_grad_correct_mentions_both_references():
    x, w = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    r = check_grad(lambda x, w: (x * w).sum(), [x, w], [w, x], names=["dx", "dw"])
    assert r.ok
    lines = str(r).splitlines()
    assert lines[0] == "✓ dx: matches autograd (exact match) and finite differences (close)"
    assert lines[1].startswith("✓ dw:")


def test_check_grad_wrong_is_diagnosed():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = torch.tensor([[0.5, -1.0], [2.0, 1.0], [-0.5, 0.25]])

    def f(x, w):
        return (x @ w).sum()

    right_dw = x.T @ torch.ones(2, 2)
    r = check_grad(f, [x, w], [torch.ones(2, 2) @ w.T, right_dw.T], names=["dx", "dw"])
    assert not r.ok
    assert r["dx"].ok and not r["dw"].ok
    assert "transposed" in flat(r["dw"]) and "finite differences" in flat(r["dw"])


def test_check_grad_non_smooth_point_is_noted_not_failed():
    x = torch.tensor([0.0, 1.0])
    r = check_grad(lambda x: x.relu().sum(), x, torch.tensor([0.0, 1.0]), names=["dx"])
    assert r.ok and "not finite differences" in flat(r) and "differentiable" in flat(r)


def test_check_grad_bad_arguments():
    x = torch.ones(2)
    with pytest.raises(ValueError, match="^manual_grads: expected 1 gradient"):
        check_grad(lambda x: x.sum(), x, [x, x])
    with pytest.raises(ValueError, match="^f: expected a scalar"):
        check_grad(lambda x: x * 2, x, x)
    with pytest.raises(TypeError, match=r"^manual_grads\[0\]: expected a tensor"):
        check_grad(lambda x: x.sum(), x, "ones")
    with pytest.raises(ValueError, match="^names: "):
        check_grad(lambda x: x.sum(), x, x, names=["a", "b"])


# --------------------------------------------------------------------------
# check_function
# --------------------------------------------------------------------------


class WrongSquare(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return x * grad  # forgot the 2


class StashSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # stashed on ctx, not saved
        return x**2

    @staticmethod
    def backward(ctx, grad):
        return 2 * ctx.x * grad


class OnceSquare(Square):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class NumpySquare(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(2 * x.detach().numpy() * grad.detach().numpy())


class DetachedSquare(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x.detach() * grad  # right value, wrong second derivative


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, k):
        ctx.save_for_backward(x, w)
        ctx.k = k  # a number on ctx is fine
        return x @ w * k

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.T * ctx.k, x.T @ grad * ctx.k, None


class BadMatmul(ScaledMatmul):
    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.T * ctx.k, -(x.T @ grad) * ctx.k, None


X = torch.tensor([1.0, -2.0, 3.0])


def test_check_function_correct():
    r = check_function(Square, X)
    assert r.ok
    text = flat(r)
    assert "cast from float32 to float64" in text
    assert "✓ d out/d input0: Jacobian from backward matches finite differences" in text
    assert "✓ gradcheck" in text and "✓ gradgradcheck" in text
    assert "⚠" not in text


def test_check_function_wrong_backward_names_first_entry_and_mistake():
    r = check_function(WrongSquare, X)
    assert not r.ok
    line = flat(r["d out/d input0"])
    assert "entry [0, 0]" in line and "backward gives 1, finite differences give 2" in line
    assert "factor 2" in line
    assert not r["gradcheck"].ok


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad_output


class CubeIgnoresGradOutput(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x**2  # the local derivative only: grad_output is never used


class CubeIgnoresGradOutputAndFactor(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return x**2


POINTS = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)


def test_check_function_backward_ignoring_grad_output_is_diagnosed():
    r = check_function(CubeIgnoresGradOutput, POINTS)
    assert not r.ok
    c = r["d out/d input0"]
    assert "36 of 49 entries differ" in c.message
    assert c.diagnosis is not None
    assert "Likely mistake: backward ignores grad_output" in c.message
    assert "returns the local derivative" in c.message and "chain rule" in c.message


def test_check_function_correct_cube_is_not_said_to_ignore_grad_output():
    r = check_function(Cube, POINTS)
    assert r.ok, str(r)
    assert "grad_output" not in flat(r)


def test_check_function_ignoring_grad_output_with_a_wrong_local_derivative():
    # Not the local derivative either: the claim is only "ignores", plus the factor.
    c = check_function(CubeIgnoresGradOutputAndFactor, POINTS)["d out/d input0"]
    assert "backward ignores grad_output" in c.message
    assert "returns the local derivative" not in c.message
    assert "missing factor 3" in c.message


def test_check_function_ignoring_grad_output_with_scalar_output():
    # One output element: the one-hot Jacobian row is grad_output = 1, so it
    # matches; the probe with other grad_outputs still catches the mistake.
    r = check_function(CubeIgnoresGradOutput, torch.tensor(2.0))
    assert not r.ok
    assert r["d out/d input0"].ok
    line = flat(r["grad_output → input0"])
    assert line.startswith("✗") and "backward ignores grad_output" in line


def test_check_function_wrong_factor_is_not_said_to_ignore_grad_output():
    line = flat(check_function(WrongSquare, POINTS)["d out/d input0"])
    assert "missing factor 2" in line
    assert "grad_output" not in line


def test_check_function_two_inputs_points_at_the_wrong_pair():
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 3, generator=g), torch.randn(3, 2, generator=g)
    good = check_function(ScaledMatmul, x, w, 2.0)
    assert good.ok and "⚠" not in flat(good)
    bad = check_function(BadMatmul, x, w, 2.0)
    assert bad["d out/d input0"].ok and not bad["d out/d input1"].ok
    assert "sign is flipped" in flat(bad["d out/d input1"])


def test_check_function_warns_about_ctx_stash():
    r = check_function(StashSquare, X)
    assert r.ok  # right numbers, but a warning line
    assert r["ctx"].verdict == "warning"
    assert "ctx.x" in flat(r) and "save_for_backward" in flat(r)


@pytest.mark.parametrize("fn", [OnceSquare, NumpySquare])
def test_check_function_not_differentiable_backward_is_not_wrong(fn):
    r = check_function(fn, X)
    gg = r["gradgradcheck"]
    assert gg.ok and gg.verdict == "warning"
    assert "correct but is not itself differentiable" in gg.message


def test_check_function_wrong_second_derivative():
    r = check_function(DetachedSquare, X)
    assert r["gradcheck"].ok and not r["gradgradcheck"].ok
    assert "second derivatives" in r["gradgradcheck"].message


def test_check_function_backward_error_and_bad_class():
    class BadShape(Square):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return (2 * x * grad).sum()

    r = check_function(BadShape, X)
    assert not r.ok and "backward raised RuntimeError" in flat(r)
    with pytest.raises(TypeError, match="^fn_class: expected a subclass of torch.autograd"):
        check_function(lambda x: x, X)


def test_check_function_float64_input_says_so():
    assert "already float64" in flat(check_function(Square, X.double()))


# --------------------------------------------------------------------------
# check_graph
# --------------------------------------------------------------------------

REAL = ["MulBackward0", "AddBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]


@pytest.mark.parametrize(
    "prediction",
    [
        REAL,
        "MulBackward0 -> AddBackward0 -> AccumulateGrad -> AccumulateGrad -> AccumulateGrad",
        "MulBackward0, AddBackward0, AccumulateGrad, AccumulateGrad, AccumulateGrad",
        "MulBackward0\nAddBackward0\nAccumulateGrad\nAccumulateGrad\nAccumulateGrad\n",
    ],
)
def test_check_graph_right(prediction):
    r = check_graph(prediction, REAL)
    assert r.ok and "all 5 nodes named" in flat(r)


def test_check_graph_missing_extra_and_order():
    r = check_graph("AddBackward0 -> Mul -> SubBackward0 -> AccumulateGrad", REAL)
    nodes = flat(r["nodes"])
    assert "missing MulBackward0, AccumulateGrad (×2)" in nodes
    assert "extra Mul (did you mean MulBackward0?), SubBackward0" in nodes
    assert r["order"].ok  # what is shared is in order
    swapped = check_graph(["AddBackward0", "MulBackward0", *REAL[2:]], REAL)
    assert swapped["nodes"].ok and not swapped["order"].ok
    assert "out of order" in flat(swapped)


def test_check_graph_against_a_real_tensor():
    a, b, d = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    e = (a + b) * d
    assert check_graph(REAL, e).ok
    from backproplab.graph import describe

    assert check_graph(REAL, describe(e)).ok
    assert not check_graph(REAL[:2], e).ok


def test_check_graph_bad_arguments():
    with pytest.raises(TypeError, match="^prediction: expected a list of node names"):
        check_graph(3, REAL)
    with pytest.raises(TypeError, match="^output: expected a torch.Tensor, a Graph"):
        check_graph(REAL, 3)
