"""The references and the slips of lesson 03's engine exercises: torch's gradients of
each test expression, and the gradients each typical wrong rule gives, by operation.
They are computed in the grader (`judge_by_hand` calls them); nothing here runs the
learner's code."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["CE_ADVICE", "CE_SLIPS", "OPS", "OP_ADVICE", "ce_reference", "forward",
           "op_reference", "slips"]

F64 = torch.float64
OPS = ("exp", "log", "power")

# Each operation by name: torch's version of it and its local derivative at u (k is the
# exponent, used by power alone).
_OPS = {
    "exp": (lambda t, k: torch.exp(t), lambda u, k: math.exp(u)),
    "log": (lambda t, k: torch.log(t), lambda u, k: 1 / u),
    "power": (lambda t, k: t**k, lambda u, k: k * u ** (k - 1)),
}


def forward(op, u, k):
    return _OPS[op][0](torch.tensor(u, dtype=F64), k).item()


def op_reference(op):
    """torch's gradients of f(u) * u + f(u), u = x * w + b."""
    def reference(x, w, b, k):
        leaves = [t.requires_grad_() for t in (x, w, b)]
        u = x * w + b
        fu = _OPS[op][0](u, k)
        return torch.stack(torch.autograd.grad(fu * u + fu, leaves))
    return reference


def _op_slip(op, du_of):
    """The leaf gradients when d(f(u)*u + f(u))/du comes out as ``du_of(u, f(u), f'(u), k)``."""
    def wrong(x, w, b, k):
        u = float(x * w + b)
        du = du_of(u, forward(op, u, k), _OPS[op][1](u, k), k)
        return torch.tensor([du * float(w), du * float(x), du], dtype=F64)
    return wrong


def slips(op):
    """The slips any of the three rules can make, then the ones of ``op`` alone."""
    common = {
        "the rule sets a.grad with = instead of adding with +=, so the product's direct "
        "path to u is overwritten (u is used twice here)":
            lambda u, fu, d, k: d * (u + 1),
        # -= and a minus sign in the local derivative give the same numbers: name both.
        "the sign is flipped: the rule's share of a.grad has the wrong sign (-= where += "
        "belongs, or a minus sign in the local derivative)":
            lambda u, fu, d, k: fu - d * (u + 1),
        "the rule leaves out out.grad: it must multiply the local derivative by the gradient "
        "that reached the operation's output (here u + 1, not 1)":
            lambda u, fu, d, k: fu + d,
        "u gets nothing through the new operation: its rule is missing or never runs (does "
        "the new Value list a among its parents, and is the rule stored in "
        "out.backward_rule?)":
            lambda u, fu, d, k: fu,
    }
    own = {
        "exp": {
            "exp's rule passes out.grad on without exp's derivative: d/da e^a = e^a, which "
            "the node holds as out.data":
                lambda u, fu, d, k: fu + (u + 1),
            "exp's rule uses the input a.data where its derivative e^a belongs (out.data)":
                lambda u, fu, d, k: fu + u * (u + 1),
        },
        "log": {
            "log's rule is missing its local derivative 1/x: d/da log a = 1 / a.data, times "
            "out.grad":
                lambda u, fu, d, k: fu + (u + 1),
            "log's rule divides by out.data (log a); its derivative is 1/a, with the input "
            "a.data":
                lambda u, fu, d, k: fu + (u + 1) / fu,
            "log's rule multiplies by a.data; its derivative is 1 / a.data":
                lambda u, fu, d, k: fu + u * (u + 1),
        },
        "power": {
            "the power rule is off: the exponent was not lowered (k * a**k, or k * out.data); "
            "d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + k * u**k * (u + 1),
            "the power rule is off: the factor k is missing; d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + u ** (k - 1) * (u + 1),
            "the power rule is off: the exponent was lowered by one in the factor too "
            "((k - 1) * a**(k - 1)); d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + (k - 1) * u ** (k - 1) * (u + 1),
        },
    }[op]
    return {text: _op_slip(op, du) for text, du in {**own, **common}.items()}


OP_ADVICE = {
    "exp": "exp's rule: a.grad += e^a * out.grad, and e^a is out.data.",
    "log": "log's rule: a.grad += (1 / a.data) * out.grad.",
    "power": "power's rule, k a plain number: a.grad += k * a.data**(k - 1) * out.grad.",
}


def ce_reference(logits, target):
    z = logits.requires_grad_()
    (g,) = torch.autograd.grad(F.cross_entropy(z.unsqueeze(0), target.view(1)), z)
    return g


def _ce_slip(grad_of):
    """The logits' gradient under a slip, from p = softmax(z), c = exp(z) and the one-hot y."""
    def wrong(logits, target):
        c = logits.exp()
        p = c / c.sum()
        y = F.one_hot(target, 3).to(F64)
        return grad_of(p, c, y, p[target])
    return wrong


# Slips of the rules, as they show when the loss is -log(c_t * (c_1 + c_2 + c_3)**-1).
CE_SLIPS = {
    "log's rule is missing its local derivative 1/x: its input got out.grad unchanged "
    "(Exercise 1's check names such slips one rule at a time)":
        _ce_slip(lambda p, c, y, pt: pt * (p - y)),
    "the power rule is off: the exponent was not lowered (k * a**k instead of "
    "k * a**(k - 1)), so the sum's path carries e^z where softmax's p belongs":
        _ce_slip(lambda p, c, y, pt: c - y),
    "the power rule is off: the factor k (here -1) is missing, so the sum's path has the "
    "wrong sign":
        _ce_slip(lambda p, c, y, pt: -p - y),
    "only the direct path to the target's logit is there: the normalising sum also "
    "depends on every logit, and its path must be part of the graph":
        _ce_slip(lambda p, c, y, pt: -y),
}

CE_ADVICE = ("The loss is -log(e^z_t / (e^z_1 + e^z_2 + e^z_3)), every piece made with your "
             "exp, log and power (or the engine's + and *). If Exercise 1's check fails, "
             "fix that first.")
