"""Shortcuts for the exercises of 10-backprop-through-a-classifier.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. For every step: central finite differences
written out, bl.numerical_grad, and a table of the visible check's answers; where torch
has one, its backward kernel (torch.ops.aten.*_backward) or a backward node called by
hand (y.grad_fn(g), which needs grad mode back on).
"""

# name: (signature, the scalar whose gradient is asked, written in t for the input that is
# differentiated, that input). For the steps with several outputs, one entry per output.
STEPS = {
    "l10-dlogprobs": ("dlogprobs(logprobs, y)",
                      [("-t[torch.arange(len(t)), y].mean()", "logprobs")]),
    "l10-dprobs": ("dprobs(probs, dlogprobs)", [("(t.log() * dlogprobs).sum()", "probs")]),
    "l10-dcounts-sum-inv": ("dcounts_sum_inv(counts, dprobs)",
                            [("(counts * t * dprobs).sum()",
                              "torch.ones(len(counts), 1, dtype=counts.dtype)")]),
    "l10-dcounts-sum": ("dcounts_sum(counts_sum, dcounts_sum_inv)",
                        [("(t**-1 * dcounts_sum_inv).sum()", "counts_sum")]),
    "l10-dcounts": ("dcounts(counts_sum_inv, dprobs, dcounts_sum)",
                    [("(t * counts_sum_inv * dprobs).sum() "
                      "+ (t.sum(1, keepdim=True) * dcounts_sum).sum()",
                      "torch.ones_like(dprobs)")]),
    "l10-dshifted": ("dshifted(counts, dcounts)", [("(t.exp() * dcounts).sum()", "counts.log()")]),
    "l10-dlogit-maxes": ("dlogit_maxes(dshifted)",
                         [("(-t * dshifted).sum()",
                           "torch.ones(len(dshifted), 1, dtype=dshifted.dtype)")]),
    "l10-dlogits": ("dlogits(logits, dshifted, dlogit_maxes)",
                    [("(t * dshifted).sum() + (t.max(1, keepdim=True).values * dlogit_maxes).sum()",
                      "logits")]),
    "l10-linear": ("linear_backward(inp, W, dout)",
                   [("((t @ W) * dout).sum()", "inp"), ("((inp @ t) * dout).sum()", "W"),
                    ("((inp @ W + t) * dout).sum()", "torch.zeros(W.shape[1], dtype=W.dtype)")]),
    "l10-dhbn": ("dhbn(h, dh)", [("(torch.tanh(t) * dh).sum()", "h.atanh()")]),
    "l10-scale-shift": ("scale_shift_backward(xhat, gain, dhbn)",
                        [("(gain * t * dhbn).sum()", "xhat"), ("(t * xhat * dhbn).sum()", "gain"),
                         ("((gain * xhat + t) * dhbn).sum()", "torch.zeros_like(gain)")]),
    "l10-dinvstd": ("dinvstd(diff, dxhat)",
                    [("(diff * t * dxhat).sum()",
                      "torch.ones(1, diff.shape[1], dtype=diff.dtype)")]),
    "l10-dvar": ("dvar(var, dinvstd, eps)", [("((t + eps) ** -0.5 * dinvstd).sum()", "var")]),
    "l10-ddiff2": ("ddiff2(diff2, dvar)", [("(t.mean(0, keepdim=True) * dvar).sum()", "diff2")]),
    "l10-ddiff": ("ddiff(diff, invstd, dxhat, ddiff2)",
                  [("(t * invstd * dxhat).sum() + (t**2 * ddiff2).sum()", "diff")]),
    "l10-dmean": ("dmean(ddiff)",
                  [("(-t * ddiff).sum()", "torch.ones(1, ddiff.shape[1], dtype=ddiff.dtype)")]),
    "l10-dhpre": ("dhpre(ddiff, dmean)",
                  [("(t * ddiff).sum() + (t.mean(0, keepdim=True) * dmean).sum()",
                    "torch.ones_like(ddiff)")]),
    "l10-demb": ("demb(dxin, emb)",
                 [("(torch.cat([torch.zeros(len(t), 2, dtype=t.dtype), t.reshape(len(t), -1)], 1)"
                   " * dxin).sum()", "emb")]),
    "l10-embedding": ("dC(tokens, demb, num_rows)",
                      [("(t[tokens] * demb).sum()",
                        "torch.ones(num_rows, demb.shape[-1], dtype=demb.dtype)")]),
    "l10-layernorm": ("layernorm_backward(dout, x, gain, eps)",
                      [("(F.layer_norm(t, (t.shape[1],), gain, None, eps) * dout).sum()", "x")]),
}


def _arguments(signature: str) -> str:
    return signature.split("(", 1)[1].rstrip(")")


def _returns(parts: list[str]) -> str:
    return ", ".join(parts)


def _finite_differences(signature: str, outputs: list[tuple[str, str]]) -> str:
    """Central differences, one entry at a time, written out by the learner."""
    return (
        f"def {signature}:\n"
        "    def central(f, x, h=1e-6):\n"
        "        grad = torch.zeros_like(x).flatten()\n"
        "        for i in range(x.numel()):\n"
        "            step = torch.zeros_like(x).flatten()\n"
        "            step[i] = h\n"
        "            step = step.view_as(x)\n"
        "            grad[i] = (f(x + step) - f(x - step)) / (2 * h)\n"
        "        return grad.view_as(x)\n"
        "\n"
        f"    return {_returns([f'central(lambda t: {s}, {x})' for s, x in outputs])}\n"
    )


def _numerical_grad(signature: str, outputs: list[tuple[str, str]]) -> str:
    parts = [f"bl.numerical_grad(lambda t: {s}, {x})[0]" for s, x in outputs]
    return f"def {signature}:\n    return {_returns(parts)}\n"


def _lookup(key: str, signature: str) -> str:
    """A table of the visible check's answers (seeds 0..2), looked up by the inputs: it
    passes the visible check and fails the hidden one, whose inputs are not in it."""
    return (
        "from backproplab.lessons import find_exercise\n\n"
        f"_exercise = find_exercise({key!r})\n"
        "_table = {}\n\n\n"
        "def _key(values):\n"
        "    return tuple(str(v.tolist()) if isinstance(v, torch.Tensor) else v for v in values)\n"
        "\n\n"
        "for _k in range(3):\n"
        "    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
        "    _copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in _inputs]\n"
        "    _table[_key(_inputs)] = _exercise.reference(*_copies)\n\n\n"
        f"def {signature}:\n"
        f"    return _table[_key(({_arguments(signature)},))]\n"
    )


def _grad_fn(signature: str, forward: str, inp: str, upstream: str) -> str:
    """Grad mode back on, a graph built, and its backward node called by hand."""
    return (
        f"def {signature}:\n"
        "    with torch.enable_grad():\n"
        f"        t = {inp}.detach().requires_grad_()\n"
        f"        out = {forward}\n"
        f"    return out.grad_fn({upstream})[0]\n"
    )


KERNELS = {
    "l10-dprobs": [(_grad_fn("dprobs(probs, dlogprobs)", "t.log()", "probs", "dlogprobs"),
                    "enable_grad")],
    "l10-dcounts-sum": [(_grad_fn("dcounts_sum(counts_sum, dcounts_sum_inv)", "t**-1",
                                  "counts_sum", "dcounts_sum_inv"), "enable_grad")],
    "l10-dvar": [(_grad_fn("dvar(var, dinvstd, eps)", "(t + eps) ** -0.5", "var", "dinvstd"),
                  "enable_grad")],
    "l10-dhbn": [("def dhbn(h, dh):\n    return torch.ops.aten.tanh_backward(dh, h)\n",
                  "backward kernels")],
    "l10-embedding": [("def dC(tokens, demb, num_rows):\n"
                       "    return torch.ops.aten.embedding_dense_backward(\n"
                       "        demb.reshape(-1, demb.shape[-1]), tokens.flatten(), num_rows, -1,"
                       " False)\n", "backward kernels")],
    "l10-layernorm": [
        ("def layernorm_backward(dout, x, gain, eps):\n"
         "    D = x.shape[1]\n"
         "    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [D], gain, None, eps)\n"
         "    return torch.ops.aten.native_layer_norm_backward(\n"
         "        dout, x, [D], mean, rstd, gain, None, [True, False, False])[0]\n",
         "backward kernels"),
        # Layer norm is batch norm on the transpose: torch's batch-norm kernel, so used.
        ("def layernorm_backward(dout, x, gain, eps):\n"
         "    xt = x.T.contiguous()\n"
         "    mean = xt.mean(0)\n"
         "    invstd = (xt.var(0, correction=0) + eps) ** -0.5\n"
         "    return torch.ops.aten.native_batch_norm_backward(\n"
         "        (dout * gain).T.contiguous(), xt, None, None, None, mean, invstd, True, eps,\n"
         "        [True, False, False])[0].T\n",
         "backward kernels"),
    ],
    # The spiral's own gradient from the lesson's autograd pass, handed in.
    "l10-dlogits": [("def dlogits(logits, dshifted, dlogit_maxes):\n"
                     "    return autograd['logits']\n", "hard-coded")],
    "l10-ddiff": [("def ddiff(diff, invstd, dxhat, ddiff2):\n"
                   "    return autograd['diff']\n", "hard-coded")],
}

CHEATS = {
    key: [
        (_finite_differences(signature, outputs), "numerical estimate"),
        (_numerical_grad(signature, outputs), "numerical_grad"),
        (_lookup(key, signature), "raised KeyError"),
        *KERNELS.get(key, []),
    ]
    for key, (signature, outputs) in STEPS.items()
}
