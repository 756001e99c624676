"""backproplab.course.distributed: worker processes that always end, errors that name the rank.

The workers used here are module-level functions of this file: a child process
imports them, as it imports the lesson's workers from the package. "No orphan"
is checked in /proc: after `run` returns or raises, no process started for it
is left, neither a worker nor a zombie; what remains is multiprocessing's own
helpers (the fork server and the resource tracker), which end with this process.
"""

from __future__ import annotations

import inspect
import linecache
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
import torch.distributed as dist

from backproplab import distributed as bd
from backproplab import processes

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="process checks read /proc (Linux)")


# --------------------------------------------------------------------------
# Workers (a child process imports them from this module)
# --------------------------------------------------------------------------


def rank_and_size():
    return dist.get_rank(), dist.get_world_size()


def raise_on_rank_one():
    if dist.get_rank() == 1:
        raise ValueError("rank one cannot go on")
    dist.barrier()  # rank 0 waits here for a partner that is gone
    return "rank 0 finished"


def wait_forever():
    dist.barrier()
    time.sleep(600)


def die_without_a_word():
    if dist.get_rank() == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return "alive"


def send_more_than_received():
    if dist.get_rank() == 0:  # gloo aborts this process when 24 values arrive for 12
        dist.recv(torch.zeros(12, dtype=torch.float64), src=1)
    else:
        dist.send(torch.zeros(24, dtype=torch.float64), dst=0)
        dist.barrier()  # then loses its connection to rank 0
    return "done"


def chatty():
    print("printed by a worker")
    print("warned by a worker", file=sys.stderr)
    return dist.get_rank()


def pid_of_worker():
    return os.getpid()


# --------------------------------------------------------------------------
# Processes, read from /proc
# --------------------------------------------------------------------------


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended while we looked
            continue
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry.name)] = (int(fields[1]), fields[0])
    return table


def _descendants(pid: int) -> dict[int, str]:
    table = _parents()
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state) in table.items():
            if ppid == parent and child not in found:
                found[child] = state
                frontier.append(child)
    return found


def _helpers() -> set[int]:
    """multiprocessing's fork server and resource tracker, which live as long as we do."""
    from multiprocessing import forkserver, resource_tracker

    pids = {getattr(forkserver._forkserver, "_forkserver_pid", None),
            getattr(resource_tracker._resource_tracker, "_pid", None)}
    return {p for p in pids if p is not None}


# Processes of ours that were there before the test (in a full run, the browser test's
# JupyterLab server and its kernels live for the whole session): not this test's.
_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _processes_before():
    _BEFORE.clear()
    _BEFORE.update(_descendants(os.getpid()))
    yield


def _assert_no_worker_left() -> None:
    assert multiprocessing.active_children() == []
    # Killed processes are gone within milliseconds on an idle machine; the minute is for
    # a machine whose two cores are busy with the rest of the suite.
    deadline = time.monotonic() + 60
    while True:
        left = {pid: state for pid, state in _descendants(os.getpid()).items()
                if pid not in _helpers() and pid not in _BEFORE}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert left == {}, f"processes left behind (pid: state): {left}"


# --------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------


def test_results_come_back_in_rank_order():
    assert bd.run(rank_and_size, 3) == [(0, 3), (1, 3), (2, 3)]
    _assert_no_worker_left()


def test_all_reduce_sums_and_every_rank_gets_the_sum():
    results = bd.run(bd.all_reduce_ranks, 4)
    assert [r["before"] for r in results] == [1.0, 2.0, 3.0, 4.0]
    assert [r["after"] for r in results] == [10.0] * 4


def test_the_same_run_gives_the_same_numbers_bit_for_bit():
    first = bd.run(bd.ddp_gradients, 2)
    second = bd.run(bd.ddp_gradients, 2)
    for a, b in zip(first, second, strict=True):
        for name in a["ddp"]:
            assert torch.equal(a["ddp"][name], b["ddp"][name])
            assert torch.equal(a["local"][name], b["local"][name])


def test_a_worker_that_raises_is_named_with_its_traceback():
    with pytest.raises(bd.WorkerError) as info:
        bd.run(raise_on_rank_one, 2, timeout=30)
    err = info.value
    assert err.rank == 1
    message = str(err)
    assert message.startswith("rank 1 of 2 failed: ValueError: rank one cannot go on")
    assert "in raise_on_rank_one" in message  # the worker's own frame
    assert 'raise ValueError("rank one cannot go on")' in message
    assert "in _child" not in message  # not the machinery's
    _assert_no_worker_left()


def test_a_hanging_worker_is_stopped_at_the_timeout():
    start = time.monotonic()
    with pytest.raises(bd.WorkerTimeout) as info:
        bd.run(wait_forever, 2, timeout=2)
    # Stopped, not waited for: a generous bound, since the suite shares the cores.
    assert time.monotonic() - start < 60
    assert info.value.ranks == [0, 1]
    assert "ranks 0, 1 of 2 still running after 2 s" in str(info.value)
    _assert_no_worker_left()


def test_a_worker_killed_by_a_signal_is_reported():
    with pytest.raises(bd.WorkerError) as info:
        bd.run(die_without_a_word, 2, timeout=30)
    assert info.value.rank == 0
    assert "killed by signal 9" in str(info.value)
    _assert_no_worker_left()


def test_the_rank_that_died_comes_before_the_rank_that_lost_it():
    with pytest.raises(bd.WorkerError) as info:
        bd.run(send_more_than_received, 2, timeout=30)
    # Rank 0 died without a Python error; rank 1's lost connection came after, because of it.
    assert info.value.rank == 0
    first = str(info.value).splitlines()[0]
    assert first.startswith("rank 0 of 2 failed: the process ended (killed by signal 6)")
    assert "Received data size doesn't match expected size" in first
    _assert_no_worker_left()


def test_an_interrupted_run_stops_its_workers(monkeypatch):
    started = []

    def interrupted(processes, folder, timeout):
        started.extend(p.pid for p in processes)
        raise KeyboardInterrupt  # what the lab's stop button raises

    monkeypatch.setattr(processes, "_wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bd.run(wait_forever, 2)
    assert len(started) == 2
    _assert_no_worker_left()


def test_workers_print_into_a_log_not_into_the_notebook(capfd):
    assert bd.run(chatty, 2) == [0, 1]
    out, err = capfd.readouterr()
    assert "by a worker" not in out + err


def test_every_run_has_new_processes_and_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where run makes its folder
    first, second = bd.run(pid_of_worker, 2), bd.run(pid_of_worker, 2)
    assert not set(first) & set(second)
    with pytest.raises(bd.WorkerError):
        bd.run(raise_on_rank_one, 2)
    assert list(tmp_path.iterdir()) == []


def _from_notebook(source: str, name: str):
    """A function as a notebook cell makes it: module __main__, source in linecache."""
    filename = f"<cell defining {name}>"
    source = textwrap.dedent(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def test_a_function_defined_in_a_notebook_travels_as_source():
    double_rank = _from_notebook("""
        def double_rank(scale):
            t = torch.tensor([float(dist.get_rank())]) * scale
            dist.all_reduce(t)
            return t.item()
    """, "double_rank")
    assert double_rank.__module__ == "__main__"
    assert bd.run(double_rank, 3, 2.0) == [6.0, 6.0, 6.0]


def test_a_notebook_function_passed_as_an_argument_travels_too():
    offset = _from_notebook("""
        def offset(x):
            return x + dist.get_rank()
    """, "offset")
    assert bd.run(_apply, 2, offset, 10) == [10, 11]


def _apply(f, x):
    return f(x)


def test_a_notebook_worker_sees_only_the_documented_names():
    uses_a_global = _from_notebook("""
        def uses_a_global():
            return SOMETHING_FROM_THE_NOTEBOOK
    """, "uses_a_global")
    with pytest.raises(bd.WorkerError) as info:
        bd.run(uses_a_global, 2)
    assert "NameError" in str(info.value) and "SOMETHING_FROM_THE_NOTEBOOK" in str(info.value)
    assert "<uses_a_global, from the notebook>" in str(info.value)  # the line is shown
    _assert_no_worker_left()


def test_forked_workers_run_source_compiled_ahead_and_see_the_same_names():
    """fork_workers (the grade's sandbox): each worker is a fork of this process, a
    notebook function's source is compiled before compiling is refused, and a worker still
    sees only the documented names. It switches the process for good: a Python of its own."""
    script = textwrap.dedent("""
        import linecache, os, sys
        from backproplab import processes
        SOURCE = ("def worker():\\n"
                  "    parent = __import__('os').getppid()\\n"
                  "    return [dist.get_rank(), 'LIMIT' in globals(), parent]\\n")
        linecache.cache["<cell 1>"] = (len(SOURCE), None, SOURCE.splitlines(True), "<cell 1>")
        namespace = {"__name__": "__main__", "LIMIT": 3}
        exec(compile(SOURCE, "<cell 1>", "exec"), namespace)
        processes.fork_workers([namespace["worker"]])

        def refuse_compile(event, args):
            if event == "compile":
                raise PermissionError("compile refused")

        sys.addaudithook(refuse_compile)
        got = processes.run(namespace["worker"], 2)
        print(got == [[0, False, os.getpid()], [1, False, os.getpid()]], got)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True"), done.stdout + done.stderr


@pytest.mark.parametrize("functions", [None, "worker", [rank_and_size, 3]])
def test_fork_workers_names_a_wrong_argument_and_changes_nothing(functions):
    with pytest.raises(TypeError, match="functions: expected a sequence of functions"):
        processes.fork_workers(functions)
    assert not processes._FORKING


def test_a_lambda_from_a_notebook_is_refused_before_anything_starts():
    f = lambda: 1  # noqa: E731
    f.__module__ = "__main__"
    with pytest.raises(TypeError, match="worker: a function defined in the notebook .* def"):
        bd.run(f, 2)
    _assert_no_worker_left()


@pytest.mark.parametrize(("args", "kwargs", "error", "fragment"), [
    ((42, 2), {}, TypeError, "worker: expected a function to run in every process, got int"),
    ((rank_and_size, 0), {}, ValueError, "world_size: expected 1 to 16 processes, got 0"),
    ((rank_and_size, 17), {}, ValueError, "world_size: expected 1 to 16 processes, got 17"),
    ((rank_and_size, True), {}, TypeError, "world_size: expected an int"),
    ((rank_and_size, 2.0), {}, TypeError, "world_size: expected an int"),
    ((rank_and_size, 2), {"timeout": 0}, ValueError, "timeout: expected a positive number"),
    ((rank_and_size, 2), {"timeout": float("inf")}, ValueError, "timeout: expected a positive"),
    ((rank_and_size, 2), {"timeout": "5"}, TypeError, "timeout: expected a number of seconds"),
    ((lambda: 1, 2), {}, TypeError, "worker: cannot be sent to the worker processes"),
    ((_apply, 2, lambda x: x, 1), {}, TypeError, "args.0.: cannot be sent"),
])
def test_bad_arguments_are_named(args, kwargs, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        bd.run(*args, **kwargs)
    _assert_no_worker_left()


@pytest.mark.parametrize(("worker", "kwargs", "error", "fragment"), [
    (bd.first_buckets, {"bucket_bytes": 0}, ValueError, "bucket_bytes: expected an int from 1"),
    (bd.first_buckets, {"bucket_bytes": 300.0}, TypeError, "bucket_bytes: expected an int, got f"),
    (bd.bucket_timeline, {"steps": 0}, ValueError, "steps: expected an int from 1 to 1000, got 0"),
    (bd.micro_batches, {"k": "4"}, TypeError, "k: expected an int, got str"),
    (bd.ddp_gradients, {"n": 0}, ValueError, "n: expected an int from 1"),
    (bd.unused_parameter, {"steps": True}, TypeError, "steps: expected an int, got bool"),
    (bd.replica_drift, {"edit_after": -1}, ValueError, "edit_after: expected an int from 0"),
    (bd.sharded_step, {"n": 2.5}, TypeError, "n: expected an int, got float"),
])
def test_a_workers_bad_argument_is_named_before_any_collective(worker, kwargs, error, fragment):
    # Checked first, so the error is the same in a worker process and in a plain call.
    with pytest.raises(error, match=fragment):
        worker(**kwargs)


def test_no_process_outlives_the_python_that_ran_the_workers(tmp_path):
    script = tmp_path / "lesson.py"
    script.write_text(textwrap.dedent("""
        import os
        from multiprocessing import forkserver
        import backproplab.course.distributed as bd

        def fails():
            raise RuntimeError("on purpose")

        if __name__ == "__main__":
            print(bd.run(bd.all_reduce_ranks, 2)[1]["after"])
            try:
                bd.run(fails, 2)
            except bd.WorkerError as err:
                print("rank", err.rank)
            print("helper", forkserver._forkserver._forkserver_pid)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:3] == ["3.0", "rank", "0"] or lines[:3] == ["3.0", "rank", "1"]
    helper = int(lines[-1])
    deadline = time.monotonic() + 60  # seconds on an idle machine; a minute when loaded
    while Path(f"/proc/{helper}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{helper}").exists(), "the fork server outlived its Python"


# --------------------------------------------------------------------------
# What the lesson's workers show
# --------------------------------------------------------------------------


def test_ddp_on_two_processes_matches_one_process_on_the_whole_batch():
    ranks = bd.run(bd.ddp_gradients, 2)
    model = bd.tiny_mlp(seed=0)
    x, y = bd.make_batch(16, seed=1)
    ((model(x) - y) ** 2).mean().backward()
    for name, p in model.named_parameters():
        assert torch.allclose(ranks[0]["ddp"][name], p.grad, rtol=1e-5, atol=1e-7)
        halves = (ranks[0]["local"][name] + ranks[1]["local"][name]) / 2
        assert torch.equal(ranks[0]["ddp"][name], halves)


def test_buckets_go_out_during_backward_last_layer_first():
    first, second = bd.run(bd.bucket_timeline, 2)[0]
    buckets = [e for e in second if e[0] == "all-reduce"]
    assert [b[2] for b in buckets] == [["fc3.bias", "fc3.weight", "fc2.bias"], ["fc2.weight"],
                                       ["fc1.bias", "fc1.weight"]]
    assert second.index(buckets[0]) < second.index(("ready", "fc2.weight"))
    assert [e[0] for e in first].count("all-reduce") == 1  # before the buckets are rebuilt


def test_the_first_step_plan_is_one_bucket_unless_unused_parameters_are_looked_for():
    plan = bd.run(bd.first_buckets, 1)[0]
    whole = sum(p.numel() * 4 for p in bd.tiny_mlp().parameters())
    assert plan["buckets"][False] == str(whole)  # one bucket: every gradient
    sizes = [int(s) for s in plan["buckets"][True].split(", ")]
    assert len(sizes) > 1 and sum(sizes) == whole
    assert plan["first bucket"] == 2**20 and plan["default cap"] == 25 * 2**20


def test_show_prints_a_workers_code_without_its_docstring_and_argument_checks(capsys):
    bd.show(bd.bucket_timeline)
    shown = capsys.readouterr().out
    assert shown.startswith("def bucket_timeline(") and "register_comm_hook" in shown
    assert bd.bucket_timeline.__doc__.splitlines()[0] not in shown
    assert "_check_int" not in shown and "_check_int" in inspect.getsource(bd.bucket_timeline)
    assert shown.rstrip().endswith("return timeline")
    bd.show(bd.replica_drift)  # a check under an if
    shown = capsys.readouterr().out
    assert shown.splitlines()[1] == "    rank = dist.get_rank()"
    with pytest.raises(TypeError, match="worker: expected a function, got str"):
        bd.show("bucket_timeline")


def test_no_sync_makes_one_all_reduce_instead_of_k():
    synced = bd.run(bd.micro_batches, 2, 4, False)
    quiet = bd.run(bd.micro_batches, 2, 4, True)
    assert [r["all_reduce_calls"] for r in synced] == [4, 4]
    assert [r["all_reduce_calls"] for r in quiet] == [1, 1]
    for name, g in synced[0]["grads"].items():
        assert torch.allclose(g, quiet[0]["grads"][name], rtol=1e-5, atol=1e-7)


def test_what_breaks():
    unused = bd.run(bd.unused_parameter, 2, False)[0]
    assert unused["steps_done"] == 1 and unused["first_step_averaged"] is False
    assert "prior iteration" in unused["error"]
    assert bd.run(bd.unused_parameter, 2, True)[0]["error"] is None
    stuck = bd.run(bd.uneven_batches, 2, False)
    assert stuck[0]["steps_done"] == 2 and stuck[0]["error"] == "RuntimeError"
    joined = bd.run(bd.uneven_batches, 2, True)
    assert [r["steps_done"] for r in joined] == [3, 2]
    a, b = bd.run(bd.replica_drift, 2)
    gaps = [max(abs(u - v) for u, v in zip(s, t, strict=True)) for s, t in zip(a, b, strict=True)]
    assert gaps[:3] == [0.0, 0.0, gaps[2]] and gaps[2] > 0.1 and gaps[-1] == pytest.approx(gaps[2])


def test_fsdp_gathers_twice_and_reduce_scatters_once_per_layer_and_step():
    ranks = bd.run(bd.sharded_step, 2)
    ddp = bd.run(bd.ddp_gradients, 2)[0]["ddp"]
    for r in ranks:
        assert r["shards"]["fc1.weight"] == ((16, 8), (8, 8), (8, 8))
        assert r["shards"]["fc3.bias"] == ((4,), (2,), (2,))
        assert r["bytes"] == {"parameters": 968, "gradients": 968}  # half of 1,936 each
        for events in r["steps"]:
            backward = events[events.index(("backward",)):]
            assert [e[:2] for e in backward if len(e) == 3] == [
                ("all-gather", "fc3"), ("all-gather", "fc2"), ("reduce-scatter", "fc3"),
                ("all-gather", "fc1"), ("reduce-scatter", "fc2"), ("reduce-scatter", "fc1")]
            kinds = [e[0] for e in events]
            assert (kinds.count("all-gather"), kinds.count("reduce-scatter")) == (6, 3)
        for name, g in r["grads"].items():
            assert torch.equal(g, ddp[name])  # the same average as DDP's, bit for bit
    kept = bd.run(bd.sharded_step, 2, False)[0]
    assert [e[0] for e in kept["steps"][1]].count("all-gather") == 3
    assert kept["fc1.weight after forward"] == "Parameter"
    assert ranks[0]["fc1.weight after forward"] == "DTensor"
    assert dist.all_gather_single.__module__ == "torch.distributed.distributed_c10d"


def test_fsdp_shards_unevenly_over_three_ranks():
    ranks = bd.run(bd.sharded_step, 3, True, 1, 12)
    assert [r["shards"]["fc1.weight"][1] for r in ranks] == [(6, 8), (6, 8), (4, 8)]
    assert [r["shards"]["fc3.bias"][1] for r in ranks] == [(2,), (2,), (0,)]
    layers = [e[1] for e in ranks[0]["steps"][0] if len(e) == 3]
    assert layers == ["fc1", "fc2", "fc3", "fc3", "fc2", "fc3", "fc1", "fc2", "fc1"]
    model = bd.tiny_mlp(seed=0)
    x, y = bd.make_batch(12, seed=1)
    bd.mse(model, x, y).backward()
    for name, p in model.named_parameters():
        assert torch.allclose(ranks[2]["grads"][name], p.grad, rtol=1e-5, atol=1e-7)


def shard_mean_that_deadlocks(grad):
    """Every rank sends first with the blocking dist.send: nobody ever receives."""
    for other in range(dist.get_world_size()):
        if other != dist.get_rank():
            dist.send(grad.contiguous(), other)
    return grad


def test_a_deadlocking_answer_is_named_and_leaves_no_worker(monkeypatch):
    from backproplab.course.exercises import lesson23
    from backproplab.course.exercises.lesson23 import sharding

    monkeypatch.setattr(sharding, "ANSWER_SECONDS", 1.0)
    report = lesson23.EXERCISES["l23-shard-mean"].check(shard_mean_that_deadlocks, 0)
    assert not report.ok
    assert "ranks 0, 1 still waiting inside the function 1 s after" in str(report)
    assert "blocking dist.send" in str(report)
    _assert_no_worker_left()


def late_shard_trial(answer, seed, seconds):
    """lesson 23's trial of one rank, rank 0 calling the answer half a second after rank 1."""
    from backproplab.course.exercises.lesson23 import sharding

    if dist.get_rank() == 0:
        time.sleep(0.5)
    return sharding._shard_trial(answer, seed, seconds)


def test_ranks_that_reach_a_deadlock_apart_are_each_told_they_waited():
    # Rank 1 reaches its deadline first; rank 0, still inside its own call, must reach its
    # deadline too rather than be told that rank 1 closed the connection.
    results = processes.run(late_shard_trial, 2, shard_mean_that_deadlocks, 0, 1.0, timeout=20)
    assert [r.get("last") for r in results] == ["send", "send"]
    _assert_no_worker_left()


# --------------------------------------------------------------------------
# Model, data, text and picture
# --------------------------------------------------------------------------


def test_model_and_data_are_made_from_their_seeds():
    assert torch.equal(bd.tiny_mlp(3).fc1.weight, bd.tiny_mlp(3).fc1.weight)
    assert not torch.equal(bd.tiny_mlp(3).fc1.weight, bd.tiny_mlp(4).fc1.weight)
    assert torch.equal(bd.make_batch(5, seed=2)[0], bd.make_batch(5, seed=2)[0])
    with pytest.raises(ValueError, match="n: expected an int from 1 to 1000000, got 0"):
        bd.make_batch(0)
    with pytest.raises(TypeError, match="seed: expected an int, got float"):
        bd.tiny_mlp(1.5)


EVENTS = [("ready", "b"), ("ready", "w"), ("all-reduce", 0, ["b", "w"], 5), ("returned",)]


def test_the_timeline_as_text_and_as_a_picture():
    assert bd.format_timeline(EVENTS).splitlines()[2] == " 3  all-reduce  bucket 0: b, w (5 values)"
    ax = bd.plot_timeline(EVENTS)
    try:
        assert ax.backproplab == {"rows": ["b", "w"], "buckets": [(3, 0)]}
        assert [t.get_text() for t in ax.get_yticklabels()] == ["w", "b"]
    finally:
        plt.close(ax.figure)


@pytest.mark.parametrize(("events", "error", "fragment"), [
    ([], TypeError, "events: expected the list of events"),
    ("ready", TypeError, "events: expected the list of events"),
    ([("ready",)], ValueError, r"events\[0\]: expected"),
    ([("ready", "b"), ("sent", 0)], ValueError, r"events\[1\]: expected"),
])
def test_bad_events_are_named(events, error, fragment):
    with pytest.raises(error, match=fragment):
        bd.format_timeline(events)
    with pytest.raises(error, match=fragment):
        bd.plot_timeline(events)
