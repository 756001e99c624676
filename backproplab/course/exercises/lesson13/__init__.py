"""Lesson 13, the classic layers' backward by hand: its exercises and its predictions.

The lesson writes four layers as plain tensor code: a 2-D convolution as a matrix
product on unfolded patches, max-pooling, dropout, and one step of an LSTM
(module ``layers`` holds its convolution and LSTM code). A check makes a fresh random
layer with sizes of its own, runs it forward in float64, and hands the learner's function
the forward values its exercise names and random numbers standing for the gradient
arriving from above. The reference is autograd's gradient through torch's own layer
(`F.conv2d`, `F.max_pool2d`) or through the lesson's forward code, given the same
numbers (`_spec.vjp`).

- ``l13-conv-dx``: the input gradient of a convolution with stride and padding.
- ``l13-conv-dw``: its weight and bias gradients.
- ``l13-pool``: max-pooling's backward, with ties and overlapping windows.
- ``l13-dropout``: dropout's backward from the mask, in training and in eval mode.
- ``l13-lstm-step``: one LSTM step's backward, from its gates to its pre-activations.
- ``l13-lstm-bptt``: backpropagation through time over a few LSTM steps.
- ``l13-predict-pool-tie`` and ``l13-predict-dropout-eval``: where a tied maximum's
  gradient goes, and what dropout's backward does in eval mode.

The convolution, max-pooling and dropout exercises are here, in that order, with the
ids and the predictions; the two LSTM exercises are in module ``layers``, beside the
forward code they are built on.

The slips kept with each exercise are the ones its forward code invites: padding
or stride forgotten, the kernel not turned (or turned where it must not be), a sum
over the batch or the positions left out, a tie settled the other way, a scale
missing or applied in eval, a gate's derivative swapped, and a path of the cell
state or of the hidden state left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, Prediction, randint
from .._spec import vjp as _vjp
from .layers import LSTM_BPTT, LSTM_STEP, randn

# --------------------------------------------------------------------------
# The convolution: fresh inputs and the references
# --------------------------------------------------------------------------


def fresh_conv(gen):
    """(x, w, dout, stride, padding) of a new convolution: a batch of 2 or 3, square
    kernels of 2 to 4, stride 2 or 3, padding 1 up to half the kernel, images 5 to 9 on a
    side: the height often, the width always, not a whole number of strides, so the last
    rows (columns) are never read; never square, so that H and W mixed up show.

    A check's three trials have seeds that follow each other, one of each kind ``seed % 3``:
    1 input channel, stride 3, padding 1; 2 or 3 channels, stride 2, padding 1; 2 or 3
    channels, stride 3, padding 2 (a kernel of 4). So every check has both strides, both
    paddings and both kinds of channel count, and the trial of one channel shares its stride
    with one trial of several and its padding with the other: an answer right for one
    channel only is not taken for one that ignores the stride or the padding."""
    kind = gen.initial_seed() % 3
    N, C_out = randint(2, 4, gen), randint(2, 5, gen)
    C_in = 1 if kind == 0 else randint(2, 4, gen)
    k = 4 if kind == 2 else randint(2, 5, gen)
    stride, padding = ((3, 1), (2, 1), (3, 2))[kind]
    H, W = randint(5, 10, gen), randint(5, 10, gen)
    if (W + 2 * padding - k) % stride == 0:  # a column past the last stride, within 5..9
        W += 1 if W == 5 else -1
    if H == W:  # a square image would pass an answer that mixes up H and W
        H += 1 if H < 9 else -1
    x, w = randn(gen, N, C_in, H, W), randn(gen, C_out, C_in, k, k)
    H_out = (H + 2 * padding - k) // stride + 1
    W_out = (W + 2 * padding - k) // stride + 1
    return x, w, randn(gen, N, C_out, H_out, W_out), stride, padding


def _conv_ref(x, w, dout, stride, padding):
    bias = w.new_zeros(w.shape[0])
    return _vjp(lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding),
                [x, w, bias], dout)


def _dx_ref(x, w, dout, stride, padding):
    return _conv_ref(x, w, dout, stride, padding)[0]


def _dw_db_ref(x, w, dout, stride, padding):
    return _conv_ref(x, w, dout, stride, padding)[1:]


# --------------------------------------------------------------------------
# Exercise 1: the convolution's input gradient
# --------------------------------------------------------------------------


def _extra(x, w, dout, stride, padding):
    """conv_transpose2d's output_padding: the rows and columns past the last window."""
    k = w.shape[-1]
    return tuple(size + 2 * padding - k - (out - 1) * stride
                 for size, out in zip(x.shape[2:], dout.shape[2:], strict=True))


def _turned(x, w, dout, stride, padding, kernel):
    """dx as the correlation of dout (spread out by the stride) with ``kernel`` turned
    180 degrees: the right answer when ``kernel`` is w."""
    return F.conv_transpose2d(dout, kernel, stride=stride, padding=padding,
                              output_padding=_extra(x, w, dout, stride, padding))


def _padded_dx(x, w, dout, stride, padding, matrix=None):
    """The gradient at the padded image, border included (``matrix``: the kernel as a
    matrix, if not w.reshape(C_out, -1))."""
    cols = (w.reshape(w.shape[0], -1) if matrix is None else matrix).T @ dout.flatten(2)
    size = (x.shape[2] + 2 * padding, x.shape[3] + 2 * padding)
    return F.fold(cols, size, w.shape[-1], stride=stride)


CONV_DX = ByHand(
    name="dx",
    reference=_dx_ref,
    make_inputs=fresh_conv,
    mistakes={
        "the padding is still on dx: it has the padded image's shape (H + 2p, W + 2p). The "
        "p rows and columns of zeros that padding put around x are not part of x: cut them "
        "off on every side (fold does it when given padding=)":
            lambda x, w, dout, s, p: _padded_dx(x, w, dout, s, p),
        "the padding was cut from one side only: the zeros went around x on every side, so "
        "x starts p rows and p columns into the padded image; keep [p:p + H, p:p + W]":
            lambda x, w, dout, s, p: _padded_dx(x, w, dout, s, p)[..., :x.shape[2], :x.shape[3]],
        "the kernel's matrix mixes up the channels: the forward pass multiplied by "
        "w.reshape(C_out, -1), one row per output channel, its entries in the order of "
        "unfold's rows (input channel, then kernel row and column); a reshape of w with its "
        "channels transposed reads them in another order (it agrees only when C_in is 1)":
            lambda x, w, dout, s, p: _padded_dx(
                x, w, dout, s, p, w.transpose(0, 1).reshape(w.shape[0], -1)
            )[..., p:p + x.shape[2], p:p + x.shape[3]],
        "the kernel was not turned: pixel (r, c) meets kernel entry (r - i, c - j) at output "
        "(i, j), so as the output moves right the kernel is read leftwards; correlating dout "
        "with the kernel as it is reads it the wrong way round (flip dims 2 and 3)":
            lambda x, w, dout, s, p: _turned(x, w, dout, s, p, w.flip(2, 3)),
        "the kernel was transposed (rows and columns swapped) where it must be turned 180 "
        "degrees: flip(2, 3) reverses both directions, transpose(2, 3) swaps them":
            lambda x, w, dout, s, p: _turned(x, w, dout, s, p, w.transpose(2, 3).flip(2, 3)),
        "the stride is missing: outputs next to each other read patches `stride` pixels "
        "apart, so dout's entries must be spread out with stride - 1 zeros between them "
        "before the correlation (fold does it when given stride=)":
            lambda x, w, dout, s, p: F.conv_transpose2d(dout, w, padding=p),
        "dx lacks the last rows or columns of x: where H + 2·padding - k is not a multiple "
        "of the stride, the forward pass's patches never reach them, and conv_transpose2d "
        "leaves them out unless told (output_padding=); dx has x's shape, 0 where no patch "
        "reached":
            lambda x, w, dout, s, p: F.conv_transpose2d(dout, w, stride=s, padding=p),
    },
    advice="The layer is unfold, then a matrix product: go back through the product (lesson "
           "08's matmul rule, per example), then through unfold (section 2), with the same "
           "stride and padding as the forward pass.",
)

# --------------------------------------------------------------------------
# Exercise 2: the weight and bias gradients
# --------------------------------------------------------------------------


def _dw(x, w, dout, stride, padding):
    cols = F.unfold(x, w.shape[-1], stride=stride, padding=padding)
    return (dout.flatten(2) @ cols.transpose(1, 2)).sum(0).reshape(w.shape)


def _first_only(x, w, dout, stride, padding):
    return _dw(x[:1], w, dout[:1], stride, padding)


CONV_DW = ByHand(
    name="conv2d_dw_db",
    reference=_dw_db_ref,
    make_inputs=fresh_conv,
    outputs=["dw", "db"],
    mistakes={
        "db is not summed over the batch: b (one number per output channel) was added to "
        "every position of every example, so db sums dout over dims 0, 2 and 3":
            lambda x, w, d, s, p: (_dw(x, w, d, s, p), d.sum((2, 3))),
        "db is not summed over the positions: b was added at every position of the output, "
        "so db sums dout over dims 0, 2 and 3":
            lambda x, w, d, s, p: (_dw(x, w, d, s, p), d.sum(0)),
        "dw comes from the first example only: every example of the batch used the same "
        "kernel, so the kernel's gradient adds up one term per example":
            lambda x, w, d, s, p: (_first_only(x, w, d, s, p), d.sum((0, 2, 3))),
        "dw came out turned 180 degrees: conv2d does not flip its kernel (it is a "
        "correlation), so dw[o, c, a, b] pairs dout with the pixel at offset (a, b) of each "
        "patch, as it is":
            lambda x, w, d, s, p: (_dw(x, w, d, s, p).flip(2, 3), d.sum((0, 2, 3))),
        "dw came out transposed (its rows and columns swapped): offset (a, b) of a patch is "
        "row a of the kernel, column b":
            lambda x, w, d, s, p: (_dw(x, w, d, s, p).transpose(2, 3), d.sum((0, 2, 3))),
    },
    advice="The layer is unfold, then a matrix product with the kernel as a (C_out, C_in*k*k) "
           "matrix, then a bias added at every position: lesson 09's rules for the product "
           "and for broadcasting, per example, then summed over the batch.",
)


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


EXERCISES = {
    "l13-conv-dx": CONV_DX,
    "l13-conv-dw": CONV_DW,
    "l13-pool": POOL,
    "l13-dropout": DROPOUT,
    "l13-lstm-step": LSTM_STEP,
    "l13-lstm-bptt": LSTM_BPTT,
}

# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------

TIED_WINDOW = [[1.0, 3.0], [3.0, 2.0]]  # the question's one 2x2 window


def _tie_grad() -> list[float]:
    x = torch.tensor([[TIED_WINDOW]], requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    return x.grad.flatten().tolist()


def _eval_grad() -> str:
    x = torch.ones(4, requires_grad=True)
    F.dropout(x, p=0.5, training=False).sum().backward()
    values = set(x.grad.tolist())
    if values == {1.0}:
        return "all 1"
    if values == {2.0}:
        return "all 2"
    return "0 or 2"


PREDICTIONS = {
    "l13-predict-pool-tie": Prediction(
        question="x.grad after F.max_pool2d(x, 2).sum().backward() for the window "
                 "[[1, 3], [3, 2]], row by row",
        answer=_tie_grad,
        hint="lesson 09 met two conventions for a tied maximum. Which one fits an "
             "operation that can return the index of each window's maximum "
             "(return_indices=True)? And if it keeps one index, which does it meet first?",
        why="max_pool2d keeps one index per window, like max(dim=...), and sends the whole "
            "gradient there: {answer}. Reading the window row by row, the 3 in the top row "
            "comes first, and a later entry replaces the kept one only when it is strictly "
            "larger, so a tie stays with the first",
    ),
    "l13-predict-dropout-eval": Prediction(
        question="x.grad after F.dropout(x, p=0.5, training=False).sum().backward() for "
                 "x = torch.ones(4, requires_grad=True)",
        answer=_eval_grad,
        hint="in training, dropout zeroes some entries and scales the others so that the "
             "output's expected value is x. In eval mode nothing is dropped: does the output "
             "still need a scale to have that expected value?",
        why="in eval mode F.dropout returns its input itself: no mask, no 1/(1 - p), not even "
            "a node in the graph, so each entry's gradient is the 1 that sum() sends back: "
            "{answer}. The training-time scale is what lets eval mode do nothing",
        choices=("all 1", "all 2", "0 or 2"),
    ),
}
