"""Exercise 3 of lesson 23: a reduce-scatter built from ``send`` and ``recv``.

From its whole local gradient each rank keeps the mean over the ranks of its own rows, in
FSDP's layout (ceil(rows / world) rows per rank, the last rank what remains). A dispatch
mode inside the workers records every c10d operation the answer makes and what it
returned; the verdict refuses any collective but send and receive (reduce_scatter
itself, and all_reduce followed by slicing), and sending more than the other ranks'
shards, and compares the shards with the single-process whole-batch gradient's rows
(each rank's own gradient, what the answer was handed, computed again in the grader)."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from .._spec import Method, failure, is_failure
from .common import ALLOWS, VOCABULARY, WORLD_SIZES, _factor, each_world

SHARD_TIMEOUT = 20.0  # the whole run: starting the processes, forming the group, the answer
# Every rank calls the answer at once (the group's barrier comes first) and a right one
# returns within milliseconds (27 ms at most, measured with the two cores oversubscribed
# threefold); one still inside it after this long waits for a message that never comes, the
# typical slip here (a deadlock): said without waiting out the run.
ANSWER_SECONDS = 2.0
# Why ranks still inside the answer wait, by the last transfer each had started (the wire
# sees dist.recv and dist.irecv alike), and what to do.
_WAITING = {
    "send": "A blocking dist.send waits until the other rank receives, so when every rank "
            "sends first, none ever receives",
    "recv": "A blocking dist.recv waits until the other rank sends, so when every rank "
            "receives first, none ever sends",
    None: "A blocking dist.send waits until the other rank receives, and a blocking dist.recv "
          "until the other rank sends, so when every rank starts with the same one, none "
          "ever reaches the other",
}
_UNBLOCK = (": start the sends with dist.isend and the receives with dist.irecv, then wait() "
            "on each.")
_TRANSFER = {"send": "a send", "recv": "a receive"}
# What to check when what a rank received did not fit what was sent (gloo aborts).
_MISMATCH = ("Check that every send has a matching receive on the other rank, into a buffer "
             "of the same size and dtype as what is sent.")
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
        self.last: str | None = None  # the last transfer started: "send" or "recv"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "c10d" in func.namespace:
            name = func.overloadpacket.__name__
            values = sum(t.numel() for a in args
                         for t in (a if isinstance(a, (list, tuple)) else [a])
                         if isinstance(t, torch.Tensor))
            if name == "send":
                self.sent += values
                self.last = "send"
            elif name.startswith("recv"):
                self.received += values
                self.last = "recv"
            elif name not in _MOVES_NO_DATA:
                self.others.append(name)
        return func(*args, **(kwargs or {}))


def _within(seconds: float, call: Any) -> dict[str, Any]:
    """``call()`` in a thread of its own: {"value": ...}, {"error": ...}, or {} when it is
    still running after ``seconds`` (the worker process ends soon after, thread and all)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # noqa: BLE001 - raised again in the worker's thread
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return box


def _wired(wire: _Wire, answer: Any, grad: torch.Tensor) -> Any:
    with wire:  # a dispatch mode is the calling thread's own
        return answer(grad)


def _shard_trial(answer: Any, seed: int, seconds: float) -> dict[str, Any]:
    """Call the learner's function on each of this rank's gradients (runs in each worker);
    {"waiting": name, "last": its last transfer} when it had not returned after
    ``seconds``."""
    rank, world = dist.get_rank(), dist.get_world_size()
    found = {}
    for name, grad in _shard_gradients(seed, rank, world).items():
        wire = _Wire()
        box = _within(seconds, functools.partial(_wired, wire, answer, grad.clone()))
        if "error" in box:
            raise box["error"]
        if "value" not in box:
            # Not gone at once: leaving closes this rank's connections, and a rank still
            # waiting inside its own call (begun a few milliseconds later) would then be told
            # its connection closed, not reach its deadline and be told it was waiting.
            time.sleep(seconds)
            return {"waiting": name, "last": wire.last}
        result = box["value"]
        kept = result.detach().clone() if isinstance(result, torch.Tensor) else None
        found[name] = {"result": kept, "type": type(result).__name__,
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


def _observe_shard(answer: Any, inputs: dict[str, Any]) -> Any:
    """The learner's function on each rank's gradients, in 2 and in 3 processes: what it
    returned and what it sent (a `failure` when the first run raised or hung)."""
    found = each_world(_shard_trial, answer, inputs["seed"], timeout=SHARD_TIMEOUT,
                       extra=lambda world: (ANSWER_SECONDS,), failed=_still_waiting,
                       waiting="every rank was waiting. " + _WAITING[None] + _UNBLOCK,
                       mismatch=_MISMATCH)
    return found if is_failure(found) else {"runs": found}


def _still_waiting(world: int, results: list[dict]) -> dict | None:
    """The `failure` of a run where a rank had not returned from the answer in time."""
    waiting = [rank for rank, entry in enumerate(results) if "waiting" in entry]
    if not waiting:
        return None
    ranks = ", ".join(map(str, waiting))
    lasts = {results[rank]["last"] for rank in waiting}
    last = lasts.pop() if len(lasts) == 1 else None
    started = "" if last is None else (
        f"; the last transfer {'each' if len(waiting) > 1 else 'it'} had started was "
        f"{_TRANSFER[last]}")
    return failure("error", f"({world} processes) rank{'s' * (len(waiting) > 1)} {ranks} "
                            f"still waiting inside the function {ANSWER_SECONDS:g} s after "
                            f"every rank had called it (for {results[waiting[0]]['waiting']})"
                            f"{started}. {_WAITING[last]}{_UNBLOCK}")


def _shard_want(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """For each world size: each rank's own gradients, and the whole batch's."""
    return [{"local": [_shard_gradients(inputs["seed"] + world, rank, world)
                       for rank in range(world)],
             "whole": _shard_gradients(inputs["seed"] + world, 0, 1)} for world in WORLD_SIZES]


def _shard_slip(got: dict[str, Any], wants: list[dict[str, Any]]) -> str | None:
    for world, found, want in zip(WORLD_SIZES, got["runs"], wants, strict=True):
        if is_failure(found):
            return found["detail"]
        # What each rank was handed goes beside what it returned, as the readings expect.
        results = [{name: {**entry[name], "local": local[name]} for name in SHARD_NAMES}
                   for entry, local in zip(found, want["local"], strict=True)]
        slip = _shard_verdict(results, want["whole"], world)
        if slip is not None:
            return slip
    return None


SHARD_MEAN = Method(
    name="shard_mean",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_shard,
    reference=_shard_want,
    wrong=_shard_slip,
    trials=1,
    passed="each rank kept the mean over the ranks of its own rows, in FSDP's layout (7 rows "
           f"as {_layouts(7, 2)} over 2 ranks and {_layouts(7, 3)} over 3; 4 rows as "
           f"{_layouts(4, 3)}), equal to the single-process whole-batch gradient's rows, "
           "sending every other rank only its shard, with send and recv alone, in 2 and in 3 "
           "processes",
    allows=ALLOWS,
    vocabulary=VOCABULARY,
)
