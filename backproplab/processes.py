"""Several worker processes joined by torch.distributed, on the CPU.

`run` starts ``world_size`` processes, joins them into one process group
(backend gloo, rendezvous through a file in a temporary folder, so no network
port is chosen and nothing leaves the machine), calls the same function in
each and returns what each returned, in rank order. Inside the function,
``dist.get_rank()`` tells a process which one it is. Every process is stopped
before `run` returns, also when a worker raises, hangs or the cell is
interrupted; a worker's error comes back as a `WorkerError` naming its rank.

>>> from backproplab.processes import run
>>> import torch.distributed as dist
>>> run(dist.barrier, 2)  # every rank waits for the others, then returns None
[None, None]

A child process can only call a function it can import: a module's function
is sent by name. A function defined in a notebook is sent to the workers as
its source text instead (see `run`), which is how the exercises' answers
reach them. The functions lesson 23 runs are in
:mod:`backproplab.course.distributed` (``bl.distributed``).
"""

from __future__ import annotations
import __future__

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
import types
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
    pass

__all__ = ["MAX_WORLD_SIZE", "PRELOAD", "WorkerError", "WorkerTimeout", "fork_workers", "run"]

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
# A module whose workers the server should hold ready adds its name here.
PRELOAD = ["torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo",
           "backproplab.processes"]


def _context() -> Any:
    if _FORKING:
        return mp.get_context("fork")
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return mp.get_context("spawn")


# Set by `fork_workers`: workers are started as copies of this process, and a function
# from the notebook runs from its source compiled ahead of time, by (name, source).
_FORKING = False
_COMPILED: dict[tuple[str, str], Any] = {}


def fork_workers(functions: Sequence[Callable[..., Any]]) -> None:
    """From now on, start the workers as forks of this process, which must already hold
    torch and run one thread (then a worker is ready at once, with no server to start),
    and compile now the source text each of ``functions`` is sent as.

    For a process that may not compile once the code it serves runs: the grade's sandbox
    (`backproplab.course.runner`), whose audit hook refuses ``compile`` in the answer's
    process and in every process it forks. A worker still sees only the names a
    forkserver's worker sees, so an answer behaves as it does in the notebook.
    """
    if isinstance(functions, (str, bytes)) or not isinstance(functions, Sequence) or not all(
            callable(f) for f in functions):
        raise TypeError(f"functions: expected a sequence of functions, got "
                        f"{type(functions).__name__}")
    global _FORKING
    _FORKING = True
    for function in functions:
        try:
            shipped = _FromSource(function, "worker")
        except TypeError:  # no source to send: `run` will say so, as it does in a notebook
            continue
        _COMPILED[shipped.name, shipped.source] = shipped.compiled()


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
        self.filename = f"<{name}, from the notebook>"
        # The cell's own ``from __future__ import annotations``, if it had one: its hints
        # then stay text in the worker too, where the names they use were never imported.
        code = getattr(function, "__code__", None)
        self.flags = getattr(code, "co_flags", 0) & __future__.annotations.compiler_flag

    def compiled(self) -> types.CodeType:
        # dont_inherit: the notebook's future imports, not this module's
        return compile(self.source, self.filename, "exec", flags=self.flags, dont_inherit=True)

    def load(self) -> Callable[..., Any]:
        # Tracebacks show the lines of the function, as they do for a notebook cell.
        linecache.cache[self.filename] = (len(self.source), None,
                                          self.source.splitlines(True), self.filename)
        # A module of its own, known to sys.modules: a dataclass made under the cell's
        # ``from __future__ import annotations`` looks its module up there.
        notebook = types.ModuleType("__notebook__")
        notebook.__dict__.update(torch=torch, nn=nn, dist=dist, DDP=DDP, math=math)
        sys.modules["__notebook__"] = notebook
        code = _COMPILED.get((self.name, self.source))
        if code is None:
            code = self.compiled()
        exec(code, notebook.__dict__)
        function = notebook.__dict__.get(self.name)
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
        # Every rank finishes connecting before any may return and close its sockets:
        # a worker with no collective of its own would otherwise leave a peer's
        # handshake half done ("Connection closed by peer").
        dist.barrier()
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

    >>> import torch.distributed as dist
    >>> run(dist.barrier, 3)
    [None, None, None]
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


# What a rank raises when a peer ended under it: never the cause, always a consequence.
PEER_GONE = ("Connection reset by peer", "Connection closed by peer")


def _failure(processes: list[Any], folder: str) -> WorkerError:
    """The error of the rank that failed first, with a line about any other. A rank that lost
    its connection to a peer comes after every other: it failed because that peer ended (a
    peer killed by a signal, as gloo kills a rank that received data of the wrong size, wrote
    no error and would otherwise come last)."""
    reports = {}
    for rank, p in enumerate(processes):
        path = os.path.join(folder, f"error{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                reports[rank] = pickle.load(f)
        elif p.exitcode not in (None, 0):
            reports[rank] = (math.inf, _death(p.exitcode, folder, rank), "")
    first = min(reports, key=lambda r: (any(w in reports[r][1] for w in PEER_GONE),
                                        reports[r][0], r))
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
