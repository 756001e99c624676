"""What lesson 23's checks share: the world sizes, what the workers watch (all-reduce calls,
DDP objects, torch's ready-made hooks), running an answer in 2 and in 3 processes (the
observation steps), and the readings of a gradient that is the sum, or is divided twice,
or assumes two processes (the verdicts, made from what the runs sent back).

The observation steps start worker processes joined by gloo over loopback (from a
forkserver in a notebook; in the grade's sandbox, forked from the answer's process, under
its audit hook): they need to start processes, open sockets and files (the rendezvous
file and the results), and import what the results' pickles name.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ....processes import PEER_GONE
from ...distributed import WorkerError, WorkerTimeout, grads_by_name, make_batch, mse, run
from .._spec import METHOD, failure, is_failure

WORLD_SIZES = (2, 3)  # every check runs in 2 processes, then in 3
TIMEOUT = 60.0
# What the observation steps do beyond computing, refused otherwise in the grade's sandbox:
# worker processes (stopped with a signal once they are done), gloo's sockets, and the
# folder of the rendezvous and result files.
ALLOWS = frozenset({"processes", "sockets", "open"})
# What an answer may name besides the method vocabulary: the process group and its futures.
VOCABULARY = METHOD.allowing("torch.distributed.", "torch.futures.")

# --------------------------------------------------------------------------
# What the workers watch: all-reduce calls and DDP, inside each process
# --------------------------------------------------------------------------


def _watch_all_reduce() -> list[dict[str, Any]]:
    """Record every dist.all_reduce call in this worker: the dtype and size it sent, whether
    it ran inside backward, the values sent (a copy, taken before the call sums them), and
    for a call with async_op=True, "waited": whether its work's wait() or get_future() was
    ever called, or its is_completed() ever said True (the tensor holds the sum only once
    that work is done)."""
    sent: list[dict[str, Any]] = []
    started: list[tuple[Any, dict[str, Any]]] = []  # (work, call): held, so each stays itself
    original = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        call = {"dtype": str(tensor.dtype).removeprefix("torch."), "size": tensor.numel(),
                "inside": torch._C._current_autograd_node() is not None,
                "values": tensor.detach().clone()}
        sent.append(call)
        work = original(tensor, *args, **kwargs)
        if work is not None:  # async_op=True
            call["waited"] = False
            started.append((work, call))
        return work

    def watched(method, done=lambda said: True):
        def waiting(self, *args, **kwargs):
            said = method(self, *args, **kwargs)
            for work, call in started:
                if work is self and done(said):
                    call["waited"] = True
            return said
        return waiting

    # A worker process is thrown away afterwards, so it may be patched freely.
    dist.all_reduce = all_reduce
    dist.distributed_c10d.all_reduce = all_reduce
    Work = dist.distributed_c10d.Work  # noqa: N806 - the class, named as torch names it
    Work.wait = watched(Work.wait)
    Work.get_future = watched(Work.get_future)
    Work.is_completed = watched(Work.is_completed, done=bool)  # polled until done
    return sent


def _unwaited(calls: list[dict[str, Any]]) -> int:
    """How many of ``calls`` were made with async_op=True and their work never waited for."""
    return sum(1 for call in calls if call.get("waited") is False)


def _never_waited(count: int, where: str) -> str | None:
    """The slip of ``count`` all-reduce calls made with async_op=True and never waited for."""
    if not count:
        return None
    some = "an all-reduce" if count == 1 else f"{count} all-reduces"
    return (f"{where} {some} made with async_op=True {'was' if count == 1 else 'were'} never "
            "waited for (neither the returned work's wait() nor its get_future() was "
            "called, and its is_completed() never said True): the tensor holds the sum only "
            "once wait() has returned, so read it after that.")


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


# --------------------------------------------------------------------------
# Reading the results in the notebook
# --------------------------------------------------------------------------


# What to check when what one rank sent did not fit what another expected (gloo aborts the
# receiving process: "Received data size doesn't match expected size"), or when a rank lost
# its connection to one that had ended before it ("Connection reset by peer").
_SAME_CALLS = ("Check that every rank makes the same all-reduce calls, on tensors of the same "
               "size and dtype.")
_SIZE_MISMATCH = "Received data size doesn't match expected size"


def _broken_link(err: WorkerError, summary: str, mismatch: str) -> str | None:
    """What to say of a worker's error (``summary``, the first line of ``err``) that says
    data did not fit, or that a rank lost its connection to one that had ended; else None.
    (`run` names a rank that lost its connection only when no rank failed otherwise.)"""
    if _SIZE_MISMATCH in summary:
        return f"rank {err.rank}: {summary} ({mismatch})"
    gone = next((words for words in PEER_GONE if words in summary), None)
    if gone is None:
        return None
    return (f"rank {err.rank} lost its connection to a rank that had ended before it "
            f"({summary[:summary.index(gone) + len(gone)]}). {mismatch}")


def _trials(worker: Any, answer: Any, seed: int, timeout: float = TIMEOUT,
            waiting: str = "does every rank make the same all-reduce calls?",
            worlds: tuple[int, ...] = WORLD_SIZES,
            extra: tuple[Any, ...] = (), mismatch: str = _SAME_CALLS) -> list[list[dict]] | dict:
    """Run ``worker(answer, seed + world, *extra)`` in 2 and then 3 processes (or in
    ``worlds``): each run's results, rank by rank, or the `failure` of the first run
    that raised or hung (``mismatch``: what to check when data that one rank sent did not
    fit what another expected)."""
    if not callable(answer):
        return failure("missing", f"expected a function, got {type(answer).__name__}")
    results = []
    for world in worlds:
        try:
            results.append(run(worker, world, answer, seed + world, *extra, timeout=timeout))
        except TypeError as err:  # the function could not be sent to the workers
            return failure("error", str(err))
        except WorkerError as err:
            summary = str(err).splitlines()[0].split(" failed: ", 1)[-1]
            if summary.startswith("NotImplementedError"):
                return failure("missing", "not written yet: the function still raises "
                                          "NotImplementedError.")
            said = _broken_link(err, summary, mismatch) or summary + _advice(summary)
            return failure("error", f"raised in the worker processes ({world} of them): {said}")
        except WorkerTimeout:
            return failure("error", f"the {world} worker processes were still waiting after "
                                    f"{timeout:g} s: {waiting}")
    return results


def each_world(worker: Any, answer: Any, seed: int, extra: Any = lambda world: (),
               failed: Any = lambda world, results: None, **options: Any) -> list[Any] | dict:
    """Run in 2 processes, then in 3, each run on its own: the first run's `failure` ends
    it; a later run's is kept in its place, to be told once the runs before it pass.
    ``failed(world, results)`` may call a run that ended a `failure` too."""
    runs: list[Any] = []
    for world in WORLD_SIZES:
        found = _trials(worker, answer, seed, worlds=(world,), extra=extra(world), **options)
        if not is_failure(found):
            found = failed(world, found[0]) or found
        if is_failure(found) and not runs:
            return found
        runs.append(found if is_failure(found) else found[0])
    return runs


def averaged(make_model: Any, x: torch.Tensor, y: torch.Tensor, world: int
             ) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
    """What DDP's averaging gives in ``world`` processes, each on its chunk of the batch
    (x, y), computed here in one process; and each rank's own gradients. The models are
    made with ``make_model()`` (which seeds torch's generator: this one's is kept)."""
    local = []
    with torch.random.fork_rng():
        for rank in range(world):
            model = make_model()
            mse(model, x.chunk(world)[rank], y.chunk(world)[rank]).backward()
            local.append(grads_by_name(model))
    exact = {name: sum(grads[name] for grads in local) / world for name in local[0]}
    return exact, local


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


def _whose(results: list[dict], exact: torch.Tensor, c: float, r: int) -> str:
    """Whose gradients are ``c`` times ``exact``: "the gradients" when every rank's are,
    else rank ``r``'s (a slip made on some ranks only)."""
    for result in results:
        mine = _flat(result["grads"])
        if mine is None or mine.shape != exact.shape or (mine - c * exact).abs().max() > (
                1e-2 * exact.abs().max()):
            return f"rank {r}'s gradients"
    return "the gradients"


def _is_local(grads: dict, local: dict) -> bool:
    """Whether a rank's gradients are its own, not averaged (to float32 round-off: the
    rank's own gradient was computed again here, in another process)."""
    mine, local = _flat(grads), _flat(local)
    return mine is not None and mine.shape == local.shape and torch.allclose(
        mine, local, rtol=1e-6, atol=1e-9)
