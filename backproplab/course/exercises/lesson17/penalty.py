"""Lesson 17, Exercise 2 (``l17-weight-penalty``): the gradient with respect to the weights w
of the input-gradient penalty |d f / d x|^2 (a mixed second derivative), with two backward
passes and no Hessian (the passes and the torch functions called are counted), on new
critics and shapes."""

from __future__ import annotations

import torch

from .._spec import (
    Method,
    as_plain,
    call_answer,
    close,
    compared,
    count_autograd,
    every_case,
    failure,
    kind_of,
    randint,
)
from .newton import _graph_error

_FULL_JACOBIANS = ("hessian", "jacobian", "jacrev", "jacfwd")

# The critics the check tries: scalar functions of an input batch x and weights w.
CRITICS = (
    ("sum(tanh(x @ w))", lambda x, w: torch.tanh(x @ w).sum()),
    ("sum(sin(x @ w) ** 2)", lambda x, w: (torch.sin(x @ w) ** 2).sum()),
    ("sum(softplus(x @ w)) + sum((x @ w) ** 3) / 6",
     lambda x, w: torch.nn.functional.softplus(x @ w).sum() + ((x @ w) ** 3).sum() / 6),
)


def _critic(gen: torch.Generator):
    """(label, f, x, w): a critic, a batch x (n, d) and weights w (d, h) of new sizes, d != h
    so that a gradient with respect to the wrong tensor cannot have the right shape, and
    n >= 3 so that a penalty averaged over the examples (1/n of the answer) is not the
    square's missing factor 2 (1/2 of it)."""
    n, d = randint(3, 6, gen), randint(2, 6, gen)
    h = d + int(torch.randint(1, 4, (1,), generator=gen))
    label, f = CRITICS[int(torch.randint(len(CRITICS), (1,), generator=gen))]
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    w = torch.randn(d, h, generator=gen, dtype=torch.float64) * 0.6
    return label, f, x, w


def _penalty_grads(f, x, w, first, second, power=2):
    """d/d(second) of |d f / d(first)|**power, by double backward (the reference and its
    slips: first and second are "x" or "w")."""
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    wrt = {"x": x, "w": w}
    (g,) = torch.autograd.grad(f(x, w), wrt[first], create_graph=True)
    return torch.autograd.grad((g**2).sum() if power == 2 else g.sum(), wrt[second])[0]


def _penalty_inputs(gen: torch.Generator) -> dict:
    """Two new critics, each by its place in CRITICS, with its x and w."""
    labels = [label for label, _ in CRITICS]
    cases = []
    for _ in range(2):
        label, _f, x, w = _critic(gen)
        cases.append({"critic": labels.index(label), "x": x, "w": w})
    return {"critics": cases}


def _where(case: dict) -> str:
    return (f"for f = {CRITICS[case['critic']][0]}, x of shape {tuple(case['x'].shape)}, w of "
            f"shape {tuple(case['w'].shape)}")


def _observe_penalty(penalty_grad, inputs: dict) -> list | dict:
    """For each critic: the autograd calls the answer made, how many reverse passes, and
    the gradient it returned."""
    seen_all = []
    for case in inputs["critics"]:
        with count_autograd() as seen:
            got, failed = call_answer(
                penalty_grad, CRITICS[case["critic"]][1], case["x"].clone(), case["w"].clone(),
                not_callable=f"expected a function penalty_grad(f, x, w), got "
                             f"{type(penalty_grad).__name__}",
                raised=_graph_error(
                    _where(case), seen,
                    needs_grad="x and w arrive as plain tensors: make both require grad "
                               "(.detach().requires_grad_()) before calling f; the first pass "
                               "differentiates with respect to x, the second with respect "
                               "to w.",
                    keeps_graph="The second pass differentiates the penalty, made from the "
                                "input-gradient, which has no graph here: the input-gradient "
                                "keeps its graph only when computed with create_graph=True, "
                                "and not detached afterwards."))
        if failed is not None:
            return failed
        seen_all.append({"calls": list(seen.calls), "reverse": seen.reverse,
                         "grad": as_plain(got)})
    return seen_all


def _full(calls: list) -> list:
    """The calls that build a full Hessian or Jacobian."""
    return sorted({c for c in calls if any(j in c for j in _FULL_JACOBIANS)})


def _penalty_agree(got: dict, want: dict) -> bool:
    return (not _full(got["calls"]) and got["reverse"] <= 2
            and close(got["grad"], want["grad"]))


def _penalty(inputs: dict, first: str, second: str, power: int = 2, by: float = 1.0) -> list:
    """The observation of an answer giving d/d(second) |d f / d(first)|**power, times by."""
    return [{"grad": by * _penalty_grads(CRITICS[c["critic"]][1], c["x"], c["w"], first,
                                         second, power)} for c in inputs["critics"]]


def _batch_mean(inputs: dict) -> list:
    """The observation of an answer averaging each example's penalty over the batch: the
    reference over n, the number of examples."""
    return [{"grad": want["grad"] / len(case["x"])}
            for case, want in zip(inputs["critics"], _penalty(inputs, "x", "w"), strict=True)]


def _explain_penalty(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if not _penalty_agree(g, w))
    case, mine = inputs["critics"][at], got[at]
    where = _where(case)
    if _full(mine["calls"]):
        return (f"{where}: it calls {', '.join(_full(mine['calls']))}, building a full Hessian "
                "or Jacobian. The exercise asks for two passes and no matrix of second "
                "derivatives.")
    if mine["reverse"] > 2:
        return (f"{where}: {mine['reverse']} backward passes; two are enough: one for the "
                "input-gradient (with a graph), one from the penalty.")
    grad, x, w = mine["grad"], case["x"], case["w"]
    if not isinstance(grad, torch.Tensor):
        return f"{where}: expected a tensor shaped like w, got {kind_of(grad)}"
    if grad.shape == x.shape and grad.shape != w.shape:
        return failure("mismatch", f"{where}: the result is shaped like x, {tuple(x.shape)}: "
                       "the penalty is trained through the weights, so its gradient is taken "
                       "with respect to w (the first pass is the one with respect to x).")
    return compared("gradient of the penalty", grad, want[at]["grad"], "a tensor", where=where)


WEIGHT_PENALTY = Method(
    name="penalty_grad",
    make_inputs=_penalty_inputs,
    observe=_observe_penalty,
    reference=lambda inputs: _penalty(inputs, "x", "w"),
    explain=_explain_penalty,
    mistakes={
        "it penalises the gradient with respect to w; the penalty is on the gradient with "
        "respect to the input x, differentiated with respect to w.":
            lambda inputs: _penalty(inputs, "w", "w"),
        "it is half the answer: d|g|^2 = 2 g dg, the chain rule's factor 2 from the square "
        "is missing.": lambda inputs: _penalty(inputs, "x", "w", by=0.5),
        "it is the gradient of the sum of the input-gradient's entries, not of their "
        "squares: the penalty is |g|^2 = (g ** 2).sum().":
            lambda inputs: _penalty(inputs, "x", "w", power=1),
        "it is the answer divided by n, the number of examples: each example's penalty "
        "averaged over the batch. The penalty is |g|^2 for the whole batch, (g ** 2).sum(), "
        "every example's squares added up.": _batch_mean,
    },
    trials=1,
    agree=every_case(_penalty_agree),
    passed="the penalty's gradient with respect to w matches on 2 new critics, with two "
           "backward passes and no Hessian",
)
