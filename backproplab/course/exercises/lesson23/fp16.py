"""Exercise 1 of lesson 23: a DDP communication hook that averages each bucket in float16.

Inside the workers the observation counts the hook's all-reduce calls (one per bucket DDP
hands it), notes the dtype each call sends and the dtype the hook hands back (float32),
and keeps the gradients; then once more with gradients near 40,000 on every rank, where a
float16 sum over the ranks overflows and only dividing before the all-reduce gives a
finite average. The verdict compares them with DDP's exact average, computed in the
grader's own process (the mean over the ranks of each rank's gradient)."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from ...distributed import grads_by_name, make_batch, mse, tiny_mlp
from .._spec import Method, is_failure
from .common import (
    ALLOWS,
    VOCABULARY,
    WORLD_SIZES,
    _factor,
    _flat,
    _is_local,
    _my_share,
    _scale_slip,
    _trials,
    _watch_all_reduce,
    _watch_ready_made_hooks,
    averaged,
)

BUCKET_BYTES = 300  # several buckets per step in tiny_mlp


def _hook_trial(hook: Any, seed: int) -> dict[str, Any]:
    """Two training steps through DDP with the learner's comm hook, then one step whose
    gradients are near 40,000 on every rank (runs in each worker)."""
    sent = _watch_all_reduce()
    ready_made = _watch_ready_made_hooks()
    model = tiny_mlp(seed=seed)
    x, y = _my_share(seed)
    buckets: list[int] = []
    futures: list[Any] = []

    def checked(state, bucket):
        buckets.append(bucket.buffer().numel())
        result = hook(state, bucket)
        if not isinstance(result, torch._C.Future):  # what .then() and get_future() give
            raise TypeError(
                f"the hook returned {type(result).__name__}, not a torch.futures.Future "
                "holding the bucket's averaged values")
        futures.append(result)
        return result

    ddp = DDP(model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    ddp.register_comm_hook(state=None, hook=checked)
    for _ in range(2):  # the first step has one bucket; the second, rebuilt, has three
        ddp.zero_grad()
        mse(ddp, x, y).backward()
    found = {"buckets": len(buckets), "sent": list(sent), "ready_made": sorted(set(ready_made)),
             "grads": grads_by_name(model)}
    found["big"] = _big_step(checked, seed)
    found["returned"] = sorted({_value_dtype(future) for future in futures})
    return found


def _big_scale(seed: int) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The loss's scale that makes the largest gradient entry 40,000 on the whole batch,
    and the batch."""
    x, y = make_batch(12, seed=seed + 1)
    with torch.random.fork_rng():
        probe = tiny_mlp(seed=seed)
    mse(probe, x, y).backward()
    return 40000.0 / max(float(p.grad.abs().max()) for p in probe.parameters()), x, y


def _big_step(hook: Any, seed: int) -> dict:
    """One step with the same batch on every rank and the loss scaled so that the largest
    gradient entry is 40,000: a float16 sum over the ranks passes 65,504, the average does
    not. Returns the gradients through ``hook``."""
    scale, x, y = _big_scale(seed)
    model = tiny_mlp(seed=seed)
    ddp = DDP(model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    ddp.register_comm_hook(state=None, hook=hook)
    (mse(ddp, x, y) * scale).backward()
    return grads_by_name(model)


def _value_dtype(future: Any) -> str:
    """The dtype of the tensor a hook's Future holds (DDP takes a tensor or a list of one)."""
    value = future.value()
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    return type(value).__name__


def _fp16_calls_slip(first: dict, where: str) -> str | None:
    """What is wrong with the all-reduce calls of one run, if anything."""
    calls = first["sent"]
    if first["ready_made"]:
        return (f"it hands the bucket to torch's ready-made {first['ready_made'][-1]}; the "
                "exercise asks you to write the hook yourself, from dist.all_reduce.")
    if not calls:
        return (f"{where} made no dist.all_reduce call: each rank kept its own gradient. "
                "All-reduce the bucket's buffer.")
    if len(calls) != first["buckets"]:
        return (f"{where} {len(calls)} all-reduce calls for the {first['buckets']} buckets DDP "
                "handed the hook: send each bucket's flat buffer, bucket.buffer(), in one call.")
    dtypes = sorted({dtype for dtype, _, _ in calls})
    if dtypes != ["float16"]:
        return (f"{where} the all-reduce calls sent {', '.join(dtypes)}; the exercise asks to "
                "send float16 (buffer.to(torch.float16)), half the bytes of float32.")
    return None


def _fp16_values_slip(results: list[dict], want: dict, world: int) -> str | None:
    """What is wrong when some rank's gradients are not DDP's average, else None."""
    where = f"({world} processes)"
    exact = _flat(want["exact"])
    for r, (result, local) in enumerate(zip(results, want["local"], strict=True)):
        mine = _flat(result["grads"])
        if mine is None:
            return f"{where} some .grad is None after backward on rank {r}."
        scale = exact.abs().max() + _flat(local).abs().max()
        if mine.shape == exact.shape and (mine - exact).abs().max() <= 5e-3 * scale + 1e-6:
            continue
        c = _factor(mine, exact)
        slip = None if c is None else _scale_slip(c, world)
        if slip is not None:
            return f"{where} the gradients are {slip}."
        if _is_local(result["grads"], local):
            return (f"{where} each rank kept its own gradient: return a Future whose value is "
                    "the all-reduced, averaged buffer.")
        worst = float((mine - exact).abs().max())
        return (f"{where} rank {r}'s gradients differ from DDP's average by up to {worst:.2g}, "
                "more than float16 rounding explains.")
    returned = results[0]["returned"]
    if returned != ["float32"]:
        return (f"{where} the Future the hook returns holds {', '.join(returned)}; the task "
                "asks for the average as float32, the bucket's own dtype: expected float32, "
                f"got {', '.join(returned)} (convert back with .to(torch.float32) after the "
                "all-reduce).")
    return None


def _overflow_slip(results: list[dict], want: dict, world: int) -> str | None:
    """What is wrong when the step with gradients near 40,000 did not give their average."""
    exact = _flat(want["big"])
    for r, result in enumerate(results):
        mine = _flat(result["big"])
        if mine is None:
            return f"({world} processes) some .grad is None after backward on rank {r}."
        if not torch.isfinite(mine).all():
            return (f"({world} processes) with a gradient entry of 40,000 on every rank, rank "
                    f"{r}'s gradients hold inf: the float16 sum over the processes passed "
                    "65,504, float16's largest value, and overflowed. Divide by "
                    "dist.get_world_size() before the all-reduce, so the sum stays in range.")
        worst = float((mine - exact).abs().max())
        if worst > 5e-3 * float(exact.abs().max()):
            return (f"({world} processes) with gradients near 40,000, rank {r}'s differ from "
                    f"DDP's average by up to {worst:.2g}, more than float16 rounding explains.")
    return None


def _observe_fp16(hook: Any, inputs: dict[str, Any]) -> Any:
    """The hook in DDP, in 2 and in 3 processes: what each rank sent, handed back and
    ended with (a `failure` when a run raised or hung)."""
    found = _trials(_hook_trial, hook, inputs["seed"])
    return found if is_failure(found) else {"runs": found}


def _fp16_want(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """For each world size: DDP's exact average, each rank's own gradient, and the average
    of the step with gradients near 40,000 (the same batch on every rank: its gradient)."""
    wants = []
    for world in WORLD_SIZES:
        seed = inputs["seed"] + world
        x, y = make_batch(12, seed=seed + 1)
        exact, local = averaged(functools.partial(tiny_mlp, seed=seed), x, y, world)
        scale, x, y = _big_scale(seed)
        with torch.random.fork_rng():
            model = tiny_mlp(seed=seed)
        (mse(model, x, y) * scale).backward()
        wants.append({"exact": exact, "local": local, "big": grads_by_name(model)})
    return wants


def _fp16_slip(got: dict[str, Any], wants: list[dict[str, Any]]) -> str | None:
    runs = list(zip(WORLD_SIZES, got["runs"], wants, strict=True))
    for world, results, want in runs:
        if len(results) != world:  # never from a run that went through
            return f"({world} processes) {len(results)} ranks sent back their results."
        slip = (_fp16_calls_slip(results[0], f"({world} processes)")
                or _fp16_values_slip(results, want, world))
        if slip is not None:
            return slip
    # Large gradients only once the ordinary ones pass: a slip there is named first.
    return next(filter(None, (_overflow_slip(results, want, world)
                              for world, results, want in runs)), None)


FP16_HOOK = Method(
    name="fp16_average",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_fp16,
    reference=_fp16_want,
    agree=lambda got, want: _fp16_slip(got, want) is None,
    explain=lambda inputs, got, want: _fp16_slip(got, want),
    trials=1,
    passed="one float16 all-reduce per bucket (4 buckets in 2 steps), float32 handed back, "
           "and the gradients agree with DDP's exact average to float16 precision (relative "
           "error under 5e-3) in 2 and in 3 processes, also where they are near 40,000 and a "
           "float16 sum would overflow",
    allows=ALLOWS,
    vocabulary=VOCABULARY,
)
