"""Lesson 23, backward across processes: its exercises and its prediction.

Every exercise runs the learner's function inside real worker processes
(`backproplab.distributed.run`: gloo, on the CPU), first in 2 processes and
then in 3, so that an answer which assumes two workers is caught:

- ``l23-fp16-hook`` (here): a DDP communication hook that averages each bucket in
  float16. Inside the workers the observation counts the hook's all-reduce calls (one
  per bucket DDP hands it), notes the dtype each call sends and the dtype the hook
  hands back (float32), and keeps the gradients; then two steps with large gradients:
  one near 40,000 on every rank, where a float16 sum over the ranks overflows, and one
  where rank 0's reach 80,000 and the other ranks' 20,000 (the average 50,000 or 40,000),
  where converting to float16 before dividing overflows on rank 0. Only dividing, in
  float32, before the conversion and the all-reduce gives a finite average in both: there
  it keeps the calls too, and the values each sent, which say where an inf came from. The
  verdict compares them with DDP's exact average, computed in the grader's own process
  (the mean over the ranks of each rank's gradient).
- ``l23-buckets`` (`buckets`): DDP's buckets built from gradient hooks on a
  plain model, without DDP: the all-reduce calls (their sizes, and when each
  is made) and the gradients compared with what DDP does.
- ``l23-shard-mean`` (`sharding`): a reduce-scatter built from ``send`` and
  ``recv``, in FSDP's layout.

The shared parts (what the workers watch, running in 2 and 3 processes, the
readings of a gradient off by a factor) are in `common`. The prediction runs
DDP with a given bucket cap and counts the all-reduce calls of one step, after
DDP has rebuilt its buckets. The messages name the slip the numbers show (a
sum where an average was due, a world size of 2 written in, float32 sent) and
only when the numbers show it.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ...distributed import counting_average, grads_by_name, make_batch, mse, run, tiny_mlp
from .._spec import Method, Prediction, is_failure
from .buckets import BUCKETS
from .common import (
    ALLOWS,
    TIMEOUT,
    VOCABULARY,
    WORLD_SIZES,
    _factor,
    _flat,
    _is_local,
    _my_share,
    _never_waited,
    _scale_slip,
    _trials,
    _unwaited,
    _watch_all_reduce,
    _watch_ready_made_hooks,
    _whose,
    averaged,
)
from .sharding import SHARD_MEAN

# What the grade's sandbox loads before an answer runs (its audit hook refuses imports
# after, in the worker processes too, which it forks): what multiprocessing imports to fork
# them, what reading their results (pickled tensors) imports, and what DDP imports when a
# communication hook is registered.
PRELOAD = ("multiprocessing.popen_fork", "torch.utils.serialization",
           "torch.utils.serialization.config", "torch.distributed.algorithms.ddp_comm_hooks")


# --------------------------------------------------------------------------
# l23-fp16-hook: a communication hook that sends float16
# --------------------------------------------------------------------------

BUCKET_BYTES = 300  # several buckets per step in tiny_mlp
FLOAT16_MAX = 65504.0


def _hook_trial(hook: Any, seed: int) -> dict[str, Any]:
    """Two training steps through DDP with the learner's comm hook, then one step whose
    gradients are near 40,000 on every rank and one whose gradients are `_spread` times
    that (runs in each worker)."""
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
    found = {**_calls_since(sent, buckets, ready_made), "grads": grads_by_name(model)}
    for key, factor in (("big", 1.0), ("spread", _spread(dist.get_rank()))):
        start = len(sent), len(buckets), len(ready_made)
        big = _big_step(checked, seed, factor)
        found[key] = {**_calls_since(sent, buckets, ready_made, start), "grads": big}
    found["returned"] = sorted({_value_dtype(future) for future in futures})
    return found


def _calls_since(sent: list[dict], buckets: list[int], ready_made: list[str],
                 start: tuple[int, int, int] = (0, 0, 0)) -> dict[str, Any]:
    """The all-reduce calls, the number of buckets DDP handed the hook and torch's ready-made
    hooks used, from the counts in ``start`` on."""
    return {"sent": sent[start[0]:], "buckets": len(buckets) - start[1],
            "ready_made": sorted(set(ready_made[start[2]:]))}


def _big_scale(seed: int) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The loss's scale that makes the largest gradient entry 40,000 on the whole batch,
    and the batch."""
    x, y = make_batch(12, seed=seed + 1)
    with torch.random.fork_rng():
        probe = tiny_mlp(seed=seed)
    mse(probe, x, y).backward()
    return 40000.0 / max(float(p.grad.abs().max()) for p in probe.parameters()), x, y


def _big_step(hook: Any, seed: int, factor: float) -> dict:
    """One step with the same batch on every rank and the loss scaled so that the largest
    gradient entry is 40,000 times ``factor``: with 1 on every rank a float16 sum over the
    ranks passes 65,504, the average does not. Returns the gradients through ``hook``."""
    scale, x, y = _big_scale(seed)
    model = tiny_mlp(seed=seed)
    ddp = DDP(model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    ddp.register_comm_hook(state=None, hook=hook)
    (mse(ddp, x, y) * (scale * factor)).backward()
    return grads_by_name(model)


def _spread(rank: int) -> float:
    """Rank ``rank``'s factor in the step whose ranks differ: rank 0's largest gradient entry
    is 80,000, past float16's range, every other rank's 20,000, and their average (50,000
    in 2 processes, 40,000 in 3) is not: converting to float16 before dividing gives inf
    on rank 0, where with 40,000 on every rank it gives none."""
    return 2.0 if rank == 0 else 0.5


# What each step with large gradients is called in the messages.
_BIG = {"big": "with gradients near 40,000 on every rank",
        "spread": "with gradients near 80,000 on rank 0 and 20,000 on every other rank"}


def _value_dtype(future: Any) -> str:
    """The dtype of the tensor a hook's Future holds (DDP takes a tensor or a list of one)."""
    value = future.value()
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    return type(value).__name__


def _fp16_calls_slip(found: dict, where: str) -> str | None:
    """What is wrong with the all-reduce calls of one rank's steps (``found``: its calls, the
    buckets DDP handed the hook, the ready-made hooks used), if anything."""
    calls, count = found["sent"], found["buckets"]
    if found["ready_made"]:
        return (f"it hands the bucket to torch's ready-made {found['ready_made'][-1]}; the "
                "exercise asks you to write the hook yourself, from dist.all_reduce.")
    if not calls:
        return (f"{where} the hook made no dist.all_reduce call; the exercise asks for one per "
                "bucket, of the bucket's buffer in float16.")
    dtypes = list(dict.fromkeys(call["dtype"] for call in calls))  # in the order sent
    if len(calls) != count:
        sending = f", sending {' and '.join(dtypes)}," if len(dtypes) > 1 else ""
        return (f"{where} the hook made {_counted(len(calls), 'all-reduce call')}{sending} for "
                f"the {_counted(count, 'bucket')} DDP handed it: send each bucket's flat buffer, "
                "bucket.buffer(), in one call.")
    if dtypes != ["float16"]:
        return (f"{where} the all-reduce calls sent {', '.join(sorted(dtypes))}; the exercise "
                "asks to send float16 (buffer.to(torch.float16)), half the bytes of float32.")
    return _never_waited(_unwaited(calls), where)


def _counted(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' * (n != 1)}"


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
            return f"{where} {_whose(results, exact, c, r)} are {slip}."
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


def _overflow_slip(results: list[dict], key: str, want: dict, world: int) -> str | None:
    """What is wrong when the step ``key`` with large gradients did not give their average."""
    where = f"({world} processes) {_BIG[key]},"
    exact = _flat(want["exact"])
    for r, result in enumerate(results):
        mine = _flat(result[key]["grads"])
        if mine is None:
            return f"({world} processes) some .grad is None after backward on rank {r}."
        if not torch.isfinite(mine).all():
            return (f"{where} rank {r}'s gradients hold inf: "
                    + _overflow_cause(results, key, want["local"], world))
        worst = float((mine - exact).abs().max())
        if worst > 5e-3 * float(exact.abs().max()):
            return (f"{where} rank {r}'s differ from DDP's average by up to {worst:.2g}, "
                    "more than float16 rounding explains.")
    return None


def _overflow_cause(results: list[dict], key: str, local: list[dict], world: int) -> str:
    """Where an inf came from in the step ``key`` (``local``: each rank's own gradients),
    read from the values each rank sent to the all-reduce (one float16 call per bucket: the
    calls were checked first): sent already, made by the sum, or made after it."""
    sent = [[call["values"].double() for call in result[key]["sent"]] for result in results]
    tops = [float(_flat(grads).abs().max()) for grads in local]
    for k, calls in enumerate(sent):
        if all(torch.isfinite(values).all() for values in calls):
            continue
        infs = sum(int(values.isinf().sum()) for values in calls)
        past = int(_flat(local[k]).float().to(torch.float16).isinf().sum())
        if infs == past > 0:  # inf exactly where float16 cannot hold the gradient itself
            return (f"rank {k}'s gradients reach {tops[k]:,.0f} here, past 65,504, float16's "
                    "largest: the tensor it sent to the all-reduce held inf already, before "
                    f"any sum, at just the entries past that ({past}), as converting to float16 "
                    "before dividing gives. Divide by dist.get_world_size() first, in float32 "
                    f"({tops[k]:,.0f} / {world} = {tops[k] / world:,.0f} fits), then convert.")
        return (f"the tensor rank {k} sent to the all-reduce held inf already, before any "
                "sum. A value past 65,504, float16's largest, turns into inf when converted "
                f"to float16; rank {k}'s gradients here reach {tops[k]:,.0f}, and "
                f"{tops[k] / world:,.0f} once divided by the world size, so the inf came from "
                "what the hook did to them before the conversion.")
    peak = max(float(values.abs().max()) for calls in sent for values in calls)
    total = max(float(sum(parts).abs().max()) for parts in zip(*sent, strict=False))
    if total <= FLOAT16_MAX:
        return (f"what the ranks all-reduced was finite, and its sum stays within float16's "
                f"range (up to {total:,.0f}): the inf came after the all-reduce.")
    said = (f"the float16 sum over the processes passed 65,504, float16's largest value, and "
            f"overflowed: the ranks sent values up to {peak:,.0f}")
    if peak >= max(tops) * (1 - 1e-3):  # the largest gradient entry went out as it is
        return (f"{said}, the gradients undivided. Divide by dist.get_world_size() before "
                "the all-reduce, so the sum stays in range.")
    if peak > max(tops) / world * (1 + 1e-3):
        return (f"{said}, more than the gradients divided by the world size "
                f"({max(tops) / world:,.0f} at most). Send the gradients divided by "
                "dist.get_world_size(), so the sum stays in range.")
    return f"{said}."


def _observe_fp16(hook: Any, inputs: dict[str, Any]) -> Any:
    """The hook in DDP, in 2 and in 3 processes: what each rank sent, handed back and
    ended with (a `failure` when a run raised or hung)."""
    found = _trials(_hook_trial, hook, inputs["seed"])
    return found if is_failure(found) else {"runs": found}


def _fp16_want(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """For each world size: DDP's exact average and each rank's own gradient, in the two
    training steps and in the two with large gradients (the same batch on every rank: its
    gradient, times each rank's factor)."""
    wants = []
    for world in WORLD_SIZES:
        seed = inputs["seed"] + world
        x, y = make_batch(12, seed=seed + 1)
        exact, local = averaged(functools.partial(tiny_mlp, seed=seed), x, y, world)
        scale, x, y = _big_scale(seed)
        with torch.random.fork_rng():
            model = tiny_mlp(seed=seed)
        (mse(model, x, y) * scale).backward()
        big = grads_by_name(model)
        spread = [{name: g * _spread(rank) for name, g in big.items()} for rank in range(world)]
        wants.append({"exact": exact, "local": local,
                      "big": {"exact": big, "local": [big] * world},
                      "spread": {"exact": {name: sum(grads[name] for grads in spread) / world
                                           for name in big}, "local": spread}})
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
    # Large gradients only once the ordinary ones pass: a slip there is named first. Their
    # calls are checked as the others were, before the values; the same on every rank first.
    for key in _BIG:
        for world, results, want in runs:
            slip = (_fp16_calls_slip(results[0][key], f"({world} processes) {_BIG[key]},")
                    or _overflow_slip(results, key, want[key], world))
            if slip is not None:
                return slip
    return None


FP16_HOOK = Method(
    name="fp16_average",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_fp16,
    reference=_fp16_want,
    wrong=_fp16_slip,
    trials=1,
    passed="one float16 all-reduce per bucket (4 buckets in 2 steps, then 1 in each of 2 "
           "steps with large gradients), float32 handed back, and the gradients agree with "
           "DDP's exact average to float16 precision (relative error under 5e-3) in 2 and in "
           "3 processes, in those steps too: with 40,000 on every rank, where a float16 sum "
           "would overflow, and with 80,000 on rank 0, where converting before dividing would",
    allows=ALLOWS,
    vocabulary=VOCABULARY,
)


EXERCISES = {
    "l23-fp16-hook": FP16_HOOK,
    "l23-buckets": BUCKETS,
    "l23-shard-mean": SHARD_MEAN,
}


# --------------------------------------------------------------------------
# The prediction: all-reduce calls in one step, for a given bucket cap
# --------------------------------------------------------------------------

PREDICTION_CAP = 4000  # bytes


def _prediction_model() -> nn.Sequential:
    """The model of the lesson's prediction cell."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 10),
    )


def _calls_per_step(steps: int = 3) -> list[int]:
    """All-reduce calls in each of ``steps`` training steps (runs in each worker)."""
    ddp = DDP(_prediction_model(), bucket_cap_mb=PREDICTION_CAP / 2**20)
    calls: list[int] = []
    ddp.register_comm_hook(state=None, hook=counting_average(calls))
    x = make_batch(4, seed=2)[0].repeat(1, 4)  # 32 features
    per_step = []
    for _ in range(steps):
        before = len(calls)
        ddp.zero_grad()
        ddp(x).pow(2).mean().backward()
        per_step.append(len(calls) - before)
    return per_step


def _buckets_answer() -> int:
    """All-reduce calls in the third step, once DDP has rebuilt its buckets."""
    return run(_calls_per_step, 2, timeout=TIMEOUT)[0][-1]


PREDICTIONS = {
    "l23-predict-buckets": Prediction(
        question="all-reduce calls in one step (after the first) with a 4,000-byte bucket cap",
        answer=_buckets_answer,
        hint="list the parameters in the order their gradients become ready (last layer "
             "first, each bias before its weight) with their bytes (4 per float32 value), "
             "and close a bucket as soon as it holds 4,000 bytes or more; what is left at the "
             "end makes one more bucket.",
        why="the gradients arrive as the last layer's bias (40 bytes) and weight (1,280), the "
            "middle layer's bias (128) and weight (4,096): with that weight bucket 0 holds "
            "5,544 bytes, past the cap, and is sent. The first layer's bias and weight (4,224 "
            "bytes) make bucket 1. {answer} buckets, {answer} all-reduce calls per step (the "
            "very first step sends everything in one bucket, before DDP has seen the order)",
    ),
}
