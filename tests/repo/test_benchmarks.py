"""The benchmark scripts keep working: run benchmarks/graph.py's pieces on
small graphs (its timings are only meaningful at full size, so nothing here
asserts a time)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from backproplab.graph import describe

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_graph", ROOT / "benchmarks" / "graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.CHAIN, module.GROUPS, module.GROUP = 300, 4, 25
    return module


def test_floor_visits_every_node_describe_finds(bench):
    for out in (bench.chain_graph(), bench.wide_graph()):
        assert bench.floor_visit(out) == len(describe(out).names())


def test_graph_rows_report_times_and_the_torchviz_rows(bench):
    rows = bench.graph_rows("chain of 300 ops", bench.chain_graph(), None)
    rows += bench.graph_rows("wide graph", bench.wide_graph(), None)
    labels = [r[0] for r in rows]
    assert sum(s.startswith("describe+text+DOT") for s in labels) == 2
    assert sum("torchviz not installed" == r[1] for r in rows) == 2


def test_scaling_row_compares_time_per_node(bench):
    label, result, target, ok = bench.scaling_row(bench.wide_graph(2), bench.wide_graph(4))
    ratio = float(re.search(r"= ([\d.]+)x$", result).group(1))
    assert target == "<= 1.5x" and ok == (ratio <= 1.5)
    assert "wide graph of" in label


def test_trace_row_and_table_rendering(bench):
    plain, traced = bench.mlp_backward()
    assert plain > 0 and traced > 0
    rows = [
        ("a", "1", "<= 2.0x", True),
        ("b", "2", "<= 2.0x", False),
        ("c", "3", "(information)", True),
    ]
    table = bench.render(rows).splitlines()
    assert table[1].startswith("|--")
    assert table[2].rstrip().endswith("| PASS |")
    assert table[3].rstrip().endswith("| FAIL |")
    assert "PASS" not in table[4] and "FAIL" not in table[4]
