"""Lesson 23's experiments: the functions its worker processes run.

They run in every process of `run` (from :mod:`backproplab.processes`, which
starts the processes and is re-exported here, so the lesson needs only
``bl.distributed``):

>>> import backproplab as bl
>>> bl.distributed.run(bl.distributed.all_reduce_ranks, 2)
[{'rank': 0, 'before': 1.0, 'after': 3.0}, {'rank': 1, 'before': 2.0, 'after': 3.0}]

A child process can only call a function it can import, so they live in the
package: `ddp_gradients`, `bucket_timeline`, `first_buckets`, `micro_batches`,
`unused_parameter`, `uneven_batches`, `replica_drift`, and `sharded_step`,
the same model under FSDP2's ``fully_shard``. They build their model
and data with `tiny_mlp` and `make_batch`, which the notebook calls too, so
both sides work on the same numbers. `format_timeline` and `plot_timeline`
show what `bucket_timeline` recorded; `show` prints a worker's code.

Each worker uses one thread and seeds its own random numbers, and each returns
plain data (numbers, names, tensors), never a model or a process group.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import textwrap
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

if TYPE_CHECKING:  # only for annotations
    from matplotlib.axes import Axes

from ..figure import new_or_given_ax
from ..processes import PRELOAD, WorkerError, WorkerTimeout, run

__all__ = [
    "WorkerError",
    "WorkerTimeout",
    "run",
    "tiny_mlp",
    "make_batch",
    "all_reduce_ranks",
    "ddp_gradients",
    "bucket_timeline",
    "first_buckets",
    "micro_batches",
    "unused_parameter",
    "uneven_batches",
    "replica_drift",
    "sharded_step",
    "show",
    "watch_collectives",
    "format_timeline",
    "plot_timeline",
    "counting_average",
    "grads_by_name",
    "mse",
]

# The workers' functions and FSDP, ready in every new process, and so are the workers of
# the lesson's checks: each process would otherwise import the course first (0.2 s).
PRELOAD.extend(["torch.distributed.fsdp", __name__, "backproplab.course.exercises.lesson23"])


# --------------------------------------------------------------------------
# The model and the data every worker and the notebook share
# --------------------------------------------------------------------------


def tiny_mlp(seed: int = 0) -> nn.Sequential:
    """A three-layer MLP, 8 -> 16 -> 16 -> 4 with tanh, its weights drawn from ``seed``.

    >>> [name for name, _ in tiny_mlp().named_parameters()][:2]
    ['fc1.weight', 'fc1.bias']
    """
    _check_int("seed", seed)
    torch.manual_seed(seed)
    return nn.Sequential(OrderedDict(
        fc1=nn.Linear(8, 16), act1=nn.Tanh(),
        fc2=nn.Linear(16, 16), act2=nn.Tanh(),
        fc3=nn.Linear(16, 4),
    ))


def make_batch(n: int = 16, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` inputs of 8 features and ``n`` targets of 4, drawn from ``seed``.

    >>> [t.shape for t in make_batch(6)]
    [torch.Size([6, 8]), torch.Size([6, 4])]
    """
    _check_int("n", n, low=1, high=10**6)
    _check_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=gen), torch.randn(n, 4, generator=gen)


def _check_int(name: str, value: Any, low: int = 0, high: int = 2**63 - 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name}: expected an int from {low} to {high}, got {value}")


def mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean squared error of ``model`` on ``(x, y)``, the loss of every worker."""
    return ((model(x) - y) ** 2).mean()


def grads_by_name(model: nn.Module) -> dict[str, torch.Tensor | None]:
    """Each parameter's .grad (a copy), by name; the DDP wrapper's "module." prefix dropped."""
    return {name.removeprefix("module."): None if p.grad is None else p.grad.detach().clone()
            for name, p in model.named_parameters()}


def show(worker: Callable[..., Any]) -> None:
    """Print a worker's code without its docstring and its argument checks: the lesson
    reads what it does.

    >>> show(all_reduce_ranks)  # doctest: +ELLIPSIS
    def all_reduce_ranks() -> dict[str, Any]:
        rank = dist.get_rank()
    ...
    """
    if not inspect.isfunction(worker):
        raise TypeError(f"worker: expected a function, got {type(worker).__name__}")
    lines = textwrap.dedent(inspect.getsource(worker)).splitlines()
    body = ast.parse("\n".join(lines)).body[0].body
    skipped = list(itertools.takewhile(_preamble, body))
    if skipped:
        del lines[skipped[0].lineno - 1:skipped[-1].end_lineno]
    print("\n".join(lines))


def _preamble(stmt: ast.stmt) -> bool:
    """A docstring, or a check of the arguments (``_check_int``, maybe under an ``if``)."""
    if isinstance(stmt, ast.If):
        return all(_preamble(inner) for inner in stmt.body) and not stmt.orelse
    if not isinstance(stmt, ast.Expr):
        return False
    value = stmt.value
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str)
    return isinstance(value, ast.Call) and getattr(value.func, "id", None) == "_check_int"


# --------------------------------------------------------------------------
# The workers of the lesson. Each runs in every process of `run`.
# --------------------------------------------------------------------------


def all_reduce_ranks() -> dict[str, Any]:
    """Each rank holds rank + 1; all_reduce adds them up and every rank gets the sum."""
    rank = dist.get_rank()
    t = torch.tensor([rank + 1.0])
    before = t.item()
    dist.all_reduce(t)  # in place: sum over all ranks
    return {"rank": rank, "before": before, "after": t.item()}


def ddp_gradients(n: int = 16) -> dict[str, Any]:
    """One backward pass through DDP on this rank's share of a batch of ``n``."""
    _check_int("n", n, low=1, high=10**6)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_mlp(seed=0)
    x, y = make_batch(n, seed=1)
    x_mine, y_mine = x.chunk(world)[rank], y.chunk(world)[rank]

    mse(model, x_mine, y_mine).backward()  # the plain model: this rank's data only
    local = grads_by_name(model)
    model.zero_grad()

    ddp = DDP(model)  # same model, now wrapped: its backward averages across ranks
    mse(ddp, x_mine, y_mine).backward()
    return {"rank": rank, "examples": len(x_mine), "local": local,
            "ddp": grads_by_name(model)}


def bucket_timeline(bucket_bytes: int = 300, steps: int = 2) -> list[list[tuple]]:
    """Record, step by step, when each gradient is ready and when DDP sends a bucket.

    Events, in the order they happen on this rank:
    ("ready", name): AccumulateGrad has just filled that parameter's .grad;
    ("all-reduce", bucket index, names, values): DDP hands a full bucket to the hook;
    ("returned",): backward() has returned, the averaged gradients are in .grad.
    """
    _check_int("bucket_bytes", bucket_bytes, low=1)
    _check_int("steps", steps, low=1, high=1000)
    model = tiny_mlp(seed=0)
    x, y = make_batch(8, seed=1)
    names = {p: name for name, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=bucket_bytes / 2**20)  # a tiny cap: several buckets
    log: list[tuple] = []

    def ready(p):  # runs right after AccumulateGrad has filled p.grad
        log.append(("ready", names[p]))

    def logging_average(state, bucket):  # DDP calls this once per full bucket
        params = [names[p] for p in bucket.parameters()]
        log.append(("all-reduce", bucket.index(), params, bucket.buffer().numel()))
        world = dist.get_world_size()
        sent = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return sent.then(lambda done: done.value()[0] / world)  # sum / world: average

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(ready)
    ddp.register_comm_hook(state=None, hook=logging_average)

    timeline = []
    for _ in range(steps):
        ddp.zero_grad()
        mse(ddp, x, y).backward()
        log.append(("returned",))
        timeline.append(log.copy())
        log.clear()
    return timeline


def first_buckets(bucket_bytes: int = 300) -> dict[str, Any]:
    """DDP's plan for the first step's buckets, read before any backward, without and
    with ``find_unused_parameters``; and the default caps, in bytes."""
    _check_int("bucket_bytes", bucket_bytes, low=1)
    plans = {}
    for find in (False, True):
        ddp = DDP(tiny_mlp(seed=0), bucket_cap_mb=bucket_bytes / 2**20,
                  find_unused_parameters=find)
        plans[find] = ddp._get_ddp_logging_data()["bucket_sizes"]  # a string of sizes
    default = DDP(tiny_mlp(seed=0))
    return {"buckets": plans, "default cap": default.bucket_bytes_cap,
            "first bucket": dist._DEFAULT_FIRST_BUCKET_BYTES}


def counting_average(counter: list[int]) -> Callable[..., Any]:
    """DDP's averaging as a comm hook that also counts its all-reduce calls."""
    def hook(state, bucket):
        counter.append(bucket.buffer().numel())
        world = dist.get_world_size()
        sent = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return sent.then(lambda done: done.value()[0] / world)
    return hook


def micro_batches(k: int = 4, use_no_sync: bool = True, n: int = 16) -> dict[str, Any]:
    """Accumulate ``k`` micro-batches per rank, with or without ``no_sync``.

    Counts the all-reduce calls with a comm hook that averages as DDP does.
    """
    _check_int("k", k, low=1, high=10**6)
    _check_int("n", n, low=1, high=10**6)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_mlp(seed=0)
    x, y = make_batch(n, seed=1)
    x_mine, y_mine = x.chunk(world)[rank], y.chunk(world)[rank]
    ddp = DDP(model)
    all_reduces: list[int] = []
    ddp.register_comm_hook(state=None, hook=counting_average(all_reduces))

    pieces = list(zip(x_mine.chunk(k), y_mine.chunk(k), strict=True))
    for i, (x_part, y_part) in enumerate(pieces):
        last = i == len(pieces) - 1
        if use_no_sync and not last:
            with ddp.no_sync():  # backward only accumulates into .grad
                (mse(ddp, x_part, y_part) / k).backward()  # lesson 05: loss / k
        else:  # averages everything .grad holds
            (mse(ddp, x_part, y_part) / k).backward()
    return {"rank": rank, "all_reduce_calls": len(all_reduces),
            "grads": grads_by_name(model)}


class _WithSpareLayer(nn.Module):
    """tiny_mlp plus a layer that forward() never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.body = tiny_mlp(seed=0)
        self.spare = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)  # self.spare is left out


def _first_sentence(err: BaseException) -> str:
    text = " ".join(str(err).split())
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def unused_parameter(find_unused_parameters: bool = False, steps: int = 2) -> dict[str, Any]:
    """Train a model with a layer forward() never uses; report what DDP did.

    Each rank has its own data, so a gradient that was averaged differs from
    the one this rank computes alone.
    """
    _check_int("steps", steps, low=1, high=1000)
    rank = dist.get_rank()
    model = _WithSpareLayer()
    ddp = DDP(model, find_unused_parameters=find_unused_parameters)
    x, y = make_batch(8, seed=1 + rank)
    alone = _WithSpareLayer()  # the same model without DDP: this rank's own gradient
    mse(alone, x, y).backward()
    done, averaged, error = 0, None, None
    try:
        for _ in range(steps):
            ddp.zero_grad()
            mse(ddp, x, y).backward()
            done += 1
            if done == 1:
                mine, own = model.body.fc3.bias.grad, alone.body.fc3.bias.grad
                averaged = not torch.equal(mine, own)
    except RuntimeError as err:
        error = _first_sentence(err)
    return {"steps_done": done, "first_step_averaged": averaged, "error": error,
            "spare_grad": model.spare.weight.grad}


def uneven_batches(use_join: bool = False) -> dict[str, Any]:
    """Rank 0 has three batches, every other rank two; train on all of them."""
    rank = dist.get_rank()
    model = tiny_mlp(seed=0)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [make_batch(4, seed=10 * rank + i) for i in range(3 if rank == 0 else 2)]
    done, error = 0, None
    with ddp.join() if use_join else contextlib.nullcontext():
        try:
            for x, y in batches:
                optimizer.zero_grad()
                mse(ddp, x, y).backward()
                optimizer.step()
                done += 1
        except RuntimeError:  # gloo's message names addresses and ports: keep the kind
            error = "RuntimeError"
    return {"rank": rank, "batches": len(batches), "steps_done": done, "error": error}


def replica_drift(edit_after: int | None = 2, steps: int = 4) -> list[list[float]]:
    """Train with SGD; rank 0 alone clips a weight in place after step ``edit_after``.

    Returns this rank's parameters, flattened into one list, right after
    DDP(model) and then after each step, so the notebook can compare the replicas.
    """
    if edit_after is not None:
        _check_int("edit_after", edit_after)
    _check_int("steps", steps, low=1, high=1000)
    rank = dist.get_rank()
    model = tiny_mlp(seed=rank)  # different on purpose: DDP copies rank 0's at the start
    ddp = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = make_batch(8, seed=1 + rank)

    def snapshot() -> list[float]:
        return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()

    states = [snapshot()]
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        mse(ddp, x, y).backward()
        optimizer.step()
        if step == edit_after and rank == 0:
            with torch.no_grad():
                model.fc1.weight.clamp_(-0.2, 0.2)  # only rank 0 clips its weights
        states.append(snapshot())
    return states


# --------------------------------------------------------------------------
# Sharded data parallel: FSDP2's fully_shard
# --------------------------------------------------------------------------


@contextlib.contextmanager
def watch_collectives(log: list[tuple], layer_of: dict[int, str]) -> Iterator[list[tuple]]:
    """Write down every all-gather and reduce-scatter this process makes, while inside.

    ``fully_shard`` (torch 2.13) calls ``dist.all_gather_single`` and
    ``dist.reduce_scatter_single``; both are wrapped here and restored on the way
    out. Each call adds ("all-gather" or "reduce-scatter", layer, values) to
    ``log``: the layer whose parameters travel (found from how many values the
    whole layer has, looked up in ``layer_of``), and the values this rank hands
    in: its shard for an all-gather, its whole gradient for a reduce-scatter.
    """
    originals = {"all_gather_single": dist.all_gather_single,
                 "reduce_scatter_single": dist.reduce_scatter_single}

    def all_gather(output_tensor, input_tensor, *args, **kwargs):
        # Every rank sends its shard; all ranks get the whole layer.
        log.append(("all-gather", layer_of.get(output_tensor.numel(), "?"),
                    input_tensor.numel()))
        return originals["all_gather_single"](output_tensor, input_tensor, *args, **kwargs)

    def reduce_scatter(output, input, *args, **kwargs):
        # Every rank sends its whole gradient; each gets back the reduced shard it keeps.
        log.append(("reduce-scatter", layer_of.get(input.numel(), "?"), input.numel()))
        return originals["reduce_scatter_single"](output, input, *args, **kwargs)

    dist.all_gather_single, dist.reduce_scatter_single = all_gather, reduce_scatter
    try:
        yield log
    finally:
        for name, function in originals.items():
            setattr(dist, name, function)


def sharded_step(reshard_after_forward: bool = True, steps: int = 2,
                 n: int = 16) -> dict[str, Any]:
    """``steps`` forward and backward passes of tiny_mlp under ``fully_shard``, on
    this rank's share of a batch of ``n``; what each rank holds and what travels.

    Each Linear layer is its own FSDP unit, then the whole model. The device mesh
    is "cpu": its process group is gloo's. Returns the shapes of this rank's
    parameter and gradient shards (DTensor ``to_local()``), the collectives of
    each step, the bytes this rank holds, and the whole gradients
    (``full_tensor()``, gathered after the last step).
    """
    _check_int("steps", steps, low=1, high=1000)
    _check_int("n", n, low=1, high=10**6)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_mlp(seed=0)
    mesh = init_device_mesh("cpu", (world,))
    for layer in (model.fc1, model.fc2, model.fc3):
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    x, y = make_batch(n, seed=1)
    x_mine, y_mine = x.chunk(world)[rank], y.chunk(world)[rank]

    log: list[tuple] = []
    per_step = []
    with watch_collectives(log, _layer_sizes(model, world)):
        for _ in range(steps):
            model.zero_grad()
            log.append(("forward",))
            loss = mse(model, x_mine, y_mine)
            after_forward = type(model.fc1.weight).__name__  # resharded, or whole?
            log.append(("backward",))
            loss.backward()
            log.append(("returned",))
            per_step.append(log.copy())
            log.clear()
    return {"rank": rank, "fc1.weight after forward": after_forward, "steps": per_step,
            **_holdings(model)}


def _holdings(model: nn.Module) -> dict[str, Any]:
    """What this rank holds of a ``fully_shard`` model after backward: each parameter's
    whole shape with its shard's and its gradient's (``to_local()``), their placement,
    the bytes kept, and the whole gradients (``full_tensor()``, which gathers them)."""
    params = dict(model.named_parameters())
    return {
        "shards": {name: (tuple(p.shape), tuple(p.to_local().shape),
                          tuple(p.grad.to_local().shape)) for name, p in params.items()},
        "placements": str(params["fc1.weight"].placements),
        "bytes": {"parameters": sum(_local_bytes(p) for p in params.values()),
                  "gradients": sum(_local_bytes(p.grad) for p in params.values())},
        "grads": {name: p.grad.full_tensor() for name, p in params.items()},
    }


def _layer_sizes(model: nn.Module, world: int) -> dict[int, str]:
    """Each fc layer's name, by how many values an all-gather of it brings."""
    return {_gathered_size(layer, world): name
            for name, layer in model.named_children() if name.startswith("fc")}


def _gathered_size(layer: nn.Module, world: int) -> int:
    """How many values an all-gather of ``layer`` brings: FSDP pads every parameter to
    ceil(rows / world) rows per rank, so that all shards have one size."""
    size = 0
    for p in layer.parameters():
        rows = p.shape[0]
        size += world * -(-rows // world) * (p.numel() // rows)
    return size


def _local_bytes(t: torch.Tensor) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


# --------------------------------------------------------------------------
# The picture
# --------------------------------------------------------------------------


def format_timeline(events: Sequence[tuple]) -> str:
    """One numbered line per event of `bucket_timeline`, as text.

    >>> print(format_timeline([("ready", "b"), ("all-reduce", 0, ["b"], 4), ("returned",)]))
     1  ready       b
     2  all-reduce  bucket 0: b (4 values)
     3  backward() returns
    """
    _check_events(events)
    lines = []
    for number, e in enumerate(events, start=1):
        if e[0] == "ready":
            what = f"ready       {e[1]}"
        elif e[0] == "all-reduce":
            what = textwrap.fill(f"all-reduce  bucket {e[1]}: {', '.join(e[2])} ({e[3]} values)",
                                 84, subsequent_indent=" " * 22, break_on_hyphens=False)
        else:
            what = "backward() returns"
        lines.append(f"{number:>2}  {what}")
    return "\n".join(lines)


def _check_events(events: Any) -> None:
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence) or not events:
        raise TypeError("events: expected the list of events of one step from "
                        f"bucket_timeline, got {type(events).__name__}")
    for i, e in enumerate(events):
        shape_ok = isinstance(e, (tuple, list)) and len(e) > 0 and (
            (e[0] == "ready" and len(e) == 2)
            or (e[0] == "all-reduce" and len(e) == 4)
            or (e[0] == "returned" and len(e) == 1))
        if not shape_ok:
            raise ValueError(f"events[{i}]: expected ('ready', name), ('all-reduce', index, "
                             f"names, size) or ('returned',), got {e!r}")


def plot_timeline(events: Sequence[tuple], ax: Axes | None = None) -> Axes:
    """Draw one backward pass recorded by `bucket_timeline`, in the order things happened.

    One row per parameter (the order their gradients became ready, first at
    the top); a dot when a gradient is ready; a bar across a bucket's rows
    where DDP sent it. The x axis counts events, not seconds: the order is
    what the lesson is about, and it is the same on every run.

    >>> ax = plot_timeline([("ready", "b"), ("ready", "w"), ("all-reduce", 0, ["b", "w"], 5),
    ...                     ("returned",)])
    >>> ax.backproplab["rows"]
    ['b', 'w']
    """
    _check_events(events)
    rows: list[str] = []
    for e in events:
        if e[0] == "ready" and e[1] not in rows:
            rows.append(e[1])
    ax = new_or_given_ax(ax, (7, 0.45 * len(rows) + 1.6))
    y = {name: len(rows) - 1 - i for i, name in enumerate(rows)}
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    bucket_of = {name: e[1] for e in events if e[0] == "all-reduce" for name in e[2]}
    buckets = []
    for t, e in enumerate(events, start=1):
        if e[0] == "ready":  # a dot in the colour of the bucket the gradient goes in
            index = bucket_of.get(e[1])
            colour = "black" if index is None else colours[index % len(colours)]
            ax.plot(t, y[e[1]], "o", color=colour, markersize=7)
        elif e[0] == "all-reduce":
            index, names, size = e[1], e[2], e[3]
            colour = colours[index % len(colours)]
            ys = [y[n] for n in names if n in y]
            low, high = (min(ys), max(ys)) if ys else (0, len(rows) - 1)
            ax.add_patch(_bar(t, low, high, colour))
            ax.text(t + 0.3, high + 0.3, f"bucket {index}\n{size} values", fontsize=8,
                    color=colour, va="bottom")
            buckets.append((t, index))
        else:
            ax.axvline(t, color="grey", linestyle="--", linewidth=1)
            ax.text(t + 0.2, -0.8, "backward()\nreturns", fontsize=8, color="grey")
    ax.set_yticks(range(len(rows)), list(reversed(rows)))
    ax.set_xticks(range(1, len(events) + 1))
    ax.set_xlim(0.3, len(events) + 1.8)
    ax.set_ylim(-1.0, len(rows) + 0.2)
    ax.set_xlabel("event number (the order things happen on one rank)")
    ax.set_title("one backward pass: gradients ready (dots), buckets sent (bars)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.backproplab = {"rows": rows, "buckets": buckets}
    return ax


def _bar(t: int, low: float, high: float, colour: str) -> Any:
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((t - 0.18, low - 0.3), 0.36, high - low + 0.6,
                          boxstyle="round,pad=0.02", color=colour, alpha=0.6)
