"""Plausible wrong answers for the exercises of 13-backprop-through-a-classifier.ipynb."""

DLOGITS = "def dlogits_ce(logits, targets):\n    n, classes = logits.shape\n    return {}\n"
SOFTMAX, ONE_HOT = "torch.softmax(logits, dim=1)", "F.one_hot(targets, classes)"

BN = (
    "def batchnorm_backward(dout, x, gain, eps):\n"
    "    n = x.shape[0]\n"
    "    centred = x - x.mean(0)\n"
    "    inv_sd = ({} + eps) ** -0.5\n"
    "    normed = centred * inv_sd\n"
    "    return {}\n"
)
BIASED, UNBIASED = "(centred**2).mean(0)", "x.var(0)"
COMPACT = "gain * inv_sd / n * (n * dout - dout.sum(0) - normed * (dout * normed).sum(0))"

EMBEDDING = (
    "def embedding_grad(ids, demb, num_rows):\n"
    "    dim = demb.shape[-1]\n"
    "    flat_ids, flat_grads = ids.reshape(-1), demb.reshape(-1, dim)\n"
    "    dtable = torch.zeros(num_rows, dim, dtype=demb.dtype)\n"
    "{}"
    "    return dtable\n"
)

LINEAR = (
    "def linear_grads(inp, dout):\n"
    "    flat_in = inp.reshape(-1, inp.shape[-1])\n"
    "    flat_out = dout.reshape(-1, dout.shape[-1])\n"
    "    return {}\n"
)

WRONG = {
    "l13-predict-shape": [
        ("dW2_shape_guess = (3, 16)\n", "shape of what it is the gradient of"),
        ("dW2_shape_guess = (300, 3)\n", "W2 is 16 x 3"),
    ],
    "l13-predict-rows": [
        # Every row, as if the gradient were spread over the table.
        ("nonzero_rows_guess = (0, 1, 2, 3, 4)\n", "only rows that were looked up"),
        # Only the row looked up twice.
        ("nonzero_rows_guess = (3,)\n", "never use rows [2, 4]"),
    ],
    "l13-dlogits": [
        # The mean's 1/N forgotten.
        (DLOGITS.format(f"{SOFTMAX} - {ONE_HOT}"), "a missing 1/N"),
        # one_hot minus softmax: the sign.
        (DLOGITS.format(f"({ONE_HOT} - {SOFTMAX}) / n"), "sign is flipped"),
        # The worked cell's fused form copied: 3 classes and N = 300 hard-wired.
        ("def dlogits_ce(logits, targets):\n"
         "    return (torch.softmax(logits, dim=1) - F.one_hot(targets, 3)) / 300\n",
         "raised RuntimeError"),
        # The lesson's own tensor.
        ("def dlogits_ce(logits, targets):\n    return dlogits_fused\n", "hard-coded"),
        # The autograd shortcut.
        ("def dlogits_ce(logits, targets):\n"
         "    logits = logits.requires_grad_()\n"
         "    F.cross_entropy(logits, targets).backward()\n"
         "    return logits.grad\n",
         "by hand"),
    ],
    "l13-batchnorm": [
        # torch.var's default: Bessel's correction, although training divides by N.
        (BN.format(UNBIASED, COMPACT), "invstd and xhat were made with the unbiased variance"),
        # The N - 1 forward's exact gradient.
        (BN.format(UNBIASED, COMPACT.replace("normed * (", "n / (n - 1) * normed * (")),
         "gradient of a forward pass that uses the unbiased variance"),
        # Only the direct path through xhat.
        (BN.format(BIASED, "gain * inv_sd * dout"), "paths through the batch mean"),
        # The 1/N of the compact form forgotten.
        (BN.format(BIASED, COMPACT.replace(" / n *", " *")), "a missing 1/N"),
        # The autograd shortcut.
        ("def batchnorm_backward(dout, x, gain, eps):\n"
         "    x = x.requires_grad_()\n"
         "    out = F.batch_norm(x, None, None, gain, None, training=True, eps=eps)\n"
         "    out.backward(dout)\n"
         "    return x.grad\n",
         "by hand"),
    ],
    "l13-embedding": [
        # Assigned instead of added: a repeated row keeps one lookup's gradient.
        (EMBEDDING.format("    dtable[flat_ids] = flat_grads\n"), "assigned (=) instead of added"),
        # The same slip, in a loop.
        (EMBEDDING.format("    for i, row in enumerate(flat_ids.tolist()):\n"
                          "        dtable[row] = flat_grads[i]\n"),
         "keeps one contribution"),
        # The section's dC, hard-coded.
        ("def embedding_grad(ids, demb, num_rows):\n    return dC\n", "hard-coded"),
        # The autograd shortcut.
        ("def embedding_grad(ids, demb, num_rows):\n"
         "    table = torch.zeros(num_rows, demb.shape[-1], dtype=demb.dtype,\n"
         "                        requires_grad=True)\n"
         "    table[ids].backward(demb)\n"
         "    return table.grad\n",
         "by hand"),
    ],
    "l13-linear": [
        # The weight gradient transposed.
        (LINEAR.format("flat_out.T @ flat_in, flat_out.sum(0)"), "transposed"),
        # The bias not summed over the batch.
        (LINEAR.format("flat_in.T @ flat_out, flat_out"), "forgot to sum over dimension 0"),
        # A second 1/N.
        (LINEAR.format("flat_in.T @ flat_out / len(flat_in), flat_out.mean(0)"),
         "divided by the number of rows"),
        # The bias summed over the batch but not over the positions of a sequence.
        (LINEAR.format("flat_in.T @ flat_out, dout.sum(0)"), "not over the positions"),
        # The worked cell's formula, which only fits a batch of points (N, in_features).
        ("def linear_grads(inp, dout):\n    return inp.T @ dout, dout.sum(0)\n",
         "on inputs of shapes 8x9x"),
    ],
}
