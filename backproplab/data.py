"""Tiny synthetic data sets, made in code so the lessons never download anything.

Every function takes a seed and uses its own ``torch.Generator``, so calling
one never disturbs the global random state a lesson has seeded.

>>> x, y = linear_data()
>>> x.shape, y.shape
(torch.Size([100, 1]), torch.Size([100, 1]))
"""

from __future__ import annotations

import torch

__all__ = ["linear_data", "xor_data", "regression_data"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return value


def linear_data(
    n: int = 100,
    slope: float = 2.0,
    intercept: float = 1.0,
    noise: float = 1.5,
    low: float = 0.0,
    high: float = 10.0,
    seed: int = 42,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Points on the line ``y = slope * x + intercept`` plus Gaussian noise.

    ``x`` is drawn uniformly from ``[low, high]``; the noise has standard
    deviation ``noise``. Both tensors have shape ``(n, 1)`` and dtype float32.

    >>> x, y = linear_data(n=3, noise=0.0)
    >>> torch.allclose(y, 2 * x + 1)
    True
    """
    n = _positive_int("n", n)
    if not high > low:
        raise ValueError(f"high: expected a value greater than low={low!r}, got {high!r}")
    if noise < 0:
        raise ValueError(f"noise: expected a standard deviation >= 0, got {noise!r}")
    gen = torch.Generator().manual_seed(seed)
    x = low + (high - low) * torch.rand(n, 1, generator=gen)
    y = slope * x + intercept + noise * torch.randn(n, 1, generator=gen)
    return x, y


def xor_data() -> tuple[torch.Tensor, torch.Tensor]:
    """The four XOR points: inputs of shape (4, 2), targets of shape (4, 1).

    >>> x, y = xor_data()
    >>> y.flatten().tolist()
    [0.0, 1.0, 1.0, 0.0]
    """
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    return x, y


def regression_data(
    n: int = 256, features: int = 10, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A small nonlinear regression problem for training an MLP.

    The target mixes a linear part with a ReLU bump, so a linear model
    underfits and a one-hidden-layer MLP does better. ``x`` has shape
    ``(n, features)``, ``y`` has shape ``(n, 1)``.

    >>> x, y = regression_data(n=8, features=4)
    >>> tuple(x.shape), tuple(y.shape)
    ((8, 4), (8, 1))
    """
    n = _positive_int("n", n)
    features = _positive_int("features", features)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=gen)
    w = torch.randn(features, 1, generator=gen) / features**0.5
    v = torch.randn(features, 1, generator=gen) / features**0.5
    y = x @ w + torch.relu(x @ v) + 0.1 * torch.randn(n, 1, generator=gen)
    return x, y
