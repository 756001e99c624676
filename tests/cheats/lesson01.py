"""Shortcuts for the exercises of 01-computational-graph.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

CHEATS = {
    "l01-find-leaves": [
        # bl.describe under another name.
        (
            "from backproplab.graph import describe as walk\n\n\n"
            "def find_leaves(out):\n"
            "    return [n.leaf.tensor for n in walk(out).nodes if n.leaf]\n",
            "backproplab.graph.describe",
        ),
        # A backward pass, then the tensors that got a .grad: it cannot find them, and
        # the pass is refused by name.
        (
            "def find_leaves(out):\n"
            "    out.backward()\n"
            "    return []\n",
            "backward pass",
        ),
    ],
    "l01-formula": [
        # bl.describe walks the graph for it.
        (
            "def formula(out, names):\n"
            "    bl.describe(out, names=names)\n"
            "    return 'p'\n",
            "bl.describe",
        ),
        # The check's own formula looked for among the objects alive in the process.
        (
            "import gc\n\n\n"
            "def formula(out, names):\n"
            "    texts = [o for o in gc.get_objects() if isinstance(o, str) and 'torch.' in o]\n"
            "    return texts[-1]\n",
            "gc.get_objects",
        ),
        # A backward pass to look at the leaves' gradients: the wrong method, named.
        (
            "def formula(out, names):\n"
            "    out.backward()\n"
            "    return ' + '.join(names)\n",
            "backward pass",
        ),
    ],
}
