"""Lesson 18, forward mode and torch.func: its exercises and its predictions.

- Exercise 2 (``l18-jvp-by-hand``): ``tangent(W, b, x, v)`` is the JVP ``J v`` of
  ``f(x) = tanh(W x + b) * (x . x)``, written by hand: the learner carries a tangent
  through each operation with its forward-mode rule. A `ByHand` exercise: checked on new
  float64 inputs (shapes, points and directions, one-hot ones among them, where ``J v``
  is a column of J) with autograd and torch.func refused; the typical slips of the
  forward-mode rules are named.
- Exercise 3 (``l18-clip-per-example``): ``clipped_mean_gradient(model, X, Y, max_norm)``
  clips every example's gradient to ``max_norm`` and averages, from ONE vmapped call: the
  check counts the reverse passes and the calls, compares with a loop of its own (on two
  new models, with batches of different sizes), and names each typical slip when the
  learner's result equals it.

The predictions run the lesson's experiments again: the pass counts of the table, of
lesson 08's Jacobian, and of the three functions of Exercise 1.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import jvp, vjp

from ._spec import (
    ByHand,
    Method,
    Prediction,
    as_plain,
    call_answer,
    close,
    compared,
    count_autograd,
    failure,
    kind_of,
    seeded,
)

# --------------------------------------------------------------------------- Exercise 2


def tangent_inputs(gen: torch.Generator):
    """(W, b, x, v) for f(x) = tanh(W x + b) * (x . x): W is m x n with m != n, so that a
    transposed W cannot pass; on every other trial v is one-hot (J v is then a column)."""
    n, m = [int(s) + 2 for s in torch.randperm(5, generator=gen)[:2]]
    W = torch.randn(m, n, generator=gen, dtype=torch.float64) * 0.7
    b = torch.randn(m, generator=gen, dtype=torch.float64)
    x = torch.randn(n, generator=gen, dtype=torch.float64)
    if gen.initial_seed() % 2 == 0:
        v = torch.zeros(n, dtype=torch.float64)
        v[int(torch.randint(n, (1,), generator=gen))] = 1.0
    else:
        v = torch.randn(n, generator=gen, dtype=torch.float64)
    return W, b, x, v


def _tangent_reference(W, b, x, v):
    return jvp(lambda t: torch.tanh(W @ t + b) * (t @ t), (x,), (v,))[1]


def _pieces(W, b, x, v):
    u, du = W @ x + b, W @ v
    h = torch.tanh(u)
    return u, du, h, x @ x, 2 * (x @ v)


def _slip(kind):
    def wrong(W, b, x, v):
        u, du, h, s, ds = _pieces(W, b, x, v)
        return {
            "first": (1 - h**2) * du * s,
            "second": h * ds,
            "two": (1 - h**2) * du * s + h * (x @ v),
            "pre": (1 - u**2) * du * s + h * ds,
            "square": (1 - h) * du * s + h * ds,
            "bias": (1 - h**2) * (du + b) * s + h * ds,
            "value": h * s,
        }[kind]
    return wrong


_TANGENT_SLIPS = {
    "the product rule lost a term: y = h * s moves through s as well, so dy = dh * s + h * ds":
        _slip("first"),
    "the product rule lost a term: y = h * s moves through h as well, so dy = dh * s + h * ds":
        _slip("second"),
    "the tangent of s = x . x is 2 (x . v); the factor 2 is missing": _slip("two"),
    "tanh' is 1 - tanh(u)**2 = 1 - h**2 (lesson 02), with h the OUTPUT of tanh; this uses "
    "1 - u**2, with its input": _slip("pre"),
    "tanh' is 1 - h**2; the square is missing": _slip("square"),
    "b is a constant: the tangent of W x + b is W v alone": _slip("bias"),
    "that is the value y = tanh(W x + b) * (x . x), not its tangent": _slip("value"),
}

# --------------------------------------------------------------------------- Exercise 3


def _new_net(seed, batch):
    """A small model whose inputs are 2 x 3 grids, with a batch of ``batch`` examples."""
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        net = nn.Sequential(nn.Flatten(), nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    # Inputs and targets off to one side, so that the examples pull the same way: the batch
    # gradient is then about as large as theirs, and clipping it once is told apart from
    # clipping each.
    X = torch.randn(batch, 2, 3, generator=gen, dtype=torch.float64) + 2
    Y = torch.randn(batch, 2, generator=gen, dtype=torch.float64) + 3
    return net, X, Y


def _clip_error(err: Exception) -> str:
    if isinstance(err, RuntimeError):
        hint = (" Inside vmap your function sees one example without its batch dimension "
                "(2 x 3, not 1 x 2 x 3): unsqueeze(0) it before calling the model"
                if "shape" in str(err) else "")
        return f"it raised RuntimeError: {str(err).splitlines()[0]}.{hint}"
    return f"it raised {type(err).__name__}: {str(err).splitlines()[0]}"


def _loop_gradients(net, X, Y):
    """The check's own loop: each example's gradient, one backward call each."""
    grads = []
    for xi, yi in zip(X, Y, strict=True):
        net.zero_grad()
        ((net(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()
        grads.append({k: p.grad.clone() for k, p in net.named_parameters()})
    net.zero_grad()
    return {k: torch.stack([g[k] for g in grads]) for k in grads[0]}


def _clipped(per_example, scale):
    return {k: (g * scale.reshape(-1, *[1] * (g.dim() - 1))).mean(0)
            for k, g in per_example.items()}


_CLIP_SLIPS = (
    "the plain mean of the per-example gradients, nothing clipped: that is the batch gradient",
    "the batch gradient clipped once: clip every example's gradient first, then average",
    "every example's gradient came out scaled to norm max_norm, the small ones UP too. "
    "max_norm / norm without the clamp at 1 does that (an example within the limit keeps "
    "its gradient: scale = min(1, max_norm / norm)); so do per-example gradients larger "
    "than they should be, which all pass the limit (each example's loss is the mean of its "
    "squared errors)",
    "each parameter's gradient clipped on its own: an example's norm is taken over all its "
    "parameters together, then one scale multiplies all of them",
    "the clipped gradients are added up, not averaged (divide by the number of examples)",
)


def _clip_slips(per_example, max_norm):
    """What each typical slip returns, computed from the per-example gradients."""
    norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in per_example.values()]).sum(0).sqrt()
    mean = {k: g.mean(0) for k, g in per_example.items()}
    batch_norm = sum(g.pow(2).sum() for g in mean.values()).sqrt()
    batch_scale = min(1.0, max_norm / float(batch_norm))
    per_tensor = {}
    for k, g in per_example.items():
        own = g.flatten(1).norm(dim=1).clamp(min=1e-300)
        per_tensor[k] = (g * (max_norm / own).clamp(max=1.0).reshape(
            -1, *[1] * (g.dim() - 1))).mean(0)
    scale = (max_norm / norms).clamp(max=1.0)
    clipped = _clipped(per_example, scale)
    values = (mean, {k: g * batch_scale for k, g in mean.items()},
              _clipped(per_example, max_norm / norms), per_tensor,
              {k: g * len(norms) for k, g in clipped.items()})
    return dict(zip(_CLIP_SLIPS, values, strict=True))


def _telling_max_norm(per_example, norms):
    """A max_norm that clips some examples and not others, under which every slip of
    `_clip_slips` gives numbers of its own (so that each can be named), or None."""
    keys = list(per_example)
    ordered = norms.sort().values
    # Between two examples' norms, the smallest first: the more examples are clipped, the
    # likelier the batch gradient is clipped too.
    candidates = [float(ordered[i - 1] + ordered[i]) / 2 for i in range(1, len(ordered))]

    def same(a, b):
        return all(torch.allclose(a[k], b[k], rtol=1e-6) for k in keys)

    for max_norm in candidates:
        want = _clipped(per_example, (max_norm / norms).clamp(max=1.0))
        slips = list(_clip_slips(per_example, max_norm).values())
        if not any(same(a, b) for i, a in enumerate([want, *slips]) for b in slips[i:]):
            return max_norm
    return None


def _batch_size(gen: torch.Generator) -> int:
    """5 to 9 examples, one more with each trial (9 is followed by 5): the two trials of a
    check have batches of different sizes, so that a count of examples written into the
    answer fails one of them."""
    return 5 + gen.initial_seed() % 5


def _clip_inputs(gen: torch.Generator) -> dict:
    """A new model and batch (by the seed and the size `_new_net` makes them from) and a
    max_norm under which the answer and every slip differ: new draws until one has it (the
    inputs are off to one side, so nearly always the first)."""
    batch = _batch_size(gen)
    for draw in range(50):
        seed = gen.initial_seed() + 15 + 7717 * draw
        per_example, norms = _per_example(seed, batch)
        max_norm = _telling_max_norm(per_example, norms)
        if max_norm is not None:
            return {"net": seed, "batch": batch, "max_norm": max_norm}
    raise AssertionError("no model and max_norm tell per-example clipping from its slips")


def _per_example(seed: int, batch: int):
    """The per-example gradients of `_new_net`'s model for ``seed`` and ``batch``, and their
    norms."""
    per_example = _loop_gradients(*_new_net(seed, batch))
    norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in per_example.values()]).sum(0).sqrt()
    return per_example, norms


def _observe_clip(answer, inputs: dict) -> dict:
    """The autograd calls the answer made, its reverse passes, and what it returned."""
    net, X, Y = _new_net(inputs["net"], inputs["batch"])
    with count_autograd() as seen:
        got, failed = call_answer(answer, net, X.clone(), Y.clone(), inputs["max_norm"],
                                  what="it", raised=_clip_error,
                                  not_callable=f"expected a function (model, X, Y, max_norm) "
                                               f"-> dict of gradients, got "
                                               f"{type(answer).__name__}")
    if failed is not None:
        return failed
    return {"calls": list(seen.calls), "reverse": seen.reverse, "result": as_plain(got)}


def _clip_reference(inputs: dict) -> dict:
    per_example, norms = _per_example(inputs["net"], inputs["batch"])
    return {"result": _clipped(per_example, (inputs["max_norm"] / norms).clamp(max=1.0))}


def _clip_slip(words: str):
    """The observation of the slip ``words`` names."""
    def slip(inputs: dict) -> dict:
        per_example, _ = _per_example(inputs["net"], inputs["batch"])
        return {"result": _clip_slips(per_example, inputs["max_norm"])[words]}
    return slip


def _passes(got: dict) -> int:
    return max(got["calls"].count("Tensor.backward()"), got["reverse"])


def _clip_agree(got: dict, want: dict) -> bool:
    result, right = got["result"], want["result"]
    return (_passes(got) == 1 and "torch.func.vmap" in got["calls"]
            and isinstance(result, dict) and sorted(result) == sorted(right)
            and all(close(result[k], right[k]) for k in right))


def _explain_clip(inputs: dict, got: dict, want: dict) -> str:
    result, right, n = got["result"], want["result"], inputs["batch"]
    if _passes(got) > 1:
        return failure("method", f"{_passes(got)} backward passes for {n} examples: a loop "
                       "over the examples. The exercise asks for ONE vmapped call, "
                       "vmap(grad(...)), which batches them into one pass.")
    if _passes(got) == 0 or "torch.func.vmap" not in got["calls"]:
        return failure("method", "no vmapped call ran a reverse pass: one backward on the "
                       "whole batch gives one gradient for all the examples together, not one "
                       "per example. Get the per-example gradients with one call of "
                       "vmap(grad(one_loss), in_dims=(None, 0, 0)).")
    keys = list(right)
    if not isinstance(result, dict) or sorted(result) != sorted(keys):
        what = sorted(result) if isinstance(result, dict) else kind_of(result)
        return (f"expected a dict with one gradient per parameter, keys {keys}; got {what}")
    for k in keys:
        if not isinstance(result[k], torch.Tensor) or result[k].shape != right[k].shape:
            shape = tuple(result[k].shape) if isinstance(result[k], torch.Tensor) else result[k]
            return failure("shape", f"the gradient for {k} has shape {shape}; it has the "
                           f"parameter's shape {tuple(right[k].shape)}")
    k = next(k for k in keys if not close(result[k], right[k]))
    compare_words = compared(f"per-example clipping ({k})", result[k], right[k], "a tensor")
    return failure("mismatch", f"the clipped mean for {k} differs from a loop of {n} backward "
                   "calls with clipping. Each example's loss is ((model(x_i) - y_i) ** "
                   "2).mean() on a batch of one; its norm is taken over all parameters "
                   "together.\n  " + compare_words["detail"])


CLIP = Method(
    name="per-example clipping",
    make_inputs=_clip_inputs,
    observe=_observe_clip,
    reference=_clip_reference,
    explain=_explain_clip,
    mistakes={f"your result is {words}": _clip_slip(words)
              for words in _CLIP_SLIPS},
    trials=2,
    agree=_clip_agree,
    passed="one vmapped pass, and the same as a loop of backward calls, one per example, on 2 "
           "new models with batches of different sizes (some examples clipped, the others "
           "not)",
)


EXERCISES = {
    "l18-jvp-by-hand": ByHand(
        name="J v of tanh(W x + b) * (x . x)",
        reference=_tangent_reference,
        make_inputs=tangent_inputs,
        mistakes=_TANGENT_SLIPS,
        advice="Carry the tangent through each step as the forward pass goes: u = W x + b, "
               "h = tanh(u), s = x . x, y = h * s; each step's tangent comes from the "
               "tangents of its inputs by that step's local rule.",
    ),
    "l18-clip-per-example": CLIP,
}

# --------------------------------------------------------------------------- predictions


def passes_for(in_shape, out_shape, seed=0):
    """Both modes' passes for the full Jacobian of a random f with these shapes:
    (JVPs, one per input element; VJPs, one per output element)."""
    gen = torch.Generator().manual_seed(seed)
    n, m = torch.Size(in_shape).numel(), torch.Size(out_shape).numel()
    A = torch.randn(m, n, generator=gen, dtype=torch.float64)

    def f_new(t):
        return torch.tanh(A @ t.reshape(-1)).reshape(out_shape)

    x = torch.randn(in_shape, generator=gen, dtype=torch.float64)
    with count_autograd() as forward:
        for e in torch.eye(n, dtype=torch.float64):
            jvp(f_new, (x,), (e.reshape(in_shape),))
    with count_autograd() as reverse:
        _, pullback = vjp(f_new, x)
        for e in torch.eye(m, dtype=torch.float64):
            pullback(e.reshape(out_shape))
    return forward.forward, reverse.reverse


def _loss_row_answer():
    return passes_for((64,), ())


def _lesson05_answer():
    from torch.func import jacfwd, jacrev

    inp = torch.eye(4, 5, dtype=torch.float64)

    def square_t(t):
        return (t + 1).pow(2).t()

    with count_autograd() as seen_05:
        torch.autograd.functional.jacobian(square_t, inp)
    with count_autograd() as seen_rev:
        jacrev(square_t)(inp)
    with count_autograd() as seen_fwd:
        jacfwd(square_t)(inp)
    return seen_05.reverse, seen_rev.reverse, seen_fwd.forward


SHAPES = {"a": ((28, 28), (10,)), "b": ((2,), (50, 3)), "c": ((100,), ())}


def _modes_answer():
    counted = {k: passes_for(*shapes) for k, shapes in SHAPES.items()}
    return tuple("jacfwd" if fw < rv else "jacrev" for fw, rv in counted.values())


PREDICTIONS = {
    "l18-predict-loss-row": Prediction(
        question="(forward-mode passes, reverse-mode passes) for the full Jacobian, n = 64, "
                 "m = 1",
        answer=_loss_row_answer,
        hint="one forward-mode pass fills one column of J, one reverse-mode pass one row: what "
             "shape is the Jacobian of a function with n inputs and m outputs?",
        why="forward mode needs one JVP per input (a column each), reverse mode one VJP per "
            "output (a row each); a loss has 64 inputs and 1 output, so {answer}",
    ),
    "l18-predict-lesson08": Prediction(
        question="(reverse passes of lesson 08's jacobian, reverse passes of jacrev, forward "
                 "passes of jacfwd)",
        answer=_lesson05_answer,
        hint="torch.autograd.functional.jacobian (without vectorize=True) runs one VJP per "
             "output element in a Python loop; jacrev and jacfwd batch all their one-hot "
             "vectors with vmap.",
        why="lesson 08's jacobian loops over the 20 output elements, one backward each; "
            "jacrev and jacfwd push all 20 one-hot vectors through at once, as one batched "
            "pass: {answer}",
    ),
    "l18-predict-modes": Prediction(
        question="the cheaper mode for (a), (b), (c)",
        answer=_modes_answer,
        hint="forward mode needs one pass per input element, reverse mode one per output "
             "element: count both sides for each function.",
        why="counted, forward vs reverse passes: (a) 784 vs 10, (b) 2 vs 150, (c) 100 vs 1; "
            "the side with fewer passes wins: {answer}",
    ),
}
