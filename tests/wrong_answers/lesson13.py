"""Plausible wrong answers for the exercises of 13-backprop-through-a-classifier.ipynb."""

DLOGITS = (
    "def dlogits_ce(logits, targets):\n"
    "    n, classes = logits.shape\n"
    "    return {}\n"
)
BN = (
    "def batchnorm_backward(dout, x, gain, eps):\n"
    "    n = len(x)\n"
    "    diff = x - x.mean(0)\n"
    "    invstd = ({} + eps) ** -0.5\n"
    "    xhat = diff * invstd\n"
    "    return {}\n"
)
GOOD_BN = "gain * invstd / n * (n * dout - dout.sum(0) - xhat * (dout * xhat).sum(0))"
LINEAR = "def linear_weight_grads(inp, dout):\n    return {}\n"

WRONG = {
    "l13-predict-shape": [
        ("dW2_shape_guess = (3, 16)\n", "shape of what it is the gradient of"),
        ("dW2_shape_guess = (300, 3)\n", "shape of what it is the gradient of"),
    ],
    "l13-dlogits": [
        # The mean's 1/N forgotten.
        (DLOGITS.format("torch.softmax(logits, dim=1) - F.one_hot(targets, classes).double()"),
         "factor"),
        # one_hot minus softmax: the sign.
        (DLOGITS.format("(F.one_hot(targets, classes).double() - torch.softmax(logits, dim=1)) / n"),
         "sign"),
        # The lesson's own dlogits, hard-coded.
        ("def dlogits_ce(logits, targets):\n    return dlogits_fused\n", "hard-coded"),
        (
            "def dlogits_ce(logits, targets):\n"
            "    logits = logits.requires_grad_()\n"
            "    F.cross_entropy(logits, targets).backward()\n"
            "    return logits.grad\n",
            "by hand",
        ),
    ],
    "l13-batchnorm": [
        # Bessel's correction in the backward although the forward used N.
        (BN.format("(diff**2).sum(0) / (n - 1)", GOOD_BN), "unbiased variance"),
        # The gain forgotten.
        (BN.format("(diff**2).mean(0)", GOOD_BN.replace("gain * ", "")), "mismatch"),
        # Only the direct path through xhat: the mean's and the variance's paths dropped.
        (BN.format("(diff**2).mean(0)", "gain * invstd * dout"), "mismatch"),
    ],
    "l13-embedding": [
        # Assigned instead of added.
        (
            "def embedding_grad(ids, demb, num_rows):\n"
            "    out = torch.zeros(num_rows, demb.shape[1], dtype=demb.dtype)\n"
            "    out[ids] = demb\n"
            "    return out\n",
            "assigned instead of added",
        ),
        # Every row gets the total.
        (
            "def embedding_grad(ids, demb, num_rows):\n"
            "    return demb.sum(0).expand(num_rows, -1).clone()\n",
            "mismatch",
        ),
        (
            "def embedding_grad(ids, demb, num_rows):\n"
            "    table = torch.zeros(num_rows, demb.shape[1], dtype=demb.dtype, requires_grad=True)\n"
            "    table[ids].backward(demb)\n"
            "    return table.grad\n",
            "by hand",
        ),
    ],
    "l13-linear": [
        (LINEAR.format("dout.T @ inp, dout.sum(0)"), "transposed"),
        (LINEAR.format("inp.T @ dout, dout"), "sum over"),
        (LINEAR.format("inp.T @ dout / len(inp), dout.sum(0) / len(inp)"), "factor"),
    ],
}
