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
