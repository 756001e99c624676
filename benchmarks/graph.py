"""Benchmark backproplab.graph / backproplab.trace against baselines in one process.

Run: python benchmarks/graph.py

Every ratio compares two timings taken here, now, on the same graph: the
best of several repeats of each (the machine may be shared).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import torch

import backproplab as bl

CHAIN = 100_000
GROUPS, GROUP = 150, 1000  # wide graph: 150 x 1000 additions, stacked twice
SMALL_GROUPS = 15  # the same wide graph at a tenth of the size, for the scaling row


def best(f: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def floor_visit(out: torch.Tensor) -> int:
    """For scale: the least any graph reader must do, visit each node's next_functions once."""
    seen = {out.grad_fn}
    stack = [out.grad_fn]
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return len(seen)


def ours(out: torch.Tensor) -> None:
    g = bl.describe(out)
    g.to_text()
    g.to_dot()


def chain_graph() -> torch.Tensor:
    y = torch.tensor(0.5, requires_grad=True)
    for _ in range(CHAIN):
        y = y.sin()
    return y


def wide_graph(groups: int | None = None) -> torch.Tensor:
    x = torch.tensor(1.0, requires_grad=True)
    n = GROUPS if groups is None else groups
    return torch.stack([torch.stack([x + 1 for _ in range(GROUP)]) for _ in range(n)]).sum()


def mlp_backward() -> tuple[float, float]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(3):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(256, 1))
    x, y = torch.randn(64, 256), torch.randn(64, 1)

    def once(traced: bool) -> float:
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        t0 = time.perf_counter()
        if traced:
            bl.trace_backward(loss)
        else:
            loss.backward()
        return time.perf_counter() - t0

    once(False), once(True)  # warm up
    # Taken in turns, so that a change in the machine's load reaches both sides alike;
    # the machine is shared: the best run of each is the stable number.
    plain, traced = zip(*((once(False), once(True)) for _ in range(30)), strict=True)
    return min(plain), min(traced)


def import_times(runs: int = 7) -> tuple[float, float]:
    """Median seconds of `import torch`, then of importing backproplab and
    loading its core (graph, trace, check: names load on first use) after it,
    each timed inside the same fresh interpreter (one per run).

    Every module is read from its bytecode, as after an install (pip writes it, and
    Python does on a first import): a first, untimed run writes it into a folder of its
    own. Where PYTHONDONTWRITEBYTECODE is set, every process would compile backproplab's
    modules from source again, which is not what a learner's import costs."""
    code = (
        "import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
        "import backproplab as bl; bl.describe, bl.trace_backward, bl.compare; "
        "t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    torch_s, ours_s = [], []
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        for run in range(runs + 1):
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                 env=env)
            if run:  # the first run wrote the bytecode
                a, b = map(float, out.stdout.split())
                torch_s.append(a)
                ours_s.append(b)
    return statistics.median(torch_s), statistics.median(ours_s)


Row = tuple[str, str, str, bool]


def graph_rows(label: str, out: torch.Tensor, torchviz: object | None) -> list[Row]:
    n = floor_visit(out)  # warm-up: the first visit pays for memory later ones reuse
    t_floor = best(lambda: floor_visit(out), 5)
    t_ours = best(lambda: ours(out), 3)
    rows = [
        (
            f"describe+text+DOT, {label} ({n:,} nodes)",
            f"{t_ours:.2f} s ({t_ours / t_floor:.1f}x a bare next_functions visit)",
            "(information)",
            True,
        )
    ]
    what = f"vs torchviz.make_dot(...).source, {label}"
    if torchviz is None:
        rows.append((what, "torchviz not installed", "-", True))
    elif label.startswith("chain"):
        try:
            _ = torchviz.make_dot(out).source
            rows.append((what, "torchviz: no error", "ours works", True))
        except RecursionError:
            rows.append((what, "torchviz: RecursionError; ours works", "ours works", True))
    else:
        t_viz = best(lambda: torchviz.make_dot(out).source)
        speed = t_viz / t_ours
        result = f"{t_viz:.2f} s / {t_ours:.2f} s = {speed:.1f}x faster"
        rows.append((what, result, ">= 1.2x faster", speed >= 1.2))
    return rows


def scaling_row(small: torch.Tensor, large: torch.Tensor) -> Row:
    """Time per node on the large graph against time per node on one a tenth its size."""
    n_small, n_large = floor_visit(small), floor_visit(large)
    per_small = best(lambda: ours(small), 5) / n_small
    per_large = best(lambda: ours(large), 3) / n_large
    ratio = per_large / per_small
    return (
        f"linear: time per node, wide graph of {n_large:,} vs {n_small:,} nodes",
        f"{per_large * 1e6:.2f} us / {per_small * 1e6:.2f} us = {ratio:.2f}x",
        "<= 1.5x",
        ratio <= 1.5,
    )


def main() -> list[Row]:
    try:
        import torchviz
    except ImportError:
        torchviz = None
    rows = graph_rows("chain of 100,000 ops", chain_graph(), torchviz)
    wide = wide_graph()
    rows += graph_rows("wide graph", wide, torchviz)
    rows.append(scaling_row(wide_graph(SMALL_GROUPS), wide))

    plain, traced = mlp_backward()
    rows.append(
        (
            "trace_backward vs loss.backward, MLP batch 64, 3 hidden layers of 256 (best of 30)",
            f"{traced * 1e3:.2f} ms / {plain * 1e3:.2f} ms = {traced / plain:.1f}x",
            "<= 3x",
            traced / plain <= 3.0,
        )
    )
    t_torch, extra = import_times()
    rows.append(
        (
            "import backproplab + its core after import torch (fresh process, median of 7)",
            f"+{extra * 1e3:.0f} ms (import torch itself: {t_torch * 1e3:.0f} ms)",
            "<= +100 ms",
            extra * 1e3 <= 100,
        )
    )
    return rows


def render(rows: list[tuple[str, str, str, bool]]) -> str:
    head = ("measurement", "result", "target", "")
    table = [head] + [
        (a, b, c, "" if c.startswith("(") else "PASS" if ok else "FAIL") for a, b, c, ok in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = ["| " + " | ".join(r[i].ljust(widths[i]) for i in range(4)) + " |" for r in table]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


if __name__ == "__main__":
    # Once Python has looked at a deep graph's nodes, torch frees that graph
    # recursively: run everything on a thread with a large stack.
    result: list = []
    threading.stack_size(1024 * 2**20)
    worker = threading.Thread(target=lambda: result.append(main()))
    worker.start()
    worker.join()
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}")
    print(render(result[0]))
