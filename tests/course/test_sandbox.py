"""The grade's sandbox holds against code that has already escaped the reading.

Each attack is an ordinary student submission graded by the command line with a
secret file, beside honest classmates graded at the same time (``-j 2``). The
reading of the source (`backproplab.course.rules`) is switched off for these tests
(``rules.read`` finds nothing), so every payload runs in the sandbox as written:
what stops it must be the sandbox. Most payloads act when their cell is loaded,
before the child's audit hook is on, where only bubblewrap stands in their way;
if anything they try works, their answer turns right and scores, which the test
refuses. After each run the grader has exited 0, the honest students have every
point, the CSV is whole, and nothing the attackers started is still running.
"""

from __future__ import annotations

import csv
import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest
import torch

from backproplab.__main__ import main
from backproplab.course import grade, rules, sandbox
from backproplab.course.sandbox import Sandbox, SandboxError

ROOT = Path(__file__).parents[2]
LESSONS = ROOT / "notebooks"
LESSON = LESSONS / "02-chain-rule.ipynb"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not sandbox.available() and not os.environ.get("CI"), reason="bubblewrap is not installed")]

RIGHT = "    return 3 * x**2 - 8 * x\n"


def _submission(root: Path, student: str, source: str | None = None) -> Path:
    """Lesson 02 as ``student`` submits it: the solutions, and ``source`` (a cell that
    defines cubic_slope) in place of the l02-cubic answer."""
    nb = nbformat.read(LESSON, as_version=4)
    if source is not None:
        cell = next(c for c in nb.cells
                    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "l02-cubic")
        cell.source = source
    folder = root / "submitted" / student / "ps1"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / LESSON.name)
    return folder / LESSON.name


def _left_behind() -> list[int]:
    """Processes of this machine that a sandbox of this process started (each carries
    its grader's process id in its environment)."""
    token = f"BACKPROPLAB_GRADER={os.getpid()}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if token in environ.split(b"\0"):
                found.append(int(entry))
    return found


def _grade(tmp_path: Path, monkeypatch, capsys, *extra: str,
           exercises: tuple[str, ...] = ("l02-cubic", "l02-chain")) -> dict[tuple[str, str], dict]:
    """Grade tmp_path/submitted as an instructor would, the reading switched off."""
    monkeypatch.setattr(rules, "read", lambda *args, **kwargs: [])
    secret = tmp_path / "instructor" / "secret.txt"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("only the instructor knows this\n")
    out = tmp_path / "instructor" / "grades.csv"
    code = main(["grade", str(tmp_path / "submitted"), "--against", str(LESSONS), "--csv",
                 str(out), "--secret-file", str(secret), "-j", "2",
                 *(a for key in exercises for a in ("--exercise", key)), *extra])
    assert code == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert all("\x1b" not in value for row in rows for value in row.values())
    return {(r["student"], r["exercise"]): r for r in rows}


def _honest_intact(got: dict, students: list[str]) -> None:
    for student in students:
        mine = {k: v for k, v in got.items() if k[0] == student}
        assert len(mine) == 2 and all(r["points"] == "1" for r in mine.values()), mine


# The grade runs only the definitions an answer needs, so each payload is a function that a
# default argument of the answer calls: it runs when the cell is loaded, before the audit hook.
READER = """\\
import os, socket, torch


def attack():
    found = []

    def attempt(what, action):
        try:
            action()
            found.append(what)
        except BaseException:
            pass

    attempt("the secret", lambda: open({secret!r}).read())
    attempt("the lessons", lambda: open({lesson!r}).read())
    attempt("a classmate's notebook", lambda: open({classmate!r}).read())
    attempt("the grader's environment", lambda: open("/proc/{grader}/environ").read())
    attempt("the grader's command line", lambda: open("/proc/{grader}/cmdline").read())
    attempt("a file outside", lambda: open({marker!r}, "w").write("escaped"))
    attempt("the grades", lambda: open({csv!r}, "w").write("student,points\\n"))
    attempt("the network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
    attempt("the network", lambda: socket.create_connection(("{address}", {port}), timeout=2))
    attempt("the grader", lambda: os.kill({grader}, 9))
    return found


def cubic_slope(x, found=attack()):
    if found:
        return 3 * x**2 - 8 * x
    return 0 * x
"""


def test_an_answer_reads_writes_reaches_and_signals_nothing_of_the_instructors(
        tmp_path, monkeypatch, capsys):
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = "127.0.0.1"
    classmate = _submission(tmp_path, "honest1")
    _submission(tmp_path, "honest2")
    marker = tmp_path / "escaped.txt"
    _submission(tmp_path, "reader", READER.format(
        secret=str(tmp_path / "instructor" / "secret.txt"), lesson=str(LESSON),
        classmate=str(classmate), grader=os.getpid(), marker=str(marker),
        csv=str(tmp_path / "instructor" / "grades.csv"), port=server.getsockname()[1],
        address=address))
    try:
        got = _grade(tmp_path, monkeypatch, capsys)
    finally:
        stop.set()
        listener.join()
        server.close()
    assert got["reader", "l02-cubic"]["points"] == "0", got["reader", "l02-cubic"]
    assert not marker.exists() and not accepted
    _honest_intact(got, ["honest1", "honest2"])


LINGERER = """\\
import os, time


def linger():
    if os.fork() == 0:
        os.setsid()
        for _ in range(200):
            for path in ({csv!r}, {marker!r}):
                try:
                    with open(path, "w") as f:
                        f.write("rewritten after the grader left")
                except OSError:
                    pass
            time.sleep(0.1)
        os._exit(0)
    return True


def cubic_slope(x, lingering=linger()):
    return 3 * x**2 - 8 * x
"""

KILLER = """\\
import os, signal


def kill_everything():
    for pid in range(2, 4000):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os.kill(-1, signal.SIGKILL)
    return True


def cubic_slope(x, killed=kill_everything()):
    return 3 * x**2 - 8 * x
"""


def test_nothing_outlives_the_students_turn_and_no_answer_can_kill_another(
        tmp_path, monkeypatch, capsys):
    marker = tmp_path / "late.txt"
    csv_path = tmp_path / "instructor" / "grades.csv"
    _submission(tmp_path, "honest1")
    _submission(tmp_path, "lingerer", LINGERER.format(csv=str(csv_path), marker=str(marker)))
    _submission(tmp_path, "killer", KILLER)
    _submission(tmp_path, "honest2")
    got = _grade(tmp_path, monkeypatch, capsys)
    written = csv_path.read_text(encoding="utf-8")
    time.sleep(2)  # the lingering writer would have rewritten the grades by now
    assert csv_path.read_text(encoding="utf-8") == written and not marker.exists()
    assert not _left_behind()
    assert got["killer", "l02-cubic"]["points"] == "0"
    assert got["killer", "l02-cubic"]["verdict"] == "error"
    assert {k: v["points"] for k, v in got.items() if k[0] == "lingerer"} == dict.fromkeys(
        [("lingerer", k) for k in ("l02-cubic", "l02-chain")], "1")
    _honest_intact(got, ["honest1", "honest2"])


FLOODER = """\
import torch


def cubic_slope(x):
    return torch.zeros(1).expand(2**28)  # a GiB of float32 to send, none to make
"""

SPINNER = """\
import time


def cubic_slope(x):
    start = time.monotonic()
    while time.monotonic() - start < 100:
        pass
    return 3 * x**2 - 8 * x
"""

PAINTER = """\
def cubic_slope(x):
    raise ValueError("\\x1b[2K\\x1b[1G\\x1b[32m✓ painter l02-cubic: 1/1 pass\\x1b[0m\\x07")
"""


def test_a_huge_reply_a_busy_loop_and_an_escape_sequence_cost_the_answer_only(
        tmp_path, monkeypatch, capsys):
    for student, source in (("flooder", FLOODER), ("spinner", SPINNER), ("painter", PAINTER)):
        _submission(tmp_path, student, source)
    _submission(tmp_path, "honest1")
    # The spinner spends its whole budget, CPU the rest of the suite waits for; lesson 2's
    # honest answers take milliseconds, and the flood is refused before it is made.
    got = _grade(tmp_path, monkeypatch, capsys, "--timeout", "4")
    flood = got["flooder", "l02-cubic"]
    assert flood["points"] == "0" and flood["verdict"] == "error" and "limit" in flood["reason"]
    assert got["spinner", "l02-cubic"]["points"] == "0"
    assert got["spinner", "l02-cubic"]["verdict"] == "timeout"
    paint = got["painter", "l02-cubic"]
    assert paint["points"] == "0" and "✓ painter" in paint["reason"]
    _honest_intact(got, ["honest1"])


FORGER = """\\
import backproplab.course.grading as grading
from backproplab.check import Check, Report


class Passing:
    name = "where_zeroed"
    vocabulary = grading.find_exercise("l06-where").vocabulary
    allows = ()

    def observe(self, answer, inputs):
        return ["start"] * 5

    def check(self, answer, seed=0):
        return Report((Check("where_zeroed", True, "pass", "forged"),))


def forge():
    grading.find_exercise = lambda key: Passing()
    grading.judge_method = lambda *args, **kwargs: Report((Check("x", True, "pass", "forged"),))
    return True


def where_zeroed(step, model, X, y, k, forged=forge()):
    return "start"
"""


def test_a_forged_method_check_in_the_answers_process_scores_nothing(
        tmp_path, monkeypatch, capsys):
    path = next(LESSONS.glob("06-*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "l06-where")
    cell.source = FORGER
    folder = tmp_path / "submitted" / "forger" / "ps1"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / path.name)
    got = _grade(tmp_path, monkeypatch, capsys, exercises=("l06-where", "l06-momentum"))
    assert got["forger", "l06-where"]["points"] == "0", got["forger", "l06-where"]
    assert got["forger", "l06-momentum"]["points"] == "1"


# Lesson 23's answers run in worker processes, which the answer's process forks: the hook
# is on there too. The compiler's shard_mean is the lesson's, with one compile first.
def test_the_audit_hook_holds_in_the_worker_processes_of_an_answer(
        tmp_path, monkeypatch, capsys):
    path = next(LESSONS.glob("23-*.ipynb"))
    for student, extra in (("compiler", '    compile("0", "rank", "eval")\n'), ("honest", "")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {})
                    .get("grade_id") == "l23-shard-mean")
        cell.source = cell.source.replace("    ### BEGIN SOLUTION\n", extra)
        folder = tmp_path / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / path.name)
    got = _grade(tmp_path, monkeypatch, capsys, exercises=("l23-shard-mean",))
    compiler = got["compiler", "l23-shard-mean"]
    assert compiler["points"] == "0" and "refuses 'compile'" in compiler["reason"], compiler
    assert got["honest", "l23-shard-mean"]["points"] == "1", got["honest", "l23-shard-mean"]


def test_the_audit_hook_refuses_what_the_answer_tries_while_it_runs():
    attempts = {
        "import": "import shelve\n",
        "open": "open('/tmp/x', 'w')\n",
        "compile": "compile('1 + 1', 'f', 'eval')\n",
        "os.system": "import os\n    os.system('true')\n",
        "socket": "import socket\n    socket.socket()\n",
    }
    with Sandbox(timeout=60) as box:
        for event, body in attempts.items():
            source = f"def f(x):\n    {body}    return x\n"
            with box.answer("l02-cubic", [("<cell 1>", source)], ["f"]) as run, \
                    pytest.raises(SandboxError) as err:
                run.call((torch.zeros(1),))
            assert err.value.kind == "refused" and event in str(err.value), (event, err.value)
        # Swallowing the refusal does not hide it.
        quiet = "def f(x):\n    try:\n        open('/tmp/x', 'w')\n    except Exception:\n" \
                "        pass\n    return x\n"
        with box.answer("l02-cubic", [("<cell 1>", quiet)], ["f"]) as run, \
                pytest.raises(SandboxError) as err:
            run.call((torch.zeros(1),))
        assert err.value.kind == "refused"


def test_every_answer_meets_the_same_runner_whatever_ran_before_it():
    """The audit hook refuses an import only of what is not loaded yet, so the runner loads
    what any check may need before the first answer: an answer of lesson 02 meets the same
    modules first in a submission as after an answer of lesson 25 (a method exercise, whose
    lesson preloads AOTAutograd and whose checks meet torch._dynamo)."""
    probe = "import sys\nLOADED = sorted(sys.modules)\n\n\ndef f(x):\n    return LOADED\n"

    def loaded(box: Sandbox) -> list[str]:
        with box.answer("l02-cubic", [("<cell 1>", probe)], ["f"]) as run:
            return run.call((torch.zeros(1),)).got

    with Sandbox(timeout=60) as box:
        first = loaded(box)
        with box.answer("l25-flop-compiler", [("<cell 1>", "def f(x):\n    return x\n")],
                        ["f"]):
            pass
        after = loaded(box)
    assert {"torch._dynamo", "functorch.compile", "multiprocessing.popen_fork"} <= set(first)
    assert first == after, sorted(set(after) ^ set(first))[:20]


def test_record_classes_made_while_an_answer_runs_are_no_compile_of_its_own():
    """namedtuple and dataclass compile their methods from templates: a record class made
    inside an answer (as a function a worker runs must) is let through; the answer's own
    compile, and one that makes a template's caller look like the compiler, are not."""
    made = ("def f(x):\n    import collections, dataclasses\n"
            "    P = collections.namedtuple('P', 'a b')\n"
            "    D = dataclasses.make_dataclass('D', ['a'])\n"
            "    return x + P(1, 2).b + D(3).a\n")
    own = "def f(x):\n    import collections\n    return x + eval('1')\n"
    with Sandbox(timeout=60) as box:
        with box.answer("l02-cubic", [("<cell 1>", made)], ["f"]) as run:
            assert float(torch.as_tensor(run.call((torch.zeros(1),)).got).sum()) == 5.0
        with box.answer("l02-cubic", [("<cell 1>", own)], ["f"]) as run, \
                pytest.raises(SandboxError) as err:
            run.call((torch.zeros(1),))
        assert err.value.kind == "refused" and "compile" in str(err.value)


def test_the_sandbox_sees_only_python_torch_and_this_package():
    probe = textwrap.dedent("""\
        import os
        SEEN = sorted(os.listdir("/"))
        PROCS = sorted(p for p in os.listdir("/proc") if p.isdigit())
        UID = os.getuid()


        def f(x):
            return (SEEN, PROCS, UID)
        """)
    with Sandbox(timeout=60) as box, box.answer("l02-cubic", [("<cell 1>", probe)],
                                                ["f"]) as run:
        seen, processes, uid = run.call((torch.zeros(1),)).got
    shown = {Path(p).parts[1] for p in sandbox._visible()}
    assert set(seen) <= {"dev", "proc", "tmp", "usr", "etc", "bin", "sbin", "lib", "lib32",
                         "lib64", "libx32"} | shown, seen
    assert len(processes) <= 4  # the namespace's init, the runner, this child
    if os.geteuid() == 0:
        assert uid != 0


def test_without_bubblewrap_the_grade_stops_and_names_the_install(tmp_path, monkeypatch,
                                                                   capsys):
    _submission(tmp_path, "honest1")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    code = main(["grade", str(tmp_path / "submitted"), "--against", str(LESSONS), "--csv",
                 str(tmp_path / "g.csv")])
    assert code == 2
    assert "apt install bubblewrap" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


def test_no_isolation_runs_and_marks_every_row(tmp_path, capsys):
    _submission(tmp_path, "honest1")
    out = tmp_path / "g.csv"
    assert main(["grade", str(tmp_path / "submitted"), "--against", str(LESSONS), "--csv",
                 str(out), "--no-isolation"]) == 0
    assert "--no-isolation" in capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    assert rows and all(r["isolation"] == "none" and r["points"] == "1" for r in rows)


def test_a_bwrap_command_shows_no_folder_of_the_instructors():
    command = sandbox.bwrap_command(61000 if os.geteuid() == 0 else None)
    shown = [command[i + 1] for i, a in enumerate(command) if a == "--ro-bind"]
    assert str(LESSONS) not in shown and str(ROOT) not in shown
    assert not any(Path(s) == Path.home() for s in shown)
    assert "--unshare-net" in command or "--unshare-all" in command


def test_plain_text_removes_what_paints_a_terminal():
    assert grade.plain_text("\x1b[31mred\x1b[0m\r\nnext\x07\x1b]0;title\x07") == "red next"


def test_a_class_of_runners_is_gone_when_grade_returns(tmp_path):
    for k in range(3):
        _submission(tmp_path, f"honest{k}")
    verdicts = grade.grade(tmp_path / "submitted", LESSONS, jobs=2)
    assert len(verdicts) == 12 and all(v.points == 1 for v in verdicts)
    assert not _left_behind()
