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
- ``l16-shard-mean``: a reduce-scatter built from ``send`` and ``recv``: from
  its whole local gradient each rank keeps the mean over the ranks of its own
  rows, in FSDP's layout (ceil(rows / world) rows per rank, the last rank what
  remains). A dispatch mode inside the workers records every c10d operation the
  answer makes: any collective but send and receive is refused (reduce_scatter
  itself, and all_reduce followed by slicing), and so is sending more than the
  other ranks' shards. The shards are compared with the single-process
  whole-batch gradient's rows.

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
from torch.utils._python_dispatch import TorchDispatchMode

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


def _trials(worker: Any, answer: Any, seed: int, name: str, timeout: float = TIMEOUT,
            waiting: str = "does every rank make the same all-reduce calls?",
            worlds: tuple[int, ...] = WORLD_SIZES) -> list[list[dict]] | Report:
    """Run ``worker(answer, seed)`` in 2 and then 3 processes (or in ``worlds``); a failing
    Report on error."""
    if not callable(answer):
        return _fail(name, f"expected a function, got {type(answer).__name__}", "missing")
    results = []
    for world in worlds:
        try:
            results.append(run(worker, world, answer, seed + world, timeout=timeout))
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
                               f"{timeout:g} s: {waiting}", "error")
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


# --------------------------------------------------------------------------
# Exercise 3: a reduce-scatter from send and recv
# --------------------------------------------------------------------------

SHARD_TIMEOUT = 20.0  # a deadlock is the typical slip here: say so soon
SHARD_NAMES = ("layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias")
_MOVES_NO_DATA = {"barrier", "monitored_barrier"}


def _shard_layers(seed: int) -> list[torch.Tensor]:
    """The exercise's two-layer net, 6 -> 7 -> 4 in float64: 7 and 4 rows split unevenly
    over 2 and over 3 ranks (4 and 3; 3, 3 and 1; 2, 2 and 0)."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(7, 6), (7,), (4, 7), (4,)]
    return [torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in shapes]


def _shard_gradients(seed: int, rank: int, world: int) -> dict[str, torch.Tensor]:
    """The gradient of the mean squared error on rank ``rank``'s share of 12 examples
    (``world`` = 1: the whole batch, in one process)."""
    w1, b1, w2, b2 = params = [t.requires_grad_() for t in _shard_layers(seed)]
    gen = torch.Generator().manual_seed(seed + 7)
    x = torch.randn(12, 6, generator=gen, dtype=torch.float64).chunk(world)[rank]
    y = torch.randn(12, 4, generator=gen, dtype=torch.float64).chunk(world)[rank]
    loss = ((torch.tanh(x @ w1.T + b1) @ w2.T + b2 - y) ** 2).mean()
    grads = torch.autograd.grad(loss, params)
    return dict(zip(SHARD_NAMES, grads, strict=True))


def _rows(rows: int, world: int, rank: int) -> range:
    """The rows FSDP gives ``rank``: ceil(rows / world) each, the last what remains."""
    size = -(-rows // world)
    return range(min(rank * size, rows), min((rank + 1) * size, rows))


class _Wire(TorchDispatchMode):
    """Every c10d operation made while active: values sent and received, and the names
    of the other collectives. A dispatch mode sees them however they are called
    (dist.*, a process group's own methods, functional collectives)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = self.received = 0
        self.others: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "c10d" in func.namespace:
            name = func.overloadpacket.__name__
            values = sum(t.numel() for a in args
                         for t in (a if isinstance(a, (list, tuple)) else [a])
                         if isinstance(t, torch.Tensor))
            if name == "send":
                self.sent += values
            elif name.startswith("recv"):
                self.received += values
            elif name not in _MOVES_NO_DATA:
                self.others.append(name)
        return func(*args, **(kwargs or {}))


def _shard_trial(answer: Any, seed: int) -> dict[str, Any]:
    """Call the learner's function on each of this rank's gradients (runs in each worker)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    found = {}
    for name, grad in _shard_gradients(seed, rank, world).items():
        wire = _Wire()
        with wire:
            result = answer(grad.clone())
        kept = result.detach().clone() if isinstance(result, torch.Tensor) else None
        found[name] = {"local": grad, "result": kept, "type": type(result).__name__,
                       "sent": wire.sent, "received": wire.received, "others": wire.others}
    return found


def _collective_name(op: str) -> str:
    """c10d's name of an operation as torch.distributed calls it (allreduce_ -> all_reduce)."""
    plain = op.strip("_").replace("allreduce", "all_reduce").replace("allgather", "all_gather")
    plain = plain.replace("alltoall", "all_to_all").removesuffix("_base").strip("_")
    for family in ("reduce_scatter", "all_reduce", "all_gather"):
        if family in plain:
            return family
    return plain


def _refused_collective(others: list[str], where: str) -> str | None:
    if not others:
        return None
    used = _collective_name(others[0])
    if used == "reduce_scatter":
        return (f"{where} it calls reduce_scatter itself; the exercise is to build it from "
                "send and recv (dist.isend, dist.irecv).")
    return (f"{where} it uses dist.{used}; the exercise hands over send and recv only "
            "(dist.isend, dist.irecv). Bringing the whole gradient to every rank (all_reduce "
            "or all_gather) and then slicing is refused: that is the traffic a "
            "reduce-scatter avoids.")


def _layouts(rows: int, world: int) -> str:
    return ", ".join(str(len(_rows(rows, world, r))) for r in range(world))


def _shape_slip(name: str, results: list[dict], world: int, rank: int) -> str | None:
    local, result = results[rank][name]["local"], results[rank][name]["result"]
    rows = local.shape[0]
    want = len(_rows(rows, world, rank))
    if tuple(result.shape) == (want, *local.shape[1:]):
        return None
    if result.shape == local.shape and want != rows:
        return f"rank {rank} returned the whole gradient of {name}; keep only its own rows."
    if result.dim() != local.dim() or tuple(result.shape[1:]) != tuple(local.shape[1:]):
        return (f"rank {rank}'s result for {name} has shape {tuple(result.shape)}; its shard "
                f"is rows of the gradient, shape {(want, *local.shape[1:])}.")
    kept = [_length(r[name]["result"]) for r in results]
    if kept == [rows // world] * world:
        how = f"rows // world = {rows // world} rows each, as if they split evenly"
    elif kept == [len(c) for c in torch.arange(rows).tensor_split(world)]:
        how = "the rows spread evenly (torch.tensor_split): " + ", ".join(map(str, kept))
    else:
        how = "rows: " + ", ".join(map(str, kept))
    return (f"uneven last shard: {rows} rows of {name} over {world} ranks; the ranks kept "
            f"{how}, but FSDP gives each rank ceil({rows} / {world}) = {-(-rows // world)} "
            f"rows and the last rank what remains: {_layouts(rows, world)}.")


def _length(t: torch.Tensor | None) -> int:
    return t.shape[0] if t is not None and t.dim() else -1


def _other_shard(name: str, results: list[dict], world: int, rank: int) -> str | None:
    """The slip of a rank that kept the mean of another rank's rows, if it did."""
    result = results[rank][name]["result"]
    rows = results[rank][name]["local"].shape[0]
    mine = _rows(rows, world, rank)
    for other in range(world):
        theirs = _rows(rows, world, other)
        mean = sum(r[name]["local"][theirs.start:theirs.stop] for r in results) / world
        if other != rank and mean.shape == result.shape and len(theirs) and torch.allclose(
                result, mean, rtol=1e-10, atol=1e-12):
            return (f"rank {rank} kept the mean of rank {other}'s rows of {name} "
                    f"({theirs.start} to {theirs.stop - 1}), not its own ({mine.start} to "
                    f"{mine.stop - 1}).")
    return None


def _value_slip(name: str, result: torch.Tensor, expected: torch.Tensor,
                results: list[dict], world: int, rank: int) -> str | None:
    if torch.allclose(result, expected, rtol=1e-10, atol=1e-12):
        return None
    local = results[rank][name]["local"]
    rows = local.shape[0]
    mine = _rows(rows, world, rank)
    if torch.allclose(result, local[mine.start:mine.stop], rtol=1e-10, atol=1e-12):
        return (f"rank {rank} kept its own gradient's rows of {name}, not their mean over the "
                f"{world} ranks: add what the other ranks send.")
    c = _factor(result.flatten(), expected.flatten())
    if c is not None and abs(c - world) < 0.05 * world:
        return (f"the sum over the {world} ranks, not the mean: divide by "
                "dist.get_world_size().")
    if c is not None and world != 2 and abs(c - world / 2) < 0.05 * world:
        return (f"divided by 2 while {world} processes were running: ask "
                "dist.get_world_size() rather than assume two.")
    worst = float((result - expected).abs().max())
    return (f"rank {rank}'s rows of {name} differ from the mean over the ranks (the "
            f"single-process whole-batch gradient's rows) by up to {worst:.2g}.")


def _traffic_slip(entry: dict, rows: range, numel: int, per_row: int, world: int,
                  rank: int, name: str) -> str | None:
    allowed = numel - len(rows) * per_row
    if entry["sent"] > allowed:
        return (f"rank {rank} sent {entry['sent']} values for {name}; a reduce-scatter sends "
                f"each other rank only that rank's shard, {allowed} values in all. Sending "
                "the whole gradient around and slicing the sum is what sharding avoids.")
    if world > 1 and allowed and not entry["sent"]:
        return (f"rank {rank} sent nothing for {name}: the other ranks' gradients reach a "
                "rank only through send and recv.")
    return None


def _shard_verdict(results: list[dict], whole: dict[str, torch.Tensor],
                   world: int) -> str | None:
    """The first slip of one run, or None."""
    where = f"({world} processes)"
    for found in results:
        for name in SHARD_NAMES:
            slip = _refused_collective(found[name]["others"], where)
            if slip is not None:
                return slip
    for rank, found in enumerate(results):
        for name in SHARD_NAMES:
            slip = _entry_slip(name, found[name], whole[name], results, world, rank)
            if slip is not None:
                return f"{where} {slip}"
    return None


def _entry_slip(name: str, entry: dict, whole: torch.Tensor, results: list[dict],
                world: int, rank: int) -> str | None:
    """What is wrong with one rank's answer for one gradient: shape, values, traffic."""
    result, local = entry["result"], entry["local"]
    if result is None:
        return (f"rank {rank} returned {entry['type']} for {name}, not a tensor: return "
                "the mean of this rank's rows.")
    rows = _rows(local.shape[0], world, rank)
    return (_other_shard(name, results, world, rank)
            or _shape_slip(name, results, world, rank)
            or _value_slip(name, result, whole[rows.start:rows.stop], results, world, rank)
            or _traffic_slip(entry, rows, local.numel(), local[0].numel(), world, rank,
                             name))


def _check_shard_mean(answer: Any, seed: int) -> Report:
    name = getattr(answer, "__name__", "your function")
    for world in WORLD_SIZES:  # 2 processes first: an answer wrong there needs no third
        found = _trials(_shard_trial, answer, seed, name, timeout=SHARD_TIMEOUT,
                        waiting="every rank was waiting. A blocking dist.send waits until "
                                "the other rank receives, so when every rank sends first, "
                                "none ever receives: start the sends with dist.isend and "
                                "the receives with dist.irecv, then wait() on each.",
                        worlds=(world,))
        if isinstance(found, Report):
            return found
        whole = _shard_gradients(seed + world, 0, 1)  # one process, the whole batch
        slip = _shard_verdict(found[0], whole, world)
        if slip is not None:
            return _fail(name, slip, "mismatch")
    return passed(name, "each rank kept the mean over the ranks of its own rows, in FSDP's "
        f"layout (7 rows as {_layouts(7, 2)} over 2 ranks and {_layouts(7, 3)} over 3; 4 "
        f"rows as {_layouts(4, 3)}), equal to the single-process whole-batch gradient's "
        "rows, sending every other rank only its shard, with send and recv alone, in 2 and "
        "in 3 processes")


EXERCISES = {
    "l16-fp16-hook": Method(check=_check_fp16_hook),
    "l16-own-averaging": Method(check=_check_own_averaging),
    "l16-shard-mean": Method(check=_check_shard_mean),
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
