"""A fresh process for one answer: its source, its inputs, and nothing else.

``backproplab grade`` runs each submitted answer here, never in the learner's
kernel. A `Sandbox` is a child process forked from a server process that has
only imported torch and this package (multiprocessing's forkserver): it holds
no reference, no seed and no secret of the grader's, and its environment is
emptied before the answer runs. The grader sends it the answer's source (the
definitions `backproplab.course.sources` found, already read against the
exercise's vocabulary); the child runs them and then, on request,

- ``call``: runs the answer on inputs the grader made, with autograd off and
  refused and estimates watched (`backproplab.course.byhand.run_answer`), and
  sends back what it returned, as plain data;
- ``method``: runs a method exercise's check on the answer and sends back its
  verdicts as plain strings.

What comes back is read with ``torch.load(weights_only=True)``, which builds
only tensors and plain containers: nothing the answer makes can run code in
the grader. Each request has a time limit; the child has a memory limit.

>>> with Sandbox(timeout=120) as box:
...     box.load([("<cell 1>", "def slope(x):\\n    return 2 * x\\n")], ["slope"])
...     ran = box.call((torch.tensor([1.0, 3.0]),))
>>> ran.got
tensor([2., 6.])
"""

from __future__ import annotations

import io
import linecache
import multiprocessing
import os
import pickle
from collections.abc import Sequence
from typing import Any

import torch

from .byhand import Ran, run_answer

__all__ = ["Sandbox", "SandboxError", "load_answer"]

_CONTEXT: Any = None


def _context() -> Any:
    """The fork server, started once per grader with torch already imported."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["torch", "backproplab.course.sandbox",
                                         "backproplab.course.grading"])
    return _CONTEXT


class SandboxError(RuntimeError):
    """The child died, ran out of time or memory: the verdict is in ``kind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _safe(value: Any, depth: int = 0) -> Any:
    """A result as plain data the grader can read safely: tensors, numbers, strings, None,
    and tuples of them; anything else as a description of what it was."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)) and depth < 4:
        return tuple(_safe(v, depth + 1) for v in value)
    return f"<a {type(value).__name__} object>"


def _send(conn: Any, message: Any) -> None:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    conn.send_bytes(buffer.getvalue())


def _child(conn: Any, memory: int) -> None:
    """The child's loop: load the source, then answer calls until told to stop."""
    os.environ.clear()
    os.environ.update(PATH="/usr/bin:/bin", OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    if memory:
        import resource

        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + memory, used + memory))
    answer: Any = None
    while True:
        request = pickle.loads(conn.recv_bytes())
        kind = request[0]
        try:
            if kind == "load":
                answer = load_answer(*request[1:])
                _send(conn, ("ok", None))
            elif kind == "call":
                ran = run_answer(answer, request[1])
                _send(conn, ("ok", (_safe(ran.got), ran.failure, ran.detail, ran.nudged,
                                    tuple(ran.warnings), ran.largest)))
            elif kind == "method":
                from .grading import find_exercise

                report = find_exercise(request[1]).check(answer, request[2])
                _send(conn, ("ok", tuple((c.name, bool(c.ok), str(c.verdict), str(c.message))
                                         for c in report.checks)))
            else:
                return
        except MemoryError:
            _send(conn, ("memory", "it ran out of memory"))
        except BaseException as err:  # the answer's source itself failed to run
            _send(conn, ("error", f"{type(err).__name__}: {err}"))


def load_answer(files: Sequence[tuple[str, str]], names: Sequence[str]) -> Any:
    """Run an answer's source (one text per cell, named like ``<cell 3>``) in a namespace of
    its own and return the answer: the value of its one name, or a tuple of several."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for filename, text in files:
        # Registered so that inspect.getsource works on the answer (a check may ship a
        # function to worker processes as its source).
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - the answer's source
    missing = [n for n in names if n not in namespace]
    if missing:
        raise NameError(f"{', '.join(missing)} is not defined above the check")
    values = tuple(namespace[n] for n in names)
    return values[0] if len(values) == 1 else values


class Sandbox:
    """One child process for one answer (see the module's documentation)."""

    def __init__(self, *, timeout: float = 300.0, memory: int = 4 << 30) -> None:
        self.timeout = timeout
        self.memory = memory
        self._conn: Any = None
        self._process: Any = None

    def __enter__(self) -> Sandbox:
        context = _context()
        parent, child = context.Pipe()
        self._process = context.Process(target=_child, args=(child, self.memory),
                                        name="backproplab-answer")
        self._process.start()
        child.close()
        self._conn = parent
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._conn.send_bytes(pickle.dumps(("stop",)))
        except (OSError, ValueError):
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()

    def _ask(self, *request: Any) -> Any:
        self._conn.send_bytes(pickle.dumps(request))
        if not self._conn.poll(self.timeout):
            self._process.kill()
            raise SandboxError("timeout", f"it was still running after {self.timeout:g} s")
        try:
            data = self._conn.recv_bytes()
        except EOFError:
            self._process.join()
            raise SandboxError("error", f"the process running it died (exit code "
                                        f"{self._process.exitcode})") from None
        status, payload = torch.load(io.BytesIO(data), weights_only=True)
        if status != "ok":
            raise SandboxError(status, payload)
        return payload

    def load(self, files: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
        """Run the answer's source; its answer is the value of ``names``."""
        self._ask("load", list(files), list(names))

    def call(self, args: tuple[Any, ...]) -> Ran:
        """The answer called on ``args`` (what `run_answer` reports)."""
        got, failure, detail, nudged, warned, largest = self._ask("call", args)
        return Ran(got, failure, detail, nudged, tuple(warned), largest)

    def method(self, key: str, seed: int) -> list[tuple[str, bool, str, str]]:
        """A method exercise's check run on the answer: (name, ok, verdict, message) each."""
        return list(self._ask("method", key, seed))
