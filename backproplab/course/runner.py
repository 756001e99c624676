"""What runs inside a grade's sandbox: one student's answers, each in a process of its own.

``backproplab grade`` starts this module inside a bubblewrap sandbox
(`backproplab.course.sandbox`) once per student, and talks to it over its
standard input and output in frames of plain data (`backproplab.course.sandbox`).
The runner never runs an answer itself. For each answer it forks a child,
which

1. runs the answer's source (the definitions the grade read and accepted),
2. installs an audit hook (PEP 578, which nothing in the process can remove)
   that refuses new imports, ``exec`` and ``compile``, opening files, starting
   processes, sockets and ctypes, except what the exercise needs,
3. answers the grader's requests: ``call`` (a by-hand answer called on the
   grader's inputs, autograd off and refused, estimates watched) and
   ``observe`` (a method exercise's observation step run on the answer),
   each sent back as plain data, never a verdict,

and exits when the grader says ``end``. The runner then says how it ended.
A refusal by the audit hook is a finding: it is sent back with every reply,
even when the answer caught the error it raised.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import importlib
import inspect
import os
import pkgutil
import re
import resource
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any, BinaryIO

__all__ = ["EVENTS", "main", "refusing_hook"]

# Audit events by the family an exercise may allow: what the hook refuses otherwise. Running
# a code object is not refused: a new one can only come from compile or code.__new__.
EVENTS = {
    "import": ("import",),
    "exec": ("compile", "code.__new__"),
    "open": ("open", "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "shutil."),
    "processes": ("os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn",
                  "os.spawn", "os.kill", "os.killpg", "subprocess.", "pty."),
    "sockets": ("socket.",),
    "ctypes": ("ctypes.",),
}
# Modules an answer's code may meet lazily while it runs: loaded before the hook is on
# (str() of a tensor imports schema_check_mode the first time).
PRELOAD = ("torch._subclasses.schema_check_mode", "torch.func", "torch.nn.functional",
           "torch.autograd.graph", "torch.autograd.forward_ad",
           "torch.autograd.functional", "torch.utils.checkpoint", "torch.utils.hooks",
           "torch.nn.utils", "torch.optim", "torch.testing", "torch.overrides",
           "torch.utils._python_dispatch", "math", "collections", "itertools", "functools",
           "operator", "heapq", "bisect", "dataclasses", "typing", "copy", "statistics",
           "string", "random", "numbers", "enum", "warnings")
# And what the method checks meet: torch.optim's step, a checkpoint and torch.func's
# transforms import torch._dynamo (about 1.5 s of a container's start), an optimizer's first
# step or zero_grad a profiler module, forward mode its decompositions.
METHOD_PRELOAD = ("torch._dynamo", "torch._dynamo.aot_compile", "torch.profiler._cupti_monitor",
                  "torch._decomp.decompositions_for_jvp")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# The files whose templates namedtuple and dataclass compile (identifiers checked first).
_RECORD_MAKERS = frozenset(os.path.realpath(m.__file__) for m in (collections, dataclasses))


def _harmless(event: str, args: Any, libraries: tuple[str, ...]) -> bool:
    """The uses honest code makes of refused events: reading a library's own source (a
    traceback torch formats), compiling a dotted name (a type hint written as a string),
    and the methods namedtuple and dataclass compile from their templates (a record class
    made inside a function a worker runs)."""
    if event == "compile":  # the frame that compiles: past this function and the hook
        if os.path.realpath(sys._getframe(2).f_code.co_filename) in _RECORD_MAKERS:
            return True
    if event == "open" and args and isinstance(args[0], str):
        mode, flags = (args[1] or "r") if len(args) > 1 else "r", args[2] if len(args) > 2 else 0
        read_only = (not any(c in str(mode) for c in "wax+")
                     and (flags or 0) & os.O_ACCMODE == os.O_RDONLY)
        return read_only and os.path.realpath(args[0]).startswith(libraries)
    if event == "compile" and args:
        text = args[0].decode() if isinstance(args[0], bytes) else args[0]
        return isinstance(text, str) and _DOTTED.fullmatch(text.strip()) is not None
    return False


def refusing_hook(allowed: Sequence[str], found: list[str],
                  libraries: Sequence[str] = ()) -> Any:
    """An audit hook refusing every family of `EVENTS` not in ``allowed`` (but what
    `_harmless` lets through, ``libraries`` being the folders of Python's and torch's own
    files); each refused event's name is appended to ``found`` (the first 20)."""
    refused = [p for family, prefixes in EVENTS.items() if family not in allowed
               for p in prefixes]
    exact = frozenset(p for p in refused if not p.endswith("."))
    prefixes = tuple(p for p in refused if p.endswith("."))
    roots = tuple(os.path.join(os.path.realpath(p), "") for p in libraries)

    def hook(event: str, args: Any) -> None:
        if (event in exact or event.startswith(prefixes)) and not _harmless(event, args, roots):
            if len(found) < 20:  # an import or an open names what it wanted
                found.append(f"{event} {args[0]}"[:120] if event in ("import", "open")
                             and args and isinstance(args[0], str) else event)
            raise PermissionError(f"the grade's sandbox refuses {event!r}")

    return hook


def _plain(value: Any, depth: int = 0) -> Any:
    """An answer's result as plain data: tensors, numbers, strings, None and tuples of
    them; anything else as a description of what it was."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if type(value) in (torch.Tensor, torch.nn.Parameter) \
            else f"<a {type(value).__name__} object>"
    if value is None or type(value) in (bool, int, float, complex, str):
        return value
    if isinstance(value, (tuple, list)) and depth < 4:  # a named tuple too, as the kernel
        return tuple(_plain(v, depth + 1) for v in value)
    return f"<a {type(value).__name__} object>"


class _Serve:
    """One answer's child: its requests, answered until ``end``."""

    def __init__(self, inbox: BinaryIO, outbox: BinaryIO, exercise: Any, answer: Any,
                 found: list[str]) -> None:
        self.inbox, self.outbox = inbox, outbox
        self.exercise, self.answer, self.found = exercise, answer, found

    def reply(self, kind: str, payload: Any) -> None:
        from .sandbox import FRAME_LIMIT, WireError, write_frame

        try:
            write_frame(self.outbox, {"kind": kind, "payload": payload,
                                      "refused": list(self.found)}, limit=FRAME_LIMIT)
        except WireError as err:  # too much, or an observation that is not plain data
            write_frame(self.outbox, {"kind": "error", "payload": f"it sent back {err}",
                                      "refused": list(self.found)})

    def serve(self) -> None:
        from .byhand import run_answer
        from .sandbox import read_frame

        while True:
            request = read_frame(self.inbox)
            what = request.get("kind") if isinstance(request, dict) else None
            try:
                if what == "call":
                    ran = run_answer(self.answer, request["args"])
                    self.reply("ran", [_plain(ran.got), ran.failure, ran.detail, ran.nudged,
                                       list(ran.warnings), ran.largest])
                elif what == "observe":
                    self.reply("observed", self.exercise.run(self.answer, request["inputs"]))
                else:
                    return
            except MemoryError:
                self.reply("memory", "it ran out of memory")
            except BaseException as err:  # noqa: BLE001 - whatever the answer raised
                self.reply("error", f"{type(err).__name__}: {err}")


def _child(inbox: BinaryIO, outbox: BinaryIO, request: dict) -> None:
    """Load one answer, shut the doors, serve it. Never returns."""
    from .grading import find_exercise
    from .sandbox import load_answer, write_frame

    found: list[str] = []
    budget = float(request.get("cpu", 300))
    resource.setrlimit(resource.RLIMIT_CPU, (int(budget) + 1, int(budget) + 2))
    memory = int(request.get("memory", 0))
    if memory:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + memory, used + memory))
    exercise = find_exercise(request["key"])
    try:
        answer = load_answer(request["files"], request["names"])
    except BaseException as err:  # noqa: BLE001 - the answer's own source failed to run
        write_frame(outbox, {"kind": "error", "payload": f"{type(err).__name__}: {err}",
                             "refused": []})
        os._exit(0)
    allows = tuple(getattr(exercise, "allows", ()))
    if "processes" in allows:  # ranks forked from here: no server to start, no compile
        from .. import processes

        processes.fork_workers(_notebook_functions(answer))
    warnings.showwarning = lambda *args, **kwargs: None  # no source lines read to show one
    libraries = {sys.prefix, sys.base_prefix, *(p for p in sys.path if "-packages" in p),
                 os.path.dirname(os.path.dirname(__file__))}  # this package
    sys.addaudithook(refusing_hook(allows, found, tuple(sorted(libraries))))
    server = _Serve(inbox, outbox, exercise, answer, found)
    server.reply("loaded", None)
    server.serve()
    os._exit(0)


def _notebook_functions(answer: Any) -> list[Any]:
    """Every function the answer's cells define (those a check may send to workers), found
    through the answer's globals (a decorated answer's: the function ``functools.wraps``
    keeps, as ``@torch.no_grad()`` does)."""
    values = [_unwrapped(v) for v in (answer if isinstance(answer, tuple) else (answer,))]
    spaces = {id(g): g for v in values if isinstance(g := getattr(v, "__globals__", None), dict)}
    return [f for g in spaces.values() for f in g.values()
            if inspect.isfunction(f) and f.__module__ == "__main__"]


def _unwrapped(value: Any) -> Any:
    """The function a decorator wrapped, read from the wrapper's own attributes (no
    descriptor of the learner's runs)."""
    for _ in range(8):
        inner = vars(value).get("__wrapped__") if hasattr(value, "__dict__") else None
        if inner is None:
            return value
        value = inner
    return value


def _drop_privileges() -> None:
    """As root inside the sandbox, become the unprivileged user the grader chose: no
    capabilities left, and the process limit then holds (the kernel never limits root)."""
    uid = os.environ.get("BACKPROPLAB_UID")
    if os.geteuid() == 0 and uid:
        os.setgroups([])
        os.setgid(int(uid))
        os.setuid(int(uid))


def _limits() -> None:
    processes = int(os.environ.get("BACKPROPLAB_NPROC", "64"))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    size = int(os.environ.get("BACKPROPLAB_FSIZE", str(64 << 20)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def main() -> None:
    """The runner's loop: a child per answer, until the grader closes the pipe."""
    inbox = os.fdopen(os.dup(0), "rb", buffering=0)
    outbox = os.fdopen(os.dup(1), "wb", buffering=0)
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what an answer prints must never mix with the frames
        os.dup2(quiet, fd)
    _drop_privileges()
    _limits()
    import torch

    from .grading import find_exercise
    from .sandbox import WireError, read_frame, write_frame

    torch.set_num_threads(1)
    _load_everything()
    # What is loaded now lives as long as the runner: kept out of the collector's scans, a
    # child's full collections (a graph of 5,000 nodes makes many) walk only what the answer
    # made, not torch's objects, whose pages then stay shared too.
    gc.freeze()
    write_frame(outbox, {"kind": "ready", "payload": None, "refused": []})
    while True:
        try:
            request = read_frame(inbox)
        except (EOFError, WireError):
            return
        if not isinstance(request, dict) or request.get("kind") != "answer":
            return
        try:
            find_exercise(request["key"])
        except Exception as err:  # noqa: BLE001 - told to the grader as this answer's error
            write_frame(outbox, {"kind": "error", "payload": f"{type(err).__name__}: {err}",
                                 "refused": []})
            write_frame(outbox, {"kind": "ended", "payload": {"signal": None, "code": 0},
                                 "refused": []})
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                _child(inbox, outbox, request)
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        write_frame(outbox, {"kind": "ended", "payload": _ending(status), "refused": []})


def _load_everything() -> None:
    """Load, before the first answer, every module a check or an answer may meet lazily:
    PRELOAD, METHOD_PRELOAD, every lesson's checks and what each lesson's PRELOAD names.
    The hook refuses an import only of what is not loaded yet, so every answer of a
    submission meets the same runner, whichever answers came before it."""
    from . import exercises

    for name in (*PRELOAD, *METHOD_PRELOAD):
        importlib.import_module(name)
    for found in pkgutil.iter_modules(exercises.__path__):
        if found.name.startswith("lesson"):
            lesson = importlib.import_module(f"{exercises.__name__}.{found.name}")
            for name in getattr(lesson, "PRELOAD", ()):
                importlib.import_module(name)


def _ending(status: int) -> dict:
    """How a child ended, as data: the signal that killed it, or its exit code."""
    if os.WIFSIGNALED(status):
        return {"signal": signal.Signals(os.WTERMSIG(status)).name, "code": None}
    return {"signal": None, "code": os.WEXITSTATUS(status)}


if __name__ == "__main__":
    main()
    # Nothing is left to write (the frames go out unbuffered); tearing the interpreter
    # down with torch loaded would cost most of a second of every container's close.
    os._exit(0)
