"""Lesson 16, backward across processes: its exercises and its prediction.

Both exercises run the learner's function inside real worker processes
(`backproplab.distributed.run`: gloo, on the CPU), first in 2 processes and
then in 3, so that an answer which assumes two workers is caught:

- ``l16-fp16-hook``: a DDP communication hook that averages each bucket in
  float16. Inside the workers the check counts the hook's all-reduce calls
  (one per bucket DDP hands it), notes the dtype each call sends and the dtype
  the hook hands back (float32, as the task says), and compares the gradients
  with those of DDP's own exact averaging; then once more with gradients near
  40,000 on every rank, where a float16 sum over the ranks overflows and only
  dividing before the all-reduce gives a finite average.
- ``l16-own-averaging``: DDP's averaging rebuilt from ``dist.all_reduce`` and
  gradient hooks on a plain model, without DDP. Its gradients must equal
  DDP's on the same data.

The prediction runs DDP with a given bucket cap and counts the all-reduce
calls of one step, after DDP has rebuilt its buckets. The messages name the
slip the numbers show (a sum where an average was due, a world size of 2
written in, float32 sent) and only when the numbers show it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..distributed import (
    WorkerError,
    WorkerTimeout,
    counting_average,
    grads_by_name,
    make_batch,
    mse,
    run,
    tiny_mlp,
)
from ._spec import Method, Prediction, Report, passed
from ._spec import failed as _fail

WORLD_SIZES = (2, 3)  # every check runs in 2 processes, then in 3
BUCKET_BYTES = 300  # several buckets per step in tiny_mlp
TIMEOUT = 60.0




# --------------------------------------------------------------------------
# What the workers watch: all-reduce calls and DDP, inside each process
# --------------------------------------------------------------------------


def _watch_all_reduce() -> list[tuple[str, int, bool]]:
    """Record every dist.all_reduce call in this worker: (dtype, size, inside backward?)."""
    sent: list[tuple[str, int, bool]] = []
    original = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        in_backward = torch._C._current_autograd_node() is not None
        sent.append((str(tensor.dtype).removeprefix("torch."), tensor.numel(), in_backward))
        return original(tensor, *args, **kwargs)

    # A worker process is thrown away afterwards, so it may be patched freely.
    dist.all_reduce = all_reduce
    dist.distributed_c10d.all_reduce = all_reduce
    return sent


def _watch_ddp() -> list[int]:
    """Count the DistributedDataParallel objects made in this worker from now on."""
    made: list[int] = []
    original = DDP.__init__

    def init(self, *args, **kwargs):
        made.append(1)
        original(self, *args, **kwargs)

    DDP.__init__ = init
    return made


def _watch_ready_made_hooks() -> list[str]:
    """Record calls of torch's own comm hooks (fp16_compress_hook and the like) in this worker."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    used: list[str] = []
    for name in ("allreduce_hook", "fp16_compress_hook", "bf16_compress_hook",
                 "_compress_hook", "_allreduce_fut", "fp16_compress_wrapper",
                 "bf16_compress_wrapper"):
        original = getattr(default_hooks, name, None)
        if original is None:
            continue

        def watched(*args, _name=name, _original=original, **kwargs):
            used.append(_name)
            return _original(*args, **kwargs)

        setattr(default_hooks, name, watched)
    return used


def _my_share(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = make_batch(12, seed=seed + 1)  # 12 examples: an equal share for 2, 3 or 4 ranks
    return x.chunk(world)[rank], y.chunk(world)[rank]


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


def _averaging_trial(attach: Any, seed: int) -> dict[str, Any]:
    """One backward pass of a plain model after ``attach(model)`` (runs in each worker)."""
    sent = _watch_all_reduce()
    made = _watch_ddp()
    model, exact_model, local_model = (tiny_mlp(seed=seed) for _ in range(3))
    x, y = _my_share(seed)
    attach(model)
    mse(model, x, y).backward()
    used_ddp = len(made)
    exact = DDP(exact_model)  # what DDP gives on the same data (keep it alive to backward)
    mse(exact, x, y).backward()
    mse(local_model, x, y).backward()
    return {"used_ddp": used_ddp, "sent": sent, "grads": grads_by_name(model),
            "exact": grads_by_name(exact_model), "local": grads_by_name(local_model)}


# --------------------------------------------------------------------------
# Reading the results in the notebook
# --------------------------------------------------------------------------


def _trials(worker: Any, answer: Any, seed: int, name: str) -> list[list[dict]] | Report:
    """Run ``worker(answer, seed)`` in 2 and then 3 processes; a failing Report on error."""
    if not callable(answer):
        return _fail(name, f"expected a function, got {type(answer).__name__}", "missing")
    results = []
    for world in WORLD_SIZES:
        try:
            results.append(run(worker, world, answer, seed + world, timeout=TIMEOUT))
        except TypeError as err:  # the function could not be sent to the workers
            return _fail(name, str(err), "error")
        except WorkerError as err:
            summary = str(err).splitlines()[0].split(" failed: ", 1)[-1]
            if summary.startswith("NotImplementedError"):
                return _fail(name, "not written yet: the function still raises "
                                   "NotImplementedError.", "missing")
            return _fail(name, f"raised in the worker processes ({world} of them): {summary}"
                               + _advice(summary), "error")
        except WorkerTimeout:
            return _fail(name, f"the {world} worker processes were still waiting after "
                               f"{TIMEOUT:g} s: does every rank make the same all-reduce calls?",
                         "error")
    return results


def _advice(summary: str) -> str:
    if "NoneType" in summary and "returned" not in summary:
        return (" (a .grad is None until backward has reached its parameter: do the "
                "all-reduce in a hook that runs once the gradient is there)")
    if "is not defined" in summary:
        return (" (the workers are other processes: they see torch, nn, dist, DDP and math, "
                "not the rest of this notebook; define what you need inside the function)")
    return ""


def _flat(grads: dict[str, torch.Tensor | None]) -> torch.Tensor | None:
    if any(g is None for g in grads.values()):
        return None
    return torch.cat([g.flatten().double() for g in grads.values()])


def _factor(mine: torch.Tensor, exact: torch.Tensor) -> float | None:
    """c when ``mine`` is c times ``exact`` (to 1e-2), else None."""
    c = float(mine @ exact / (exact @ exact))
    close = (mine - c * exact).abs().max() <= 1e-2 * exact.abs().max()
    return c if close else None


def _scale_slip(c: float, world: int) -> str | None:
    """The slip a gradient c times too large shows, in a run of ``world`` processes."""
    if abs(c - world) < 0.05 * world:
        return (f"the sum over the {world} processes, not the average: divide by "
                "dist.get_world_size() after the all-reduce")
    if abs(c - 1 / world) < 0.05 / world:
        return f"{world} times too small: the average was divided by the world size twice"
    if abs(c - world / 2) < 0.05 * world:
        return (f"divided by 2 while {world} processes were running: ask "
                "dist.get_world_size() rather than assume two")
    return None


def _is_local(result: dict) -> bool:
    mine, local = _flat(result["grads"]), _flat(result["local"])
    return mine is not None and torch.equal(mine, local)


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


def _check_own_averaging(attach: Any, seed: int) -> Report:
    name = getattr(attach, "__name__", "your function")
    found = _trials(_averaging_trial, attach, seed, name)
    if isinstance(found, Report):
        return found
    bitwise = []
    for world, results in zip(WORLD_SIZES, found, strict=True):
        where = f"({world} processes)"
        first = results[0]
        if first["used_ddp"]:
            return _fail(name, f"{where} it made a DistributedDataParallel; the exercise asks "
                               "for DDP's averaging without DDP: dist.all_reduce in gradient "
                               "hooks.")
        if not first["sent"]:
            return _fail(name, f"{where} made no dist.all_reduce call: each rank kept its own "
                               "gradient.")
        if not any(inside for _, _, inside in first["sent"]):
            return _fail(name, f"{where} its all-reduce calls all ran before backward, when "
                               "there was no gradient yet: register hooks that run once each "
                               "gradient is ready (register_post_accumulate_grad_hook).")
        for r, result in enumerate(results):
            mine, exact = _flat(result["grads"]), _flat(result["exact"])
            if mine is None:
                return _fail(name, f"{where} some .grad is None after backward on rank {r}.")
            if torch.allclose(mine, exact, rtol=1e-5, atol=1e-7):
                continue
            if _is_local(result):
                return _fail(name, f"{where} each rank kept its own gradient: the all-reduce "
                                   "must change the .grad that backward leaves (all-reduce "
                                   "p.grad itself, in place).", "mismatch")
            c = _factor(mine, exact)
            slip = None if c is None else _scale_slip(c, world)
            if slip is not None:
                return _fail(name, f"{where} the gradients are {slip}.", "mismatch")
            worst = float((mine - exact).abs().max())
            return _fail(name, f"{where} rank {r}'s gradients differ from DDP's by up to "
                               f"{worst:.2g}.", "mismatch")
        bitwise.append(all(torch.equal(_flat(r["grads"]), _flat(r["exact"])) for r in results))
    same = " (bit for bit with 2)" if bitwise[0] else ""
    return passed(name, "all-reduce in gradient hooks during backward, no DDP, and the gradients "
        f"equal DDP's in 2 and in 3 processes{same}")


EXERCISES = {
    "l16-fp16-hook": Method(check=_check_fp16_hook),
    "l16-own-averaging": Method(check=_check_own_averaging),
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
    "l16-predict-buckets": Prediction(
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
