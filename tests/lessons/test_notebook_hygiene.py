"""Every lesson notebook obeys the hygiene rules, and each rule can fail."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from hygiene import RULES

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebook found in notebooks/"


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_lesson_is_clean(path: Path, rule: str):
    nb = nbformat.read(path, as_version=4)
    assert RULES[rule](nb) == []


def good_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A lesson"),
        nbformat.v4.new_code_cell("x = 1\nprint(x)", execution_count=1),
        nbformat.v4.new_code_cell("", execution_count=None),
        nbformat.v4.new_code_cell("1 / 0", execution_count=2),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells[3].metadata["tags"] = ["raises-exception"]
    nb.cells[3].outputs = [
        nbformat.v4.new_output(
            "error", ename="ZeroDivisionError", evalue="division by zero", traceback=[]
        )
    ]
    return nb


def test_good_notebook_passes_every_rule():
    nb = good_notebook()
    assert {rule: check(nb) for rule, check in RULES.items()} == {r: [] for r in RULES}


def _broken(rule: str) -> nbformat.NotebookNode:
    nb = copy.deepcopy(good_notebook())
    if rule == "valid":
        nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    elif rule == "execution-order":
        nb.cells[1].execution_count = 2
        nb.cells[3].execution_count = 1
    elif rule == "errors":
        nb.cells[3].metadata["tags"] = []
    elif rule == "addresses":
        nb.cells[1].outputs[0].text = "<Node object at 0x7f3a2c1b9d60>\n"
    elif rule == "sys-path":
        nb.cells[1].source = "import sys\nsys.path.insert(0, '..')"
    elif rule == "install-paths":
        nb.cells[3].outputs[0].traceback = [
            "\x1b[36mFile \x1b[39m\x1b[32m/home/me/.venv/lib/python3.11/site-packages/torch/"
            "_tensor.py:623\x1b[39m, in \x1b[36mTensor.backward\x1b[39m",
            "\x1b[31mZeroDivisionError\x1b[39m: division by zero",
        ]
    elif rule == "widget-views":
        nb.metadata["widgets"] = {"state": {}}
    elif rule == "width":
        nb.cells[1].outputs[0].text = "a line far too long for the lab " * 4 + "\n"
    return nb


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_catches_its_bad_notebook(rule: str):
    problems = RULES[rule](_broken(rule))
    assert problems, f"rule {rule!r} accepted a notebook broken for it"
    # The broken notebook trips only its own rule, so each rule is really tested.
    others = {r: RULES[r](_broken(rule)) for r in RULES if r != rule}
    assert others == {r: [] for r in others}


def test_unexecuted_cell_is_caught():
    nb = good_notebook()
    nb.cells[1].execution_count = None
    assert RULES["execution-order"](nb) == ["cell 1 was never executed"]


def test_schema_violation_is_caught():
    nb = good_notebook()
    nb.cells[1]["outputs"] = [{"output_type": "stream"}]  # missing name and text
    assert any("invalid nbformat" in p for p in RULES["valid"](nb))


@pytest.mark.parametrize(
    "source",
    [
        "sys.path.append('../')",
        "sys.path = ['..'] + sys.path",
        "sys.path += ['..']",
        "sys.path[0:0] = ['..']",
        "os.environ['PYTHONPATH'] = '..'",
    ],
)
def test_sys_path_variants_are_caught(source: str):
    nb = good_notebook()
    nb.cells[1].source = source
    assert RULES["sys-path"](nb)


def test_sys_path_reading_is_allowed():
    nb = good_notebook()
    nb.cells[1].source = "import sys\nprint(len(sys.path) > 0)"
    assert RULES["sys-path"](nb) == []


def test_trim_tracebacks_keeps_cell_frames_and_names_the_packages():
    from notebook_runner import trim_tracebacks

    nb = good_notebook()
    cell_frame = "\x1b[36mCell\x1b[39m \x1b[32mIn[2]\x1b[39m, line 1\n----> 1 1 / 0\n"
    nb.cells[3].outputs[0].traceback = [
        "---",
        cell_frame,
        "\x1b[36mFile \x1b[39m\x1b[32m/x/lib/python3.11/site-packages/torch/_tensor.py:623\x1b[39m",
        "File /x/lib/python3.11/site-packages/torch/autograd/__init__.py:388, in backward()",
        "File /x/lib/python3.11/site-packages/numpy/core.py:1, in f()",
        cell_frame,
        "File /opt/py/lib/python3.11/dist-packages/six.py:9, in g()",
        "ZeroDivisionError: division by zero",
    ]
    assert RULES["install-paths"](nb)
    assert trim_tracebacks(nb) == 4
    assert nb.cells[3].outputs[0].traceback == [
        "---",
        cell_frame,
        "\x1b[36m[3 frames inside torch, numpy]\x1b[39m",
        cell_frame,
        "\x1b[36m[1 frame inside six]\x1b[39m",
        "ZeroDivisionError: division by zero",
    ]
    assert RULES["install-paths"](nb) == []


def test_runner_executes_and_stores_a_clean_lesson(tmp_path: Path):
    from nbclient.exceptions import CellExecutionError
    from notebook_runner import main

    nb = good_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\nx = torch.ones(2, requires_grad=True)"),
        nbformat.v4.new_code_cell("(2 * x).backward()"),
        nbformat.v4.new_code_cell("print(x.requires_grad)"),
    ]
    nb.cells[1].metadata["tags"] = ["raises-exception"]
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    assert main([str(path)]) == 0

    done = nbformat.read(path, as_version=4)
    assert [c.execution_count for c in done.cells] == [1, 2, 3]
    error = done.cells[1].outputs[0]
    assert error.ename == "RuntimeError" and "scalar outputs" in error.evalue
    assert any("frames inside torch]" in entry for entry in error.traceback)
    assert done.cells[2].outputs[0].text == "True\n"
    assert not any("execution" in c.metadata for c in done.cells)
    assert {rule: check(done) for rule, check in RULES.items()} == {r: [] for r in RULES}

    # An error in an untagged cell stops the run and leaves the file as it was.
    done.cells[1].metadata["tags"] = []
    nbformat.write(done, path)
    before = path.read_text()
    with pytest.raises(CellExecutionError):
        main([str(path)])
    assert path.read_text() == before


def test_width_rule_catches_a_long_printed_line_but_not_torch_errors():
    nb = good_notebook()
    assert RULES["width"](nb) == []
    nb.cells[1].outputs[0]["text"] = "x" * 89 + "\n"
    assert "89 characters" in RULES["width"](nb)[0]
    nb = good_notebook()
    nb.cells[3].outputs[0]["evalue"] = "y" * 300  # torch's message: not ours to wrap
    assert RULES["width"](nb) == []
    nb.cells[3].outputs[0]["ename"] = "AssertionError"  # a check's message: must fit
    assert RULES["width"](nb)


def test_widget_rule_catches_live_views_and_widget_state():
    nb = good_notebook()
    assert RULES["widget-views"](nb) == []
    nb.cells[1].outputs.append(nbformat.v4.new_output(
        "display_data",
        data={"application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "text/plain": "w"},
    ))
    assert "live widget view" in RULES["widget-views"](nb)[0]
    nb = good_notebook()
    nb.metadata["widgets"] = {}
    assert "widget state" in RULES["widget-views"](nb)[0]


def test_runner_keeps_the_still_picture_of_a_widget():
    from notebook_runner import keep_still_pictures

    nb = good_notebook()
    nb.metadata["widgets"] = {"state": {}}
    nb.cells[1].outputs.append(nbformat.v4.new_output(
        "display_data",
        data={"application/vnd.jupyter.widget-view+json": {"model_id": "x"},
              "image/png": "iVBORw0KGgo=", "text/plain": "stepper (run the cell to use it)"},
    ))
    keep_still_pictures(nb)
    assert "widgets" not in nb.metadata
    assert set(nb.cells[1].outputs[1]["data"]) == {"image/png", "text/plain"}
    assert RULES["widget-views"](nb) == []


def test_runner_stores_printed_pieces_as_one_output():
    from notebook_runner import join_streams

    nb = good_notebook()
    out = nbformat.v4.new_output
    nb.cells[1].outputs = [
        out("stream", name="stdout", text="a table"),
        out("stream", name="stdout", text="\nrow 1\n"),
        out("stream", name="stderr", text="a warning\n"),
        out("stream", name="stdout", text="row 2\n"),
    ]
    join_streams(nb)
    assert [(o.name, o.text) for o in nb.cells[1].outputs] == [
        ("stdout", "a table\nrow 1\n"), ("stderr", "a warning\n"), ("stdout", "row 2\n"),
    ]
