"""Lesson 13's max-pooling and dropout exercises: ties and overlapping windows, and
dropout's backward from its mask in training and in eval mode."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, randint
from .._spec import vjp as _vjp
from .layers import randn

# --------------------------------------------------------------------------
# Exercise 3: max-pooling
# --------------------------------------------------------------------------

PEAK, TIE = 10.0, 7.0  # above the random values 0 to 3 that fill a check's image


def fresh_pool(gen):
    """(x, dout, kernel, stride) with overlapping windows and ties on every trial.

    x holds small whole numbers (0 to 3), so most windows have a tie; one pixel where
    the first four windows overlap is the largest of them all (it collects their four
    gradients); the last window of every channel gets two equal maxima of its own. The
    image is never square, so that H and W mixed up show. Of a check's three trials (seeds
    that follow each other) two have 2 channels, one of them 2 images, so an answer that
    mixes up unfold's rows (channel by channel) with the windows' entries fails on every
    check."""
    kind = gen.initial_seed() % 3
    kernel = randint(2, 4, gen)
    stride = randint(1, kernel, gen)  # below the kernel: windows overlap
    N = 2 if kind == 1 else randint(1, 3, gen)
    C = 1 if kind == 0 else 2
    low = kernel + 2 * stride  # the last window starts below the overlapping pixel
    H, W = randint(low, low + 3, gen), randint(low, low + 3, gen)
    if H == W:  # a square image would pass an answer that mixes up H and W
        W += 1 if W < low + 2 else -1
    x = torch.randint(0, 4, (N, C, H, W), generator=gen).to(torch.float64)
    x[:, :, stride, stride] = PEAK
    top, left = (H - kernel) // stride * stride, (W - kernel) // stride * stride
    x[:, :, top, left] = TIE
    x[:, :, top + kernel - 1, left + kernel - 1] = TIE
    H_out, W_out = (H - kernel) // stride + 1, (W - kernel) // stride + 1
    return x, randn(gen, N, C, H_out, W_out), kernel, stride


def _pool_ref(x, dout, kernel, stride):
    return _vjp(lambda x: F.max_pool2d(x, kernel, stride), [x], dout)


def _windows(x, kernel, stride):
    """(N, C, kernel*kernel, L): each window's entries in a column, row by row."""
    N, C = x.shape[:2]
    return F.unfold(x, kernel, stride=stride).reshape(N, C, kernel * kernel, -1)


def _back_to_image(share, x, kernel, stride):
    """Each window's column of gradients added back onto its pixels."""
    N, C, H, W = x.shape
    return F.fold(share.reshape(N, C * kernel * kernel, -1), (H, W), kernel, stride=stride)


def _pool_with(x, dout, kernel, stride, pick):
    cols = _windows(x, kernel, stride)
    share = pick(cols) * dout.reshape(dout.shape[0], dout.shape[1], 1, -1)
    return _back_to_image(share, x, kernel, stride)


def _tied(cols):
    return (cols == cols.amax(dim=2, keepdim=True)).to(cols.dtype)


def _first(cols):
    return torch.zeros_like(cols).scatter_(2, cols.argmax(dim=2, keepdim=True), 1.0)


def _last(cols):
    k2 = cols.shape[2]
    from_end = cols.flip(2).argmax(dim=2, keepdim=True)
    return torch.zeros_like(cols).scatter_(2, k2 - 1 - from_end, 1.0)


def _channels_last(x, dout, kernel, stride):
    """unfold's rows read as (kernel*kernel, C) instead of (C, kernel*kernel)."""
    N, C, H, W = x.shape
    cols = F.unfold(x, kernel, stride=stride).reshape(N, kernel * kernel, C, -1)
    share = torch.zeros_like(cols).scatter_(1, cols.argmax(dim=1, keepdim=True), 1.0)
    share = share * dout.reshape(N, 1, C, -1)
    return F.fold(share.reshape(N, C * kernel * kernel, -1), (H, W), kernel, stride=stride)


def _pool_written(x, dout, kernel, stride):
    """Every window writes its gradient to its first maximum, window by window in order,
    each write replacing what an earlier window put there."""
    N, C, H, W = x.shape
    cols = _windows(x, kernel, stride)
    where = cols.argmax(dim=2)  # (N, C, L): the offset inside each window
    W_out = (W - kernel) // stride + 1
    dx = torch.zeros_like(x)
    for n in range(N):
        for ch in range(C):
            for window in range(where.shape[2]):
                a, b = divmod(int(where[n, ch, window]), kernel)
                r, c = divmod(window, W_out)
                dx[n, ch, r * stride + a, c * stride + b] = dout[n, ch, r, c]
    return dx


POOL = ByHand(
    name="dx through max_pool2d",
    reference=_pool_ref,
    make_inputs=fresh_pool,
    mistakes={
        "the gradient was split evenly between the tied maxima of a window, as x.max() does "
        "for a whole tensor; max_pool2d keeps one index per window and sends everything there":
            lambda x, d, k, s: _pool_with(x, d, k, s, lambda c: _tied(c) / _tied(c).sum(
                2, keepdim=True)),
        "every tied maximum received the whole gradient: a window has one output, and "
        "max_pool2d sends its gradient to one index only":
            lambda x, d, k, s: _pool_with(x, d, k, s, _tied),
        "the gradient went to the last of the tied maxima; torch keeps the first one, "
        "reading the window row by row (the index max_pool2d returns)":
            lambda x, d, k, s: _pool_with(x, d, k, s, _last),
        "a pixel that is the maximum of several overlapping windows kept one window's "
        "gradient (= or a scatter where += was meant): each window sends its own, and they "
        "add up": _pool_written,
        "the windows' entries are mixed up with the channels: unfold's rows go channel by "
        "channel, kernel*kernel of them each, so its output reshapes to (N, C, kernel*kernel, "
        "L); read as (N, kernel*kernel, C, L) they agree only when C is 1": _channels_last,
        "the gradient was spread over the whole window, as average pooling would; a max "
        "sends it to the winner only":
            lambda x, d, k, s: _pool_with(x, d, k, s, lambda c: torch.ones_like(c) / c.shape[2]),
    },
    advice="Each window's gradient goes to one pixel, its first maximum read row by row; "
           "windows overlap, so a pixel can collect from several. unfold gives the windows as "
           "columns, fold adds columns back onto the image.",
)

# --------------------------------------------------------------------------
# Exercise 4: dropout
# --------------------------------------------------------------------------


def fresh_dropout(gen):
    """(dout, mask, p, training). The mode alternates with the seed, so that every check
    (consecutive seeds) sees both; p stays away from 0.5, where p and 1 - p agree. In eval
    mode no mask was drawn, and ``mask`` is all True."""
    training = gen.initial_seed() % 2 == 0
    N, D = randint(2, 6, gen), randint(3, 9, gen)
    p = float(torch.rand(1, generator=gen)) * 0.3 + 0.1
    p = p if randint(0, 2, gen) else 1 - p
    mask = torch.rand(N, D, generator=gen) >= p
    mask.view(-1)[:2] = torch.tensor([False, True])  # at least one dropped, one kept
    if not training:
        mask = torch.ones(N, D, dtype=torch.bool)
    return randn(gen, N, D), mask, p, training


def _dropout_ref(dout, mask, p, training):
    if not training:
        return _vjp(lambda x: F.dropout(x, p, training=False) * 1.0, [dout], dout)
    return _vjp(lambda x: x * mask / (1 - p), [dout], dout)


def _when(training, train_value, eval_value):
    return train_value if training else eval_value


DROPOUT = ByHand(
    name="dx through dropout",
    reference=_dropout_ref,
    make_inputs=fresh_dropout,
    mistakes={
        "the scale is missing: the kept entries were multiplied by 1/(1 - p) in the forward "
        "pass, so their gradient is too":
            lambda d, m, p, t: _when(t, d * m, d),
        "the scale was applied in eval mode: there dropout returns its input unchanged (no "
        "mask, no 1/(1 - p)), so the gradient passes through as it is":
            lambda d, m, p, t: d * m / (1 - p),
        "the mask is missing: the dropped entries never reached the output, so they get no "
        "gradient":
            lambda d, m, p, t: _when(t, d / (1 - p), d),
        "divided by p instead of 1 - p: p is the probability of dropping, and the kept "
        "entries (probability 1 - p) were scaled by 1/(1 - p)":
            lambda d, m, p, t: _when(t, d * m / p, d),
        "multiplied by 1 - p instead of dividing by it: the forward pass scaled the kept "
        "entries up, by 1/(1 - p)":
            lambda d, m, p, t: _when(t, d * m * (1 - p), d),
    },
    advice="In training, dropout multiplies x by the mask and by 1/(1 - p); in eval mode it "
           "returns x as it is. Backward multiplies by the same numbers.",
)
