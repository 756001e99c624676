"""An answer's source as the grade takes it from a notebook (`sources.from_notebook`): the
definitions it needs, each as it stands where it is read, and nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys

from backproplab.course import live, rules, sources


def _taken(cells: list[str], names: list[str]) -> list[tuple[int, str]]:
    """(cell, first line) of each statement the answer ``names`` is made of."""
    return [(p.cell, ast.unparse(p.tree).split("\n")[0])
            for p in sources.from_notebook(cells, names)]


def test_what_a_statement_reads_while_it_runs_comes_from_above_it():
    """A decorator, a base class or a default runs when its cell runs: the ``import torch``
    above it, not only a scratch cell's below it, which the function reads when called."""
    cells = ["import torch", "@torch.no_grad()\ndef slope(x):\n    return torch.cos(x)",
             "import torch\nprint(torch.__version__)"]
    assert _taken(cells, ["slope"]) == [(0, "import torch"), (1, "@torch.no_grad()"),
                                        (2, "import torch")]
    base = ["import torch", "class Power(torch.autograd.Function):\n    pass",
            "import torch"]
    assert _taken(base, ["Power"]) == [(0, "import torch"),
                                       (1, "class Power(torch.autograd.Function):")]


def test_a_value_that_reads_its_own_name_takes_the_one_above():
    cells = ["x = 1", "y = 5", "x = x + y", "def f():\n    return x"]
    assert _taken(cells, ["f"]) == [(0, "x = 1"), (1, "y = 5"), (2, "x = x + y"),
                                    (3, "def f():")]


def test_a_global_counter_takes_its_start():
    cells = ["CALLS = 0", "def f(x):\n    global CALLS\n    CALLS += 1\n    return x"]
    assert _taken(cells, ["f"]) == [(0, "CALLS = 0"), (1, "def f(x):")]


def test_a_loop_that_fills_a_table_is_part_of_its_definition():
    cells = ["TABLE = {}\nfor k in range(3):\n    TABLE[k] = 2 * k\nLOG = []\nLOG.append(1)",
             "print(TABLE)", "def f(x):\n    return TABLE[1] * x + LOG[0]"]
    assert _taken(cells, ["f"]) == [(0, "TABLE = {}"), (0, "for k in range(3):"),
                                    (0, "LOG = []"), (0, "LOG.append(1)"), (2, "def f(x):")]


def test_names_a_match_pattern_captures_are_its_own():
    cells = ["numeric = bl.numerical_grad(f, x)",
             "def f(x):\n    match x.shape:\n        case (numeric, *rest):\n"
             "            return numeric\n        case {'k': v, **others}:\n            return v"]
    assert _taken(cells, ["f"]) == [(1, "def f(x):")]


def test_a_definition_inside_an_if_block_or_followed_by_a_help_line_counts():
    cells = ["if True:\n    def f(x):\n        return x", "def g(x):\n    return x\n\ng?"]
    assert _taken(cells, ["f", "g"]) == [(0, "if True:"), (1, "def g(x):")]
    assert sources.defined(ast.parse(cells[0])) == {"f"}


def test_a_cell_that_cannot_be_read_is_said_so():
    unreadable: list[tuple[int, int, str]] = []
    cells = ["import torch", "def f(x):\n    return x +\n"]
    assert sources.from_notebook(cells, ["f"], unreadable) == []
    assert unreadable == [(1, 2, "invalid syntax")]
    assert sources.unreadable_note(unreadable, ["cell 3", 'cell 7 (under "Exercise 1")']) == (
        'cell 7 (under "Exercise 1") could not be read as Python (line 2: invalid syntax), so '
        "nothing it defines counts")


def test_a_class_reads_its_own_names_and_a_method_the_globals():
    cells = ["scale = 2", "x = 9",
             "class A:\n    x = 1\n    y = x + 1\n\n    def f(self):\n        return scale"]
    assert _taken(cells, ["A"]) == [(0, "scale = 2"), (2, "class A:")]


def test_the_kernel_reads_a_decorated_function_of_the_learners():
    """``@torch.no_grad()`` wraps the learner's function in one of torch's: the learner's
    is read, decorator and all."""
    import linecache

    import torch

    source = "@torch.no_grad()\ndef slope(x):\n    return 3 * x\n"
    name = "<test cell sources-decorated>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    space = {"torch": torch}
    exec(compile(source, name, "exec"), space)
    trees, bound, unread = live.from_objects(space["slope"])
    assert [type(t).__name__ for t in trees] == ["FunctionDef"] and unread == []
    assert rules.read(trees, rules.BY_HAND, bound) == []


def test_the_kernel_reads_a_module_an_answer_holds_as_a_value():
    """A module handed to a function through functools.partial is no name in any cell's
    code: the kernel's reading says it is a module used as a value all the same."""
    import functools
    import linecache

    import torch

    source = "def load(T, path):\n    return T.load(path)\n"
    name = "<test cell sources-partial>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    space: dict = {}
    exec(compile(source, name, "exec"), space)
    trees, bound, _ = live.from_objects(functools.partial(space["load"], torch))
    found = rules.read(trees, rules.METHOD, bound)
    assert [(f.used, f.why) for f in found] == [("answer, which is torch", "module-value")]


def test_the_kernel_reads_a_table_of_the_learners_functions():
    """A dict of rules the answer looks up by name is the learner's code, read function by
    function (it was refused whole as a builtins.dict); a table that holds a refused tool
    still names that tool."""
    import linecache

    import torch

    source = ("RULES = {'sin': lambda x, g: g * torch.cos(x), 'exp': lambda x, g: g * x.exp()}\n"
              "TOOLS = [torch.autograd.grad]\n\n\n"
              "def rule(name, x, g):\n    return RULES[name](x, g)\n\n\n"
              "def cheat(y, x):\n    return TOOLS[0](y, x)\n")
    name = "<test cell sources-table>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    space = {"torch": torch}
    exec(compile(source, name, "exec"), space)
    trees, bound, unread = live.from_objects(space["rule"])
    assert unread == [] and {type(t).__name__ for t in trees} == {"FunctionDef", "Lambda"}
    assert rules.read(trees, rules.METHOD, bound) == []
    trees, bound, _ = live.from_objects(space["cheat"])
    assert [f.used for f in rules.read(trees, rules.BY_HAND, bound)] \
        == ["TOOLS, which is torch.autograd.grad"]


def test_an_operator_held_in_a_table_is_named_as_code_names_it():
    """torch defines its operator objects (``torch.ops.aten.mm.default``) in a private
    module; held in a constant or a table they are read as ``torch.ops...``, which an
    exercise that works with torch.ops.aten allows and a by-hand one refuses as torch's
    kernels (not as a private part of a library, which the source's own words are not)."""
    import linecache

    import torch

    source = ("PRODUCTS = (torch.ops.aten.mm.default, torch.ops.aten.bmm)\n\n\n"
              "def is_product(target):\n    return target in PRODUCTS\n")
    name = "<test cell sources-ops>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    space = {"torch": torch}
    exec(compile(source, name, "exec"), space)
    trees, bound, _ = live.from_objects(space["is_product"])
    assert bound["PRODUCTS"] in ("torch.ops.aten.mm.default", "torch.ops.aten.bmm")
    compiler = rules.METHOD.allowing("torch.ops.aten.")
    assert rules.read(trees, compiler, bound) == []
    assert [f.why for f in rules.read(trees, rules.BY_HAND, bound)] == ["kernels"]


def _notebook_cell(source: str, name: str) -> dict:
    """Run ``source`` as a notebook cell runs (module ``__main__``, its text in linecache
    for the kernel's reading to find): the names it made."""
    import linecache

    import torch

    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    space = {"torch": torch, "__name__": "__main__"}
    exec(compile(source, name, "exec"), space)
    return space


def _read(answer) -> tuple[list[str], str]:
    """The kernel's reading of a live answer: what it could not read, and every name the
    by-hand vocabulary refuses in it."""
    trees, bound, unread = live.from_objects(answer)
    return unread, " ".join(f.used for f in rules.read(trees, rules.BY_HAND, bound))


def test_a_record_class_stands_with_its_fields_and_what_it_holds_is_read():
    """A dataclass or named tuple of fields has no method to find its source by: it stands
    in the reading with its fields (``cache.logits`` is the learner's attribute), and what
    an instance holds is read, so a record holding autograd still names it."""
    space = _notebook_cell("from dataclasses import dataclass\nfrom typing import NamedTuple\n\n\n"
              "@dataclass\nclass Cache:\n    logits: object\n    tool: object = None\n\n\n"
              "class Pair(NamedTuple):\n    value: object\n    dot: object\n\n\n"
              "HONEST = Cache(torch.ones(2))\nSLY = Cache(torch.ones(2), torch.autograd.grad)\n"
              "PAIR = Pair(torch.ones(1), torch.zeros(1))\n\n\n"
              "def honest(x):\n    return HONEST.logits * x + PAIR.dot\n\n\n"
              "def sly(y, x):\n    return SLY.tool(y, x)\n", "<test cell sources-records>")
    assert _read(space["honest"]) == ([], "")
    assert "torch.autograd.grad" in _read(space["sly"])[1]


def test_a_class_that_makes_an_outside_function_a_static_method_is_read():
    """``slope = staticmethod(cubic_slope)`` puts a function written outside the class into
    it: the class has no code of its own to find its source by, so it stands as a record
    does, and the function is read where it was written (autograd in it still named)."""
    space = _notebook_cell("def cubic_slope(x):\n    return 3 * x * x\n\n\n"
              "def sly_slope(x):\n    return torch.autograd.grad(x.sum(), x)[0]\n\n\n"
              "class Rules:\n    slope = staticmethod(cubic_slope)\n\n\n"
              "class Sly:\n    slope = staticmethod(sly_slope)\n\n\n"
              "def honest(x):\n    return Rules.slope(x)\n\n\n"
              "def sly(x):\n    return Sly.slope(x)\n", "<test cell sources-static>")
    assert _read(space["honest"]) == ([], "")
    unread, refused = _read(space["sly"])
    assert unread == [] and "torch.autograd.grad" in refused
    # With a library's base, the base is read too: a by-hand answer may not use it.
    exec("class Gap(torch.autograd.Function):\n    forward = staticmethod(cubic_slope)\n",
         space)
    unread, refused = _read(space["Gap"])
    assert unread == [] and "torch.autograd.Function" in refused


def test_a_tensor_method_held_as_a_value_is_named_as_code_names_it():
    """``functools.partial(torch.Tensor.sum, dim=0)`` holds a method of torch's C tensor
    class: it is read as torch.Tensor.sum (allowed), and a method of it that is not
    arithmetic is still refused by that name."""
    space = _notebook_cell("import functools\n\nover = functools.partial(torch.Tensor.sum, dim=0)\n"
                           "back = functools.partial(torch.Tensor.backward)\n\n\n"
                           "def honest(x):\n    return over(x * x)\n\n\n"
                           "def sly(x):\n    return back(x.sum())\n", "<test cell sources-partial>")
    assert _read(space["honest"]) == ([], "")
    unread, refused = _read(space["sly"])
    assert unread == [] and "backward" in refused


def test_an_enum_stands_as_a_record_with_its_members():
    space = _notebook_cell("import enum\n\n\nclass Kept(enum.Enum):\n    relu = 1\n\n\n"
                           "def per(name):\n    return Kept[name].value\n",
                           "<test cell sources-enum>")
    assert _read(space["per"]) == ([], "")


def test_records_of_every_maker_stand_as_records_but_not_one_holding_a_librarys_dunder():
    """A dataclass, a named tuple, an IntEnum, a StrEnum and make_dataclass's class have
    methods their makers wrote: each stands as a record. A record class that puts a
    library's function under a dunder (``__call__ = torch.autograd.grad``) does not."""
    space = _notebook_cell(
        "import dataclasses, enum, collections\nfrom typing import NamedTuple\n\n\n"
        "@dataclasses.dataclass(frozen=True, order=True)\nclass D:\n    a: int = 0\n\n\n"
        "@dataclasses.dataclass\nclass Sly:\n    a: int = 0\n"
        "    __call__ = torch.autograd.grad\n\n\n"
        "P = collections.namedtuple('P', 'a b')\n\n\nclass N(NamedTuple):\n    a: int\n\n\n"
        "class I(enum.IntEnum):\n    x = 1\n\n\nclass S(enum.StrEnum):\n    x = 'a'\n\n\n"
        "M = dataclasses.make_dataclass('M', ['a'])\n\n\n"
        "def honest(t):\n    return D(1).a + P(1, 2).b + N(3).a + I.x + len(S.x) + M(1).a\n\n\n"
        "def sly(t):\n    return Sly()\n", "<test cell sources-makers>")
    assert _read(space["honest"]) == ([], "")
    assert "Sly" in _read(space["sly"])[1]


def test_an_answer_cell_under_time_is_read_from_the_cell_ipython_ran():
    """IPython compiles a ``%%time`` cell's body as ``<timed exec>``, which linecache does
    not hold: the kernel reads the body from the cells the learner ran, the one that
    defines that very name where several ``%%time`` cells define something on that line.
    Run in a real IPython shell of its own (a shell is a process-wide singleton)."""
    script = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "def run(cell):\n"
        "    return shell.run_cell(cell, store_history=True).error_in_exec\n"
        "run('import backproplab as bl')\n"
        "run('%%time\\ndef helper(t):\\n    return t\\n')\n"
        "run('%%time\\ndef cubic_slope(x):\\n    return 3 * x**2 - 8 * x\\n')\n"
        "run('%%time\\ndef other(t):\\n    return t\\n')\n"
        "print('PASSED', repr(run('bl.check_exercise(\"l02-cubic\", cubic_slope)')))\n"
        "run('%%time\\ndef cubic_slope(x):\\n    import numpy\\n    return 3 * x**2 - 8 * x\\n')\n"
        "said = str(run('bl.check_exercise(\"l02-cubic\", cubic_slope)'))\n"
        "print('REFUSED', said.replace('\\n', ' '))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    said = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()
            if line.startswith(("PASSED ", "REFUSED "))}
    passed, refused = said.get("PASSED"), said.get("REFUSED", "")
    assert passed == "None", done.stdout + done.stderr
    assert "uses import numpy" in refused and "could not be read" not in refused, refused


def test_a_loop_at_the_top_level_reads_its_own_variable_not_an_earlier_cells():
    """A table filled by a cell-level loop: the loop's variable, read in its body, is the
    loop's; an earlier cell that bound the same name (a lesson's own ``for name in ...``)
    is not part of the answer."""
    cells = ["import torch\nfor name in ('a', 'b'):\n    print(torch.compile)",
             "KEPT = {}\nfor name in ('relu', 'gelu'):\n    KEPT[name] = len(name)",
             "def kept(kind):\n    return KEPT[kind]"]
    assert _taken(cells, ["kept"]) == [(1, "KEPT = {}"), (1, "for name in ('relu', 'gelu'):"),
                                        (2, "def kept(kind):")]
    assert sources.free_names(ast.parse("x = x + 1\nfor k in x:\n    y = k")) == {"x"}


def test_a_table_set_up_by_calls_comes_with_its_calls_but_a_module_never_does():
    """A table filled by its own method as a decorator or by a call standing alone, or by
    a function of the notebook's called once, comes with those statements; calls on a
    module (``torch.manual_seed(0)``, ``@torch.no_grad()``) never join a module's import."""
    cells = ["import torch\ntorch.manual_seed(0)\n\n\n@torch.no_grad()\ndef lesson(x):\n"
             "    return x",
             "RULES = Book()\n\n\n@RULES.register('mul')\ndef mul(g):\n    return g",
             "RULES.limit(3)\nTABLE = {}\n\n\ndef install():\n    TABLE['a'] = 1\n\n\n"
             "install()",
             "def answer(x):\n    return RULES, TABLE, torch.sin(x)"]
    assert _taken(cells, ["answer"]) == [
        (0, "import torch"), (1, "RULES = Book()"), (1, "@RULES.register('mul')"),
        (2, "RULES.limit(3)"), (2, "TABLE = {}"), (2, "def install():"), (2, "install()"),
        (3, "def answer(x):")]
