"""A sandbox for one student's answers: bubblewrap around `backproplab.course.runner`.

``backproplab grade`` runs every submitted answer here, never in its own
process nor in a learner's kernel. A `Sandbox` is one bubblewrap container
(Debian's ``bubblewrap``, the tool Flatpak runs on) holding a Python process
that has imported torch and this package, and nothing of the instructor's:

- no network (its own, empty network namespace);
- a read-only view of the Python installation, its site-packages and the
  backproplab package, and nothing else: no lessons, no secret, no
  submissions, no home, no working folder; a private, size-capped /tmp;
- its own process namespace (it sees only its own processes, never the
  grader's), ``--die-with-parent`` and ``--new-session``: nothing in it
  outlives the student's turn;
- an empty environment; when the grader is root, an unprivileged user of its
  own, so that the kernel's limits on processes hold; limits on CPU seconds,
  memory, file size and processes.

The grader sends an answer's source (`Sandbox.answer`); the runner forks a
child for it, and the grader asks that child to ``call`` the answer on inputs
it made, or to ``observe`` it, and reads back plain data only
(frames of plain data, below: no pickle), capped in size. One time budget covers
all of an answer's requests. A child that dies, hangs, overflows its budget or
sends garbage costs that answer its points (`SandboxError`), never the grader:
the container is then thrown away and the next answer gets a new one.

>>> import torch
>>> with Sandbox(isolation=available()) as box:
...     with box.answer("l02-cubic", [("<cell 1>", "def slope(x):\\n    return 2 * x\\n")],
...                     ["slope"]) as run:
...         ran = run.call((torch.tensor([1.0, 3.0]),))
>>> ran.got
tensor([2., 6.])
"""

from __future__ import annotations

import json
import linecache
import math
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from .byhand import Ran

__all__ = ["DTYPES", "FRAME_LIMIT", "INSTALL", "Answer", "FrameTooLarge", "Sandbox",
           "SandboxError", "WireError", "available", "bwrap_command", "decode", "encode",
           "load_answer", "read_exactly", "read_frame", "write_frame"]

INSTALL = ("bubblewrap is not installed, and the grade runs every answer inside it. Install "
           "it (Debian/Ubuntu: sudo apt install bubblewrap; Fedora: sudo dnf install "
           "bubblewrap; Arch: sudo pacman -S bubblewrap), or grade with --no-isolation, which "
           "runs the answers as you, with your files, network and processes in reach.")
FRAME_LIMIT = 64 << 20  # bytes a frame may hold: far more than any honest answer sends back
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
    torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
    torch.bool)}
_LENGTH = struct.Struct(">Q")
ANSWER_LIMIT = 64 << 20  # bytes an answer may send back, all its replies together
TMP_SIZE = 256 << 20
_UIDS = 61000  # the first unprivileged user a root grader gives a sandbox


class SandboxError(RuntimeError):
    """An answer's run went wrong outside the answer's own code: ``kind`` is the verdict
    (``timeout``, ``memory``, ``error``, ``refused``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def available() -> bool:
    """Whether bubblewrap can start a sandbox here."""
    return shutil.which("bwrap") is not None


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


# --------------------------------------------------------------------------
# The container
# --------------------------------------------------------------------------


def _visible() -> list[Path]:
    """The folders a sandbox sees, read-only: Python's own, its site-packages, this
    package. Never a folder that holds them (a checkout holds the lessons)."""
    import backproplab

    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(backproplab.__file__).parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(Path(sysconfig.get_paths()[key]))
    sites = {Path(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    paths |= sites | {target for site in sites for target in _link_targets(site)}
    real = sorted({p.resolve() for p in paths if p.exists()})
    # A folder inside another that is shown already comes with it.
    return [p for p in real if not any(q != p and q in p.parents for q in real)]


def _link_targets(site: Path) -> set[Path]:
    """What a site folder's links point to (a site made of links to another environment's
    packages): the links are bound as they are, so each target must be seen too, itself
    and nothing around it."""
    try:
        entries = list(os.scandir(site))
    except OSError:
        return set()
    return {Path(os.path.realpath(e.path)) for e in entries if e.is_symlink()}


def _ancestors(path: Path) -> list[Path]:
    return [p for p in reversed(path.parents) if p != Path("/")]


def bwrap_command(uid: int | None = None) -> list[str]:
    """The bubblewrap command line of a sandbox (``uid``: the user it becomes, when the
    grader is root)."""
    command = ["bwrap", "--die-with-parent", "--new-session", "--clearenv"]
    if uid is None:
        command += ["--unshare-all"]
    else:  # root: no user namespace, so the runner can become ``uid`` and drop everything
        command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                    "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    command += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d"):  # how libraries are found
        if os.path.exists(f"/etc/{name}"):
            command += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    # The private /tmp first: a Python installation under /tmp (a virtual environment
    # made by a test) is bound on top of it, never hidden by it.
    command += ["--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
    made: set[Path] = {Path("/usr"), Path("/tmp")}
    for path in _visible():
        for parent in _ancestors(path):
            if parent not in made and not str(parent).startswith("/usr/"):
                command += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        if not str(path).startswith("/usr/"):
            command += ["--ro-bind", str(path), str(path)]
    command += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
    return command


def _environment(uid: int | None, processes: int) -> dict[str, str]:
    import backproplab

    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": str(Path(backproplab.__file__).resolve().parent.parent),
           "BACKPROPLAB_NPROC": str(processes),
           "BACKPROPLAB_GRADER": str(os.getpid())}  # whose sandbox it is (tests look for it)
    if uid is not None:
        env["BACKPROPLAB_UID"] = str(uid)
    return env


def _processes_of_this_user() -> int:
    """How many processes run as this user now (the process limit counts them all)."""
    count, me = 0, str(os.getuid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    uid_line = next(line for line in f if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            count += uid_line.split()[1] == me
    return count


_SLOTS = threading.Lock()
_TAKEN: set[int] = set()


class Sandbox:
    """One student's container and runner (see the module's documentation).

    ``isolation``: True for bubblewrap (`SandboxError` if it is missing), False to run
    the runner as a plain process of the grader's user (``--no-isolation``).
    ``timeout`` is each answer's time budget, ``memory`` each answer's memory limit.
    """

    def __init__(self, *, isolation: bool = True, timeout: float = 300.0,
                 memory: int = 4 << 30, processes: int = 64) -> None:
        if isolation and not available():
            raise SandboxError("error", INSTALL)
        self.isolation, self.timeout, self.memory = isolation, timeout, memory
        self.processes = processes
        self._process: subprocess.Popen | None = None
        self._slot: int | None = None
        self.last_size = 0  # bytes of the last frame received

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the container's life ------------------------------------------------

    def _start(self) -> None:
        root = os.geteuid() == 0
        if self.isolation and root:
            with _SLOTS:
                self._slot = next(k for k in range(1000) if k not in _TAKEN)
                _TAKEN.add(self._slot)
        uid = _UIDS + self._slot if self._slot is not None else None
        limit = self.processes if uid is not None else _processes_of_this_user() + self.processes
        python = [sys.executable, "-s", "-B", "-m", "backproplab.course.runner"]
        env = _environment(uid, limit)
        if self.isolation:
            command = bwrap_command(uid) + [a for k, v in env.items()
                                            for a in ("--setenv", k, v)] + python
            env = {}
        else:
            command = python
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd="/tmp" if self.isolation else _scratch(), start_new_session=True)
        self._receive(time.monotonic() + 120, expect="ready")

    def close(self) -> None:
        """Stop the container and everything in it; return once it is gone."""
        process, self._process = self._process, None
        if process is not None:
            try:
                process.stdin.close()
                process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            if process.poll() is None or not self.isolation:
                try:  # without a process namespace, what it left behind is its group
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                process.kill()
                process.wait()
            process.stdout.close()
        if self._slot is not None:
            with _SLOTS:
                _TAKEN.discard(self._slot)
            self._slot = None

    # -- frames ---------------------------------------------------------------

    def _send(self, value: Any) -> None:
        try:
            write_frame(self._process.stdin, value)
        except (OSError, ValueError) as err:
            self.close()
            raise SandboxError("error", f"the sandbox stopped taking requests ({err})") from None

    def _read(self, n: int, deadline: float) -> bytes:
        fd, parts = self._process.stdout.fileno(), []
        while n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def _receive(self, deadline: float, expect: str | None = None, limit: int = FRAME_LIMIT
                 ) -> dict:
        try:
            size = int.from_bytes(self._read(8, deadline), "big")
            if size > limit:
                raise FrameTooLarge(size, limit)
            frame = decode(self._read(size, deadline))
            self.last_size = size
        except TimeoutError:
            self.close()
            raise SandboxError("timeout", "it was still running when its time was up") from None
        except FrameTooLarge as err:
            self.close()
            raise SandboxError("error", f"it sent back {err}") from None
        except (EOFError, OSError, WireError) as err:
            self.close()
            why = "it sent back something that is not plain data" \
                if isinstance(err, WireError) else "the sandbox's process died"
            raise SandboxError("error", why) from None
        if not (isinstance(frame, dict) and isinstance(frame.get("kind"), str)
                and isinstance(frame.get("refused", []), list)):
            self.close()
            raise SandboxError("error", "it sent back something that is not plain data")
        if expect is not None and frame["kind"] != expect:
            self.close()
            raise SandboxError("error", f"the sandbox did not start ({frame.get('payload')})")
        return frame

    # -- answers ----------------------------------------------------------------

    @contextmanager
    def answer(self, key: str, files: Sequence[tuple[str, str]], names: Sequence[str],
               ) -> Iterator[Answer]:
        """Load one answer to exercise ``key`` in a child of its own; the `Answer` then
        runs it. Its time budget starts now; the child ends when the block does."""
        if self._process is None:
            self._start()
        run = Answer(self, self.timeout)
        self._send({"kind": "answer", "key": key, "files": [list(f) for f in files],
                    "names": list(names), "cpu": self.timeout, "memory": self.memory})
        loaded = False
        try:
            run.expect("loaded")
            loaded = True
            yield run
        finally:
            if self._process is not None:
                try:
                    if loaded:
                        self._send({"kind": "end"})
                    deadline = time.monotonic() + 30
                    while self._receive(deadline)["kind"] != "ended":
                        pass  # what a child sent after its answer's time (discarded)
                except SandboxError:
                    pass


class Answer:
    """A loaded answer in its child: `call` it (by hand) or `observe` it (a method)."""

    def __init__(self, box: Sandbox, budget: float) -> None:
        self.box, self.left, self.received = box, budget, 0

    def expect(self, kind: str) -> Any:
        """The payload of the child's next reply, which must be of ``kind``. Only the time
        spent waiting for the child counts against the answer's budget."""
        start = time.monotonic()
        try:
            frame = self.box._receive(start + self.left,
                                      limit=max(ANSWER_LIMIT - self.received, 1024))
        finally:
            self.left -= time.monotonic() - start
        self.received += self.box.last_size
        if frame["refused"]:
            raise SandboxError("refused", "the grade's sandbox refused what it tried: "
                               + ", ".join(map(str, frame["refused"][:5])))
        what, payload = frame["kind"], frame.get("payload")
        if what in ("error", "memory"):
            raise SandboxError(what, str(payload))
        if what != kind:
            self.box.close()  # not ours to read, or the child ended before it answered
            raise SandboxError(*_ended(payload) if what == "ended" else (
                "error", "it sent back something that is not plain data"))
        return payload

    def call(self, args: Sequence[Any]) -> Ran:
        """The answer called on ``args``, with autograd refused: what `run_answer` reports."""
        self.box._send({"kind": "call", "args": list(args)})
        got = self.expect("ran")
        if not (isinstance(got, list) and len(got) == 6):
            self.box.close()
            raise SandboxError("error", "it sent back something that is not plain data")
        value, failure, detail, nudged, warned, largest = got
        return Ran(value, failure if isinstance(failure, str) else None, str(detail),
                   nudged if isinstance(nudged, int) else None,
                   tuple(map(str, warned if isinstance(warned, list) else [])),
                   largest if isinstance(largest, int) else 0)

    def observe(self, inputs: Any) -> Any:
        """A method exercise's observation step, run on the answer with ``inputs``."""
        self.box._send({"kind": "observe", "inputs": inputs})
        return self.expect("observed")


def _ended(how: Any) -> tuple[str, str]:
    """(verdict, reason) for a child that ended before it answered."""
    how = how if isinstance(how, dict) else {}
    if how.get("signal") == "SIGXCPU":
        return "timeout", "it used up its CPU time"
    if how.get("signal"):
        return "error", f"its process was killed by {how['signal']}"
    return "error", f"its process ended before it answered (exit code {how.get('code')})"


def _scratch() -> str:
    """A folder of its own for a runner without isolation to start in."""
    import tempfile

    return tempfile.mkdtemp(prefix="backproplab-answer-")


# --------------------------------------------------------------------------
# Plain data across the pipe: what the grader and a sandbox send each other
# --------------------------------------------------------------------------
# The grader never unpickles what a sandbox sends: a pickle can run code as it is read.
# Messages are written in a small format of their own instead, which can only ever become
# plain data: None, booleans, integers, floats, complex numbers, strings, lists, tuples,
# dicts with string keys, and tensors (dense, strided, of the dtypes in DTYPES). A frame
# is a header (JSON) and the tensors' raw bytes after it; its length comes first, so a
# reader refuses a frame larger than its limit before reading it.


class WireError(ValueError):
    """A frame that is not plain data in this format."""


class FrameTooLarge(WireError):
    """A frame longer than the reader's limit (its length is in ``size``)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of {size:,} bytes, over the limit of {limit:,}")
        self.size = size


def _header(value: Any, blobs: list[bytes], depth: int = 0, limit: int | None = None) -> Any:
    """``value`` as JSON-ready data; tensors' bytes go to ``blobs`` (`FrameTooLarge` as soon
    as they pass ``limit``, before the bytes are copied)."""
    if depth > 32:
        raise WireError("nested more than 32 levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"i": str(value)}  # any size, exactly
    if isinstance(value, float):
        return {"f": repr(value)}  # nan and inf included
    if isinstance(value, complex):
        return {"c": [repr(value.real), repr(value.imag)]}
    if isinstance(value, (list, tuple)):
        return {"l" if isinstance(value, list) else "t":
                [_header(v, blobs, depth + 1, limit) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise WireError("a dict whose keys are not all strings")
        return {"d": {k: _header(v, blobs, depth + 1, limit) for k, v in value.items()}}
    if isinstance(value, torch.Tensor):
        size = sum(map(len, blobs)) + value.numel() * value.element_size()
        if limit is not None and size > limit:
            raise FrameTooLarge(size, limit)
        # A conjugate or negative view (z.conj()) shares memory with a bit set: its bytes
        # are the values only once that bit is applied.
        t = value.detach().to("cpu", copy=False).resolve_conj().resolve_neg().contiguous()
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in DTYPES or t.layout != torch.strided:
            raise WireError(f"a tensor of dtype {dtype} and layout {t.layout}")
        blobs.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return {"T": [dtype, list(t.shape), len(blobs) - 1]}
    raise WireError(f"a {type(value).__name__}, which is not plain data")


def encode(value: Any, limit: int | None = None) -> bytes:
    """``value`` as one frame's body; with ``limit``, `FrameTooLarge` rather than a body
    of more bytes.

    >>> import torch
    >>> back = decode(encode({"said": "start", "grad": torch.tensor([1.0, -2.0]), "n": (1, 2)}))
    >>> back["said"], back["grad"], back["n"]
    ('start', tensor([ 1., -2.]), (1, 2))
    """
    blobs: list[bytes] = []
    head = json.dumps(_header(value, blobs, 0, limit), allow_nan=False).encode()
    if limit is not None and len(head) + sum(map(len, blobs)) > limit:
        raise FrameTooLarge(len(head) + sum(map(len, blobs)), limit)
    sizes = [len(b) for b in blobs]
    return _LENGTH.pack(len(head)) + head + json.dumps(sizes).encode() + b"\n" + b"".join(blobs)


def _value(node: Any, blobs: list[bytes], depth: int = 0) -> Any:
    if depth > 34:
        raise WireError("nested too deep")
    if node is None or isinstance(node, (bool, str)):
        return node
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError("not a frame of this format")
    (tag, body), = node.items()
    try:
        if tag == "i":
            if len(body) > 4300:  # int(str) refuses longer ones anyway
                raise WireError("an integer with too many digits")
            return int(body)
        if tag == "f":
            return float(body)
        if tag == "c":
            return complex(float(body[0]), float(body[1]))
        if tag in ("l", "t"):
            items = [_value(v, blobs, depth + 1) for v in body]
            return items if tag == "l" else tuple(items)
        if tag == "d":
            return {str(k): _value(v, blobs, depth + 1) for k, v in body.items()}
        if tag == "T":
            dtype, shape, index = DTYPES[body[0]], [int(s) for s in body[1]], int(body[2])
            data = blobs[index]
            count = math.prod(shape)
            if len(data) != count * torch.empty((), dtype=dtype).element_size():
                raise WireError("a tensor whose bytes do not match its shape")
            if count == 0:
                return torch.empty(shape, dtype=dtype)
            return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    except WireError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as err:
        raise WireError(f"not a frame of this format ({type(err).__name__})") from None
    raise WireError(f"an unknown tag {tag!r}")


def decode(body: bytes) -> Any:
    """The plain data a frame's body holds; `WireError` when it is anything else."""
    try:
        (n,) = _LENGTH.unpack_from(body)
        head = json.loads(body[_LENGTH.size:_LENGTH.size + n])
        rest = body[_LENGTH.size + n:]
        line, _, data = rest.partition(b"\n")
        sizes = json.loads(line)
        if not (isinstance(sizes, list) and all(isinstance(s, int) and s >= 0 for s in sizes)
                and sum(sizes) == len(data)):
            raise WireError("tensor sizes that do not add up")
    except WireError:
        raise
    except (struct.error, ValueError, RecursionError):
        raise WireError("not a frame of this format") from None
    blobs, at = [], 0
    for s in sizes:
        blobs.append(data[at:at + s])
        at += s
    return _value(head, blobs)


def write_frame(stream: BinaryIO, value: Any, limit: int | None = None) -> None:
    """Send ``value`` as one frame: its length, then its body (at most ``limit`` bytes)."""
    body = encode(value, limit)
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def read_exactly(stream: BinaryIO, n: int) -> bytes:
    """``n`` bytes from ``stream``; EOFError when it ends first."""
    parts, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the other end closed the pipe")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(stream: BinaryIO, limit: int = FRAME_LIMIT) -> Any:
    """The next frame's value; `FrameTooLarge` (before reading it) when it is over ``limit``."""
    (size,) = _LENGTH.unpack(read_exactly(stream, _LENGTH.size))
    if size > limit:
        raise FrameTooLarge(size, limit)
    return decode(read_exactly(stream, size))
