"""Tiny synthetic data sets, made in code so the lessons never download anything.

Every function takes a seed and uses its own ``torch.Generator``, so calling
one never disturbs the global random state a lesson has seeded.

>>> x, y = linear_data()
>>> x.shape, y.shape
(torch.Size([100, 1]), torch.Size([100, 1]))
"""

from __future__ import annotations

import math

import torch

__all__ = ["linear_data", "xor_data", "regression_data", "spiral_data"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return value


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def _generator(seed: object) -> torch.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed: expected an int between 0 and 2**63 - 1, got {seed!r}")
    return torch.Generator().manual_seed(seed)


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
    slope, intercept, low, high = (
        _finite(name, v)
        for name, v in (("slope", slope), ("intercept", intercept), ("low", low), ("high", high))
    )
    if not high > low:
        raise ValueError(f"high: expected a value greater than low={low!r}, got {high!r}")
    noise = _finite("noise", noise)
    if noise < 0:
        raise ValueError(f"noise: expected a standard deviation >= 0, got {noise!r}")
    gen = _generator(seed)
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
    gen = _generator(seed)
    x = torch.randn(n, features, generator=gen)
    w = torch.randn(features, 1, generator=gen) / features**0.5
    v = torch.randn(features, 1, generator=gen) / features**0.5
    y = x @ w + torch.relu(x @ v) + 0.1 * torch.randn(n, 1, generator=gen)
    return x, y


def spiral_data(
    n_per_class: int = 100, classes: int = 3, noise: float = 0.2, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Interleaved spiral arms in 2-D, one arm per class: a classic that no
    straight line can separate.

    Arm ``k`` starts at the origin and turns outwards; each point's angle is
    jittered by Gaussian noise of standard deviation ``noise`` (radians).
    Returns ``x`` of shape ``(n_per_class * classes, 2)``, float32 and inside
    the unit disc, and the class ids ``y`` of shape ``(n_per_class * classes,)``,
    int64, grouped by class.

    >>> x, y = spiral_data()
    >>> tuple(x.shape), tuple(y.shape), y.bincount().tolist()
    ((300, 2), (300,), [100, 100, 100])
    """
    n_per_class = _positive_int("n_per_class", n_per_class)
    classes = _positive_int("classes", classes)
    if not isinstance(noise, (int, float)) or isinstance(noise, bool) or not noise >= 0:
        raise ValueError(f"noise: expected a standard deviation >= 0, got {noise!r}")
    gen = _generator(seed)
    radius = torch.linspace(0.0, 1.0, n_per_class)
    xs, ys = [], []
    for k in range(classes):
        # Each arm turns through 4 radians, starting where the previous one started + 2*pi/classes.
        start = 2 * torch.pi * k / classes
        angle = start + 4.0 * radius + noise * torch.randn(n_per_class, generator=gen)
        xs.append(torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1))
        ys.append(torch.full((n_per_class,), k, dtype=torch.int64))
    return torch.cat(xs), torch.cat(ys)
