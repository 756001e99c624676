"""Lesson 25, Exercise 4 (``l25-sac-policy``): a selective-checkpointing policy that keeps a
matrix product's result only where computing it again would cost more than ``ratio`` FLOPs
for each byte kept, and recomputes everything else.

The observation runs blocks of new sizes under ``checkpoint`` with the learner's policy,
each aten operation of the forward noted with what the policy decided for it and its
result's bytes, and measures the FLOPs of the backward's products (``FlopCounterMode``, the
recomputation included) and the gradients. The grader runs the right policy and each slip's
on the same blocks and compares: the decisions operation by operation, the bytes kept, the
FLOPs computed again, the gradients.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)
from torch.utils.flop_counter import FlopCounterMode

from .._spec import METHOD, Method, call_answer, failure

_ATEN = torch.ops.aten
PRODUCTS = (_ATEN.mm.default, _ATEN.addmm.default, _ATEN.bmm.default)
_SAVE, _RECOMPUTE = CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE
# Eager mode takes a PREFER_ answer as given: what a decision does, in one word.
_KIND = {CheckpointPolicy.MUST_SAVE: "save", CheckpointPolicy.PREFER_SAVE: "save",
         CheckpointPolicy.MUST_RECOMPUTE: "recompute", CheckpointPolicy.PREFER_RECOMPUTE:
         "recompute"}


def block(x, w1, b1, w2, u):
    """The checked block: a Linear (addmm), tanh, a product (mm), sigmoid, a batched product
    (bmm) and sin, summed."""
    h = torch.sigmoid(torch.tanh(F.linear(x, w1, b1)) @ w2)
    return torch.bmm(h.reshape(u.shape[0], -1, h.shape[-1]), u).sin().sum()


def _size(gen, low, high):
    """A whole number from ``low`` to ``high``, both included."""
    return int(torch.randint(low, high + 1, (), generator=gen))


def _block(gen, dtype, ratio, h, d, p, q):
    """A block in ``dtype`` at ``ratio``: a Linear d -> h, a product h -> p, a bmm of two
    products p -> q."""
    batches, rows = 2, _size(gen, 2, 3)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    return {"ratio": ratio, "tensors": [randn(batches * rows, d), randn(h, d), randn(h),
                                        randn(h, p), randn(batches, p, q)]}


def policy_inputs(gen):
    """Two blocks, one in float32 and one in float64 (4 and 8 bytes a number). A product is
    kept when its inner size exceeds t = ratio * bytes per number / 2 (2 FLOPs a
    multiply-add). Each slip below decides unlike the right policy on one block, and no two
    slips decide alike on both.

    float32: the Linear's input width d and the bmm's inner size p lie between t and 2t:
    kept, but not if FLOPs were counted once per multiply-add. The mm's inner size h is below
    t (recomputed) but above ratio / 2 (kept if bytes were counted as numbers).

    float64: d is exactly t, which only a policy that keeps at the ratio itself (>=) keeps.
    p lies between ratio * 2 and t: kept if bytes were counted as 4 a number. h is at most
    ratio / 2: recomputed even if bytes were counted as numbers. The bmm's output width q
    is above t, so a size read from the result instead of the left factor decides unlike
    any slip."""
    ratio = _size(gen, 2, 5)
    t = 2 * ratio
    f32 = _block(gen, torch.float32, ratio, h=_size(gen, ratio // 2 + 1, t - 1),
                 d=_size(gen, t + 1, 2 * t), p=_size(gen, t + 1, 2 * t), q=_size(gen, 2, 4))
    ratio = _size(gen, 4, 5)
    t = 4 * ratio
    f64 = _block(gen, torch.float64, ratio, h=_size(gen, 2, ratio // 2), d=t,
                 p=_size(gen, 2 * ratio + 1, t - 1), q=_size(gen, t + 1, 2 * t))
    return {"cases": [f32, f64]}


def _run(policy, case) -> dict | Any:
    """One block under checkpoint with ``policy`` (None: no checkpoint): each forward
    operation with the decision and its result's bytes, the backward's FLOPs and the
    gradients."""
    noted = []

    def noting(ctx, op, *args, **kwargs):
        decision = policy(ctx, op, *args, **kwargs)
        if not ctx.is_recompute:
            out = ctx.op_output
            noted.append([str(op), _KIND.get(decision, repr(decision)[:40]),
                          out.nbytes if isinstance(out, torch.Tensor) else 0])
        return decision

    tensors = [t.detach().clone().requires_grad_() for t in case["tensors"]]
    out = block(*tensors) if policy is None else checkpoint(
        block, *tensors, use_reentrant=False,
        context_fn=partial(create_selective_checkpoint_contexts, noting))
    with FlopCounterMode(display=False) as counter:
        out.backward()
    return {"ops": noted, "flops": counter.get_total_flops(),
            "grads": [t.grad for t in tensors]}


def _observe(answer, inputs):
    """The learner's policy_for(ratio) on every block, or the failure of the first that
    cannot run."""
    runs = []
    for case in inputs["cases"]:
        policy, failed = call_answer(answer, case["ratio"], what="policy_for")
        if failed is None and not callable(policy):
            failed = failure("fail", f"policy_for({case['ratio']}) returned "
                                     f"{type(policy).__name__}; it must return a policy: a "
                                     "function of (ctx, op, *args, **kwargs)")
        if failed is None:
            ran, failed = call_answer(_run, policy, case, what="your policy")
        if failed is not None:
            return failed
        runs.append(ran)
    return {"runs": runs}


# --------------------------------------------------------------------------- the judge


def _policy(inner, flops_per_entry=2, bytes_of=lambda out: out.nbytes, products=PRODUCTS,
            others=_RECOMPUTE, worth=lambda flops, budget: flops > budget):
    """policy_for as a right answer writes it, or with one part of it changed."""
    def policy_for(ratio):
        def policy(ctx, op, *args, **kwargs):
            if op in products:
                flops = flops_per_entry * ctx.op_output.numel() * inner(op, args)
                return _SAVE if worth(flops, ratio * bytes_of(ctx.op_output)) else _RECOMPUTE
            return others
        return policy
    return policy_for


def _inner(op, args):
    """A product's inner size: the last size of its left factor (addmm's bias comes first)."""
    return args[-2].shape[-1]


_RIGHT = _policy(_inner)

SLIPS = {
    "addmm's size was read from its first argument, the bias: addmm(bias, a, b) multiplies "
    "a @ b, so the inner size is a's last (args[1], or args[-2])":
        _policy(lambda op, args: args[0].shape[-1]),
    # Counting bmm's FLOPs without its batch decides as this does on these blocks: the
    # words fit both.
    "bmm was never kept: it was left out of the products, or its FLOPs were counted without "
    "the batch. torch.bmm (aten.bmm) is a batch of b products, 2 * b * m * k * n FLOPs for "
    "(m, k) @ (k, n) ones":
        _policy(_inner, products=PRODUCTS[:2]),
    "bytes were counted as numbers: a float64 result takes 8 bytes a number and float32 4 "
    "(out.nbytes, or out.numel() * out.element_size())":
        _policy(_inner, bytes_of=lambda out: out.numel()),
    "bytes were counted as 4 a number, float32's: a float64 result takes 8 (out.nbytes, or "
    "out.numel() * out.element_size())":
        _policy(_inner, bytes_of=lambda out: out.numel() * 4),
    "FLOPs were counted as multiply-adds: Exercise 2's count is 2 FLOPs per multiply-add, "
    "2 * m * k * n for an (m, k) @ (k, n) product":
        _policy(_inner, flops_per_entry=1),
    "every product was kept, whatever it weighs (section 5's policy): keep one only when "
    "its FLOPs per byte kept exceed the ratio":
        _policy(lambda op, args: float("inf")),
    "the comparison is the wrong way round: a product is worth keeping when computing it "
    "again costs more than ratio FLOPs per byte, not less":
        _policy(_inner, worth=lambda flops, budget: flops < budget),
    "a product exactly at the ratio was kept: keep one only when computing it again costs "
    "more than ratio FLOPs a byte (>, not >=)":
        _policy(_inner, worth=lambda flops, budget: flops >= budget),
    "every result was kept, the element-wise ones too, so nothing is computed again: "
    "they cost about one FLOP a number to compute again, far below any ratio here, so the "
    "answer for everything but a product worth its bytes is PREFER_RECOMPUTE":
        _policy(lambda op, args: float("inf"), others=_SAVE),
}


def _reference(inputs):
    """The right policy's runs, and the plain backward's FLOPs (nothing computed again)."""
    return {"runs": [_run(_RIGHT(case["ratio"]), case) for case in inputs["cases"]],
            "plain": [_run(None, case)["flops"] for case in inputs["cases"]]}


def _kept(run) -> tuple[list[str], int]:
    """The short names of the operations a run kept, and their bytes."""
    kept = [(op, size) for op, decision, size in run["ops"] if decision == "save"]
    return [op.removeprefix("aten.").removesuffix(".default") for op, _ in kept], sum(
        size for _, size in kept)


def _problem(got, want) -> tuple[int, str] | None:
    """(the block, what differs) for the first block whose run differs, or None."""
    for k, (mine, right) in enumerate(zip(got["runs"], want["runs"], strict=True)):
        if [op[:2] for op in mine["ops"]] != [op[:2] for op in right["ops"]]:
            (ops, size), (want_ops, want_size) = _kept(mine), _kept(right)
            plain = want["plain"][k]
            return k, (f"your policy kept {', '.join(ops) or 'nothing'} ({size:,} bytes) and "
                       f"the backward computed {mine['flops'] - plain:,} FLOPs again, where "
                       f"it should keep {', '.join(want_ops) or 'nothing'} ({want_size:,} "
                       f"bytes) and compute {right['flops'] - plain:,} again")
        if not all(isinstance(g, torch.Tensor) and g.shape == e.shape
                   and torch.allclose(g, e, rtol=1e-5, atol=1e-6)
                   for g, e in zip(mine["grads"], right["grads"], strict=True)):
            return k, "the gradients differ from plain autograd's"
    return None


def _agrees(got, want) -> bool:
    return _problem(got, want) is None


def _explain(inputs, got, want) -> str:
    k, what = _problem(got, want)
    case = inputs["cases"][k]
    x, w1, _, w2, u = case["tensors"]
    words = (f"on a {str(x.dtype).removeprefix('torch.')} block at ratio {case['ratio']} (a "
             f"Linear {w1.shape[1]} -> {w1.shape[0]}, a product {w2.shape[0]} -> "
             f"{w2.shape[1]}, a bmm {u.shape[1]} -> {u.shape[2]}): {what}")
    named = next((slip for slip, policy_for in SLIPS.items()
                  if all([op[:2] for op in run["ops"]] == [op[:2] for op in _run(
                      policy_for(c["ratio"]), c)["ops"]]
                         for run, c in zip(got["runs"], inputs["cases"], strict=True))), None)
    return f"{words}. {named}." if named else (
        f"{words}. Count each product's FLOPs as Exercise 2 does, divide by the bytes of its "
        "result, and keep it only above the ratio.")


SAC_POLICY = Method(
    name="policy_for",
    make_inputs=policy_inputs,
    observe=_observe,
    reference=_reference,
    agree=_agrees,
    explain=_explain,
    trials=1,  # one trial of two blocks; a slip is named only when both show it
    passed="on 2 new blocks (float32 and float64; addmm, mm and bmm), it keeps each product "
           "worth its bytes and nothing else, and the gradients are plain autograd's",
    vocabulary=METHOD.allowing("torch.utils.checkpoint.", "torch.ops.aten."),
)
