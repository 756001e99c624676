"""Shortcuts for the exercises of 26-attention-by-hand.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. For every step: central finite differences
written out, bl.numerical_grad, a table of the visible check's answers and grad mode
switched back on to call autograd; then torch's softmax backward kernel, a torch.func
transform of torch's fused attention, and its flash-attention backward kernel.
"""

from cheats.builders import autograd_back_on, finite_differences, lookup, numerical_grad
from cheats.estimates import MASK, Plan, gradients, with_disguised

# name: (signature, the scalar whose gradient is asked, written in t for the input that is
# differentiated, that input). For the steps with several outputs, one entry per output.
STEPS = {
    "l26-dscores": ("dscores(S, lse, dP)",
                    [("(torch.softmax(t.masked_fill(future_mask(len(t)), float('-inf')), -1)"
                      " * dP).sum()", "S")]),
    "l26-heads": ("attention_backward(Q, K, V, lse, dO)",
                  [("(_attention(t, K, V) * dO).sum()", "Q"),
                   ("(_attention(Q, t, V) * dO).sum()", "K"),
                   ("(_attention(Q, K, t) * dO).sum()", "V")]),
    "l26-flash": ("flash_backward(Q, K, V, O, lse, dO, block)",
                  [("(_attention(t, K, V) * dO).sum()", "Q"),
                   ("(_attention(Q, t, V) * dO).sum()", "K"),
                   ("(_attention(Q, K, t) * dO).sum()", "V")]),
}

# The attention core, written out by the learner for the shortcuts of exercises 2 and 3.
ATTENTION = (
    "def _attention(q, k, v):\n"
    "    s = q @ k.mT / q.shape[-1] ** 0.5\n"
    "    return torch.softmax(s.masked_fill(future_mask(q.shape[-2]), float('-inf')), -1) @ v\n"
    "\n\n"
)


KERNELS = {
    # torch's own softmax backward, on P rebuilt with the mask.
    "l26-dscores": [(
        "def dscores(S, lse, dP):\n"
        "    P = torch.exp(S - lse).masked_fill(future_mask(len(S)), 0.0)\n"
        "    return torch.ops.aten._softmax_backward_data(dP, P, -1, P.dtype)\n",
        "backward kernels")],
    # A torch.func transform: the vector-Jacobian product of torch's fused attention.
    "l26-heads": [(
        "def attention_backward(Q, K, V, lse, dO):\n"
        "    _, pullback = torch.func.vjp(\n"
        "        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), Q, K, V)\n"
        "    return pullback(dO)\n",
        "torch.func")],
    # torch's own flash-attention backward kernel, from what the forward kept.
    "l26-flash": [(
        "def flash_backward(Q, K, V, O, lse, dO, block):\n"
        "    grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(\n"
        "        dO, Q, K, V, O, lse.squeeze(-1), 0.0, True)\n"
        "    return grads[0], grads[1], grads[2]\n",
        "backward kernels")],
}

def _helper(key: str) -> str:
    return "" if key == "l26-dscores" else ATTENTION


CHEATS = {
    key: [
        (_helper(key) + finite_differences(signature, outputs), "numerical estimate"),
        (_helper(key) + numerical_grad(signature, outputs), "numerical_grad"),
        (lookup(key, signature), "raised KeyError"),
        (_helper(key) + autograd_back_on(signature, outputs), "enable_grad"),
        *KERNELS.get(key, []),
    ]
    for key, (signature, outputs) in STEPS.items()
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
PLANS = {key: Plan(signature, gradients(outputs), _helper(key), lesson=MASK)
         for key, (signature, outputs) in STEPS.items()}
CHEATS = with_disguised(CHEATS, PLANS)
