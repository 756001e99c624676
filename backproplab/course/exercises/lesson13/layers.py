"""Lesson 13's forward code, as the lesson writes it (a convolution on unfolded patches,
one LSTM step and a sequence of them), and the random draws every check makes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------
# The lesson's forward code
# --------------------------------------------------------------------------


def conv2d_by_unfold(x, w, b, stride=1, padding=0):
    """conv2d as a matrix product: every patch a column, the kernel a matrix."""
    N, _, H, W = x.shape
    C_out, _, k, _ = w.shape
    H_out = (H + 2 * padding - k) // stride + 1
    W_out = (W + 2 * padding - k) // stride + 1
    cols = F.unfold(x, k, stride=stride, padding=padding)  # (N, C_in*k*k, L)
    out = w.reshape(C_out, -1) @ cols + b[:, None]            # (N, C_out, L)
    return out.reshape(N, C_out, H_out, W_out)


def lstm_step(x, h, c, W, b):
    """One LSTM step, one named intermediate per line; returns them all."""
    z = torch.cat([x, h], dim=1) @ W + b      # (N, 4H): the four gates' pre-activations
    zi, zf, zg, zo = z.chunk(4, dim=1)        # torch's order: input, forget, cell, output
    i = torch.sigmoid(zi)
    f = torch.sigmoid(zf)
    g = torch.tanh(zg)
    o = torch.sigmoid(zo)
    c_new = f * c + i * g
    h_new = o * torch.tanh(c_new)
    return {"z": z, "i": i, "f": f, "g": g, "o": o, "c_new": c_new, "h_new": h_new}


def lstm_forward(xs, h0, c0, W, b):
    """The steps over a sequence xs of shape (T, N, I): every h_t, stacked (T, N, H)."""
    h, c, hs = h0, c0, []
    for x in xs:
        step = lstm_step(x, h, c, W, b)
        h, c = step["h_new"], step["c_new"]
        hs.append(h)
    return torch.stack(hs)


# --------------------------------------------------------------------------
# Fresh inputs
# --------------------------------------------------------------------------


def randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale
