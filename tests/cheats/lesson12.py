"""Shortcuts for the exercises of 12-backprop-through-a-classifier.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. For every step: central finite differences
written out, bl.numerical_grad, and a table of the visible check's answers; where torch
has one, its backward kernel (torch.ops.aten.*_backward) or a backward node called by
hand (y.grad_fn(g), which needs grad mode back on).
"""

from cheats.builders import finite_differences, lookup, numerical_grad
from cheats.estimates import Plan, gradients, with_disguised

# name: (signature, [(the scalar whose gradient is one output, written in t for the tensor
# that output is the gradient at, that tensor's value)], one entry per output.
BN_MEAN = "(t - t.mean(0, keepdim=True))"
STEPS = {
    "l12-pick-log": ("pick_log_backward(probs, y)",
                     [("-t[torch.arange(len(t)), y].mean()", "probs.log()"),
                      ("-t.log()[torch.arange(len(t)), y].mean()", "probs")]),
    "l12-normalise": ("normalise_backward(counts, counts_sum, dprobs)",
                      [("(counts * t * dprobs).sum()", "1 / counts_sum"),
                       ("(counts * t**-1 * dprobs).sum()", "counts_sum"),
                       ("(t / t.sum(1, keepdim=True) * dprobs).sum()", "counts")]),
    "l12-shift": ("shift_backward(logits, counts, dcounts)",
                  [("(t.exp() * dcounts).sum()", "counts.log()"),
                   ("((logits - t).exp() * dcounts).sum()", "logits.max(1, keepdim=True).values"),
                   ("((t - t.max(1, keepdim=True).values).exp() * dcounts).sum()", "logits")]),
    "l12-weighted": ("weighted_dlogits(logits, y, weight)",
                     [("F.cross_entropy(t, y, weight=weight)", "logits")]),
    "l12-scale-normalise": ("scale_normalise_backward(diff, invstd, gain, dhbn)",
                            [("(gain * t * dhbn).sum()", "diff * invstd"),
                             ("(t * diff * invstd * dhbn).sum()", "gain"),
                             ("((gain * diff * invstd + t) * dhbn).sum()", "torch.zeros_like(gain)"),
                             ("(gain * diff * t * dhbn).sum()", "invstd")]),
    "l12-centre": ("centre_backward(diff, var, eps, dxhat, dinvstd)",
                   [("((t + eps) ** -0.5 * dinvstd).sum()", "var"),
                    ("((t.mean(0, keepdim=True) + eps) ** -0.5 * dinvstd).sum()", "diff**2"),
                    ("(t * (var + eps) ** -0.5 * dxhat).sum() "
                     "+ (((t**2).mean(0, keepdim=True) + eps) ** -0.5 * dinvstd).sum()", "diff"),
                    ("((diff - t) * (var + eps) ** -0.5 * dxhat).sum() "
                     "+ ((((diff - t)**2).mean(0, keepdim=True) + eps) ** -0.5 * dinvstd).sum()",
                     "torch.zeros_like(var)"),
                    (f"({BN_MEAN} * (var + eps) ** -0.5 * dxhat).sum() "
                     f"+ ((({BN_MEAN}**2).mean(0, keepdim=True) + eps) ** -0.5 * dinvstd).sum()",
                     "diff")]),
    "l12-embedding": ("embedding_backward(dxin, tokens, num_rows)",
                      [("(torch.cat([torch.zeros(len(t), 2, dtype=t.dtype), t.reshape(len(t), -1)], 1)"
                        " * dxin).sum()",
                        "torch.ones(*tokens.shape, (dxin.shape[1] - 2) // tokens.shape[1],"
                        " dtype=dxin.dtype)"),
                       ("(torch.cat([torch.zeros(len(tokens), 2, dtype=t.dtype),"
                        " t[tokens].reshape(len(tokens), -1)], 1) * dxin).sum()",
                        "torch.ones(num_rows, (dxin.shape[1] - 2) // tokens.shape[1],"
                        " dtype=dxin.dtype)")]),
    "l12-layernorm": ("layernorm_backward(dout, x, gain, eps)",
                      [("(F.layer_norm(t, (t.shape[1],), gain, None, eps) * dout).sum()", "x")]),
}


def _returns(parts: list[str]) -> str:
    return ", ".join(parts)


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
    "l12-pick-log": [("def pick_log_backward(probs, y):\n"
                      "    dlogprobs = torch.zeros_like(probs)\n"
                      "    dlogprobs[torch.arange(len(probs)), y] = -1.0 / len(probs)\n"
                      "    with torch.enable_grad():\n"
                      "        t = probs.detach().requires_grad_()\n"
                      "        out = t.log()\n"
                      "    return dlogprobs, out.grad_fn(dlogprobs)\n", "enable_grad")],
    "l12-centre": [(_grad_fn("centre_backward(diff, var, eps, dxhat, dinvstd)", "(t + eps) ** -0.5",
                             "var", "dinvstd"), "enable_grad"),
                   # The spiral's own gradients from the lesson's autograd pass, handed in.
                   ("def centre_backward(diff, var, eps, dxhat, dinvstd):\n"
                    "    return tuple(autograd[k] for k in ('var', 'diff2', 'diff', 'mean', 'hpre'))\n",
                    "hard-coded")],
    "l12-shift": [("def shift_backward(logits, counts, dcounts):\n"
                   "    return autograd['shifted'], autograd['logit_maxes'], autograd['logits']\n",
                   "hard-coded")],
    "l12-weighted": [("def weighted_dlogits(logits, y, weight):\n"
                      "    lsm = torch.log_softmax(logits, 1)\n"
                      "    one = torch.ones((), dtype=logits.dtype)\n"
                      "    g = torch.ops.aten.nll_loss_backward(one, lsm, y, weight, 1, -100,"
                      " weight[y].sum())\n"
                      "    return torch.ops.aten._log_softmax_backward_data(g, lsm, 1, logits.dtype)\n",
                      "backward kernels")],
    "l12-embedding": [("def embedding_backward(dxin, tokens, num_rows):\n"
                       "    demb = dxin[:, 2:].reshape(*tokens.shape, -1)\n"
                       "    return demb, torch.ops.aten.embedding_dense_backward(\n"
                       "        demb.reshape(-1, demb.shape[-1]), tokens.flatten(), num_rows, -1,"
                       " False)\n", "backward kernels")],
    "l12-layernorm": [
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
}

CHEATS = {
    key: [
        (finite_differences(signature, outputs), "numerical estimate"),
        (numerical_grad(signature, outputs), "numerical_grad"),
        (lookup(key, signature), "raised KeyError"),
        *KERNELS.get(key, []),
    ]
    for key, (signature, outputs) in STEPS.items()
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
PLANS = {key: Plan(signature, gradients(outputs)) for key, (signature, outputs) in STEPS.items()}
CHEATS = with_disguised(CHEATS, PLANS)
