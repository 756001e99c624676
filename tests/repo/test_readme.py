"""The README's Quickstart is what CI runs, and command (a) serves the learner's lessons."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from browser_support import free_port

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def quickstart_commands() -> list[str]:
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    section = section.split("### ", 1)[0]  # the conda route is a separate subsection
    return re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)


LOCK = ".ci/constraints.txt"
# The two Quickstart commands are an interface (learners copy them, CI runs (b)):
# they change only together with this test and .ci/run.
LEARN_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -c .ci/constraints.txt -e . "
    "&& backproplab learn notebooks/ my-lessons/ && jupyter lab my-lessons/"
)
# As root, JupyterLab starts only with --allow-root: root users get their own line.
LEARN_AS_ROOT = LEARN_COMMAND.replace("jupyter lab my-lessons/",
                                      "jupyter lab --allow-root my-lessons/")
TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && "
    'pip install -c .ci/constraints.txt -e ".[test,course]" && python -m pytest'
)


def test_quickstart_has_exactly_the_two_agreed_commands():
    assert quickstart_commands() == [LEARN_COMMAND, LEARN_AS_ROOT, TEST_COMMAND]


def test_both_commands_install_the_project_through_the_lock():
    for command in quickstart_commands():
        install = next(step for step in command.split(" && ") if step.startswith("pip install"))
        args = shlex.split(install)
        assert args[args.index("-c") + 1] == LOCK, command
        assert args[-1].startswith("."), f"{command} does not install this project"
    lock = (ROOT / LOCK).read_text()
    assert "\ntorch==2.13.0\n" in lock
    # The lock is made with one Python; the Quickstart asks for that one.
    python = re.search(r"^# Made with Python (\d+\.\d+) ", lock, re.MULTILINE).group(1)
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert f"with Python {python} as `python3`" in " ".join(section.split())


def test_ci_runs_the_readme_test_command_verbatim():
    assert quickstart_commands()[-1] in (ROOT / ".ci" / "run").read_text()


def test_cpu_route_installs_the_locked_torch_from_pytorchs_cpu_index():
    section = README.split("## Installing", 1)[1].split("\n## ", 1)[0]
    commands = [c for c in re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)
                if "download.pytorch.org" in c]
    assert commands, "README, Installing: no command for the CPU build"
    locked = re.search(r"^torch==(\S+)$", (ROOT / LOCK).read_text(), re.MULTILINE).group(1)
    for command in commands:
        assert "--index-url https://download.pytorch.org/whl/cpu" in command
        assert f"torch=={locked}" in command, f"{command} installs another torch than the lock"


def test_learn_command_serves_copies_of_the_lessons(tmp_path):
    # Command (a) without its install steps, run as written in a folder that
    # has the lessons at notebooks/ (root runs its own line, which adds
    # --allow-root): `backproplab learn` makes the learner's copies and the
    # server it starts lists every lesson among them. The browser test goes on
    # to open and run the lessons.
    command = quickstart_commands()[1 if os.geteuid() == 0 else 0]
    _, _, _, learn, lab = command.split(" && ")
    learn, lab = shlex.split(learn), shlex.split(lab)
    assert learn[:2] == ["backproplab", "learn"] and lab[:2] == ["jupyter", "lab"]
    work = tmp_path / "checkout"
    work.mkdir()
    (work / "notebooks").symlink_to(ROOT / "notebooks", target_is_directory=True)
    made = subprocess.run([sys.executable, "-m", "backproplab", *learn[1:]], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, f"{' '.join(learn)} failed:\n{made.stderr}"
    expected = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    copies = work / lab[-1]
    assert expected and sorted(p.name for p in copies.glob("*.ipynb")) == expected
    for name in expected:  # copies, not the lessons with their stored answers
        assert (copies / name).read_bytes() != (ROOT / "notebooks" / name).read_bytes()

    port, token = free_port(), "readme-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    cmd = [sys.executable, "-m", "jupyterlab", *lab[2:], "--no-browser",
           f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    server = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    listing = json.load(response)
                break
            except OSError:
                assert server.poll() is None, "jupyter lab exited"
                assert time.monotonic() < deadline, "jupyter lab did not answer in 60 s"
                time.sleep(0.5)
        served = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert served == expected
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}") as page:
            assert b"JupyterLab" in page.read()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def test_helper_package_example_runs(capsys):
    # The README's example is the first thing a reader copies; it must work.
    section = README.split("## The helper package", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)\n```", section, re.DOTALL)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "[0] MulBackward0" in printed and "AccumulateGrad  a" in printed
    assert "AddBackward0" in printed.split("step")[1]  # the trace table follows


_NUMBERS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three "
    "twenty-four twenty-five twenty-six twenty-seven twenty-eight twenty-nine thirty".split())}


def test_the_opening_counts_the_notebooks_and_lessons_there_are():
    opening = README.split("## Lessons", 1)[0]
    found = re.search(r"(\w[\w-]*) short Jupyter notebooks, (\w[\w-]*) lessons", opening)
    assert found, "README's opening no longer says how many notebooks and lessons there are"
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    lessons = {p.name[:2] for p in notebooks}
    assert _NUMBERS[found.group(1).lower()] == len(notebooks)
    assert _NUMBERS[found.group(2).lower()] == len(lessons)


def test_the_first_command_comes_within_the_first_60_lines():
    """A newcomer reaches the install line without scrolling past the lesson table."""
    first = next(i for i, line in enumerate(README.splitlines(), 1) if line.startswith("```bash"))
    assert first <= 60, f"README's first command block starts at line {first}"
