"""Several worker processes joined by torch.distributed, on the CPU (lesson 16).

`run` starts ``world_size`` processes, joins them into one process group
(backend gloo, rendezvous through a file in a temporary folder, so no network
port is chosen and nothing leaves the machine), calls the same function in
each and returns what each returned, in rank order. Inside the function,
``dist.get_rank()`` tells a process which one it is. Every process is stopped
before `run` returns, also when a worker raises, hangs or the cell is
interrupted; a worker's error comes back as a `WorkerError` naming its rank.

>>> import backproplab as bl
>>> bl.distributed.run(bl.distributed.all_reduce_ranks, 2)
[{'rank': 0, 'before': 1.0, 'after': 3.0}, {'rank': 1, 'before': 2.0, 'after': 3.0}]

The functions the lesson's workers run are here too, because a child process
can only call a function it can import: `ddp_gradients`, `bucket_timeline`,
`micro_batches`, `unused_parameter`, `uneven_batches`, `replica_drift`. They
build their model and data with `tiny_mlp` and `make_batch`, which the
notebook calls too, so both sides work on the same numbers. A function
defined in a notebook is sent to the workers as its source text instead (see
`run`), which is how the exercises' answers reach them.

Each worker uses one thread and seeds its own random numbers, and each returns
plain data (numbers, names, tensors), never a model or a process group.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import math
import os
import pickle
import socket
import sys
import tempfile
import textwrap
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

if TYPE_CHECKING:  # only for annotations
    from matplotlib.axes import Axes

__all__ = [
    "WorkerError",
    "WorkerTimeout",
    "run",
    "tiny_mlp",
    "make_batch",
    "all_reduce_ranks",
    "ddp_gradients",
    "bucket_timeline",
    "micro_batches",
    "unused_parameter",
    "uneven_batches",
    "replica_drift",
    "format_timeline",
    "plot_timeline",
]

MAX_WORLD_SIZE = 16


class WorkerError(RuntimeError):
    """A worker process raised (or died); ``rank`` says which, ``remote`` has its traceback."""

    def __init__(self, message: str, rank: int, remote: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.remote = remote


class WorkerTimeout(TimeoutError):
    """Workers were still running when `run`'s time was up; ``ranks`` lists them."""

    def __init__(self, message: str, ranks: Sequence[int]) -> None:
        super().__init__(message)
        self.ranks = list(ranks)


# --------------------------------------------------------------------------
# Starting the processes
# --------------------------------------------------------------------------

# A child process must import torch before it can do anything, which takes a
# second or two. With the "forkserver" start method one server process imports
# these modules once, and every worker starts as a copy of it, ready at once.
# (The server is a helper of this Python process and ends with it.) Where
# forkserver does not exist (Windows), workers are started with "spawn".
_PRELOAD = ["torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo",
            "backproplab.distributed"]


def _context() -> Any:
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


class _FromSource:
    """A function defined in a notebook, carried to a worker as its source text.

    A worker process imports the functions it runs, and a notebook is not a
    module it can import. So `run` sends the text of such a function, and the
    worker executes it with these names available: ``torch``, ``nn``,
    ``dist`` (torch.distributed), ``DDP`` (DistributedDataParallel) and
    ``math``. Nothing else from the notebook exists in the worker.
    """

    def __init__(self, function: Callable[..., Any], argname: str) -> None:
        name = getattr(function, "__name__", "")
        if not name.isidentifier():
            raise TypeError(
                f"{argname}: a function defined in the notebook is sent to the workers as its "
                f"source text; define it with def (got {name or type(function).__name__!r})")
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError) as err:
            raise TypeError(
                f"{argname}: a function defined in the notebook is sent to the workers as its "
                f"source text, and the source of {name} cannot be found ({err})") from None
        self.name = name
        self.source = textwrap.dedent(source)

    def load(self) -> Callable[..., Any]:
        filename = f"<{self.name}, from the notebook>"
        # Tracebacks show the lines of the function, as they do for a notebook cell.
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True),
                                     filename)
        namespace: dict[str, Any] = {"torch": torch, "nn": nn, "dist": dist, "DDP": DDP,
                                     "math": math, "__name__": "__notebook__"}
        exec(compile(self.source, filename, "exec"), namespace)
        function = namespace.get(self.name)
        if not callable(function):
            raise TypeError(f"the source of {self.name} does not define {self.name}")
        return function


def _shippable(value: Any, argname: str) -> Any:
    """``value``, or its source text if it is a function defined in the notebook."""
    if inspect.isfunction(value) and value.__module__ == "__main__":
        return _FromSource(value, argname)
    try:
        pickle.dumps(value)
    except Exception as err:  # noqa: BLE001 - pickle raises many kinds
        raise TypeError(
            f"{argname}: cannot be sent to the worker processes, which receive everything "
            f"pickled ({type(err).__name__}: {err}). Pass plain data, and functions defined "
            "with def at the top of a module or of the notebook") from None
    return value


def _landed(value: Any) -> Any:
    return value.load() if isinstance(value, _FromSource) else value


def _loopback_name() -> str | None:
    """The loopback network interface ("lo" on Linux, "lo0" on macOS), if there is one."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except (OSError, AttributeError):
        return None
    return next((n for n in ("lo", "lo0") if n in names), None)


def _child(rank: int, world_size: int, folder: str, timeout: float, worker: Any,
           args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """What each worker process runs: join the group, call the worker, write the result."""
    # The worker's printing and torch's warnings go to a file, not into the notebook.
    log = open(os.path.join(folder, f"rank{rank}.log"), "w", buffering=1)  # noqa: SIM115
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    code = 1
    try:
        torch.set_num_threads(1)
        loopback = _loopback_name()
        if loopback and "GLOO_SOCKET_IFNAME" not in os.environ:
            os.environ["GLOO_SOCKET_IFNAME"] = loopback  # talk over loopback only
        dist.init_process_group(
            "gloo", init_method="file://" + os.path.join(folder, "rendezvous"),
            rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout))
        worker = _landed(worker)
        result = worker(*(_landed(a) for a in args),
                        **{k: _landed(v) for k, v in kwargs.items()})
        _write(folder, f"result{rank}.pkl", pickle.dumps(result))
        code = 0
    except BaseException as err:  # noqa: BLE001 - every error goes back to the notebook
        tb = err.__traceback__
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next  # start at the worker's own frame, not this function's
        lines = traceback.format_exception(type(err), err, tb)
        summary = traceback.format_exception_only(type(err), err)[-1].strip()
        _write(folder, f"error{rank}.pkl",
               pickle.dumps((time.monotonic(), summary, "".join(lines))))
    finally:
        log.flush()
        # Leave at once: a process group torn down while gloo's threads still hold
        # work can deadlock at interpreter exit, and there is nothing left to clean.
        os._exit(code)


def _write(folder: str, name: str, data: bytes) -> None:
    """Write a file whole or not at all (the notebook may read it any moment)."""
    partial = os.path.join(folder, name + ".partial")
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, os.path.join(folder, name))


def _check_run_args(worker: Any, world_size: Any, timeout: Any) -> None:
    if not callable(worker):
        raise TypeError(f"worker: expected a function to run in every process, got "
                        f"{type(worker).__name__}")
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(f"world_size: expected an int (the number of processes), got "
                        f"{type(world_size).__name__}")
    if not 1 <= world_size <= MAX_WORLD_SIZE:
        raise ValueError(f"world_size: expected 1 to {MAX_WORLD_SIZE} processes, got "
                         f"{world_size}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout: expected a number of seconds, got {type(timeout).__name__}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")


def run(worker: Callable[..., Any], world_size: int, *args: Any, timeout: float = 60.0,
        **kwargs: Any) -> list[Any]:
    """Call ``worker(*args, **kwargs)`` in ``world_size`` processes; return their results.

    The processes form one gloo process group before the call, so the worker
    can use ``dist.get_rank()``, ``dist.all_reduce`` and DistributedDataParallel.
    Results come back as a list, rank 0 first (they travel pickled, so return
    plain data). The call waits at most ``timeout`` seconds, which is also the
    group's timeout for a collective that never completes.

    Every process is stopped before this returns. When a worker raises, the
    others are stopped and `WorkerError` says which rank failed and shows its
    traceback; when time runs out, `WorkerTimeout` names the ranks still
    running. A worker, or a function among ``args``, defined in a notebook is
    sent as its source text (see ``_FromSource``).

    >>> run(all_reduce_ranks, 3)[2]
    {'rank': 2, 'before': 3.0, 'after': 6.0}
    """
    _check_run_args(worker, world_size, timeout)
    target = _shippable(worker, "worker")
    args = tuple(_shippable(a, f"args[{i}]") for i, a in enumerate(args))
    kwargs = {k: _shippable(v, k) for k, v in kwargs.items()}
    ctx = _context()
    with tempfile.TemporaryDirectory(prefix="backproplab-ddp-") as folder:
        processes = []
        try:
            for rank in range(world_size):
                p = ctx.Process(target=_child, name=f"backproplab rank {rank}", daemon=True,
                                args=(rank, world_size, folder, float(timeout), target, args,
                                      kwargs))
                p.start()
                processes.append(p)
            _wait(processes, folder, timeout)
            results = []
            for rank in range(world_size):
                with open(os.path.join(folder, f"result{rank}.pkl"), "rb") as f:
                    results.append(pickle.load(f))
            return results
        finally:
            _stop(processes)


def _wait(processes: list[Any], folder: str, timeout: float) -> None:
    """Wait until every process has ended well; raise as soon as one fails."""
    deadline = time.monotonic() + timeout
    running = {p.sentinel: rank for rank, p in enumerate(processes)}
    while running:
        left = deadline - time.monotonic()
        if left <= 0:
            ranks = sorted(running.values())
            raise WorkerTimeout(
                f"{_ranks(ranks)} of {len(processes)} still running after {timeout:g} s, "
                "and stopped. A collective (all_reduce, or DDP's backward) waits until every "
                "rank joins it: did one rank skip it, or stop early?", ranks)
        for sentinel in wait(list(running), timeout=left):
            rank = running.pop(sentinel)
            processes[rank].join()
            if processes[rank].exitcode != 0:
                time.sleep(0.05)  # let a rank that failed at the same moment report too
                raise _failure(processes, folder)


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _failure(processes: list[Any], folder: str) -> WorkerError:
    """The error of the rank that failed first, with a line about any other."""
    reports = {}
    for rank, p in enumerate(processes):
        path = os.path.join(folder, f"error{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                reports[rank] = pickle.load(f)
        elif p.exitcode not in (None, 0):
            reports[rank] = (math.inf, _death(p.exitcode, folder, rank), "")
    first = min(reports, key=lambda r: (reports[r][0], r))
    _, summary, remote = reports[first]
    message = f"rank {first} of {len(processes)} failed: {summary}"
    others = [f"rank {r}: {_short(reports[r][1])}" for r in sorted(reports) if r != first]
    if others:
        message += "\n(then " + "; ".join(others) + ")"
    if remote:
        message += f"\n\nIn rank {first}:\n{remote.rstrip()}"
    return WorkerError(message, first, remote)


def _death(exitcode: int, folder: str, rank: int) -> str:
    how = f"killed by signal {-exitcode}" if exitcode < 0 else f"exit code {exitcode}"
    text = f"the process ended ({how}) without a result"
    if exitcode == -11:  # SIGSEGV
        text += " (a crash inside torch, e.g. a comm hook that returned no Future)"
    with contextlib.suppress(OSError):
        with open(os.path.join(folder, f"rank{rank}.log")) as f:
            tail = f.read().strip().splitlines()[-3:]
        if tail:
            text += "; it printed: " + " | ".join(tail)
    return text


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def _stop(processes: list[Any]) -> None:
    """End every process: ask, wait a little, then force. Reap them all."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(timeout=2)
        if p.is_alive():
            p.kill()
            p.join()


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


def _mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((model(x) - y) ** 2).mean()


def _grads(model: nn.Module) -> dict[str, torch.Tensor | None]:
    """Each parameter's .grad (a copy), by name; the DDP wrapper's "module." prefix dropped."""
    return {name.removeprefix("module."): None if p.grad is None else p.grad.detach().clone()
            for name, p in model.named_parameters()}


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
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_mlp(seed=0)
    x, y = make_batch(n, seed=1)
    x_mine, y_mine = x.chunk(world)[rank], y.chunk(world)[rank]

    _mse(model, x_mine, y_mine).backward()  # the plain model: this rank's data only
    local = _grads(model)
    model.zero_grad()

    ddp = DDP(model)  # same model, now wrapped: its backward averages across ranks
    _mse(ddp, x_mine, y_mine).backward()
    return {"rank": rank, "examples": len(x_mine), "local": local, "ddp": _grads(model)}


def bucket_timeline(bucket_bytes: int = 300, steps: int = 2) -> list[list[tuple]]:
    """Record, step by step, when each gradient is ready and when DDP sends a bucket.

    Events, in the order they happen on this rank:
    ("ready", name): AccumulateGrad has just filled that parameter's .grad;
    ("all-reduce", bucket index, names, values): DDP hands a full bucket to the hook;
    ("returned",): backward() has returned, the averaged gradients are in .grad.
    """
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
        _mse(ddp, x, y).backward()
        log.append(("returned",))
        timeline.append(log.copy())
        log.clear()
    return timeline


def _counting_average(counter: list[int]) -> Callable[..., Any]:
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
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_mlp(seed=0)
    x, y = make_batch(n, seed=1)
    x_mine, y_mine = x.chunk(world)[rank], y.chunk(world)[rank]
    ddp = DDP(model)
    all_reduces: list[int] = []
    ddp.register_comm_hook(state=None, hook=_counting_average(all_reduces))

    pieces = list(zip(x_mine.chunk(k), y_mine.chunk(k), strict=True))
    for i, (x_part, y_part) in enumerate(pieces):
        last = i == len(pieces) - 1
        if use_no_sync and not last:
            with ddp.no_sync():  # backward only accumulates into .grad
                (_mse(ddp, x_part, y_part) / k).backward()  # lesson 03: loss / k
        else:  # averages everything .grad holds
            (_mse(ddp, x_part, y_part) / k).backward()
    return {"rank": rank, "all_reduce_calls": len(all_reduces), "grads": _grads(model)}


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
    rank = dist.get_rank()
    model = _WithSpareLayer()
    ddp = DDP(model, find_unused_parameters=find_unused_parameters)
    x, y = make_batch(8, seed=1 + rank)
    alone = _WithSpareLayer()  # the same model without DDP: this rank's own gradient
    _mse(alone, x, y).backward()
    done, averaged, error = 0, None, None
    try:
        for _ in range(steps):
            ddp.zero_grad()
            _mse(ddp, x, y).backward()
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
                _mse(ddp, x, y).backward()
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
        _mse(ddp, x, y).backward()
        optimizer.step()
        if step == edit_after and rank == 0:
            with torch.no_grad():
                model.fc1.weight.clamp_(-0.2, 0.2)  # only rank 0 clips its weights
        states.append(snapshot())
    return states


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
    from ._figure import _new_or_given_ax

    _check_events(events)
    rows: list[str] = []
    for e in events:
        if e[0] == "ready" and e[1] not in rows:
            rows.append(e[1])
    ax = _new_or_given_ax(ax, (7, 0.45 * len(rows) + 1.6))
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
