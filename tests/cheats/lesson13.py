"""Shortcuts for the exercises of 13-classic-layers-by-hand.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. For every exercise: central finite differences
written out, bl.numerical_grad, a table of the visible check's answers, and grad mode
switched back on to call autograd; then torch's own backward for the layer: its backward
kernels (torch.ops.aten.*_backward), torch.nn.grad's convolution gradients, a torch.func
transform, and max_unpool2d, which puts each window's gradient back at its index but
writes where overlapping windows must add.
"""

from cheats.builders import autograd_back_on, finite_differences, lookup, numerical_grad
from cheats.estimates import LSTM, Plan, gradients, with_disguised

# name: (signature, the scalar whose gradient is asked, written in t for the input that is
# differentiated, that input). For the exercises with several outputs, one entry per output.
_CONV = "F.conv2d({x}, {w}, {b}, stride=stride, padding=padding)"
_Z = "torch.cat([torch.logit(i), torch.logit(f), torch.atanh(g), torch.logit(o)], dim=1)"
_GATES = ("torch.sigmoid(t.chunk(4, 1)[1]) * c + torch.sigmoid(t.chunk(4, 1)[0]) * "
          "torch.tanh(t.chunk(4, 1)[2])")
STEPS = {
    "l13-conv-dx": ("conv2d_dx(x, w, dout, stride, padding)",
                    [(f"({_CONV.format(x='t', w='w', b='None')} * dout).sum()", "x")]),
    "l13-conv-dw": ("conv2d_dw_db(x, w, dout, stride, padding)",
                    [(f"({_CONV.format(x='x', w='t', b='None')} * dout).sum()", "w"),
                     (f"({_CONV.format(x='x', w='w', b='t')} * dout).sum()",
                      "torch.zeros(w.shape[0], dtype=w.dtype)")]),
    "l13-pool": ("maxpool_backward(x, dout, kernel, stride)",
                 [("(F.max_pool2d(t, kernel, stride) * dout).sum()", "x")]),
    "l13-dropout": ("dropout_backward(dout, mask, p, training)",
                    [("((t * mask / (1 - p) if training else t) * dout).sum()", "dout")]),
    "l13-lstm-step": ("lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new)",
                      [(f"(torch.sigmoid(t.chunk(4, 1)[3]) * torch.tanh({_GATES}) * dh_new).sum()"
                        f" + (({_GATES}) * dc_new).sum()", _Z),
                       ("(o * torch.tanh(f * t + i * g) * dh_new).sum() + ((f * t + i * g) * "
                        "dc_new).sum()", "c")]),
    "l13-lstm-bptt": ("lstm_bptt(xs, h0, c0, W, b, dhs)",
                      [("(lstm_forward(xs, h0, c0, t, b) * dhs).sum()", "W"),
                       ("(lstm_forward(xs, h0, c0, W, t) * dhs).sum()", "b"),
                       ("(lstm_forward(xs, t, c0, W, b) * dhs).sum()", "h0"),
                       ("(lstm_forward(xs, h0, t, W, b) * dhs).sum()", "c0")]),
}


KERNELS = {
    "l13-conv-dx": [
        # torch's convolution backward kernel, asked for the input's gradient only.
        ("def conv2d_dx(x, w, dout, stride, padding):\n"
         "    return torch.ops.aten.convolution_backward(\n"
         "        dout, x, w, None, [stride, stride], [padding, padding], [1, 1], False,\n"
         "        [0, 0], 1, [True, False, False])[0]\n", "backward kernels"),
        # torch.nn.grad's helper, which calls that kernel.
        ("def conv2d_dx(x, w, dout, stride, padding):\n"
         "    return torch.nn.grad.conv2d_input(x.shape, w, dout, stride=stride,\n"
         "                                      padding=padding)\n",
         "torch.nn.grad.conv2d_input (autograd"),
    ],
    "l13-conv-dw": [
        ("def conv2d_dw_db(x, w, dout, stride, padding):\n"
         "    dw = torch.nn.grad.conv2d_weight(x, w.shape, dout, stride=stride,\n"
         "                                     padding=padding)\n"
         "    return dw, dout.sum(dim=(0, 2, 3))\n",
         "torch.nn.grad.conv2d_weight (autograd"),
    ],
    "l13-pool": [
        ("def maxpool_backward(x, dout, kernel, stride):\n"
         "    _, index = F.max_pool2d(x, kernel, stride, return_indices=True)\n"
         "    return torch.ops.aten.max_pool2d_with_indices_backward(\n"
         "        dout, x, [kernel, kernel], [stride, stride], [0, 0], [1, 1], False, index)\n",
         "backward kernels"),
        # Unpooling puts every window's value back at its index, one write per window.
        ("def maxpool_backward(x, dout, kernel, stride):\n"
         "    _, index = F.max_pool2d(x, kernel, stride, return_indices=True)\n"
         "    return F.max_unpool2d(dout, index, kernel, stride, output_size=x.shape[-2:])\n",
         "kept one window's gradient"),
    ],
    "l13-dropout": [
        ("def dropout_backward(dout, mask, p, training):\n"
         "    scale = 1 / (1 - p) if training else 1.0\n"
         "    return torch.ops.aten.native_dropout_backward(dout, mask, scale)\n",
         "backward kernels"),
    ],
    "l13-lstm-step": [
        ("def lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new):\n"
         f"    z = {_Z}\n"
         "\n"
         "    def step(z, c):\n"
         f"        cell = {_GATES.replace('t.chunk', 'z.chunk')}\n"
         "        return torch.sigmoid(z.chunk(4, 1)[3]) * torch.tanh(cell), cell\n"
         "\n"
         "    _, pullback = torch.func.vjp(step, z, c)\n"
         "    return pullback((dh_new, dc_new))\n", "torch.func"),
    ],
    "l13-lstm-bptt": [
        ("def lstm_bptt(xs, h0, c0, W, b, dhs):\n"
         "    _, pullback = torch.func.vjp(lambda W, b, h0, c0: lstm_forward(xs, h0, c0, W, b),\n"
         "                                 W, b, h0, c0)\n"
         "    return pullback(dhs)\n", "torch.func"),
    ],
}

CHEATS = {
    key: [
        (finite_differences(signature, outputs), "numerical estimate"),
        (numerical_grad(signature, outputs), "numerical_grad"),
        (lookup(key, signature), "raised KeyError"),
        (autograd_back_on(signature, outputs), "enable_grad"),
        *KERNELS.get(key, []),
    ]
    for key, (signature, outputs) in STEPS.items()
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
PLANS = {key: Plan(signature, gradients(outputs), lesson=LSTM if key == "l13-lstm-bptt" else "")
         for key, (signature, outputs) in STEPS.items()}
CHEATS = with_disguised(CHEATS, PLANS)
