"""The synthetic data sets: right shapes, reproducible, and honest about noise."""

import pytest
import torch

from backproplab import data


def test_linear_data_matches_the_lesson_description():
    x, y = data.linear_data()
    assert x.shape == y.shape == (100, 1)
    assert x.dtype == y.dtype == torch.float32
    assert 0.0 <= x.min() and x.max() <= 10.0
    residual = y - (2 * x + 1)
    # 100 draws with sd 1.5: the sample sd lands well inside this band.
    assert 1.2 < residual.std().item() < 1.8
    assert abs(residual.mean().item()) < 0.5


def test_linear_data_is_reproducible_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    x1, y1 = data.linear_data()
    after = torch.rand(1)
    x2, y2 = data.linear_data()
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(before, after)


def test_linear_data_without_noise_is_exactly_the_line():
    x, y = data.linear_data(n=5, slope=-3.0, intercept=0.5, noise=0.0)
    assert torch.allclose(y, -3.0 * x + 0.5)


def test_different_seeds_give_different_data():
    assert not torch.equal(data.linear_data(seed=1)[0], data.linear_data(seed=2)[0])


def test_xor_targets_are_xor_of_inputs():
    x, y = data.xor_data()
    assert x.shape == (4, 2) and y.shape == (4, 1)
    assert torch.equal(y.flatten(), (x[:, 0] != x[:, 1]).float())


def test_regression_data_shapes_and_nonlinearity():
    x, y = data.regression_data(n=512, features=10)
    assert x.shape == (512, 10) and y.shape == (512, 1)
    # A least-squares linear fit leaves clearly more than the 0.1 noise sd,
    # so the MLP lesson has something to learn beyond a line.
    design = torch.cat([x, torch.ones(512, 1)], dim=1)
    coef = torch.linalg.lstsq(design, y).solution
    assert (y - design @ coef).std().item() > 0.15


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: data.linear_data(n=0), "n"),
        (lambda: data.linear_data(n=2.5), "n"),
        (lambda: data.linear_data(low=3, high=1), "high"),
        (lambda: data.linear_data(noise=-1), "noise"),
        (lambda: data.regression_data(features=0), "features"),
    ],
)
def test_bad_arguments_are_named(call, argument):
    with pytest.raises(ValueError, match=rf"^{argument}: expected"):
        call()


def test_spiral_data_shapes_classes_and_range():
    x, y = data.spiral_data()
    assert x.shape == (300, 2) and x.dtype == torch.float32
    assert y.shape == (300,) and y.dtype == torch.int64
    assert y.bincount().tolist() == [100, 100, 100]
    assert float(x.norm(dim=1).max()) <= 1.0 + 1e-6
    x5, y5 = data.spiral_data(n_per_class=7, classes=5)
    assert x5.shape == (35, 2) and sorted(set(y5.tolist())) == [0, 1, 2, 3, 4]


def test_spiral_data_is_reproducible_and_arms_are_not_linearly_separable():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    x1, y1 = data.spiral_data(seed=3)
    assert torch.equal(before, torch.rand(1))
    x2, y2 = data.spiral_data(seed=3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, data.spiral_data(seed=4)[0])
    # The best linear classifier (least squares on one-hot targets) misses many points.
    features = torch.cat([x1.double(), torch.ones(len(x1), 1, dtype=torch.float64)], dim=1)
    onehot = torch.nn.functional.one_hot(y1).double()
    coef = torch.linalg.lstsq(features, onehot).solution
    accuracy = ((features @ coef).argmax(1) == y1).double().mean().item()
    assert accuracy < 0.75


@pytest.mark.parametrize(
    "kwargs, arg",
    [({"n_per_class": 0}, "n_per_class"), ({"classes": 1.5}, "classes"),
     ({"noise": -1.0}, "noise"), ({"noise": float("nan")}, "noise")],
)
def test_spiral_data_rejects_bad_arguments_by_name(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        data.spiral_data(**kwargs)
