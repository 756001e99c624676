"""Lesson 13's convolution exercises: the input gradient, then the weight and bias
gradients, of a convolution with stride and padding."""

from __future__ import annotations

import torch.nn.functional as F

from .._spec import ByHand, randint
from .._spec import vjp as _vjp
from .layers import randn


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
