"""Plausible wrong answers for lesson 09's exercises (see tests/test_exercises.py)."""

WRONG = {
    # The power rule's factor 2 forgotten: d(r²)/dr written as r.
    "l09-grads": (
        "residual = w0 * x + b0 - y\n"
        "grad_w = (residual * x).mean()\n"
        "grad_b = residual.mean()\n",
        "factor 2",
    ),
    # inputs.T @ grad_out gives (3, 2): nn.Linear stores weight as (out, in).
    "l09-linear": (
        "with torch.no_grad():\n"
        "    out = inputs @ layer.weight.T + layer.bias\n"
        "    grad_out = 2 * (out - targets) / out.numel()\n"
        "    grad_weight = inputs.T @ grad_out\n"
        "    grad_bias = grad_out.sum(dim=0)\n",
        "transposed",
    ),
}
