"""The README's Quickstart is what CI runs, and its lab command serves the lessons."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def quickstart_commands() -> list[str]:
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    section = section.split("### ", 1)[0]  # the conda route is a separate subsection
    return re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)


def test_quickstart_has_exactly_two_single_line_commands():
    commands = quickstart_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands)
    lab, test = commands
    assert lab.endswith("jupyter lab notebooks/")
    assert test.endswith("python -m pytest")


def test_both_commands_install_the_pinned_project():
    for command in quickstart_commands():
        assert re.search(r'pip install -e "?\.', command), command
    assert '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()


def test_ci_runs_the_readme_test_command_verbatim():
    assert quickstart_commands()[1] in (ROOT / ".ci" / "run").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_command_serves_the_lessons(tmp_path):
    # Command (a) without its install steps: the server it starts must list
    # every lesson. The browser test goes on to open and run them.
    lab = shlex.split(quickstart_commands()[0].rsplit("&&", 1)[1])
    assert lab[:2] == ["jupyter", "lab"]
    port, token = _free_port(), "readme-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    cmd = [sys.executable, "-m", "jupyterlab", *lab[2:], "--no-browser",
           f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    if os.geteuid() == 0:  # CI runs as root; jupyter refuses that unless told
        cmd.append("--allow-root")
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
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
        expected = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
        assert expected and served == expected
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
