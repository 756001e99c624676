"""Lesson 13's forward code, as the lesson writes it (a convolution on unfolded patches,
one LSTM step and a sequence of them), the random draws every check makes, and the LSTM
exercises built on that code: one step's backward, from its gates to its
pre-activations, then backpropagation through time over a few steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._spec import ByHand, randint
from .._spec import vjp as _vjp

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


# --------------------------------------------------------------------------
# Exercise 5: one LSTM step
# --------------------------------------------------------------------------


def fresh_step(gen):
    """(i, f, g, o, c, c_new, dh_new, dc_new) of a new step: the gate values as the forward
    pass keeps them, the cell state before and after, and random upstream gradients."""
    # A batch of 1 only on one seed in three: a check's consecutive seeds always see a
    # batch of several, where gates stacked in the wrong layout show.
    N, H = randint(1 if gen.initial_seed() % 3 == 0 else 2, 5, gen), randint(2, 6, gen)
    z, c = randn(gen, N, 4 * H, scale=1.5), randn(gen, N, H)
    zi, zf, zg, zo = z.chunk(4, dim=1)
    i, f, g, o = torch.sigmoid(zi), torch.sigmoid(zf), torch.tanh(zg), torch.sigmoid(zo)
    c_new = f * c + i * g
    return i, f, g, o, c, c_new, randn(gen, N, H), randn(gen, N, H)


def _step_ref(i, f, g, o, c, c_new, dh_new, dc_new):
    z = torch.cat([torch.logit(i), torch.logit(f), torch.atanh(g), torch.logit(o)], dim=1)

    def step(z, c):
        zi, zf, zg, zo = z.chunk(4, dim=1)
        c_next = torch.sigmoid(zf) * c + torch.sigmoid(zi) * torch.tanh(zg)
        return torch.sigmoid(zo) * torch.tanh(c_next), c_next

    return _vjp(step, [z, c], dh_new, dc_new)


def _sigmoid_slope(s):
    return s * (1 - s)


def _tanh_slope(t):
    return 1 - t**2


def _step_backward(i, f, g, o, c, c_new, dh_new, dc_new, *, through_h=True, from_next=True,
                   gate=_sigmoid_slope, candidate=_tanh_slope, cell_squared=False,
                   order="ifgo"):
    """One step's backward; the keywords make its slips: a path of the cell state left
    out, the derivative used for the sigmoid gates and for g, tanh(c_new)'s derivative
    written with c_new, the order of the gates along dz."""
    tanh_c = torch.tanh(c_new)
    dc_total = torch.zeros_like(c_new)
    if from_next:
        dc_total = dc_total + dc_new
    if through_h:
        slope = 1 - c_new**2 if cell_squared else _tanh_slope(tanh_c)
        dc_total = dc_total + dh_new * o * slope
    parts = {"i": dc_total * g * gate(i), "f": dc_total * c * gate(f),
             "g": dc_total * i * candidate(g), "o": dh_new * tanh_c * gate(o)}
    return torch.cat([parts[name] for name in order], dim=1), dc_total * f


def _swapped(*args):
    return _step_backward(*args, gate=_tanh_slope, candidate=_sigmoid_slope)


LSTM_STEP = ByHand(
    name="lstm_step_backward",
    reference=_step_ref,
    make_inputs=fresh_step,
    outputs=["dz", "dc"],
    mistakes={
        "the path through h_new is missing from the cell state's gradient: c_new goes on to "
        "the next step and also into h_new = o * tanh(c_new), and the gradients of the two "
        "uses add up": lambda *a: _step_backward(*a, through_h=False),
        "dc_new is missing from the cell state's gradient: c_new also goes on to the next "
        "step, and what comes back from there (dc_new) adds to the path through h_new":
            lambda *a: _step_backward(*a, from_next=False),
        "sigmoid's and tanh's derivatives were swapped: i, f and o are sigmoids, with "
        "derivative s * (1 - s); g is a tanh, with derivative 1 - g**2":
            _swapped,
        "the sigmoid's derivative is missing from the gates i, f and o: dz holds gradients at "
        "the pre-activations, so each gate's gradient is multiplied by s * (1 - s)":
            lambda *a: _step_backward(*a, gate=torch.ones_like),
        "tanh's derivative is missing from g: dz holds gradients at the pre-activations, so "
        "the candidate's gradient is multiplied by 1 - g**2":
            lambda *a: _step_backward(*a, candidate=torch.ones_like),
        "tanh's derivative at c_new was taken as 1 - c_new**2: h_new = o * tanh(c_new), so it "
        "is 1 - tanh(c_new)**2 (the square of the tanh, not of c_new)":
            lambda *a: _step_backward(*a, cell_squared=True),
        "the gates are in the wrong order: torch's (and the lesson's) order along dz is i, f, "
        "g, o": lambda *a: _step_backward(*a, order="ifog"),
    },
    advice="Start with the cell state: c_new has two uses, h_new = o * tanh(c_new) and the "
           "next step (dc_new). Then each product in c_new = f * c + i * g, then each gate's "
           "own derivative, written with its output.",
)

# --------------------------------------------------------------------------
# Exercise 6: backpropagation through time
# --------------------------------------------------------------------------


def fresh_sequence(gen):
    """(xs, h0, c0, W, b, dhs): a few steps of a new LSTM and a gradient at every h_t."""
    # A batch of 1 only on one seed in three: a mean over the batch where a sum is due
    # shows on the other seeds of every check.
    T, N = randint(3, 6, gen), randint(1 if gen.initial_seed() % 3 == 0 else 2, 4, gen)
    width, H = randint(2, 5, gen), randint(2, 5, gen)  # of x and of h
    W = randn(gen, width + H, 4 * H, scale=0.8)
    return (randn(gen, T, N, width), randn(gen, N, H), randn(gen, N, H), W,
            randn(gen, 4 * H, scale=0.3), randn(gen, T, N, H))


def _bptt_ref(xs, h0, c0, W, b, dhs):
    return _vjp(lambda W, b, h0, c0: lstm_forward(xs, h0, c0, W, b), [W, b, h0, c0], dhs)


def _bptt(xs, h0, c0, W, b, dhs, *, step=_step_backward, cell=True, hidden=True,
          every_step=True, accumulate=True, mean=False):
    """Backpropagation through time, with switches that make its slips."""
    h, c, kept = h0, c0, []
    for x in xs:
        s = lstm_step(x, h, c, W, b)
        kept.append((torch.cat([x, h], dim=1), s, c))
        h, c = s["h_new"], s["c_new"]
    dW, db = torch.zeros_like(W), torch.zeros_like(b)
    dh, dc = torch.zeros_like(h0), torch.zeros_like(c0)
    for t in reversed(range(len(xs))):
        xh, s, c_before = kept[t]
        above = dhs[t] if every_step or t == len(xs) - 1 else torch.zeros_like(dh)
        later = dh if hidden else torch.zeros_like(dh)
        dz, dc = step(s["i"], s["f"], s["g"], s["o"], c_before, s["c_new"], above + later,
                      dc if cell else torch.zeros_like(dc))
        share = dz / len(dz) if mean else dz
        dW = dW + xh.T @ share if accumulate else xh.T @ share
        db = db + share.sum(0) if accumulate else share.sum(0)
        dh = (dz @ W.T)[:, xs.shape[2]:]
    return dW, db, dh, dc


LSTM_BPTT = ByHand(
    name="lstm_bptt",
    reference=_bptt_ref,
    make_inputs=fresh_sequence,
    outputs=["dW", "db", "dh0", "dc0"],
    mistakes={
        "the cell state's path through time is missing: c_t goes on to step t + 1, so the "
        "dc that step t + 1's backward returns is step t's dc_new (0 only after the last "
        "step)": lambda *a: _bptt(*a, cell=False),
        "the hidden state's path through time is missing: h_t feeds step t + 1 too, so its "
        "gradient is dhs[t] plus what step t + 1 sends back to its h through W":
            lambda *a: _bptt(*a, hidden=False),
        "only the last step's gradient from above was used: the loss reads every h_t, so "
        "dhs[t] arrives at every step":
            lambda *a: _bptt(*a, every_step=False),
        "dW and db hold one step's term only (= where += was meant): W and b are used at "
        "every step, and each use adds a term":
            lambda *a: _bptt(*a, accumulate=False),
        "inside the step, the path through h_new is missing from the cell state's gradient "
        "(the two uses of c_new add up)":
            lambda *a: _bptt(*a, step=lambda *s: _step_backward(*s, through_h=False)),
        "inside the step, sigmoid's and tanh's derivatives were swapped":
            lambda *a: _bptt(*a, step=_swapped),
        "dW and db were averaged over the batch: the loss adds up the examples' terms, so "
        "W and b collect their sum": lambda *a: _bptt(*a, mean=True),
    },
    advice="Run the steps forward, keeping each step's values, then go back from the last "
           "step: each step gets dhs[t] plus what the step after it sent back to h, and the dc "
           "that step returned; W and b collect one term per step.",
)
