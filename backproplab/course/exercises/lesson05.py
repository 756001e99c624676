"""Lesson 05, gradient accumulation: its exercises and its predictions.

``l05-microbatch`` is checked by method: the learner's ``accumulate`` must call
``backward()`` once per piece of a batch and leave the full-batch gradient in
``w.grad``. The batches, their piece sizes and the starting weights are new for
every seed; the typical slips (dividing by the number of pieces, no scaling,
``.grad`` reset between pieces) are named when they explain the result on
every batch.

``l05-tied`` is by hand: the gradient of a weight matrix used at two time steps
of a small recurrent network, one term per use, checked on new sizes with
autograd off; the slips (one use counted, the transpose going back through the
second use forgotten, a tanh' left out, each term transposed) are named when
they hold on every trial.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._spec import (
    METHOD_ADVICE,
    ByHand,
    Method,
    Prediction,
    call_answer,
    close,
    compare,
    count_autograd,
    seeded,
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


# --------------------------------------------------------------------------
# l05-microbatch: pieces of unequal size, one backward per piece
# --------------------------------------------------------------------------


def _new_batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """(w, X, t, sizes): 2 to 4 pieces of different sizes, in float64."""
    pieces = int(torch.randint(2, 5, (1,), generator=gen))
    sizes = (torch.randperm(6, generator=gen)[:pieces] + 1).tolist()  # all different
    n, features = sum(sizes), int(torch.randint(2, 5, (1,), generator=gen))
    X = torch.randn(n, features, generator=gen, dtype=torch.float64)
    t = torch.randn(n, generator=gen, dtype=torch.float64)
    w = torch.randn(features, generator=gen, dtype=torch.float64)
    return w, X, t, sizes


def _piece_grads(w: torch.Tensor, X: torch.Tensor, t: torch.Tensor,
                 sizes: list[int]) -> list[torch.Tensor]:
    """The gradient of each piece's own mean squared error."""
    grads = []
    for X_part, t_part in zip(X.split(sizes), t.split(sizes), strict=True):
        w_part = w.clone().requires_grad_()
        ((X_part @ w_part - t_part) ** 2).mean().backward()
        grads.append(w_part.grad)
    return grads


# Each slip maps (piece gradients, sizes) to the w.grad it leaves.
_MICRO_SLIPS: dict[str, Callable[[list[torch.Tensor], list[int]], torch.Tensor]] = {
    "each piece's mean was divided by the number of pieces, which is right only when the "
    "pieces are the same size: weight each mean by its share of the batch, "
    "len(piece) / len(X)": lambda g, s: sum(g) / len(s),
    "each piece's mean was added unscaled, so pieces count equally whatever their size (and "
    "the total is too large): weight each mean by len(piece) / len(X)": lambda g, s: sum(g),
    "the weights are upside down: a piece's mean counts with its share of the batch, "
    "len(piece) / len(X), not len(X) / len(piece)":
        lambda g, s: sum(gi * sum(s) / si for gi, si in zip(g, s, strict=True)),
    "w.grad holds only the last piece's part: .grad was reset between the pieces, so the "
    "earlier ones were thrown away (letting them add up is the point)":
        lambda g, s: g[-1] * s[-1] / sum(s),
}


def _batch_inputs(gen: torch.Generator) -> dict[str, Any]:
    w, X, t, sizes = _new_batch(gen)
    return {"w": w, "X": X, "t": t, "sizes": sizes}


def _observe_microbatch(answer: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """What the learner's function did on one batch: the autograd calls it made, in
    order, what each backward pass brought to w, and the w.grad it left."""
    sizes = list(inputs["sizes"])
    w = inputs["w"].clone().requires_grad_()
    arrived: list[torch.Tensor] = []
    w.register_hook(lambda g: arrived.append(g.detach().clone()))
    with count_autograd() as seen:
        _, failed = call_answer(answer, w, inputs["X"].clone(), inputs["t"].clone(), sizes,
                                raised=lambda err: f"raised {type(err).__name__}: {err} (on "
                                                   f"pieces of sizes {sizes}).")
    if failed is not None:
        return failed
    # torch.autograd.backward(loss) is loss.backward() spelled as a function: both add into
    # .grad, so both are recorded as the one call the exercise asks for.
    calls = ["Tensor.backward()" if c == "torch.autograd.backward" else c for c in seen.calls]
    return {"calls": calls, "arrived": arrived,
            "grad": None if w.grad is None else w.grad.detach().clone()}


def _expected(grad_of: Callable[[list[torch.Tensor], list[int]], torch.Tensor] | None = None):
    """What one backward() per piece shows: each pass bringing its piece's share, and the
    full-batch gradient in w.grad; with ``grad_of``, the w.grad a slip leaves (what its
    passes bring left open)."""
    def observation(inputs: dict[str, Any]) -> dict[str, Any]:
        w, X, t, sizes = inputs["w"], inputs["X"], inputs["t"], inputs["sizes"]
        parts = _piece_grads(w, X, t, sizes)
        calls = ["Tensor.backward()"] * len(sizes)
        if grad_of is not None:
            return {"calls": calls, "arrived": _ANY, "grad": grad_of(parts, sizes)}
        full = w.clone().requires_grad_()
        ((X @ full - t) ** 2).mean().backward()
        return {"calls": calls, "grad": full.grad,
                "arrived": [g * s / sum(sizes) for g, s in zip(parts, sizes, strict=True)]}
    return observation


_ANY = "any"  # a slip says nothing of what each pass brought


def _carried(arrived: list[torch.Tensor], shares: list[torch.Tensor]) -> bool:
    """Whether every piece's share is among what the passes brought to w."""
    return all(any(close(a, share) for a in arrived) for share in shares)


def _agree(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return (got["calls"] == want["calls"] and close(got["grad"], want["grad"])
            and (want["arrived"] == _ANY or _carried(got["arrived"], want["arrived"])))


def _explain(inputs: dict[str, Any], got: dict[str, Any], want: dict[str, Any]) -> str:
    sizes, where = inputs["sizes"], f"for pieces of sizes {inputs['sizes']}"
    others = [c for c in got["calls"] if c != "Tensor.backward()"]
    if others:
        return (f"{where}, your function called {others[0]}, which returns gradients instead "
                "of adding them into .grad. This exercise is about letting backward() "
                "accumulate.")
    if len(got["calls"]) != len(sizes):
        return (f"{where}, your function ran {_plural(len(got['calls']), 'backward pass')} for "
                f"{_plural(len(sizes), 'piece')}; the exercise asks for one backward() per "
                "piece.")
    if got["grad"] is None:
        return f"{where}, w.grad is still None after your function ran: no backward pass reached w."
    if close(got["grad"], want["grad"]):
        return (f"{where}, w.grad ends right, but the backward passes did not each carry one "
                "piece: what reached w in each pass was not one piece's share of the gradient. "
                "Call backward() on each piece's own scaled loss.")
    told = compare("accumulate", got["grad"], want["grad"], rtol=1e-10, atol=1e-12,
                   advice=METHOD_ADVICE)[0]
    return f"w.grad {where}: {told.message}"


# --------------------------------------------------------------------------
# l05-tied: one weight matrix used at two time steps, by hand
# --------------------------------------------------------------------------


def _rnn_forward(W, h0, x1, x2):
    h1 = torch.tanh(h0 @ W + x1)
    return h1, torch.tanh(h1 @ W + x2)


def _rnn_reference(W, h0, x1, x2, y):
    W = W.requires_grad_()
    _, h2 = _rnn_forward(W, h0, x1, x2)
    ((h2 - y) ** 2).sum().backward()
    return W.grad


def _rnn_inputs(gen):
    """W (k, k) and four vectors of length k, k new each time (2 to 5)."""
    k = int(torch.randint(2, 6, (1,), generator=gen))
    W = torch.randn(k, k, generator=gen, dtype=torch.float64) * 0.8
    return (W, *(torch.randn(k, generator=gen, dtype=torch.float64) for _ in range(4)))


def _rnn_slip(transposed=False, tanh1=True, tanh2=True, step1=True, step2=True):
    """dL/dW with the slips as switches: the gradient back to h1 through W (not W.T),
    a tanh' left out at step 1 or 2, a use of W left out."""
    def wrong(W, h0, x1, x2, y):
        h1, h2 = _rnn_forward(W, h0, x1, x2)
        dpre2 = 2 * (h2 - y) * ((1 - h2**2) if tanh2 else 1)
        dh1 = (dpre2 @ W) if transposed else (W @ dpre2)
        dpre1 = dh1 * ((1 - h1**2) if tanh1 else 1)
        dW = torch.zeros_like(W)
        if step2:
            dW = dW + torch.outer(h1, dpre2)
        if step1:
            dW = dW + torch.outer(h0, dpre1)
        return dW
    return wrong


RNN_SLIPS = {
    "only step 2's use of W is counted: W is used at both steps, and the gradient has one "
    "term per use, torch.outer(h1, dpre2) + torch.outer(h0, dpre1)": _rnn_slip(step1=False),
    "only step 1's use of W is counted: W is used at both steps, and the gradient has one "
    "term per use, torch.outer(h1, dpre2) + torch.outer(h0, dpre1)": _rnn_slip(step2=False),
    "the gradient sent back to h1 through step 2's product h1 @ W is missing its transpose: "
    "dh1_i = sum_j W_ij dpre2_j, which is W @ dpre2 (that is dpre2 @ W.T), not dpre2 @ W":
        _rnn_slip(transposed=True),
    "tanh' is missing at step 1: going back through h1 = tanh(...), multiply by "
    "1 - h1**2 (lesson 02)": _rnn_slip(tanh1=False),
    "tanh' is missing at step 2: going back through h2 = tanh(...), multiply by "
    "1 - h2**2 (lesson 02)": _rnn_slip(tanh2=False),
    "tanh' is missing at both steps: going back through each h = tanh(...), multiply by "
    "1 - h**2 (lesson 02)": _rnn_slip(tanh1=False, tanh2=False),
    "each use's term came out transposed: for p = h @ W, dL/dW_ij = h_i * dL/dp_j, which "
    "is torch.outer(h, dp), not torch.outer(dp, h)":
        lambda W, h0, x1, x2, y: _rnn_slip()(W, h0, x1, x2, y).T,
}


MICROBATCH = Method(
    name="accumulate",
    make_inputs=_batch_inputs,
    observe=_observe_microbatch,
    reference=_expected(),
    explain=_explain,
    mistakes={f"w.grad is not the full-batch gradient: {words}.": _expected(grad_of)
              for words, grad_of in _MICRO_SLIPS.items()},
    trials=3,
    agree=_agree,
    passed="one backward() per piece, and the full-batch gradient on 3 new batches",
)

EXERCISES = {
    "l05-microbatch": MICROBATCH,
    "l05-tied": ByHand(
        name="dL/dW",
        reference=_rnn_reference,
        make_inputs=_rnn_inputs,
        mistakes=RNN_SLIPS,
        advice="Go back one step at a time: dpre2 at step 2, then dh1 and dpre1 at step 1; "
               "each step where W is used adds its own term to dL/dW.",
    ),
}


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------


def _second_answer() -> float:
    x = torch.tensor(1.0, requires_grad=True)
    for _ in range(2):
        (2 * x).backward()
    return x.grad.item()


def _batchnorm_grads(X: torch.Tensor, target: torch.Tensor, k: int) -> list[torch.Tensor]:
    """The parameter gradients of Linear -> BatchNorm1d -> Linear under a mean squared
    error in train mode, accumulated over ``k`` equal micro-batches (each loss divided
    by ``k``), as the lesson computes them, from the same starting weights on every call."""
    with seeded(2):
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 4), torch.nn.BatchNorm1d(4),
                                    torch.nn.Linear(4, 1))
    for X_part, t_part in zip(X.chunk(k), target.chunk(k), strict=True):
        part_loss = ((model(X_part).squeeze(1) - t_part) ** 2).mean()
        (part_loss / k).backward()
    return [p.grad for p in model.parameters()]


def _batchnorm_answer() -> str:
    gen = torch.Generator().manual_seed(0)
    X, target = torch.randn(8, 3, generator=gen), torch.randn(8, generator=gen)
    full, micro = _batchnorm_grads(X, target, 1), _batchnorm_grads(X, target, 4)
    worst = max(float((a - b).abs().max()) for a, b in zip(full, micro, strict=True))
    return "equal" if worst < 1e-5 else "different"


PREDICTIONS = {
    "l05-predict-second": Prediction(
        question="x.grad after two backward calls",
        answer=_second_answer,
        hint="the derivative is 2 both times; ask what backward does to a .grad that already "
             "holds a value.",
        why="backward adds its gradient into .grad rather than replacing it: 2 + 2 = {answer}",
    ),
    "l05-predict-batchnorm": Prediction(
        question="micro-batch gradient through BatchNorm vs the full batch",
        answer=_batchnorm_answer,
        hint="in train mode, BatchNorm1d normalises every example with the mean and variance of "
             "the batch it arrives in. Which examples share a batch here?",
        why="in train mode each example is normalised with the statistics of its own "
            "micro-batch, so the micro-batches compute a different function of the weights, not "
            "the same sum in another order",
        choices=("equal", "different"),
    ),
}
