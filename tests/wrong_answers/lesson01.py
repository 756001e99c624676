"""Plausible wrong answers for the exercises of 01-computational-graph.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment (see tests/lessons/test_exercises.py).
"""

WALK = (
    "def find_leaves(out):\n"
    "    leaves, seen, todo = [], set(), [out.grad_fn]\n"
    "    while todo:\n"
    "        node = todo.pop()\n"
    "{}"
    "        if hasattr(node, 'variable'):\n"
    "            leaves.append({})\n"
    "        todo.extend(fn for fn, _ in node.next_functions)\n"
    "    return leaves\n"
)
# Exercise 2's solution; the tests replace one of its lines with a slip.
FORMULA = (
    "def formula(out, names):\n"
    "    calls = {'SinBackward0': 'torch.sin', 'ExpBackward0': 'torch.exp'}\n"
    "    signs = {'AddBackward0': '+', 'SubBackward0': '-', 'MulBackward0': '*'}\n"
    "    seen = set()\n"
    "\n"
    "    def name_of(leaf):\n"
    "        return next(name for name, tensor in names.items() if tensor is leaf)\n"
    "\n"
    "    def text(node):\n"
    "        if hasattr(node, 'variable'):\n"
    "            return name_of(node.variable)\n"
    "        first, *rest = [fn for fn, _ in node.next_functions]\n"
    "        kind = node.name()\n"
    "        if kind in calls:\n"
    "            return f'{calls[kind]}({text(first)})'\n"
    "        if kind == 'PowBackward0':\n"
    "            return f'({text(first)} ** {node._saved_exponent})'\n"
    "        second = rest[0]\n"
    "        if first is None:\n"
    "            return f'({node._saved_self.item()} * {text(second)})'\n"
    "        if second is None:\n"
    "            return f'({text(first)} * {node._saved_other.item()})'\n"
    "        return f'({text(first)} {signs[kind]} {text(second)})'\n"
    "\n"
    "    return text(out.grad_fn)\n"
)
BOTH = "        return f'({text(first)} {signs[kind]} {text(second)})'\n"
SELF = "            return f'({node._saved_self.item()} * {text(second)})'\n"
OTHER = "            return f'({text(first)} * {node._saved_other.item()})'\n"


def slip(old: str, new: str) -> str:
    assert FORMULA.count(old) == 1, old
    return FORMULA.replace(old, new)


SKIP_NONE_AND_SEEN = (
    "        if node is None or node in seen:\n"
    "            continue\n"
    "        seen.add(node)\n"
)


WRONG = {
    "l01-predict-leaves": [
        # Takes "made by my own code" for a leaf: c and e are written by hand too.
        ('leaves_guess = ["a", "c", "e"]\n', "not quite"),
        # The output as the graph's start.
        ('leaves_guess = ["e"]\n', "not quite"),
    ],
    "l01-predict-rows": [
        # Believes the rows differ, as they would for most inputs.
        ("rows_identical = False\n", "not quite"),
        # Not one of the two choices.
        ('rows_identical = "yes"\n', "not one of the choices"),
    ],
    "l01-predict-graph": [
        # Forgets that "- 1" is an operation of its own and gets a node.
        (
            "graph_guess = [\n"
            '    "PowBackward0",\n'
            '    "SigmoidBackward0",\n'
            '    "MulBackward0",\n'
            '    "AccumulateGrad",\n'
            '    "AccumulateGrad",\n'
            "]\n",
            "not quite",
        ),
        # Lists the operations in the order the forward pass runs them.
        (
            'graph_guess = ["MulBackward0", "SigmoidBackward0", "SubBackward0", "PowBackward0",\n'
            '               "AccumulateGrad", "AccumulateGrad"]\n',
            "not quite",
        ),
    ],
    "l01-find-leaves": [
        # Forgets the (None, 0) entries of inputs that need no gradient.
        (WALK.format("        if node in seen:\n            continue\n        seen.add(node)\n",
                     "node.variable"), "(None, 0)"),
        # No memory of visited nodes: a leaf used twice is listed twice.
        (WALK.format("        if node is None:\n            continue\n", "node.variable"),
         "more than once"),
        # Follows only the first input of every node.
        (
            "def find_leaves(out):\n"
            "    node = out.grad_fn\n"
            "    while not hasattr(node, 'variable'):\n"
            "        node = node.next_functions[0][0]\n"
            "    return [node.variable]\n",
            "first inputs",
        ),
        # Returns the AccumulateGrad nodes instead of their tensors.
        (WALK.format(SKIP_NONE_AND_SEEN, "node"), "backward nodes"),
        # Looks for a node named "AccumulateGrad": name() gives the full
        # "torch::autograd::AccumulateGrad", so no leaf is ever found.
        (WALK.format(SKIP_NONE_AND_SEEN, "node.variable").replace(
            "hasattr(node, 'variable')", "node.name() == 'AccumulateGrad'"),
         "torch::autograd::AccumulateGrad"),
        # Follows next_functions[0] and [1] only, as if a node had one or two inputs.
        (WALK.format(SKIP_NONE_AND_SEEN, "node.variable").replace(
            "        todo.extend(fn for fn, _ in node.next_functions)\n",
            "        todo.extend(fn for fn, _ in node.next_functions[:2])\n"),
         "third input of torch.addcmul"),
        # No memory of nodes: a leaf already found is told apart by its value (torch.equal).
        (WALK.format("        if node is None:\n            continue\n",
                     "node.variable").replace(
            "            leaves.append(node.variable)\n",
            "            if not any(torch.equal(node.variable, t) for t in leaves):\n"
            "                leaves.append(node.variable)\n"),
         "hold the same value"),
    ],
    "l01-formula": [
        # The two sides of every operation swapped (the inputs walked from the last).
        (slip(BOTH, "        return f'({text(second)} {signs[kind]} {text(first)})'\n"),
         "came out swapped"),
        # No brackets: (a + b) * c read as a + b * c.
        (slip(BOTH, "        return f'{text(first)} {signs[kind]} {text(second)}'\n"),
         "lost its brackets"),
        # Brackets only around + and -, a product (and a constant factor) left bare, as if *
        # always bound first: (c * sin(p)) ** 2 comes out as c * sin(p) ** 2.
        (slip(BOTH, "        if kind == 'MulBackward0':\n"
                    "            return f'{text(first)} * {text(second)}'\n" + BOTH).replace(
            SELF, "            return f'{node._saved_self.item()} * {text(second)}'\n").replace(
            OTHER, "            return f'{text(first)} * {node._saved_other.item()}'\n"),
         ") ** 2), your formula"),
        # A constant factor skipped as an input that needs no gradient.
        (slip(SELF, "            return text(second)\n").replace(
            OTHER, "            return text(first)\n"), "constant factor is missing"),
        # Every constant read from _saved_other, whichever side it was on.
        (slip(SELF, SELF.replace("_saved_self", "_saved_other")), "_saved_self"),
        # The constant written as the tensor it is saved as (str() of a tensor).
        (slip(SELF, "            return '(' + str(node._saved_self) + ' * ' + text(second) + ')'\n"
              ).replace(OTHER, "            return '(' + text(first) + ' * ' + str(node._saved_other)"
                               " + ')'\n"), ".item()"),
        # Every power taken as a square.
        (slip("{node._saved_exponent}", "2"), "exponent is written in"),
        # find_leaves' memory of visited nodes: a leaf used twice is written once.
        (slip("        if hasattr(node, 'variable'):\n",
              "        if node in seen:\n            return ''\n        seen.add(node)\n"
              "        if hasattr(node, 'variable'):\n"), "used twice"),
        # A leaf's node looked for by the bare name "AccumulateGrad" (name() gives the full
        # "torch::autograd::AccumulateGrad"): the walk unpacks a leaf's empty next_functions.
        (slip("        if hasattr(node, 'variable'):\n",
              "        if node.name() == 'AccumulateGrad':\n"), "past a leaf"),
        # The value of out instead of its formula.
        ("def formula(out, names):\n    return str(out.item())\n", "at new values"),
        # The graph's nodes, not a formula.
        ("def formula(out, names):\n    return out.grad_fn\n", "expected a string"),
        # A leaf's name looked up by its value (==): two leaves of one value get one name.
        (slip("if tensor is leaf)", "if tensor == leaf)"), "hold the same value"),
        # The same, with torch.equal.
        (slip("if tensor is leaf)", "if torch.equal(tensor, leaf))"), "hold the same value"),
        # A power written without its own brackets: (x ** 2) ** 3 comes out as x ** 2 ** 3.
        (slip("f'({text(first)} ** {node._saved_exponent})'",
              "f'{text(first)} ** {node._saved_exponent}'"), "without its brackets"),
        # Constants rounded to two decimals (:.2f): 1/3 comes out as 0.33.
        (slip(SELF, SELF.replace(".item()}", ".item():.2f}")).replace(
            OTHER, OTHER.replace(".item()}", ".item():.2f}")), "0.3333333333333333), your formula"),
    ],
}
