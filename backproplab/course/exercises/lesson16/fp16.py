"""Exercise 1 of lesson 16: a DDP communication hook that averages each bucket in float16.

Inside the workers the check counts the hook's all-reduce calls (one per bucket DDP hands
it), notes the dtype each call sends and the dtype the hook hands back (float32), and
compares the gradients with those of DDP's own exact averaging; then once more with
gradients near 40,000 on every rank, where a float16 sum over the ranks overflows and only
dividing before the all-reduce gives a finite average."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from ...distributed import grads_by_name, make_batch, mse, tiny_mlp
from .._spec import Report, passed
from .._spec import failed as _fail
from .common import (
    WORLD_SIZES,
    _factor,
    _flat,
    _is_local,
    _my_share,
    _scale_slip,
    _trials,
    _watch_all_reduce,
    _watch_ready_made_hooks,
)

BUCKET_BYTES = 300  # several buckets per step in tiny_mlp


def _hook_trial(hook: Any, seed: int) -> dict[str, Any]:
    """Two training steps through DDP with the learner's comm hook, then one step whose
    gradients are near 40,000 on every rank (runs in each worker)."""
    sent = _watch_all_reduce()
    ready_made = _watch_ready_made_hooks()
    model, exact_model, local_model = (tiny_mlp(seed=seed) for _ in range(3))
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
    exact = DDP(exact_model, bucket_cap_mb=BUCKET_BYTES / 2**20)  # DDP's own averaging
    for _ in range(2):  # the first step has one bucket; the second, rebuilt, has three
        for m in (ddp, exact):
            m.zero_grad()
            mse(m, x, y).backward()
    mse(local_model, x, y).backward()  # this rank's gradient, not averaged
    found = {"buckets": len(buckets), "sent": list(sent), "ready_made": sorted(set(ready_made)),
             "grads": grads_by_name(model),
             "exact": grads_by_name(exact_model), "local": grads_by_name(local_model)}
    found["big"], found["big_exact"] = _big_step(checked, seed)
    found["returned"] = sorted({_value_dtype(future) for future in futures})
    return found


def _big_step(hook: Any, seed: int) -> tuple[dict, dict]:
    """One step with the same batch on every rank and the loss scaled so that the largest
    gradient entry is 40,000: a float16 sum over the ranks passes 65,504, the average does
    not. Returns the gradients through ``hook`` and through DDP's own averaging."""
    x, y = make_batch(12, seed=seed + 1)
    probe = tiny_mlp(seed=seed)
    mse(probe, x, y).backward()
    scale = 40000.0 / max(float(p.grad.abs().max()) for p in probe.parameters())
    model, exact_model = tiny_mlp(seed=seed), tiny_mlp(seed=seed)
    ddp = DDP(model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    ddp.register_comm_hook(state=None, hook=hook)
    exact = DDP(exact_model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    for m in (ddp, exact):
        (mse(m, x, y) * scale).backward()
    return grads_by_name(model), grads_by_name(exact_model)


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


def _fp16_values_verdict(name: str, results: list[dict], world: int) -> Report | None:
    """A failing Report when some rank's gradients are not DDP's average, else None."""
    where = f"({world} processes)"
    for r, result in enumerate(results):
        mine, exact = _flat(result["grads"]), _flat(result["exact"])
        if mine is None:
            return _fail(name, f"{where} some .grad is None after backward on rank {r}.")
        scale = exact.abs().max() + _flat(result["local"]).abs().max()
        if (mine - exact).abs().max() <= 5e-3 * scale + 1e-6:
            continue
        c = _factor(mine, exact)
        slip = None if c is None else _scale_slip(c, world)
        if slip is not None:
            return _fail(name, f"{where} the gradients are {slip}.", "mismatch")
        if _is_local(result):
            return _fail(name, f"{where} each rank kept its own gradient: return a Future "
                               "whose value is the all-reduced, averaged buffer.", "mismatch")
        worst = float((mine - exact).abs().max())
        return _fail(name, f"{where} rank {r}'s gradients differ from DDP's average by up "
                           f"to {worst:.2g}, more than float16 rounding explains.", "mismatch")
    returned = results[0]["returned"]
    if returned != ["float32"]:
        return _fail(name, f"{where} the Future the hook returns holds {', '.join(returned)}; "
                           "the task asks for the average as float32, the bucket's own dtype: "
                           f"expected float32, got {', '.join(returned)} (convert back with "
                           ".to(torch.float32) after the all-reduce).", "mismatch")
    return None


def _overflow_verdict(name: str, results: list[dict], world: int) -> Report | None:
    """A failing Report when the step with gradients near 40,000 did not give their average."""
    for r, result in enumerate(results):
        mine, exact = _flat(result["big"]), _flat(result["big_exact"])
        if mine is None:
            return _fail(name, f"({world} processes) some .grad is None after backward on "
                               f"rank {r}.")
        if not torch.isfinite(mine).all():
            return _fail(name, f"({world} processes) with a gradient entry of 40,000 on every "
                               f"rank, rank {r}'s gradients hold inf: the float16 sum over the "
                               "processes passed 65,504, float16's largest value, and "
                               "overflowed. Divide by dist.get_world_size() before the "
                               "all-reduce, so the sum stays in range.", "mismatch")
        worst = float((mine - exact).abs().max())
        if worst > 5e-3 * float(exact.abs().max()):
            return _fail(name, f"({world} processes) with gradients near 40,000, rank {r}'s "
                               f"differ from DDP's average by up to {worst:.2g}, more than "
                               "float16 rounding explains.", "mismatch")
    return None


def _check_fp16_hook(hook: Any, seed: int) -> Report:
    name = getattr(hook, "__name__", "your hook")
    found = _trials(_hook_trial, hook, seed, name)
    if isinstance(found, Report):
        return found
    for world, results in zip(WORLD_SIZES, found, strict=True):
        slip = _fp16_calls_slip(results[0], f"({world} processes)")
        if slip is not None:
            return _fail(name, slip)
        report = _fp16_values_verdict(name, results, world)
        if report is not None:
            return report
    # Large gradients only once the ordinary ones pass: a slip there is named first.
    for world, results in zip(WORLD_SIZES, found, strict=True):
        report = _overflow_verdict(name, results, world)
        if report is not None:
            return report
    return passed(name, f"one float16 all-reduce per bucket ({found[0][0]['buckets']} buckets "
        "in 2 steps), float32 handed back, and the gradients agree with DDP's exact average to "
        "float16 precision (relative error under 5e-3) in 2 and in 3 processes, also where "
        "they are near 40,000 and a float16 sum would overflow")
