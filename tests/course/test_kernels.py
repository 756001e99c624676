"""Kernels on Unix sockets: many start at once, from several processes, and every one answers.

With TCP, the process starting a kernel picks free ports and closes them for the
kernel to bind; two kernels started at the same moment by different processes could
pick the same port, and one died ("Address already in use"). IPCKernelManager gives
each kernel sockets in a folder of its own (backproplab/course/kernels.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from backproplab.course.kernels import AsyncIPCKernelManager, IPCKernelManager

# Started in each process: kernels in threads, all at once, each asked to compute.
STARTER = textwrap.dedent("""\
    import concurrent.futures, sys
    from backproplab.course.kernels import IPCKernelManager

    def one(i):
        km = IPCKernelManager(kernel_name="python3")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=120)
            answer = []
            reply = kc.execute_interactive(
                f"print({i} * 7)", timeout=120,
                output_hook=lambda m: answer.append(m["content"].get("text", "")))
            return reply["content"]["status"], "".join(answer).strip()
        except Exception as err:
            return "failed", f"{type(err).__name__}: {err}"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    first, count = int(sys.argv[1]), int(sys.argv[2])
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        for i, (status, text) in zip(range(first, first + count),
                                     pool.map(one, range(first, first + count))):
            print(i, status, text)
""")


def test_kernel_managers_use_unix_sockets_in_a_folder_of_their_own():
    managers = [IPCKernelManager(), IPCKernelManager(), AsyncIPCKernelManager()]
    try:
        assert {km.transport for km in managers} == {"ipc"}
        folders = {os.path.dirname(km.ip) for km in managers}
        assert len(folders) == 3 and all(os.path.isdir(f) for f in folders)
    finally:
        for km in managers:
            km.cleanup_connection_file()
    assert not any(os.path.exists(f) for f in folders)


def test_a_kernel_configured_back_to_tcp_gets_jupyters_default_address():
    km = IPCKernelManager(transport="tcp")
    assert km.ip == "127.0.0.1"


@pytest.mark.slow
def test_twelve_kernels_from_three_processes_at_once_all_answer(tmp_path):
    processes, per_process = 3, 4
    # The kernels' folders go to a temporary folder of this test's own, where nothing
    # else (another worker's kernels) comes and goes.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    starters = [subprocess.Popen([sys.executable, "-c", STARTER, str(k * per_process),
                                  str(per_process)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for k in range(processes)]
    lines = []
    for starter in starters:
        out, err = starter.communicate(timeout=600)
        assert starter.returncode == 0, err
        lines += out.splitlines()
    answers = {}
    for line in lines:
        i, status, *text = line.split(" ", 2)
        answers[int(i)] = (status, text[0] if text else "")
    expected = {i: ("ok", str(i * 7)) for i in range(processes * per_process)}
    assert answers == expected
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("bl-kernel-"))
    assert not left, f"kernel folders left behind: {left}"
